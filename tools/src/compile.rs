//! `pilot compile`: ONNX → artifact, with the seed's gates and `--selftest`.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::bail;

#[derive(clap::Args)]
pub struct CompileArgs {
    pub model: PathBuf,
    /// Output artifact (default: MODEL with the extension .pkl).
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
    /// cpu or null (compile everything, run nothing).
    #[arg(long, default_value = "cpu")]
    pub target: String,
    /// CPU architecture of the artifact: x86_64 or aarch64 (default: this machine's).
    #[arg(long)]
    pub arch: Option<String>,
    /// Pin a dynamic input shape, e.g. --shape input_imgs=1x12x128x256.
    #[arg(long = "shape", value_name = "NAME=DIMS")]
    pub shapes: Vec<String>,
    /// Half-precision storage (OpenCL/QCOM targets).
    #[arg(long)]
    pub float16: bool,
    /// 2-D image layout (OpenCL/QCOM targets).
    #[arg(long)]
    pub image: bool,
    /// No local memory (OpenCL/QCOM targets).
    #[arg(long)]
    pub nolocals: bool,
    /// C compiler to use (default: clang-19, clang, then cc; or $PILOT_CC).
    #[arg(long)]
    pub cc: Option<PathBuf>,
    /// Run the artifact and onnxruntime on the same seeded inputs and compare (SELFTEST=1 too).
    #[arg(long, env = "SELFTEST", value_parser = clap::builder::FalseyValueParser::new())]
    pub selftest: bool,
    /// Exact number of kernels the compiled step must have (ALLOWED_KERNEL_COUNT).
    #[arg(long, env = "ALLOWED_KERNEL_COUNT", allow_negative_numbers = true)]
    pub allowed_kernel_count: Option<i64>,
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
    if args.float16 || args.image || args.nolocals {
        bail!("--float16, --image and --nolocals apply to the OpenCL and QCOM targets, which are not available yet");
    }
    if !["cpu", "null"].contains(&args.target.as_str()) {
        bail!("target `{}` is not available yet (available: cpu, null)", args.target);
    }
    let shapes: HashMap<String, Vec<usize>> =
        args.shapes.iter().map(|s| parse_shape(s)).collect::<anyhow::Result<_>>()?;
    let output = args.output.clone().unwrap_or_else(|| args.model.with_extension("pkl"));
    let opts = pilot_compiler::CompileOptions {
        backend: args.target.clone(),
        arch: args.arch.clone().unwrap_or_else(|| std::env::consts::ARCH.to_string()),
        shapes,
        cc: args.cc.clone(),
        allowed_kernel_count: args.allowed_kernel_count.filter(|&n| n >= 0).map(|n| n as usize),
    };
    let st = Instant::now();
    let report = match pilot_compiler::compile(&args.model, &output, &opts, &progress(std::io::stderr().is_terminal()))
    {
        Err(pilot_compiler::CompileError::KernelCount { expected, found }) => {
            eprintln!(
                "ALLOWED_KERNEL_COUNT: the model compiles to {found} kernels, {expected} allowed; nothing written"
            );
            return Ok(false);
        }
        r => r?,
    };
    println!("{report}");
    println!("wrote {} in {:.2} s", output.display(), st.elapsed().as_secs_f64());
    if args.selftest {
        return crate::selftest::selftest(&args.model, &output, args.target == "null");
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
