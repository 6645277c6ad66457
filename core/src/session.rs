//! The session (being written).
#[derive(Debug)]
pub struct Session;
#[derive(Debug)]
pub struct SessionError;
