//! The CPU backend (being written).
