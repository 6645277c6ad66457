//! Writer (being written).
pub fn write() {}
