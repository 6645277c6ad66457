//! Texture, IBO and sampler descriptors as the fake reads them, with its own field table ([`super::regs`]), not
//! the encoder's `crate::dispatch` parser. Only what the a630 compute path needs is accepted: linear 2-D RGBA
//! float/half images and non-anisotropic samplers; anything else is an error naming the field.

use super::regs::*;

/// Channel format of an image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TexelFormat {
    /// FMT6_32_32_32_32_FLOAT.
    Rgba32Float,
    /// FMT6_16_16_16_16_FLOAT.
    Rgba16Float,
}

impl TexelFormat {
    pub const fn pixel_bytes(self) -> u32 {
        match self {
            TexelFormat::Rgba32Float => 16,
            TexelFormat::Rgba16Float => 8,
        }
    }
}

/// A linear 2-D image as a texture or IBO descriptor describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ImageView {
    pub format: TexelFormat,
    pub width: u32,
    pub height: u32,
    /// Row pitch in bytes.
    pub pitch: u32,
    /// GPU address of the first pixel.
    pub base: u64,
}

impl ImageView {
    /// Bytes from `base` the image spans.
    pub const fn span(&self) -> u64 {
        self.pitch as u64 * self.height as u64
    }
}

fn field_is(d: u32, f: Field, want: u32) -> Result<(), String> {
    match f.get(d) {
        v if v == want => Ok(()),
        v => Err(format!("{} is {v}, the fake supports only {want}", f.mesa_name())),
    }
}

/// Decodes a texture (`ibo == false`) or IBO descriptor. IBO descriptors carry no swizzle.
pub fn image(d: &[u32; 16], ibo: bool) -> Result<ImageView, String> {
    let format = match TEX_FMT.get(d[0]) {
        FMT6_32_32_32_32_FLOAT => TexelFormat::Rgba32Float,
        FMT6_16_16_16_16_FLOAT => TexelFormat::Rgba16Float,
        f => return Err(format!("{} is {f}, not an RGBA float or half format", TEX_FMT.mesa_name())),
    };
    for f in [TEX_TILE_MODE, TEX_SRGB, TEX_MIPLVLS, TEX_SAMPLES, TEX_SWAP] {
        field_is(d[0], f, 0)?;
    }
    if !ibo {
        for (f, want) in
            [(TEX_SWIZ_X, A6XX_TEX_X), (TEX_SWIZ_Y, A6XX_TEX_Y), (TEX_SWIZ_Z, A6XX_TEX_Z), (TEX_SWIZ_W, A6XX_TEX_W)]
        {
            field_is(d[0], f, want)?;
        }
    }
    field_is(d[2], TEX_TYPE, A6XX_TEX_2D)?;
    field_is(d[5], TEX_DEPTH, 0)?;
    if d[3] != 0 {
        return Err(format!("dword 3 is {:#x}: arrays and layers are not supported", d[3]));
    }
    let (width, height, pitch) = (TEX_WIDTH.get(d[1]), TEX_HEIGHT.get(d[1]), TEX_PITCH.get(d[2]));
    let row = width * format.pixel_bytes();
    if width == 0 || height == 0 {
        return Err(format!("image of {width}x{height} pixels"));
    }
    if pitch < row || !pitch.is_multiple_of(64) {
        return Err(format!(
            "{} is {pitch} bytes for a row of {width} pixels ({row} bytes): too small or not a multiple of 64",
            TEX_PITCH.mesa_name()
        ));
    }
    if d[4] & !TEX_BASE_LO.mask() != 0 {
        return Err(format!("base {:#x} is not 32-byte aligned", d[4]));
    }
    let base = (TEX_BASE_HI.get(d[5]) as u64) << 32 | (TEX_BASE_LO.get(d[4]) as u64) << TEX_BASE_LO.low;
    Ok(ImageView { format, width, height, pitch, base })
}

/// How a sampler filters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Filter {
    Nearest,
    Linear,
}

/// What a sampler does with coordinates outside the image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Wrap {
    Repeat,
    ClampToEdge,
    MirrorRepeat,
    ClampToBorder,
}

/// A decoded sampler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Sampler {
    /// Coordinates in `[0, 1)` (false: in pixels, UNNORM_COORDS).
    pub normalized: bool,
    pub filter: Filter,
    /// WRAP_S, WRAP_T, WRAP_R.
    pub wrap: [Wrap; 3],
}

/// Decodes a 4-dword sampler.
pub fn sampler(d: &[u32; 4]) -> Result<Sampler, String> {
    let filter = |f: Field| match f.get(d[0]) {
        A6XX_TEX_NEAREST => Ok(Filter::Nearest),
        A6XX_TEX_LINEAR => Ok(Filter::Linear),
        v => Err(format!("{} is {v}: only nearest and linear filtering are supported", f.mesa_name())),
    };
    let (mag, min) = (filter(SAMP_XY_MAG)?, filter(SAMP_XY_MIN)?);
    if mag != min {
        return Err(format!("{mag:?} magnification with {min:?} minification is not supported"));
    }
    let wrap = |f: Field| match f.get(d[0]) {
        A6XX_TEX_REPEAT => Ok(Wrap::Repeat),
        A6XX_TEX_CLAMP_TO_EDGE => Ok(Wrap::ClampToEdge),
        A6XX_TEX_MIRROR_REPEAT => Ok(Wrap::MirrorRepeat),
        A6XX_TEX_CLAMP_TO_BORDER => Ok(Wrap::ClampToBorder),
        v => Err(format!("{} is {v}, which the fake does not support", f.mesa_name())),
    };
    field_is(d[0], SAMP_ANISO, 0)?;
    field_is(d[1], SAMP_COMPARE_FUNC, 0)?;
    Ok(Sampler {
        normalized: SAMP_UNNORM_COORDS.get(d[1]) == 0,
        filter: mag,
        wrap: [wrap(SAMP_WRAP_S)?, wrap(SAMP_WRAP_T)?, wrap(SAMP_WRAP_R)?],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_tinygrads_descriptor_values() {
        // tinygrad's QCOMArgsState._tex for a 64x16 half image with a 512-byte pitch at 0x7f80001000, and its sampler.
        let mut d = [0u32; 16];
        d[..8].copy_from_slice(&[0x1880_6888, 0x0008_0040, 0x2001_0003, 0, 0x8000_1000, 0x7f, 0x4000_0000, 13]);
        let want =
            ImageView { format: TexelFormat::Rgba16Float, width: 64, height: 16, pitch: 512, base: 0x7f_8000_1000 };
        assert_eq!(image(&d, false), Ok(want));
        d[0] = 0x1880_0000;
        assert_eq!(image(&d, true), Ok(want));
        assert_eq!(image(&d, false).unwrap_err(), "A6XX_TEX_CONST_0_SWIZ_Y is 0, the fake supports only 1");
        d[2] = 0x2000_0803; // pitch 16 "bytes": a pitch in pixels
        assert!(image(&d, true).unwrap_err().starts_with("A6XX_TEX_CONST_2_PITCH is 16 bytes for a row of 64"));
        let s = sampler(&[0x1b60, 0x30, 0, 0]).unwrap();
        assert_eq!(s, Sampler { normalized: false, filter: Filter::Nearest, wrap: [Wrap::ClampToBorder; 3] });
        assert!(sampler(&[0x1b60, 0x10, 0, 0]).unwrap().normalized);
        assert_eq!(
            sampler(&[0x1b66, 0x30, 0, 0]).unwrap_err(),
            "A6XX_TEX_SAMP_0_XY_MAG is 3: only nearest and linear filtering are supported"
        );
    }
}
