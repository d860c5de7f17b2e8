//! sanitize (to be written).
