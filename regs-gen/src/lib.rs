//! pilot's register-table generator: a small data file of the registers a backend programs (offsets, bitfields,
//! enums) becomes a Rust module of typed packers, at build time (as Mesa generates its headers from XML).
//!
//! Every register family lives in `<crate>/regs/<family>.regs`. The crate's `build.rs` calls [`build`], which
//! writes `$OUT_DIR/<family>.rs` holding one item, `pub mod <family> { .. }`; the crate `include!`s it where the
//! module belongs (`amd/src/regs/mod.rs`, `qcom/src/lib.rs`). Nothing generated is committed: an edit to a data
//! file is in effect at the next build, and a malformed one fails the build with `file:line: reason`.
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

use std::path::Path;

/// For a build script: renders every `*.regs` file in `<crate>/regs/` (not recursive) to `$OUT_DIR/<stem>.rs`
/// (`pub mod <stem>`) and tells Cargo to rerun when the folder or a data file changes. Panics with the first
/// unreadable or malformed file (`file:line: reason`), which fails the build.
pub fn build() {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR: run from a build script");
    let out = std::env::var_os("OUT_DIR").expect("OUT_DIR: run from a build script");
    let krate = Path::new(&manifest);
    let dir = krate.join("regs");
    let crate_name = krate.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    println!("cargo::rerun-if-changed={}", dir.display());
    let read = |e: std::io::Error| -> ! { panic!("{}: {e}", dir.display()) };
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| read(e))
        .map(|e| e.unwrap_or_else(|e| read(e)).path())
        .filter(|p| p.extension().is_some_and(|x| x == "regs"))
        .collect();
    files.sort();
    for path in files {
        println!("cargo::rerun-if-changed={}", path.display());
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let source = format!("{crate_name}/regs/{stem}.regs");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{source}: {e}"));
        let parsed = parse(&source, &text).unwrap_or_else(|e| panic!("{e}"));
        let target = Path::new(&out).join(format!("{stem}.rs"));
        std::fs::write(&target, render(&parsed, &source, &stem))
            .unwrap_or_else(|e| panic!("{}: {e}", target.display()));
    }
}

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
