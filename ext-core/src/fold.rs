//! fold (to be written).
