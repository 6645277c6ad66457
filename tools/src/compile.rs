//! `pilot compile`: ONNX → artifact, with the seed's gates and `--selftest`.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use pilot_compiler::lower::pin::Pins;
use pilot_compiler::target::qcom::QcomCompiler;
use pilot_compiler::tensor::Tensor;
use pilot_core::target::{Backend, Modes, Target};

#[derive(clap::Args)]
pub struct CompileArgs {
    pub model: PathBuf,
    /// Output artifact (default: MODEL with the extension .pkl).
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
    /// cpu, null (compile everything, run nothing), cl (OpenCL C; the exact kernels of the Adreno path),
    /// qcom (Adreno 630 programs, run over KGSL) or usb+amd (alias amd: one HSA code object for an AMD
    /// GPU behind a USB bridge; needs --arch). The rules are `pilot_core::target`'s.
    #[arg(long, default_value = "cpu")]
    pub target: String,
    /// Where --target qcom gets Adreno binaries: `device` (Qualcomm's OpenCL compiler on a comma
    /// device), `ir3` (Mesa's ir3: a630 machine code on any host; needs scripts/setup.sh) or `fake`
    /// (blobs carrying OpenCL source, for `--device fake-kgsl`). Default: `device` on a comma device,
    /// else `ir3`.
    #[arg(long)]
    pub qcom_compiler: Option<String>,
    /// Architecture of the artifact: x86_64 or aarch64 for cpu (default: this machine's); a630 for cl;
    /// gfx1100 (RX 7900) or gfx1201 (RX 9070) for usb+amd.
    #[arg(long)]
    pub arch: Option<String>,
    /// Pin a dynamic input shape, e.g. --shape input_imgs=1x12x128x256.
    #[arg(long = "shape", value_name = "NAME=DIMS")]
    pub shapes: Vec<String>,
    /// Pin an input to the value in a .npy file at compile time (its dtype and shape must match the
    /// model's declaration): folded like a weight, recorded in the artifact (`pilot inspect` lists
    /// it) and no longer an input at run time. Repeatable.
    #[arg(long = "const", value_name = "NAME=FILE.npy")]
    pub consts: Vec<String>,
    /// Store images as half (weights cheaper than their op's input stay float32); all math stays
    /// float32 (needs --image; FLOAT16=1 too).
    #[arg(long, env = "FLOAT16", value_parser = clap::builder::FalseyValueParser::new())]
    pub float16: bool,
    /// Convolutions and matmuls read activations and weights as 2-D RGBA images (IMAGE=1 too).
    #[arg(long, env = "IMAGE", value_parser = clap::builder::FalseyValueParser::new())]
    pub image: bool,
    /// No local memory or work-group structure; local sizes timed on this machine's OpenCL device
    /// (NOLOCALS=1 too).
    #[arg(long, env = "NOLOCALS", value_parser = clap::builder::FalseyValueParser::new())]
    pub nolocals: bool,
    /// Image row pitch alignment in bytes (IMAGE_PITCH_ALIGNMENT; 64 matches the Adreno 630).
    #[arg(long, env = "IMAGE_PITCH_ALIGNMENT", default_value_t = 64)]
    pub image_pitch_alignment: usize,
    /// C compiler to use (default: clang-19, clang, then cc; or $PILOT_CC). usb+amd needs clang.
    #[arg(long)]
    pub cc: Option<PathBuf>,
    /// CPU baseline for --target cpu instead of the host's -march=native: e.g. x86-64-v3, znver4,
    /// cortex-a75 (the default for --arch aarch64).
    #[arg(long, value_name = "NAME")]
    pub cpu: Option<String>,
    /// Run the artifact and onnxruntime on the same seeded inputs and compare (SELFTEST=1 too).
    #[arg(long, env = "SELFTEST", value_parser = clap::builder::FalseyValueParser::new())]
    pub selftest: bool,
    /// Exact number of kernels the compiled step must have (ALLOWED_KERNEL_COUNT).
    #[arg(long, env = "ALLOWED_KERNEL_COUNT", allow_negative_numbers = true)]
    pub allowed_kernel_count: Option<i64>,
    /// Exact number of `read_image` in the kernel sources (ALLOWED_READ_IMAGE; OpenCL targets).
    #[arg(long, env = "ALLOWED_READ_IMAGE", allow_negative_numbers = true)]
    pub allowed_read_image: Option<i64>,
    /// Exact number of gated `read_image` (ALLOWED_GATED_READ_IMAGE; OpenCL targets).
    #[arg(long, env = "ALLOWED_GATED_READ_IMAGE", allow_negative_numbers = true)]
    pub allowed_gated_read_image: Option<i64>,
    /// The most memory one value or buffer, all the weights, or the planned total may take, e.g.
    /// 16G or 512M (PILOT_MAX_MEMORY too); a model over it is refused.
    #[arg(long, env = "PILOT_MAX_MEMORY", default_value = "16G", value_parser = pilot_compiler::lower::budget::parse_size)]
    pub max_memory: u64,
}

/// Parses `NAME=1x3x256x512`.
pub fn parse_shape(arg: &str) -> anyhow::Result<(String, Vec<usize>)> {
    let (name, dims) = arg
        .split_once('=')
        .filter(|(n, d)| !n.is_empty() && !d.is_empty())
        .ok_or_else(|| anyhow::anyhow!("--shape expects NAME=DIMS like images=1x3x256x512, got `{arg}`"))?;
    let dims = dims
        .split(['x', 'X', ','])
        .map(|d| d.trim().parse::<usize>().map_err(|_| anyhow::anyhow!("--shape {name}: `{d}` is not a dimension")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok((name.to_string(), dims))
}

/// Parses `NAME=FILE.npy` and reads the file.
pub fn parse_const(arg: &str) -> anyhow::Result<(String, Tensor)> {
    let (name, file) = arg
        .split_once('=')
        .filter(|(n, f)| !n.is_empty() && !f.is_empty())
        .ok_or_else(|| anyhow::anyhow!("--const expects NAME=FILE.npy, got `{arg}`"))?;
    let a = pilot_core::npy::read(file).map_err(|e| anyhow::anyhow!("--const {name}: {e}"))?;
    Ok((name.to_string(), Tensor { dtype: a.dtype, shape: a.shape, data: a.data }))
}

/// The `--const` arguments read, refusing a name given twice.
fn read_consts(args: &[String]) -> anyhow::Result<Pins> {
    let mut pins = Pins::new();
    for arg in args {
        let (name, t) = parse_const(arg)?;
        if pins.insert(name.clone(), t).is_some() {
            bail!("--const {name} is given twice");
        }
    }
    Ok(pins)
}

fn progress(on_terminal: bool) -> impl Fn(&str) {
    move |stage: &str| {
        if on_terminal {
            eprint!("\r\x1b[2Kcompiling: {stage}");
            if stage == "done" {
                eprintln!();
            }
        }
    }
}

/// `pilot compile`. Returns false when a gate or the selftest failed.
pub fn compile(args: &CompileArgs) -> anyhow::Result<bool> {
    let modes = Modes { image: args.image, float16: args.float16, nolocals: args.nolocals };
    let backend = pilot_compiler::target::backend(&args.target)?;
    let target = Target::parse(backend.name(), args.arch.as_deref(), modes)?;
    if !args.image_pitch_alignment.is_power_of_two() || args.image_pitch_alignment < 16 {
        bail!(
            "--image-pitch-alignment must be a power of two of at least 16 bytes, got {}",
            args.image_pitch_alignment
        );
    }
    let shapes: HashMap<String, Vec<usize>> =
        args.shapes.iter().map(|s| parse_shape(s)).collect::<anyhow::Result<_>>()?;
    let consts = read_consts(&args.consts)?;
    let output = args.output.clone().unwrap_or_else(|| args.model.with_extension("pkl"));
    // Checked before compiling (the writer checks again): a device node, FIFO or the model itself
    // as the output is refused at once, not after minutes of work.
    pilot_core::fsio::output_target(&output)
        .and_then(|target| pilot_core::fsio::refuse_same_file(&target, &[&args.model]))
        .with_context(|| format!("output {}", output.display()))?;
    let gate = |n: Option<i64>| n.filter(|&n| n >= 0).map(|n| n as usize);
    let null = backend == Backend::Null;
    if args.cpu.is_some() && !matches!(backend, Backend::Cpu | Backend::Null) {
        bail!("--cpu applies to --target cpu, not {}", backend.name());
    }
    let mut opts = pilot_compiler::CompileOptions::new(target);
    opts.shapes = shapes;
    opts.consts = consts;
    opts.cc = args.cc.clone();
    opts.cpu = args.cpu.clone();
    opts.cl.pitch_align = args.image_pitch_alignment;
    opts.cl.qcom_compiler = match args.qcom_compiler.as_deref() {
        None => QcomCompiler::host_default(),
        Some("device") => QcomCompiler::Device,
        Some("ir3") => QcomCompiler::Ir3,
        Some("fake") => QcomCompiler::Fake,
        Some(other) => bail!("--qcom-compiler must be `device`, `ir3` or `fake`, got `{other}`"),
    };
    opts.allowed_kernel_count = gate(args.allowed_kernel_count);
    opts.allowed_read_image = gate(args.allowed_read_image);
    opts.allowed_gated_read_image = gate(args.allowed_gated_read_image);
    opts.max_memory = args.max_memory;
    let st = Instant::now();
    let report = match pilot_compiler::compile(&args.model, &output, &opts, &progress(std::io::stderr().is_terminal()))
    {
        Err(pilot_compiler::CompileError::KernelCount { expected, found }) => {
            eprintln!(
                "ALLOWED_KERNEL_COUNT: the model compiles to {found} kernels, {expected} allowed; nothing written"
            );
            return Ok(false);
        }
        Err(e @ pilot_compiler::CompileError::Gate { .. }) => {
            eprintln!("{e}; nothing written");
            return Ok(false);
        }
        r => r?,
    };
    println!("{report}");
    println!("wrote {} in {:.2} s", output.display(), st.elapsed().as_secs_f64());
    if args.selftest {
        return crate::selftest::selftest(&args.model, &output, null, &opts.consts);
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse() {
        assert_eq!(parse_shape("x=1x3x256x512").unwrap(), ("x".into(), vec![1, 3, 256, 512]));
        assert_eq!(parse_shape("a/b=4").unwrap(), ("a/b".into(), vec![4]));
        assert!(parse_shape("x=").is_err());
        assert!(parse_shape("x=1xq").is_err());
        assert!(parse_shape("=1").is_err());
    }
}
