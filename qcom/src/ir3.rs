//! How [`crate::device::QcomDevice`] lays out a program Mesa's ir3 compiled (the artifact's `ir3` record,
//! [`Ir3Program`]): the launch facts the dispatch encoder needs and where each argument, immediate and the local size
//! go in the kernel-argument block. It follows tinygrad's IR3 path (`tinygrad/runtime/ops_qcom.py`,
//! `QCOMProgram.__init__` with `NIR`, `QCOMArgsState.__init__` and `QCOMComputeQueue.exec`):
//!
//! - registers: full/half footprint `max_reg + 1` / `max_half_reg + 1`, BRANCHSTACK as the variant reports it,
//!   THREADSIZE = THREAD64 (tinygrad writes THREAD64 whatever `double_threadsize` says), private and shared memory;
//! - code: the whole image at SP_CS_BASE, `ceil(bytes / 128)` instruction units;
//! - const file (the block's first 2 KiB, loaded as 256 vec4): buffer addresses at the kernel-parameter range
//!   (`ubo_state.range[0].offset`) plus each parameter's byte offset, the immediates at `max_const_offset_vec4`, and
//!   the local size as three u32 at const component `wgsz = driver_params.offset_vec4 * 4 + 8` (the driver params'
//!   `local_group_size_x`, Mesa `ir3_driver_params_cs` in `src/freedreno/ir3/ir3_shader.h`), which is also
//!   SP_CS_CONST_CONFIG_0 WGSIZECONSTID; 0xfc ("unused") without driver params;
//! - descriptors: textures first, then the IBO, then one clamp-to-border sampler per texture; texture state `i`
//!   serves image `tex_to_image[i]`.

use crate::dispatch::{ArgsLayout, KernelInfo, ShaderKind, CONST_FILE_BYTES};
use pilot_core::artifact::{Ir3Arg, Ir3Program};

/// ir3's "unused" register/constant id (`regid(63, 0)`).
pub const UNUSED_ID: u32 = 0xfc;

/// Where a loaded ir3 program's arguments go: what [`crate::device::QcomDevice::link_step`] writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ir3Layout {
    pub kind: ShaderKind,
    pub kernel: KernelInfo,
    pub args: ArgsLayout,
    /// (argument, const-file byte) of each buffer argument's 64-bit address.
    pub params: Vec<(usize, u32)>,
    /// The argument each texture state serves.
    pub textures: Vec<usize>,
    /// The argument each IBO state serves.
    pub ibos: Vec<usize>,
    /// Image arguments the program never reads (ir3 dropped their texture state): bound to nothing.
    pub unbound_images: Vec<usize>,
    /// Const-file byte of the immediates, and their values.
    pub immediates_at: u32,
    pub immediates: Vec<u32>,
}

fn vec4s(range: Option<(u32, u32)>) -> Option<(u32, u32)> {
    range.map(|(off, size)| (off * 16, (off + size) * 16))
}

impl Ir3Layout {
    /// Lays out `r` for `arg_count` arguments and `code_bytes` bytes of code; a one-line reason when the record
    /// does not fit what pilot's argument block and the a630 registers can hold.
    pub fn new(r: &Ir3Program, arg_count: usize, code_bytes: usize) -> Result<Ir3Layout, String> {
        if r.args.len() != arg_count {
            return Err(format!("the ir3 record binds {} arguments, the program says {arg_count}", r.args.len()));
        }
        if code_bytes == 0 || !code_bytes.is_multiple_of(8) || code_bytes > u32::MAX as usize {
            return Err(format!("{code_bytes} bytes of code are not whole a6xx instructions"));
        }
        // Descriptors follow the const file in the block, so the program may read only its first 2 KiB.
        if r.constlen * 16 > CONST_FILE_BYTES {
            return Err(format!(
                "the program reads {} vec4 of constants, the argument block holds {}",
                r.constlen,
                CONST_FILE_BYTES / 16
            ));
        }
        let within = |what: &str, (a, b): (u32, u32)| {
            if b > r.constlen * 16 {
                Err(format!("{what} (const bytes {a}..{b}) pass the program's {}-vec4 const file", r.constlen))
            } else {
                Ok(())
            }
        };
        let immediates_at = r.immediates_offset * 16;
        let imm = (immediates_at, immediates_at + 4 * r.immediates.len() as u32);
        if !r.immediates.is_empty() {
            within("the immediates", imm)?;
        }
        let wgsz = match r.driver_params {
            Some((off, size)) if size > 0 => off * 4 + 8,
            _ => UNUSED_ID,
        };
        let mut regions = vec![("the immediates", imm)];
        if wgsz != UNUSED_ID {
            let local = (wgsz * 4, wgsz * 4 + 12);
            if wgsz > 0xff || local.1 > CONST_FILE_BYTES {
                return Err(format!("the local size at const component {wgsz} is outside the const file"));
            }
            regions.push(("the local size", local));
        }
        let mut params = Vec::new();
        let (mut textures, mut ibos, mut unbound_images) =
            (vec![usize::MAX; r.textures as usize], vec![usize::MAX; r.ibos as usize], Vec::new());
        for (i, a) in r.args.iter().enumerate() {
            match *a {
                Ir3Arg::Param(o) => {
                    // ir3 drops the parameter block when the program reads none of it (a kernel over an empty
                    // tensor): the argument is not uploaded.
                    let Some((start, end)) = vec4s(r.params) else { continue };
                    let at = start + o;
                    if !o.is_multiple_of(8) || at + 8 > end {
                        return Err(format!(
                            "argument {i}: parameter byte {o} is unaligned or outside the parameters (const bytes \
                             {start}..{end})"
                        ));
                    }
                    params.push((i, at));
                }
                Ir3Arg::Texture(image) => match r.tex_to_image.iter().position(|&t| t == image) {
                    Some(state) if state < textures.len() => textures[state] = i,
                    _ => unbound_images.push(i),
                },
                Ir3Arg::Ibo(state) => match ibos.get_mut(state as usize) {
                    Some(slot) => *slot = i,
                    None => unbound_images.push(i),
                },
            }
        }
        if let Some(params) = vec4s(r.params) {
            within("the kernel parameters", params)?;
            regions.push(("the kernel parameters", params));
        }
        for (n, (a, (a0, a1))) in regions.iter().enumerate() {
            for (b, (b0, b1)) in &regions[n + 1..] {
                if a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1 {
                    return Err(format!("{a} (const bytes {a0}..{a1}) and {b} (bytes {b0}..{b1}) overlap"));
                }
            }
        }
        for (what, states) in [("texture", &textures), ("IBO", &ibos)] {
            if let Some(s) = states.iter().position(|&a| a == usize::MAX) {
                return Err(format!("{what} state {s} serves no image argument"));
            }
        }
        for (what, id) in [("work-group id register", r.work_group_id_reg), ("local id register", r.local_id_reg)] {
            if id > 0xff {
                return Err(format!("{what} {id:#x} does not fit SP_CS_CONST_CONFIG_0"));
            }
        }
        let kind = ShaderKind::Ir3 { wgid: r.work_group_id_reg as u8, wgsz: wgsz as u8, lid: r.local_id_reg as u8 };
        let kernel = KernelInfo {
            image_size: code_bytes as u32,
            prg_offset: 0,
            fregs: r.full_regs,
            hregs: r.half_regs,
            branchstack: r.branchstack,
            pvtmem: r.private_memory,
            shmem: r.local_memory,
        };
        kernel.validate().map_err(|e| e.0)?;
        // ir3 emits a sampler for every texture (tinygrad: "IR3 outputs a sampler for every texture").
        let args = ArgsLayout::new(kind, r.textures, r.ibos, r.textures).map_err(|e| e.0)?;
        Ok(Ir3Layout {
            kind,
            kernel,
            args,
            params,
            textures,
            ibos,
            unbound_images,
            immediates_at,
            immediates: r.immediates.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Ir3Program {
        Ir3Program {
            instrlen: 2,
            full_regs: 3,
            half_regs: 1,
            constlen: 8,
            params: Some((0, 1)),
            driver_params: Some((2, 3)),
            immediates_offset: 1,
            immediates: vec![7, 8],
            branchstack: 1,
            private_memory: 0,
            local_memory: 0,
            textures: 2,
            ibos: 1,
            tex_to_image: vec![1, 0],
            work_group_id_reg: 0x10,
            local_id_reg: 0,
            double_threadsize: false,
            args: vec![Ir3Arg::Ibo(0), Ir3Arg::Texture(0), Ir3Arg::Param(0), Ir3Arg::Texture(1), Ir3Arg::Param(8)],
        }
    }

    #[test]
    fn lays_out_as_tinygrad() {
        let l = Ir3Layout::new(&record(), 5, 256).unwrap();
        assert_eq!(l.kind, ShaderKind::Ir3 { wgid: 0x10, wgsz: 16, lid: 0 });
        assert_eq!((l.kernel.fregs, l.kernel.hregs, l.kernel.instr_units()), (3, 1, 2));
        assert_eq!(l.params, [(2, 0), (4, 8)]);
        assert_eq!(l.textures, [3, 1], "texture state i serves image tex_to_image[i]");
        assert_eq!(l.ibos, [0]);
        assert_eq!((l.immediates_at, l.args.samp_cnt, l.args.tex_off, l.args.ibo_off), (16, 2, 2048, 2048 + 128));
        let no_dp = Ir3Program { driver_params: None, ..record() };
        assert_eq!(Ir3Layout::new(&no_dp, 5, 256).unwrap().kind, ShaderKind::Ir3 { wgid: 0x10, wgsz: 0xfc, lid: 0 });
    }

    #[test]
    fn refuses_what_does_not_fit() {
        let e = |r: Ir3Program| Ir3Layout::new(&r, 5, 256).unwrap_err();
        assert_eq!(
            e(Ir3Program { constlen: 129, ..record() }),
            "the program reads 129 vec4 of constants, the argument block holds 128"
        );
        assert_eq!(
            e(Ir3Program { immediates_offset: 0, ..record() }),
            "the immediates (const bytes 0..8) and the kernel parameters (bytes 0..16) overlap"
        );
        assert_eq!(
            e(Ir3Program { driver_params: Some((0, 1)), params: Some((2, 1)), ..record() }),
            "the local size (const bytes 32..44) and the kernel parameters (bytes 32..48) overlap"
        );
        assert_eq!(
            e(Ir3Program { params: Some((0, 0)), ..record() }),
            "argument 2: parameter byte 0 is unaligned or outside the parameters (const bytes 0..0)"
        );
        assert_eq!(e(Ir3Program { tex_to_image: vec![1, 5], ..record() }), "texture state 1 serves no image argument");
        assert_eq!(
            Ir3Layout::new(&record(), 4, 256).unwrap_err(),
            "the ir3 record binds 5 arguments, the program says 4"
        );
        assert_eq!(Ir3Layout::new(&record(), 5, 12).unwrap_err(), "12 bytes of code are not whole a6xx instructions");
    }
}
