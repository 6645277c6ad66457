//! The compile-time half of Resize: per-axis source taps and weights, computed in f64 exactly as
//! the ONNX reference implementation does, and the detection of affine gathers.

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Mode {
    Nearest,
    Linear,
    Cubic,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Coord {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    /// Opset 11 only: `(o + 0.5) / scale`.
    TfHalfPixelForNn,
    TfCropAndResize,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Rounding {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
    /// Resize-10 and Upsample: floor when upsampling, ceil when downsampling (onnxruntime).
    Legacy,
}

/// Interpolation settings shared by every axis of one node.
#[derive(Clone, Copy, Debug)]
pub(super) struct Spec {
    pub(super) mode: Mode,
    pub(super) coord: Coord,
    pub(super) rounding: Rounding,
    pub(super) cubic_a: f64,
    pub(super) exclude_outside: bool,
    pub(super) antialias: bool,
}

/// The resampling of one axis: output position `o` is `Σ_t w[o*taps + t] · x[idx[o*taps + t]]`,
/// or the extrapolation value where `extrapolated[o]` (tf_crop_and_resize outside the input).
/// Indices are in range; rows shorter than `taps` are padded with weight-0 taps at index 0.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct AxisTable {
    pub(super) out: usize,
    pub(super) taps: usize,
    pub(super) idx: Vec<i64>,
    pub(super) w: Vec<f64>,
    pub(super) extrapolated: Vec<bool>,
}

impl AxisTable {
    /// One tap of weight 1 per output: a gather.
    pub(super) fn is_gather(&self) -> bool {
        self.taps == 1 && self.w.iter().all(|&w| w == 1.0)
    }
    /// Reads every input position in order, unchanged: the axis needs no work.
    pub(super) fn is_identity(&self, in_len: usize) -> bool {
        self.out == in_len
            && self.is_gather()
            && !self.extrapolated.contains(&true)
            && self.idx.iter().enumerate().all(|(o, &i)| i == o as i64)
    }
}

/// Interpolation coefficients for the taps around a source position with fractional part `ratio`
/// (in `(0, 1]`, 1 for an exact integer), as the ONNX reference computes them.
pub(super) fn coeffs(s: &Spec, ratio: f64, scale: f64) -> Vec<f64> {
    let b = |v: bool| if v { 1.0 } else { 0.0 };
    match s.mode {
        Mode::Nearest if ratio == 1.0 => vec![0.0, 1.0],
        Mode::Nearest => match s.rounding {
            Rounding::RoundPreferFloor => vec![b(ratio <= 0.5), b(ratio > 0.5)],
            Rounding::RoundPreferCeil => vec![b(ratio < 0.5), b(ratio >= 0.5)],
            Rounding::Floor => vec![1.0, 0.0],
            Rounding::Ceil => vec![0.0, 1.0],
            Rounding::Legacy => vec![b(scale >= 1.0), b(scale < 1.0)],
        },
        Mode::Linear if s.antialias => {
            let scale = scale.min(1.0);
            let start = (-1.0 / scale).floor() as i64 + 1;
            let c: Vec<f64> =
                (start..2 - start).map(|i| (1.0 - ((i as f64 - ratio) * scale).abs()).clamp(0.0, 1.0)).collect();
            let sum: f64 = c.iter().sum();
            c.into_iter().map(|v| v / sum).collect()
        }
        Mode::Linear => vec![1.0 - ratio, ratio],
        Mode::Cubic if s.antialias => {
            let (scale, a) = (scale.min(1.0), s.cubic_a);
            let f = |x: f64| {
                let x = x.abs();
                let (x2, x3) = (x * x, x * x * x);
                if x <= 1.0 {
                    (a + 2.0) * x3 - (a + 3.0) * x2 + 1.0
                } else if x < 2.0 {
                    a * x3 - 5.0 * a * x2 + 8.0 * a * x - 4.0 * a
                } else {
                    0.0
                }
            };
            let start = (-2.0 / scale).floor() as i64 + 1;
            let c: Vec<f64> = (start..2 - start).map(|i| f(scale * (i as f64 - ratio))).collect();
            let sum: f64 = c.iter().sum();
            c.into_iter().map(|v| v / sum).collect()
        }
        Mode::Cubic => {
            let (a, r) = (s.cubic_a, ratio);
            let q = 1.0 - r;
            vec![
                ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
                ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
                ((a + 2.0) * q - (a + 3.0)) * q * q + 1.0,
                ((a * (q + 1.0) - 5.0 * a) * (q + 1.0) + 8.0 * a) * (q + 1.0) - 4.0 * a,
            ]
        }
    }
}

/// The (fractional) source coordinate of output position `y` among `out`. Like the reference,
/// the align_corners, pytorch_half_pixel and tf_crop_and_resize formulas use `scale * in_len` in
/// place of the integer output length.
pub(super) fn source_coord(s: &Spec, y: f64, in_len: usize, out: usize, scale: f64, roi: (f64, f64)) -> f64 {
    let (inf, out_f) = (in_len as f64, scale * in_len as f64);
    match s.coord {
        Coord::AlignCorners if out_f == 1.0 => 0.0,
        Coord::AlignCorners => y * (inf - 1.0) / (out_f - 1.0),
        Coord::Asymmetric => y / scale,
        Coord::TfHalfPixelForNn => (y + 0.5) / scale,
        Coord::TfCropAndResize => {
            let base = if out_f == 1.0 {
                (roi.1 - roi.0) * (inf - 1.0) / 2.0
            } else {
                y * (roi.1 - roi.0) * (inf - 1.0) / (out_f - 1.0)
            };
            base + roi.0 * (inf - 1.0)
        }
        Coord::PytorchHalfPixel if out_f == 1.0 => -0.5,
        Coord::PytorchHalfPixel | Coord::HalfPixel => (y + 0.5) / scale - 0.5,
        Coord::HalfPixelSymmetric => {
            let adjustment = out as f64 / out_f;
            let offset = inf / 2.0 * (1.0 - adjustment);
            offset + (y + 0.5) / scale - 0.5
        }
    }
}

/// The compile-time table resampling an axis of `in_len` to `out` positions.
pub(super) fn axis_table(s: &Spec, in_len: usize, out: usize, scale: f64, roi: (f64, f64)) -> AxisTable {
    let mut rows: Vec<Vec<(i64, f64)>> = Vec::with_capacity(out);
    let mut extrapolated = Vec::with_capacity(out);
    for o in 0..out {
        let x = source_coord(s, o as f64, in_len, out, scale, roi);
        extrapolated.push(s.coord == Coord::TfCropAndResize && (x < 0.0 || x > in_len as f64 - 1.0));
        let ratio = if x == x.floor() { 1.0 } else { x - x.floor() };
        let mut c = coeffs(s, ratio, scale);
        let n = c.len() as i64;
        // The n taps nearest to x, ties to the smaller index (the reference's edge-padded search).
        let pad = (n + 1) / 2;
        let xp = x + pad as f64;
        let p = xp.floor();
        let frac = xp - p;
        let off = if n % 2 == 0 {
            if frac == 0.0 {
                -(n / 2)
            } else {
                -(n / 2) + 1
            }
        } else {
            -((n - 1) / 2) + if frac <= 0.5 { 0 } else { 1 }
        };
        let start = p as i64 + off - pad;
        if s.exclude_outside {
            for (k, w) in c.iter_mut().enumerate() {
                let i = start + k as i64;
                if i < 0 || i >= in_len as i64 {
                    *w = 0.0;
                }
            }
            let sum: f64 = c.iter().sum();
            let sum = if sum == 0.0 { 1.0 } else { sum };
            c.iter_mut().for_each(|w| *w /= sum);
        }
        // Clamp (edge padding), merge repeated indices, drop zero weights.
        let mut row: Vec<(i64, f64)> = Vec::new();
        for (k, &w) in c.iter().enumerate() {
            let i = (start + k as i64).clamp(0, in_len as i64 - 1);
            match row.iter_mut().find(|(j, _)| *j == i) {
                Some(t) => t.1 += w,
                None => row.push((i, w)),
            }
        }
        row.retain(|&(_, w)| w != 0.0);
        rows.push(row);
    }
    let taps = rows.iter().map(Vec::len).max().unwrap_or(1).max(1);
    let mut idx = Vec::with_capacity(out * taps);
    let mut w = Vec::with_capacity(out * taps);
    for row in rows {
        for t in 0..taps {
            let (i, wt) = row.get(t).copied().unwrap_or((0, 0.0));
            idx.push(i);
            w.push(wt);
        }
    }
    AxisTable { out, taps, idx, w, extrapolated }
}

/// `(num, off, den)` with `idx[o] == (o*num + off) / den` for every `o`, if small ones exist.
pub(super) fn affine(idx: &[i64]) -> Option<(i64, i64, i64)> {
    let first = *idx.first()?;
    for den in 1..=8i64 {
        for num in 0..=8i64 {
            for off in first * den..(first + 1) * den {
                if idx.iter().enumerate().all(|(o, &i)| (o as i64 * num + off) / den == i) {
                    return Some((num, off, den));
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(mode: Mode, coord: Coord) -> Spec {
        Spec {
            mode,
            coord,
            rounding: Rounding::RoundPreferFloor,
            cubic_a: -0.75,
            exclude_outside: false,
            antialias: false,
        }
    }

    #[test]
    fn nearest_2x_is_affine_gather() {
        for coord in [Coord::HalfPixel, Coord::Asymmetric] {
            let t = axis_table(&spec(Mode::Nearest, coord), 4, 8, 2.0, (0.0, 1.0));
            assert!(t.is_gather());
            assert_eq!(t.idx, vec![0, 0, 1, 1, 2, 2, 3, 3]);
            assert_eq!(affine(&t.idx), Some((1, 0, 2)));
        }
    }

    #[test]
    fn linear_half_pixel_weights() {
        let t = axis_table(&spec(Mode::Linear, Coord::HalfPixel), 2, 4, 2.0, (0.0, 1.0));
        // x = -0.25, 0.25, 0.75, 1.25 clamped to the edges.
        assert_eq!(t.taps, 2);
        assert_eq!(&t.idx[..2], &[0, 0]);
        assert_eq!(&t.w[..2], &[1.0, 0.0]);
        assert_eq!(&t.idx[2..4], &[0, 1]);
        assert_eq!(&t.w[2..4], &[0.75, 0.25]);
    }

    #[test]
    fn unit_scale_is_identity() {
        for mode in [Mode::Nearest, Mode::Linear, Mode::Cubic] {
            let t = axis_table(&spec(mode, Coord::HalfPixel), 5, 5, 1.0, (0.0, 1.0));
            assert!(t.is_identity(5), "{mode:?}");
        }
    }
}
