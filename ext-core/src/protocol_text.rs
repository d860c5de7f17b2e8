//! protocol_text (to be written).
