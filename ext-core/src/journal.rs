//! journal (to be written).
