//! Shared helpers for pilot's integration tests.
