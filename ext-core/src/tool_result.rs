//! tool_result (to be written).
