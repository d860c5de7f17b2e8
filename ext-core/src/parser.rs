//! parser (to be written).
