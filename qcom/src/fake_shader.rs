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
