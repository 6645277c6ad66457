//! The Qualcomm OpenCL "lib" blob: what Qualcomm's compiler hands back for one kernel (`crate::fake_shader`, behind
//! the `fake` feature, writes blobs in the same layout for the fake KGSL).
//!
//! Layout, as tinygrad's `QCOMProgram._parse_lib` reads it (all little-endian u32):
//! - header: `num_sections` at 0x18; the section table at 0x30, 20 bytes per section `{id, offset, size, count,
//!   entry_size}`, section `i` at `0x30 + 20 * i` (PROGRAM = 0, CONSTS = 6, IMAGE = 7, CODE = 10, IMAGE_DESC = 11);
//! - program section (sec 0): full / half register footprints at +0x14 / +0x18;
//! - shader machine code: `blob[sec7.offset .. sec7.offset + sec10.size]`;
//! - image descriptor (sec 11): first-exec offset +0xc4, private bytes per item +0xc8, shared bytes +0xd8, sampler
//!   count +0xdc (at most 1), branch stack +0x108 (the register takes half), kernel name (C string) +0x158;
//! - argument records from `round_up(desc + 0x158 + len(name), 4) + 8 * samplers`: variable length, the first eight
//!   u32 are `{length, ?, ?, offset_words, ?, ?, ?, type}`, `length == 0` ends the list; type 0 = buffer (its u64
//!   address goes at constant-file byte `offset_words * 4`), 1 = texture, 2 = IBO;
//! - compiler constants when `sec6.size != 0`: 40-byte records from `sec6.offset` while they end at or before the
//!   image: value +0, offset +16, is32 +24; `size = 2 << is32` bytes, written at constant-file byte `offset * size`.
//!
//! Every read is bounds-checked; errors name the field and its offset in one line.

use crate::dispatch::KernelInfo;

/// A malformed blob: which field, at which byte offset, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("adreno blob: {field} at offset {offset:#x}: {what}")]
pub struct BlobError {
    pub field: String,
    pub offset: usize,
    pub what: String,
}

fn err<T>(field: impl Into<String>, offset: usize, what: impl Into<String>) -> Result<T, BlobError> {
    Err(BlobError { field: field.into(), offset, what: what.into() })
}

/// Section ids (= positions in the table).
pub mod section {
    pub const PROGRAM: usize = 0;
    pub const CONSTS: usize = 6;
    pub const IMAGE: usize = 7;
    pub const CODE: usize = 10;
    pub const IMAGE_DESC: usize = 11;
    /// Sections a blob must have (0..=11).
    pub const COUNT: usize = 12;
}

/// Offset of `num_sections`.
pub const NUM_SECTIONS_AT: usize = 0x18;
/// Offset of the section table.
pub const SECTIONS_AT: usize = 0x30;
/// Bytes per section-table entry.
pub const SECTION_BYTES: usize = 20;
/// Register footprints inside the program section.
pub const PROG_FREGS: usize = 0x14;
pub const PROG_HREGS: usize = 0x18;
/// Fields of the image descriptor.
pub const DESC_PRG_OFFSET: usize = 0xc4;
pub const DESC_PVTMEM: usize = 0xc8;
pub const DESC_SHMEM: usize = 0xd8;
pub const DESC_SAMP_CNT: usize = 0xdc;
pub const DESC_BRNCHSTCK: usize = 0x108;
pub const DESC_NAME: usize = 0x158;
/// Bytes of the fixed part of an argument record, and of a constant record.
pub const ARG_RECORD_BYTES: usize = 32;
pub const CONST_RECORD_BYTES: usize = 40;

/// Argument record types (BUFTYPE_*).
pub const BUFTYPE_BUF: u32 = 0;
pub const BUFTYPE_TEX: u32 = 1;
pub const BUFTYPE_IBO: u32 = 2;

/// What an argument is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArgKind {
    /// A buffer: its u64 GPU address goes at constant-file byte `offset_words * 4`.
    Buffer,
    /// A read-only image, bound through a texture descriptor.
    Texture,
    /// A written image, bound through an IBO descriptor.
    Ibo,
}

/// One argument record, in the kernel's signature order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ArgDesc {
    pub kind: ArgKind,
    /// Constant-file slot in 32-bit words (buffers); for images the compiler's value, unused by the host.
    pub offset_words: u32,
}

/// A compiler constant: `size` (2 or 4) bytes of `value` at constant-file byte `byte_offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Const {
    pub byte_offset: u32,
    pub value: u32,
    pub size: u32,
}

/// A parsed blob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    pub name: String,
    pub kernel: KernelInfo,
    /// The shader machine code (`kernel.image_size` bytes).
    pub image: Vec<u8>,
    pub args: Vec<ArgDesc>,
    pub consts: Vec<Const>,
    /// Samplers the blob declares (0 or 1).
    pub samplers: u32,
}

impl Program {
    /// Sampler slots a launch binds: tinygrad binds the declared sampler plus a zero one, so 1 becomes 2.
    pub const fn sampler_slots(&self) -> u32 {
        if self.samplers == 0 {
            0
        } else {
            self.samplers + 1
        }
    }

    /// `(textures, IBOs)` among the arguments.
    pub fn image_counts(&self) -> (u32, u32) {
        let count = |k| self.args.iter().filter(|a| a.kind == k).count() as u32;
        (count(ArgKind::Texture), count(ArgKind::Ibo))
    }
}

fn u32_at(blob: &[u8], at: usize, field: &str) -> Result<u32, BlobError> {
    match at.checked_add(4).and_then(|end| blob.get(at..end)) {
        Some(b) => Ok(u32::from_le_bytes(b.try_into().expect("4 bytes"))),
        None => err(field, at, format!("past the end of the blob ({} bytes)", blob.len())),
    }
}

/// `base + off` as a byte offset, or an error naming `field` if it overflows.
fn at(base: u32, off: usize, field: &str) -> Result<usize, BlobError> {
    (base as usize).checked_add(off).map_or_else(|| err(field, base as usize, "offset overflows"), Ok)
}

#[derive(Clone, Copy)]
struct Section {
    offset: u32,
    size: u32,
}

fn section(blob: &[u8], i: usize) -> Result<Section, BlobError> {
    let base = SECTIONS_AT + SECTION_BYTES * i;
    Ok(Section {
        offset: u32_at(blob, base + 4, &format!("section {i} offset"))?,
        size: u32_at(blob, base + 8, &format!("section {i} size"))?,
    })
}

/// Parses a blob, taking the kernel name from the C identifier at image descriptor +0x158 (see [`parse_named`]
/// when the name is known).
pub fn parse(blob: &[u8]) -> Result<Program, BlobError> {
    parse_impl(blob, None)
}

/// Parses a blob whose kernel is `name`, as tinygrad does: the argument records start after `name.len()` bytes of
/// name (the terminating NUL may be overlaid by the records), and the blob's name must be `name`.
pub fn parse_named(blob: &[u8], name: &str) -> Result<Program, BlobError> {
    parse_impl(blob, Some(name))
}

fn parse_impl(blob: &[u8], expect_name: Option<&str>) -> Result<Program, BlobError> {
    let n = u32_at(blob, NUM_SECTIONS_AT, "num_sections")?;
    if (n as usize) < section::COUNT {
        return err("num_sections", NUM_SECTIONS_AT, format!("{n} sections, at least {} needed", section::COUNT));
    }
    let prog = section(blob, section::PROGRAM)?;
    let consts = section(blob, section::CONSTS)?;
    let image = section(blob, section::IMAGE)?;
    let code = section(blob, section::CODE)?;
    let desc = section(blob, section::IMAGE_DESC)?;

    // Shader machine code.
    let image_at = image.offset as usize;
    let image_size = code.size;
    if image_size == 0 {
        return err("section 10 size (shader size)", SECTIONS_AT + SECTION_BYTES * section::CODE + 8, "is 0");
    }
    let image_end = at(image.offset, image_size as usize, "section 7 offset (shader)")?;
    if image_end > blob.len() {
        return err(
            "section 7 offset (shader)",
            SECTIONS_AT + SECTION_BYTES * section::IMAGE + 4,
            format!("shader {image_at:#x}+{image_size:#x} runs past the end of the blob ({} bytes)", blob.len()),
        );
    }

    // Register footprints.
    let fregs = u32_at(blob, at(prog.offset, PROG_FREGS, "program fregs")?, "program fregs")?;
    let hregs = u32_at(blob, at(prog.offset, PROG_HREGS, "program hregs")?, "program hregs")?;

    // Image descriptor.
    let d = |off: usize, field: &str| -> Result<u32, BlobError> { u32_at(blob, at(desc.offset, off, field)?, field) };
    let prg_offset = d(DESC_PRG_OFFSET, "image descriptor prg_offset")?;
    let pvtmem = d(DESC_PVTMEM, "image descriptor pvtmem")?;
    let shmem = d(DESC_SHMEM, "image descriptor shmem")?;
    let samplers = d(DESC_SAMP_CNT, "image descriptor samp_cnt")?;
    let brnchstck = d(DESC_BRNCHSTCK, "image descriptor brnchstck")?;
    if samplers > 1 {
        let off = at(desc.offset, DESC_SAMP_CNT, "")?;
        return err("image descriptor samp_cnt", off, format!("{samplers} samplers, at most 1 is supported"));
    }
    let name_at = at(desc.offset, DESC_NAME, "kernel name")?;
    let tail = blob.get(name_at..).unwrap_or_default();
    let name = match expect_name {
        Some(name) => {
            if !tail.starts_with(name.as_bytes()) {
                let have: String = tail
                    .iter()
                    .take(name.len().max(8))
                    .map(|&b| if b.is_ascii_graphic() { b as char } else { '.' })
                    .collect();
                return err("kernel name", name_at, format!("expected `{name}`, the blob has `{have}`"));
            }
            name.to_string()
        }
        None => {
            let len = tail.iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'_').count();
            if len == 0 || tail[0].is_ascii_digit() {
                return err("kernel name", name_at, "not a C identifier");
            }
            String::from_utf8(tail[..len].to_vec()).expect("ASCII")
        }
    };

    // Argument records.
    let mut args = Vec::new();
    let mut rec = (name_at + name.len()).div_ceil(4) * 4 + 8 * samplers as usize;
    loop {
        let i = args.len();
        if rec + 4 > blob.len() {
            break; // the list may end with the blob
        }
        let length = u32_at(blob, rec, &format!("argument {i} length"))? as usize;
        if length == 0 {
            break;
        }
        if length < ARG_RECORD_BYTES || !length.is_multiple_of(4) || rec + length > blob.len() {
            return err(
                format!("argument {i} length"),
                rec,
                format!(
                    "record of {length} bytes (at least {ARG_RECORD_BYTES}, a multiple of 4, inside the {} byte blob)",
                    blob.len()
                ),
            );
        }
        let offset_words = u32_at(blob, rec + 12, &format!("argument {i} offset"))?;
        let kind = match u32_at(blob, rec + 28, &format!("argument {i} type"))? {
            BUFTYPE_BUF => ArgKind::Buffer,
            BUFTYPE_TEX => ArgKind::Texture,
            BUFTYPE_IBO => ArgKind::Ibo,
            t => return err(format!("argument {i} type"), rec + 28, format!("unknown type {t}")),
        };
        args.push(ArgDesc { kind, offset_words });
        rec += length;
    }

    // Compiler constants.
    let mut out_consts = Vec::new();
    if consts.size != 0 {
        let table = SECTIONS_AT + SECTION_BYTES * section::CONSTS + 4;
        if consts.offset as usize > image_at {
            return err(
                "section 6 offset (constants)",
                table,
                format!("{:#x} is after the shader at {image_at:#x}", consts.offset),
            );
        }
        let mut c = consts.offset as usize;
        while c + CONST_RECORD_BYTES <= image_at {
            let i = out_consts.len();
            let value = u32_at(blob, c, &format!("constant {i} value"))?;
            let offset = u32_at(blob, c + 16, &format!("constant {i} offset"))?;
            let is32 = u32_at(blob, c + 24, &format!("constant {i} is32"))?;
            if is32 > 1 {
                return err(format!("constant {i} is32"), c + 24, format!("{is32} is neither 0 nor 1"));
            }
            let size = 2 << is32;
            let byte_offset = offset.checked_mul(size).map_or_else(
                || err(format!("constant {i} offset"), c + 16, format!("{offset} x {size} overflows")),
                Ok,
            )?;
            out_consts.push(Const { byte_offset, value, size });
            c += CONST_RECORD_BYTES;
        }
    }

    Ok(Program {
        name,
        kernel: KernelInfo { image_size, prg_offset, fregs, hregs, branchstack: brnchstck / 2, pvtmem, shmem },
        image: blob[image_at..image_end].to_vec(),
        args,
        consts: out_consts,
        samplers,
    })
}

// The parser is exercised on blobs the fake writer makes.
#[cfg(all(test, feature = "fake"))]
mod tests {
    use super::*;
    use crate::fake_shader::{write_blob as write_fake, FakeShader, ShaderArg, FAKE_FREGS, FAKE_HREGS};

    fn shader(name: &str, args: Vec<ShaderArg>) -> FakeShader {
        FakeShader { name: name.into(), args, source: format!("__kernel void {name}() {{}}") }
    }

    fn sample() -> FakeShader {
        shader(
            "k1_conv",
            vec![
                ShaderArg::Ibo { index: 0 },
                ShaderArg::Buffer { offset_words: 2, bytes: 64, written: false },
                ShaderArg::Texture { index: 0 },
                ShaderArg::Buffer { offset_words: 4, bytes: 16, written: true },
                ShaderArg::Texture { index: 1 },
            ],
        )
    }

    #[test]
    fn fake_blob_round_trips() {
        for s in [
            sample(),
            shader("abcd", vec![ShaderArg::Buffer { offset_words: 0, bytes: 4, written: true }]),
            shader("e", vec![]),
        ] {
            let blob = write_fake(&s);
            for p in [parse(&blob).unwrap(), parse_named(&blob, &s.name).unwrap()] {
                assert_eq!(p.name, s.name);
                assert_eq!(p.image, s.encode());
                assert_eq!(p.kernel.image_size as usize, s.encode().len());
                assert_eq!((p.kernel.fregs, p.kernel.hregs, p.kernel.prg_offset), (FAKE_FREGS, FAKE_HREGS, 0));
                assert_eq!((p.kernel.pvtmem, p.kernel.shmem, p.kernel.branchstack), (0, 0, 0));
                assert!(p.consts.is_empty());
                let want: Vec<ArgDesc> = s
                    .args
                    .iter()
                    .map(|a| match *a {
                        ShaderArg::Buffer { offset_words, .. } => ArgDesc { kind: ArgKind::Buffer, offset_words },
                        ShaderArg::Texture { index } => ArgDesc { kind: ArgKind::Texture, offset_words: index },
                        ShaderArg::Ibo { index } => ArgDesc { kind: ArgKind::Ibo, offset_words: index },
                    })
                    .collect();
                assert_eq!(p.args, want);
                assert_eq!(FakeShader::decode(&p.image).as_ref(), Some(&s));
            }
        }
        let p = parse(&write_fake(&sample())).unwrap();
        assert_eq!((p.samplers, p.sampler_slots(), p.image_counts()), (1, 2, (2, 1)));
        let p = parse(&write_fake(&shader("e", vec![]))).unwrap();
        assert_eq!((p.samplers, p.sampler_slots()), (0, 0));
    }

    /// Overwrites the u32 at `at`.
    fn poke(blob: &mut [u8], at: usize, v: u32) {
        blob[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }

    fn desc_at(blob: &[u8]) -> usize {
        u32_at(blob, SECTIONS_AT + SECTION_BYTES * section::IMAGE_DESC + 4, "").unwrap() as usize
    }

    #[test]
    fn constants_are_read_before_the_image() {
        let s = sample();
        let mut blob = write_fake(&s);
        // Two constant records squeezed between the program section and the image.
        let image_at = u32_at(&blob, SECTIONS_AT + SECTION_BYTES * section::IMAGE + 4, "").unwrap() as usize;
        let c0 = image_at - 2 * CONST_RECORD_BYTES;
        poke(&mut blob, SECTIONS_AT + SECTION_BYTES * section::CONSTS + 4, c0 as u32);
        poke(&mut blob, SECTIONS_AT + SECTION_BYTES * section::CONSTS + 8, 2 * CONST_RECORD_BYTES as u32);
        for (i, (v, off, is32)) in [(0x3f80_0000u32, 5u32, 1u32), (0x1234, 3, 0)].into_iter().enumerate() {
            let c = c0 + i * CONST_RECORD_BYTES;
            poke(&mut blob, c, v);
            poke(&mut blob, c + 16, off);
            poke(&mut blob, c + 24, is32);
        }
        let p = parse(&blob).unwrap();
        assert_eq!(
            p.consts,
            [Const { byte_offset: 20, value: 0x3f80_0000, size: 4 }, Const { byte_offset: 6, value: 0x1234, size: 2 }]
        );
        poke(&mut blob, c0 + 24, 7);
        assert_eq!(
            parse(&blob).unwrap_err().to_string(),
            format!("adreno blob: constant 0 is32 at offset {:#x}: 7 is neither 0 nor 1", c0 + 24)
        );
    }

    #[test]
    fn truncation_and_bad_offsets_are_refused_with_the_field() {
        let blob = write_fake(&sample());
        let e = parse(&blob[..0x20]).unwrap_err();
        assert_eq!(e.to_string(), "adreno blob: section 0 offset at offset 0x34: past the end of the blob (32 bytes)");
        assert!(parse(&[]).unwrap_err().to_string().starts_with("adreno blob: num_sections at offset 0x18"));

        // Cut inside the shader image.
        let image_at = u32_at(&blob, SECTIONS_AT + SECTION_BYTES * section::IMAGE + 4, "").unwrap() as usize;
        let e = parse(&blob[..image_at + 8]).unwrap_err();
        assert_eq!(e.field, "section 7 offset (shader)");
        assert!(e.what.contains("runs past the end"), "{e}");

        // Cut inside the argument records.
        let e = parse(&blob[..blob.len() - ARG_RECORD_BYTES - 8]).unwrap_err();
        assert_eq!(e.field, "argument 4 length", "{e}");

        // An image descriptor offset past the end.
        let mut bad = blob.clone();
        poke(&mut bad, SECTIONS_AT + SECTION_BYTES * section::IMAGE_DESC + 4, 0xffff_fff0);
        let e = parse(&bad).unwrap_err();
        assert_eq!(e.field, "image descriptor prg_offset", "{e}");

        // A shader size that runs past the end.
        let mut bad = blob.clone();
        poke(&mut bad, SECTIONS_AT + SECTION_BYTES * section::CODE + 8, 0x10_0000);
        assert_eq!(parse(&bad).unwrap_err().field, "section 7 offset (shader)");
        poke(&mut bad, SECTIONS_AT + SECTION_BYTES * section::CODE + 8, 0);
        assert_eq!(
            parse(&bad).unwrap_err().to_string(),
            "adreno blob: section 10 size (shader size) at offset 0x100: is 0"
        );

        // Too few sections, too many samplers, an unknown argument type, a wrong name.
        let mut bad = blob.clone();
        poke(&mut bad, NUM_SECTIONS_AT, 11);
        assert_eq!(
            parse(&bad).unwrap_err().to_string(),
            "adreno blob: num_sections at offset 0x18: 11 sections, at least 12 needed"
        );
        let d = desc_at(&blob);
        let mut bad = blob.clone();
        poke(&mut bad, d + DESC_SAMP_CNT, 2);
        assert_eq!(
            parse(&bad).unwrap_err().to_string(),
            format!(
                "adreno blob: image descriptor samp_cnt at offset {:#x}: 2 samplers, at most 1 is supported",
                d + DESC_SAMP_CNT
            )
        );
        let first = (d + DESC_NAME + "k1_conv".len()).div_ceil(4) * 4 + 8;
        let mut bad = blob.clone();
        poke(&mut bad, first + 28, 9);
        assert_eq!(
            parse(&bad).unwrap_err().to_string(),
            format!("adreno blob: argument 0 type at offset {:#x}: unknown type 9", first + 28)
        );
        let mut bad = blob.clone();
        poke(&mut bad, first, 12);
        assert_eq!(parse(&bad).unwrap_err().field, "argument 0 length");
        assert_eq!(
            parse_named(&blob, "k2_other").unwrap_err().to_string(),
            format!(
                "adreno blob: kernel name at offset {:#x}: expected `k2_other`, the blob has `k1_conv.`",
                d + DESC_NAME
            )
        );
        let mut bad = blob.clone();
        bad[d + DESC_NAME] = b'9';
        assert_eq!(parse(&bad).unwrap_err().field, "kernel name");
    }

    proptest::proptest! {
        /// Blobs come from artifacts: any corruption is an error, never a panic.
        #[test]
        fn corrupted_blobs_never_panic(at in 0usize..4096, byte in proptest::num::u8::ANY, cut in 0usize..4096) {
            let mut blob = write_fake(&sample());
            let i = at % blob.len();
            blob[i] = byte;
            let _ = parse(&blob);
            let _ = parse(&blob[..cut.min(blob.len())]);
            let _ = FakeShader::decode(&blob[cut.min(blob.len())..]);
        }
    }
}
