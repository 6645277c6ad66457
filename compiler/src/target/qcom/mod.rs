//! `--target qcom`: the OpenCL kernels as Adreno programs, one blob per kernel.
//!
//! On a comma device the blobs come from the device's own Qualcomm OpenCL compiler (the system
//! libOpenCL, `CL_PROGRAM_BINARIES`). Elsewhere `--qcom-compiler fake` writes blobs in the same layout
//! whose shader image carries the kernel's OpenCL source and argument layout, which the fake KGSL runs.

pub mod ir3;

use pilot_core::device::ProgramFormat;
use pilot_core::gates::kernel_sources;
use pilot_qcom::fake_shader::{FakeShader, ShaderArg};

use crate::error::{CompileError, Result};
use crate::program::Program;
use crate::target::cl::{Cl, PRELUDE};
use crate::target::{Built, Codegen, Gates};

/// The QCOM back end: the OpenCL back end's kernels (gates checked on the OpenCL source), then
/// turned into Adreno programs by the compiler its [`super::cl::ClOptions::qcom_compiler`] names.
pub struct Qcom {
    pub cl: Cl,
}

impl Codegen for Qcom {
    fn build(&self, p: &mut Program, gates: &Gates) -> Result<Built> {
        if self.cl.opts.qcom_compiler == QcomCompiler::Ir3 {
            return ir3::build(p, &self.cl.target, &self.cl.opts, gates);
        }
        let built = self.cl.build(p, gates)?;
        to_adreno(p, built, self.cl.opts.qcom_compiler)
    }
}

/// Where the Adreno binaries come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QcomCompiler {
    /// Qualcomm's OpenCL compiler on this machine (a comma device).
    Device,
    /// Mesa's ir3 compiler (a630 machine code on any host, through `target/mesa/libpilot_ir3.so`).
    Ir3,
    /// Blobs carrying OpenCL source, for the fake KGSL.
    Fake,
}

impl QcomCompiler {
    /// The default: Qualcomm's compiler on a comma device (an aarch64 Linux with an Adreno KGSL),
    /// Mesa's ir3 everywhere else.
    pub fn host_default() -> QcomCompiler {
        if cfg!(all(target_arch = "aarch64", target_os = "linux")) && std::path::Path::new("/dev/kgsl-3d0").exists() {
            QcomCompiler::Device
        } else {
            QcomCompiler::Ir3
        }
    }
}

/// Turns `built` (one OpenCL source) into one Adreno blob per kernel.
pub fn to_adreno(p: &Program, mut built: Built, compiler: QcomCompiler) -> Result<Built> {
    let source = String::from_utf8(std::mem::take(&mut built.codes[0])).expect("rendered source is UTF-8");
    let texts = kernel_sources(&source);
    let mut device = match compiler {
        QcomCompiler::Device => Some(qualcomm_compiler()?),
        QcomCompiler::Fake => None,
        QcomCompiler::Ir3 => unreachable!("built by ir3::build"),
    };
    let mut codes = Vec::with_capacity(built.kernels.len());
    for (i, k) in built.kernels.iter_mut().enumerate() {
        let text =
            texts.iter().find(|(name, _)| *name == k.name).map(|(_, t)| *t).ok_or_else(|| {
                CompileError::Graph(format!("kernel `{}` is missing from the rendered source", k.name))
            })?;
        let full = format!("{PRELUDE}\n{text}");
        let blob = match device.as_mut() {
            Some(dev) => {
                let blob = dev.program_binary(&full).map_err(|e| CompileError::Tool(format!("{}: {e}", k.name)))?;
                pilot_qcom::blob::parse(&blob).map_err(|e| {
                    CompileError::Tool(format!(
                        "{}: Qualcomm's compiler returned a blob pilot cannot read: {e}",
                        k.name
                    ))
                })?;
                blob
            }
            None => pilot_qcom::fake_shader::write_blob(&fake_shader(p, &k.name, &k.args, full)),
        };
        codes.push(blob);
        k.code = i;
    }
    built.codes = codes;
    built.format = ProgramFormat::AdrenoBlob;
    Ok(built)
}

/// The argument layout the fake blob records: buffers get consecutive u64 slots of the constant
/// file; the written image (the output) is IBO 0, read images are textures in order.
fn fake_shader(p: &Program, name: &str, args: &[u32], source: String) -> FakeShader {
    let (mut buffers, mut textures) = (0u32, 0u32);
    let args = args
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            let buf = &p.bufs[b as usize];
            match (buf.image.is_some(), i == 0) {
                (true, true) => ShaderArg::Ibo { index: 0 },
                (true, false) => {
                    textures += 1;
                    ShaderArg::Texture { index: textures - 1 }
                }
                (false, written) => {
                    buffers += 1;
                    ShaderArg::Buffer { offset_words: 2 * (buffers - 1), bytes: buf.nbytes() as u32, written }
                }
            }
        })
        .collect();
    FakeShader { name: name.to_string(), args, source }
}

/// The device's OpenCL, if it is Qualcomm's.
fn qualcomm_compiler() -> Result<pilot_cl::ClDevice> {
    let fake = "elsewhere, --qcom-compiler fake writes blobs for the fake KGSL";
    let dev = pilot_cl::ClDevice::open(None).map_err(|e| {
        CompileError::Tool(format!("--target qcom needs Qualcomm's OpenCL compiler (a comma device): {e}; {fake}"))
    })?;
    let (platform, name) = (dev.platform_name().to_lowercase(), dev.device_name().to_lowercase());
    if !platform.contains("qualcomm") && !name.contains("adreno") {
        return Err(CompileError::Tool(format!(
            "--target qcom needs Qualcomm's OpenCL compiler (a comma device); this machine's OpenCL is `{}` on `{}`; {fake}",
            dev.platform_name(),
            dev.device_name()
        )));
    }
    Ok(dev)
}
