//! Strict reader (being written).
#[derive(Debug)]
pub struct PickleError;
pub fn read() {}
