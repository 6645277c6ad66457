//! Texture, image (IBO) and sampler descriptors: `A6XX_TEX_CONST` (16 dwords, also the IBO format)
//! and `A6XX_TEX_SAMP` (4 dwords) in Mesa's `src/freedreno/registers/adreno/a6xx.xml`, decoded
//! with pilot's own field table; only what compute kernels use is accepted, the rest is an error.

use half::f16;

fn field(dw: u32, lo: u32, hi: u32) -> u32 {
    (dw >> lo) & (((1u64 << (hi - lo + 1)) - 1) as u32)
}

/// `a6xx_format` values this emulator reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    R16F,
    Rg16F,
    Rgba16F,
    R32F,
    Rg32F,
    Rgba32F,
    R32U,
    Rgba8Unorm,
}

impl Format {
    fn from_fmt6(v: u32) -> Option<Format> {
        Some(match v {
            0x17 => Format::R16F,
            0x45 => Format::Rg16F,
            0x62 => Format::Rgba16F,
            0x4a => Format::R32F,
            0x67 => Format::Rg32F,
            0x82 => Format::Rgba32F,
            0x4b => Format::R32U,
            0x30 => Format::Rgba8Unorm,
            _ => return None,
        })
    }
    /// Bytes per texel.
    pub fn bytes(self) -> u32 {
        match self {
            Format::R16F => 2,
            Format::Rg16F | Format::R32F | Format::R32U | Format::Rgba8Unorm => 4,
            Format::Rgba16F | Format::Rg32F => 8,
            Format::Rgba32F => 16,
        }
    }
    fn channels(self) -> usize {
        match self {
            Format::R16F | Format::R32F | Format::R32U => 1,
            Format::Rg16F | Format::Rg32F => 2,
            _ => 4,
        }
    }
    pub fn is_int(self) -> bool {
        self == Format::R32U
    }

    /// Texel bytes → channel values (f32 bits, or the integer for integer formats), missing
    /// channels as (0, 0, 0, 1).
    pub fn unpack(self, b: &[u8]) -> [u32; 4] {
        let one = if self.is_int() { 1 } else { 1f32.to_bits() };
        let mut out = [0, 0, 0, one];
        for (c, o) in out.iter_mut().enumerate().take(self.channels()) {
            *o = match self {
                Format::R16F | Format::Rg16F | Format::Rgba16F => {
                    f16::from_le_bytes([b[2 * c], b[2 * c + 1]]).to_f32().to_bits()
                }
                Format::Rgba8Unorm => (b[c] as f32 / 255.0).to_bits(),
                _ => u32::from_le_bytes(b[4 * c..4 * c + 4].try_into().unwrap()),
            };
        }
        out
    }

    /// Channel values (as [`Format::unpack`] gives them) → texel bytes.
    pub fn pack(self, v: [u32; 4]) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.bytes() as usize);
        for c in v.iter().take(self.channels()) {
            match self {
                Format::R16F | Format::Rg16F | Format::Rgba16F => {
                    out.extend(f16::from_f32(f32::from_bits(*c)).to_le_bytes())
                }
                Format::Rgba8Unorm => out.push((f32::from_bits(*c).clamp(0.0, 1.0) * 255.0).round() as u8),
                _ => out.extend(c.to_le_bytes()),
            }
        }
        out
    }
}

/// A decoded `A6XX_TEX_CONST`: a linear 1D/2D texture or image, or a buffer (`A6XX_TEX_BUFFER`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TexDesc {
    pub format: Format,
    /// `A6XX_TEX_BUFFER`: `width` counts elements (WIDTH plus HEIGHT << 15), `height` is 1.
    pub buffer: bool,
    /// `SWIZ_X..W`: 0–3 pick a channel, 4 is zero, 5 is one.
    pub swizzle: [u8; 4],
    pub width: u32,
    pub height: u32,
    /// Bytes from one row to the next.
    pub pitch: u32,
    pub base: u64,
}

impl TexDesc {
    pub fn decode(d: &[u32; 16]) -> Result<TexDesc, String> {
        let tile = field(d[0], 0, 1);
        if tile != 0 {
            return Err(format!("texture TILE_MODE {tile} (only linear is implemented)"));
        }
        if field(d[0], 20, 21) != 0 {
            return Err("multisampled texture".into());
        }
        let fmt = field(d[0], 22, 29);
        let format =
            Format::from_fmt6(fmt).ok_or_else(|| format!("texture format FMT6 {fmt:#x} is not implemented"))?;
        let ty = field(d[2], 29, 31);
        if ty > 1 && ty != 4 {
            return Err(format!("texture TYPE {ty} (only 1D, 2D and buffers are implemented)"));
        }
        let buffer = ty == 4;
        let swizzle = [field(d[0], 4, 6), field(d[0], 7, 9), field(d[0], 10, 12), field(d[0], 13, 15)].map(|s| s as u8);
        if swizzle.iter().any(|&s| s > 5) {
            return Err(format!("texture swizzle {swizzle:?}"));
        }
        let (width, height) = if buffer {
            (field(d[1], 0, 14) | field(d[1], 15, 29) << 15, 1)
        } else {
            (field(d[1], 0, 14), field(d[1], 15, 29))
        };
        Ok(TexDesc {
            format,
            buffer,
            swizzle,
            width,
            height,
            pitch: if buffer { 0 } else { field(d[2], 7, 28) },
            base: (d[4] & !0x1f) as u64 | (field(d[5], 0, 16) as u64) << 32,
        })
    }

    /// The GPU address of texel (x, y), which must be inside the texture.
    pub fn texel_addr(&self, x: u32, y: u32) -> u64 {
        self.base + y as u64 * self.pitch as u64 + x as u64 * self.format.bytes() as u64
    }

    pub fn swizzled(&self, v: [u32; 4]) -> [u32; 4] {
        let one = if self.format.is_int() { 1 } else { 1f32.to_bits() };
        self.swizzle.map(|s| match s {
            0..=3 => v[s as usize],
            4 => 0,
            _ => one,
        })
    }
}

/// `a6xx_tex_clamp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wrap {
    Repeat,
    ClampToEdge,
    MirrorRepeat,
    ClampToBorder,
}

/// A decoded `A6XX_TEX_SAMP` (nearest filtering only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampDesc {
    pub wrap: [Wrap; 2],
    pub unnorm_coords: bool,
}

impl SampDesc {
    pub fn decode(d: &[u32; 4]) -> Result<SampDesc, String> {
        if field(d[0], 1, 4) != 0 {
            return Err("sampler filter other than nearest is not implemented".into());
        }
        if field(d[2], 7, 31) != 0 {
            return Err("sampler border colour other than the first (transparent black) is not implemented".into());
        }
        let wrap = |v: u32| -> Result<Wrap, String> {
            Ok(match v {
                0 => Wrap::Repeat,
                1 => Wrap::ClampToEdge,
                2 => Wrap::MirrorRepeat,
                3 => Wrap::ClampToBorder,
                _ => return Err(format!("sampler wrap mode {v} is not implemented")),
            })
        };
        Ok(SampDesc {
            wrap: [wrap(field(d[0], 5, 7))?, wrap(field(d[0], 8, 10))?],
            unnorm_coords: field(d[1], 5, 5) != 0,
        })
    }

    /// The texel index for coordinate `i` along an axis of `size` texels; `None` is the border.
    pub fn wrap_index(&self, axis: usize, i: i64, size: u32) -> Option<u32> {
        let n = size as i64;
        if (0..n).contains(&i) {
            return Some(i as u32);
        }
        Some(match self.wrap[axis] {
            Wrap::ClampToBorder => return None,
            Wrap::ClampToEdge => i.clamp(0, n - 1) as u32,
            Wrap::Repeat => i.rem_euclid(n) as u32,
            Wrap::MirrorRepeat => {
                let m = i.rem_euclid(2 * n);
                (if m < n { m } else { 2 * n - 1 - m }) as u32
            }
        })
    }
}
