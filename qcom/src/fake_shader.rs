//! The shader image of a *fake* Adreno program: what `pilot compile --target qcom --qcom-compiler fake`
//! puts where Qualcomm's compiler puts machine code (section 7 of the blob, uploaded as the shader), so the
//! fake KGSL can find, from the shader address of a dispatch, the kernel's OpenCL source and how its
//! arguments are laid out in the constant file and descriptor tables.
//!
//! Layout (little endian): `b"PILOTCL1"`, `u32 name_len`, name, `u32 nargs`,
//! `nargs × (u32 kind, u32 slot, u32 bytes)`, `u32 source_len`, source (UTF-8 OpenCL C), zero padding to a
//! multiple of 128 bytes (one shader unit). `kind` 0 = buffer read, 3 = buffer written (`slot` = constant-file
//! offset in 32-bit words of its u64 GPU address, `bytes` = how many bytes the kernel may touch from it),
//! 1 = texture (read-only image; `slot` = texture descriptor index), 2 = IBO (written image; `slot` = IBO
//! index); `bytes` is 0 for images (their size is in the descriptor).
//!
//! [`write_blob`] wraps such an image in the Qualcomm blob layout that [`crate::blob`] parses. The dependency goes
//! this way only: the blob parser, which the on-device runtime uses, knows nothing of fake shaders.

use crate::blob::{
    section, ARG_RECORD_BYTES, BUFTYPE_BUF, BUFTYPE_IBO, BUFTYPE_TEX, CONST_RECORD_BYTES, DESC_BRNCHSTCK, DESC_NAME,
    DESC_PRG_OFFSET, DESC_PVTMEM, DESC_SAMP_CNT, DESC_SHMEM, NUM_SECTIONS_AT, PROG_FREGS, PROG_HREGS, SECTIONS_AT,
    SECTION_BYTES,
};

/// Identifies a fake shader image.
pub const FAKE_MAGIC: &[u8; 8] = b"PILOTCL1";

/// One kernel argument, in signature order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShaderArg {
    /// A buffer whose u64 GPU address the host writes at constant-file word `offset_words`; the kernel
    /// touches `bytes` bytes from that address, and writes them when `written`.
    Buffer { offset_words: u32, bytes: u32, written: bool },
    /// A read-only image: texture descriptor `index`.
    Texture { index: u32 },
    /// A written image: IBO descriptor `index`.
    Ibo { index: u32 },
}

/// A fake shader: the kernel's name, argument layout and OpenCL C source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FakeShader {
    pub name: String,
    pub args: Vec<ShaderArg>,
    pub source: String,
}

impl FakeShader {
    /// The shader image bytes (a multiple of 128).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = FAKE_MAGIC.to_vec();
        let put = |out: &mut Vec<u8>, v: u32| out.extend_from_slice(&v.to_le_bytes());
        put(&mut out, self.name.len() as u32);
        out.extend_from_slice(self.name.as_bytes());
        put(&mut out, self.args.len() as u32);
        for a in &self.args {
            let (kind, slot, bytes) = match *a {
                ShaderArg::Buffer { offset_words, bytes, written } => {
                    (if written { 3 } else { 0 }, offset_words, bytes)
                }
                ShaderArg::Texture { index } => (1, index, 0),
                ShaderArg::Ibo { index } => (2, index, 0),
            };
            put(&mut out, kind);
            put(&mut out, slot);
            put(&mut out, bytes);
        }
        put(&mut out, self.source.len() as u32);
        out.extend_from_slice(self.source.as_bytes());
        out.resize(out.len().div_ceil(128) * 128, 0);
        out
    }

    /// Decodes a shader image; `None` if it is not a well-formed fake shader.
    pub fn decode(bytes: &[u8]) -> Option<FakeShader> {
        let rest = bytes.strip_prefix(FAKE_MAGIC.as_slice())?;
        let mut at = 0usize;
        let u32_at = |at: &mut usize| -> Option<u32> {
            let v = u32::from_le_bytes(rest.get(*at..*at + 4)?.try_into().ok()?);
            *at += 4;
            Some(v)
        };
        let n = u32_at(&mut at)? as usize;
        let name = std::str::from_utf8(rest.get(at..at.checked_add(n)?)?).ok()?.to_string();
        at += n;
        let nargs = u32_at(&mut at)? as usize;
        if nargs > 4096 {
            return None;
        }
        let mut args = Vec::with_capacity(nargs);
        for _ in 0..nargs {
            let (kind, slot, bytes) = (u32_at(&mut at)?, u32_at(&mut at)?, u32_at(&mut at)?);
            args.push(match kind {
                0 | 3 => ShaderArg::Buffer { offset_words: slot, bytes, written: kind == 3 },
                1 => ShaderArg::Texture { index: slot },
                2 => ShaderArg::Ibo { index: slot },
                _ => return None,
            });
        }
        let n = u32_at(&mut at)? as usize;
        let source = std::str::from_utf8(rest.get(at..at.checked_add(n)?)?).ok()?.to_string();
        Some(FakeShader { name, args, source })
    }
}

/// Full registers [`write_blob`] declares.
pub const FAKE_FREGS: u32 = 4;
/// Half registers [`write_blob`] declares.
pub const FAKE_HREGS: u32 = 0;

/// A blob in the Qualcomm layout around `shader`: section 7 is `shader.encode()` (section 10's size its length),
/// the program section declares [`FAKE_FREGS`]/[`FAKE_HREGS`], there are no constants, the image descriptor has
/// no first-exec offset, private or shared memory, one sampler if any argument is a texture, the kernel name at
/// +0x158, and one 32-byte argument record per `shader.args` entry in signature order (buffers: type 0 with their
/// `offset_words`; textures: type 1, IBOs: type 2, with their descriptor index as `offset_words`).
///
/// The host binds the n-th texture (IBO) argument to texture (IBO) descriptor n, so `shader`'s image indices must
/// be their ordinals among the arguments of that kind, as the compiler emits them (checked in debug builds).
pub fn write_blob(shader: &FakeShader) -> Vec<u8> {
    let put = |b: &mut Vec<u8>, at: usize, v: u32| {
        if b.len() < at + 4 {
            b.resize(at + 4, 0);
        }
        b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    };
    let (mut ntex, mut nibo) = (0, 0);
    for a in &shader.args {
        match *a {
            ShaderArg::Texture { index } => {
                debug_assert_eq!(index, ntex, "texture arguments must be numbered in order");
                ntex += 1;
            }
            ShaderArg::Ibo { index } => {
                debug_assert_eq!(index, nibo, "IBO arguments must be numbered in order");
                nibo += 1;
            }
            ShaderArg::Buffer { .. } => {}
        }
    }
    let samplers = u32::from(ntex > 0);
    let code = shader.encode();

    let prog_at = SECTIONS_AT + SECTION_BYTES * section::COUNT;
    let prog_len = 0x20;
    let image_at = (prog_at + prog_len).div_ceil(128) * 128;
    let desc_at = (image_at + code.len()).div_ceil(16) * 16;

    let mut b = vec![0u8; desc_at];
    put(&mut b, NUM_SECTIONS_AT, section::COUNT as u32);
    let sec = |b: &mut Vec<u8>, i: usize, offset: usize, size: usize, count: u32, entry: u32| {
        let base = SECTIONS_AT + SECTION_BYTES * i;
        for (k, v) in [i as u32, offset as u32, size as u32, count, entry].into_iter().enumerate() {
            put(b, base + 4 * k, v);
        }
    };
    for i in 0..section::COUNT {
        sec(&mut b, i, 0, 0, 0, 0);
    }
    sec(&mut b, section::PROGRAM, prog_at, prog_len, 1, prog_len as u32);
    sec(&mut b, section::CONSTS, image_at, 0, 0, CONST_RECORD_BYTES as u32);
    sec(&mut b, section::IMAGE, image_at, code.len(), 1, 0);
    sec(&mut b, section::CODE, image_at, code.len(), 1, 0);

    // Program section: the name's first 8 bytes, then the register footprints.
    let short = &shader.name.as_bytes()[..shader.name.len().min(8)];
    b[prog_at..prog_at + short.len()].copy_from_slice(short);
    put(&mut b, prog_at + PROG_FREGS, FAKE_FREGS);
    put(&mut b, prog_at + PROG_HREGS, FAKE_HREGS);

    b[image_at..image_at + code.len()].copy_from_slice(&code);

    // Image descriptor.
    for (off, v) in
        [(DESC_PRG_OFFSET, 0), (DESC_PVTMEM, 0), (DESC_SHMEM, 0), (DESC_SAMP_CNT, samplers), (DESC_BRNCHSTCK, 0)]
    {
        put(&mut b, desc_at + off, v);
    }
    let name_at = desc_at + DESC_NAME;
    b.resize(name_at + shader.name.len() + 1, 0);
    b[name_at..name_at + shader.name.len()].copy_from_slice(shader.name.as_bytes());
    let mut rec = (name_at + shader.name.len()).div_ceil(4) * 4 + 8 * samplers as usize;
    b.resize(b.len().max(rec), 0);
    for a in &shader.args {
        let (offset_words, typ) = match *a {
            ShaderArg::Buffer { offset_words, .. } => (offset_words, BUFTYPE_BUF),
            ShaderArg::Texture { index } => (index, BUFTYPE_TEX),
            ShaderArg::Ibo { index } => (index, BUFTYPE_IBO),
        };
        b.resize(rec + ARG_RECORD_BYTES, 0);
        b[rec..rec + ARG_RECORD_BYTES].fill(0);
        put(&mut b, rec, ARG_RECORD_BYTES as u32);
        put(&mut b, rec + 12, offset_words);
        put(&mut b, rec + 28, typ);
        rec += ARG_RECORD_BYTES;
    }
    // The terminating zero record.
    b.resize(rec + ARG_RECORD_BYTES, 0);
    b[rec..].fill(0);
    let desc_len = b.len() - desc_at;
    sec(&mut b, section::IMAGE_DESC, desc_at, desc_len, 1, 0);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects() {
        let s = FakeShader {
            name: "k0_conv".into(),
            args: vec![
                ShaderArg::Ibo { index: 0 },
                ShaderArg::Buffer { offset_words: 2, bytes: 64, written: true },
                ShaderArg::Texture { index: 1 },
            ],
            source: "__kernel void k0_conv() {}".into(),
        };
        let bytes = s.encode();
        assert_eq!(bytes.len() % 128, 0);
        assert_eq!(FakeShader::decode(&bytes), Some(s));
        assert_eq!(FakeShader::decode(&bytes[..20]), None, "truncated");
        assert_eq!(FakeShader::decode(b"NOTPILOT........"), None, "wrong magic");
        let mut bad = bytes.clone();
        bad[8 + 4 + 7 + 4] = 9; // first arg kind
        assert_eq!(FakeShader::decode(&bad), None, "unknown argument kind");
    }
}
