//! `--qcom-compiler ir3`: real Adreno 630 machine code on any host, from Mesa's ir3 compiler.
//!
//! Each kernel is prepared and rendered to OpenCL exactly as for the other QCOM compilers (the source
//! is kept for the read-image gates and fixes arguments and NDRange), then built as NIR through
//! [`ffi`] and compiled by ir3. The artifact records, per program, the facts of the ir3 variant a
//! dispatch needs ([`pilot_core::artifact::Ir3Program`]); the code record holds the machine code.

pub mod alu;
pub mod ffi;
pub mod render;

use pilot_core::artifact::{Ir3Arg, Ir3Program};
use pilot_core::device::ProgramFormat;

use crate::error::Result;
use crate::program::Program;
use crate::target::cl::{default_local, prepare, render as cl_render, ClOptions, ARENA_ALIGN, PRELUDE};
use crate::target::{Built, BuiltKernel, Gates};

/// Builds every kernel of `p` with ir3. Kernels run one work-item per output (no local-memory
/// reductions yet, so `--nolocals` changes nothing here).
pub fn build(p: &mut Program, target: &pilot_core::Target, opts: &ClOptions, gates: &Gates) -> Result<Built> {
    let version = ffi::version()?;
    let mut source = PRELUDE.to_string();
    let mut kernels = Vec::new();
    let mut codes = Vec::new();
    for i in 0..p.kernels.len() {
        let k = p.kernels[i].clone();
        let prep = prepare::prepare(p, &k, true);
        let ck = cl_render::render(p, &k, &prep, false)?;
        source.push('\n');
        source.push_str(&ck.source);
        let local = default_local(ck.global);
        let c = render::compile(p, &k, &prep, &ck, local)?;
        let f = c.facts;
        let args = render::bindings(p, &ck)
            .into_iter()
            .map(|b| match b {
                render::Binding::Param(o) => Ir3Arg::Param(o),
                render::Binding::Texture(t) => Ir3Arg::Texture(t),
                render::Binding::Ibo(t) => Ir3Arg::Ibo(t),
            })
            .collect();
        let ir3 = Ir3Program {
            instrlen: f.instrlen,
            full_regs: (f.max_reg + 1) as u32,
            half_regs: (f.max_half_reg + 1) as u32,
            constlen: f.constlen,
            params: (f.params_offset_vec4 != u32::MAX).then_some((f.params_offset_vec4, f.params_size_vec4)),
            driver_params: (f.driver_params_offset_vec4 != u32::MAX)
                .then_some((f.driver_params_offset_vec4, f.driver_params_size_vec4)),
            immediates_offset: f.immediates_offset_vec4,
            immediates: c.immediates.clone(),
            branchstack: f.branchstack,
            private_memory: f.pvtmem_size,
            local_memory: f.shared_size,
            textures: f.num_tex,
            ibos: f.num_ibo,
            tex_to_image: f.tex_to_image[..f.num_tex as usize].iter().map(|&x| u32::from(x)).collect(),
            work_group_id_reg: f.work_group_id_regid,
            local_id_reg: f.local_invocation_id_regid,
            double_threadsize: f.threadsize_double != 0,
            args,
        };
        codes.push(c.code.iter().flat_map(|w| w.to_le_bytes()).collect());
        kernels.push(BuiltKernel {
            name: ck.name,
            args: ck.args,
            code: i,
            global: ck.global,
            local,
            amdgpu: None,
            ir3: Some(ir3),
        });
    }
    let read_images = gates.check_source(&source)?;
    Ok(Built {
        format: ProgramFormat::A6xxIr3,
        codes,
        kernels,
        align: ARENA_ALIGN,
        read_past: 0,
        pitch_align: opts.pitch_align,
        target: target.clone(),
        read_images,
        codegen: Some(format!("{version} ir3 (Adreno 630)")),
    })
}
