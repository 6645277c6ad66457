//! The NULL backend (being written).
