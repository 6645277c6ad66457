//! pilot's register-table generator: a small data file of the registers a backend programs (offsets, bitfields,
//! enums) becomes a Rust module of typed packers, committed next to the code that uses it.
//!
//! Every register family lives in `<crate>/regs/<family>.regs` and generates `<crate>/src/<family>.rs` (folders under
//! `regs/` mirror those under `src/`: `usbgpu/regs/amd/regs/gc_11_0_0.regs` generates
//! `usbgpu/src/amd/regs/gc_11_0_0.rs`); the test `regs-gen/tests/generated.rs` fails when a generated file is stale
//! and rewrites it under `PILOT_BLESS=1`.
//!
//! # The data format
//!
//! One item per line; indented lines are the members of the item above them. `#` starts a comment that is not
//! copied; `#!` lines document the generated module, and a trailing `## text` documents the item on its line.
//!
//! ```text
//! #! Adreno a6xx registers (facts from Mesa src/freedreno/registers/adreno/a6xx.xml).
//! enum ThreadSize                        ## a6xx_threadsize
//!     THREAD64 0
//!     THREAD128 1
//! reg SP_CS_CNTL_0 0xa9b0                ## Shader footprint and launch mode.
//!     HALFREGFOOTPRINT low=1 high=6      ## a u32 field over bits 1..=6
//!     THREADSIZE pos=20 type=ThreadSize  ## an enum field
//!     MERGEDREGS pos=31                  ## a one-bit field: a bool
//! reg64 SP_CS_BASE 0xa9b4                ## a 64-bit register: lo at the offset, hi after it
//! reg regGRBM_GFX_INDEX 0x2200 base=1    ## an offset inside segment 1 (AMD's SOC15 BASE_IDX)
//! ```
//!
//! A field is `NAME pos=BIT` or `NAME low=LOW high=HIGH` (inclusive, as in Mesa's XML), optionally `type=ENUM`.
//! Without a type a one-bit field is a `bool` and a wider one a `u32`. Values are in field units: where a vendor
//! declares a shift on the value (Mesa's `shr`), the caller passes the shifted value.
//!
//! # The generated API
//!
//! For register `R`: `offset::R` (the dword offset, a `u32`), and a value type `R(pub u32)` with `R::OFFSET`,
//! `R::BASE_IDX` (registers with `base=`), `R::WORDS`, `R::new()` (all fields zero), `.bits()`, and per field `F`: `R::F_MAX`, the packer `.with_f(v)` and
//! the getter `.f()` (`.r#f()` where the lowercase name is a Rust keyword). For enum `E`: `#[repr(u32)] enum E`
//! with `E::from_bits`.

mod parse;
mod render;

pub use parse::parse;
pub use render::render;

/// A parsed register data file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegFile {
    /// The `#!` lines: the generated module's documentation.
    pub doc: Vec<String>,
    pub enums: Vec<Enum>,
    pub regs: Vec<Reg>,
}

/// A named set of field values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Enum {
    pub name: String,
    pub doc: Option<String>,
    pub values: Vec<EnumValue>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnumValue {
    pub name: String,
    pub value: u32,
    pub doc: Option<String>,
}

/// One register: its dword offset, how many dwords it spans (1, or 2 for `reg64`), and its fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reg {
    pub name: String,
    pub offset: u32,
    /// The segment the offset is relative to (AMD's SOC15 `BASE_IDX`), when the family has segments.
    pub base: Option<u32>,
    pub words: u32,
    pub doc: Option<String>,
    pub fields: Vec<Field>,
}

/// A bitfield of a 32-bit register, bits `low..=high`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub low: u32,
    pub high: u32,
    pub kind: FieldKind,
    pub doc: Option<String>,
}

/// The Rust type a field's packer takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldKind {
    Uint,
    Bool,
    /// The name of an enum of the same file.
    Enum(String),
}

impl Field {
    /// The largest value the field holds.
    pub fn max(&self) -> u32 {
        u32::MAX >> (31 - (self.high - self.low))
    }

    /// The field's bits in place.
    pub fn mask(&self) -> u32 {
        self.max() << self.low
    }
}

/// A data-file error: the file, the 1-based line and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {msg}")]
pub struct ParseError {
    pub file: String,
    pub line: usize,
    pub msg: String,
}
