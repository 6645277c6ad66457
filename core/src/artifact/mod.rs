//! The artifact: an openpilot-style out-of-band pickle (SPEC §3).
//!
//! Layers, bottom up: [`container`] (the `<q N> pickle (<q n> bytes)*` framing over a memory map),
//! [`pickle`] (the strict plain-data subset), [`schema`] (the typed payload, version 1) and
//! [`verify`] (structure first, then meaning). [`Artifact::open`] runs them all; nothing skips verification.

pub mod container;
pub mod pickle;
