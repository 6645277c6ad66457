//! `--target usb+amd` (gfx1100, gfx1201): the OpenCL renderer's kernels ([`crate::target::cl`]) with
//! the AMD prelude ([`prelude`]), compiled by clang for `amdgcn-amd-amdhsa` and linked into ONE code
//! object for the whole model ([`clang`]). The code object is then read back with pilot's own reader
//! ([`pilot_amd_codeobj`]): a kernel it cannot account for fails the compile, and each kernel's
//! descriptor and metadata become the program's `amdgpu` record (what the dispatch needs).

pub mod clang;
pub mod prelude;

use std::path::PathBuf;

use pilot_amd_codeobj::{CodeObject, Kernel};
use pilot_core::artifact::AmdDispatch;
use pilot_core::device::ProgramFormat;
use pilot_core::Target;

use super::cl::{default_local, prepare, render};
use super::{Built, BuiltKernel, Codegen, Gates};
use crate::error::{CompileError, Result};
use crate::program::Program;

/// Base-address alignment of arena buffers (a GPU cache line is 128 bytes; 256 keeps every load of
/// a buffer's first element aligned for any vector width).
pub const ARENA_ALIGN: usize = 256;

/// The AMD back end for `target` (backend `usb+amd`), with an optional clang override (`--cc`).
pub struct Amd {
    pub target: Target,
    pub cc: Option<PathBuf>,
}

impl Codegen for Amd {
    fn build(&self, p: &mut Program, gates: &Gates) -> Result<Built> {
        let clang = clang::find_clang(self.cc.as_deref())?;
        let mut kernels = Vec::with_capacity(p.kernels.len());
        let mut sources = Vec::with_capacity(p.kernels.len());
        for i in 0..p.kernels.len() {
            let k = p.kernels[i].clone();
            let prep = prepare::prepare(p, &k, false);
            // gfx1100 and gfx1201 have `double` (the prelude enables cl_khr_fp64).
            let ck = render::render_for(p, &k, &prep, true, true)?;
            let local = ck.local.unwrap_or_else(|| default_local(ck.global));
            sources.push(prelude::kernel_source(&ck, local)?);
            kernels.push(BuiltKernel {
                name: ck.name,
                args: ck.args,
                code: 0,
                global: ck.global,
                local,
                amdgpu: None,
                ir3: None,
            });
        }
        let read_images = gates.check_source(&sources.concat())?;
        let source = format!("{}\n{}", prelude::prelude(), sources.join("\n"));
        if let Some(path) = std::env::var_os("PILOT_DUMP_AMD") {
            // Debugging aid: the whole OpenCL C, as compiled.
            let path = PathBuf::from(path);
            std::fs::write(&path, &source)
                .map_err(|e| CompileError::Io { path: path.display().to_string(), source: e })?;
        }
        let code = clang::build(&clang, self.target.arch, &source)?;
        let obj = CodeObject::parse(&code).map_err(|e| CompileError::Tool(format!("clang's {e}")))?;
        if obj.arch != self.target.arch || obj.kernels.len() != kernels.len() {
            return Err(CompileError::Tool(format!(
                "clang's code object is for {} with {} kernels, expected {} with {}",
                obj.arch,
                obj.kernels.len(),
                self.target.arch,
                kernels.len()
            )));
        }
        for k in &mut kernels {
            let ko = obj.kernel(&k.name).ok_or_else(|| {
                CompileError::Tool(format!("kernel `{}` is missing from clang's code object", k.name))
            })?;
            k.amdgpu = Some(dispatch(k, ko)?);
        }
        Ok(Built {
            format: ProgramFormat::AmdCodeObject,
            codes: vec![code],
            kernels,
            align: ARENA_ALIGN,
            read_past: 0,
            pitch_align: 1,
            target: self.target.clone(),
            read_images,
            codegen: None,
        })
    }
}

/// The dispatch record of kernel `k`, after checking the code object agrees with how pilot launches
/// it: the work-group size it was compiled for, one 64-bit address per argument.
fn dispatch(k: &BuiltKernel, ko: &Kernel) -> Result<AmdDispatch> {
    let fail = |msg: String| Err(CompileError::Tool(format!("kernel `{}`: clang's code object {msg}", k.name)));
    if ko.reqd_workgroup_size != Some(k.local) {
        return fail(format!("says work-group size {:?}, pilot launches {:?}", ko.reqd_workgroup_size, k.local));
    }
    if ko.arg_offsets.len() != k.args.len() {
        return fail(format!("has {} arguments, the kernel {}", ko.arg_offsets.len(), k.args.len()));
    }
    Ok(ko.dispatch_record())
}
