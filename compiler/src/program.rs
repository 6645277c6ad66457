//! A program under construction: buffers, kernels in execution order, and the IR context.

use pilot_core::device::{ImageChannel, ImageDesc};
use pilot_core::DType;

use crate::ir::{Ctx, N};
use crate::tensor::Tensor;

/// The pitch of an image row: the pixels' bytes rounded up to `align`.
fn image_pitch(width: usize, elem: usize, align: usize) -> usize {
    (width * 4 * elem).div_ceil(align) * align
}

/// What a buffer holds.
#[derive(Clone, Debug, PartialEq)]
pub enum BufKind {
    /// Model input `i`.
    Input(usize),
    /// Constant contents known at compile time.
    Weight(Tensor),
    /// Written by a kernel, read by later kernels.
    Scratch,
    /// Model output `i` (written by the last kernel that produces it).
    Output(usize),
}

/// A buffer stored as a 2-D RGBA image of `height` rows of `width` pixels (OpenCL targets with
/// `--image`). Its elements are addressed linearly as `(y * width + x) * 4 + channel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Image {
    pub width: usize,
    pub height: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Buf {
    pub dtype: DType,
    pub numel: usize,
    pub kind: BufKind,
    /// Set for image buffers; then `numel == width * height * 4`.
    pub image: Option<Image>,
}

impl Buf {
    pub fn nbytes(&self) -> usize {
        self.numel * self.dtype.size()
    }

    /// The artifact's image descriptor of an image buffer whose rows are `pitch_align`-aligned.
    pub fn image_desc(&self, pitch_align: usize) -> Option<ImageDesc> {
        let im = self.image?;
        let channel = if self.dtype == DType::F16 { ImageChannel::F16 } else { ImageChannel::F32 };
        Some(ImageDesc {
            width: im.width as u32,
            height: im.height as u32,
            pitch: image_pitch(im.width, self.dtype.size(), pitch_align) as u32,
            channel,
        })
    }
}

/// One kernel: `out[flat(vars)] = expr` for every point of `shape`; `vars[i]` ranges over `shape[i]`.
#[derive(Clone, Debug)]
pub struct Kernel {
    pub name: String,
    pub out: u32,
    pub vars: Vec<u32>,
    pub shape: Vec<usize>,
    pub expr: N,
}

#[derive(Default, Debug)]
pub struct Program {
    pub ctx: Ctx,
    pub bufs: Vec<Buf>,
    pub kernels: Vec<Kernel>,
}

impl Program {
    pub fn new() -> Program {
        Program::default()
    }

    pub fn add_buf(&mut self, dtype: DType, numel: usize, kind: BufKind) -> u32 {
        self.bufs.push(Buf { dtype, numel, kind, image: None });
        self.bufs.len() as u32 - 1
    }

    /// Buffers a kernel reads, in ascending id order.
    pub fn kernel_inputs(&self, k: &Kernel) -> Vec<u32> {
        self.ctx.loads(k.expr).into_iter().filter(|&b| b != k.out).collect()
    }

    /// Floating-point operations of a kernel (per output element × elements), for the summary.
    pub fn kernel_flops(&self, k: &Kernel) -> u64 {
        let points: u64 = k.shape.iter().map(|&d| d as u64).product();
        points * crate::ir::flops_per_point(&self.ctx, k.expr)
    }
}
