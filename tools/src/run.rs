//! `pilot run` and `pilot load`: step an artifact or load it repeatedly, with the seed's gates
//! (`ASSERT_MIN_STEP_TIME`, `ASSERT_MIN_LOAD_TIME`) and `BENCHMARK_LOG`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use pilot_core::artifact::signature::VerifyingKey;
use pilot_core::artifact::TensorSpec;
use pilot_core::{Artifact, DType, Session};

use crate::devices;
use crate::keys;
use crate::npy;
use crate::rd_capture::RdCaptureOut;

#[derive(clap::Args)]
pub struct RunArgs {
    pub artifact: PathBuf,
    /// Feed NAME from a .npy file (exact dtype and shape); other inputs get seeded random values.
    #[arg(long = "input", value_name = "NAME=FILE.npy")]
    pub inputs: Vec<String>,
    #[arg(long, default_value_t = 20)]
    pub steps: usize,
    /// Write each output to DIR/<name>.npy after the last step.
    #[arg(long, value_name = "DIR")]
    pub save_outputs: Option<PathBuf>,
    /// Device to run on (default: the artifact's target backend).
    #[arg(long)]
    pub device: Option<String>,
    /// CPU backend worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// KGSL context priority for --device qcom: 0 (highest) .. 15 (lowest).
    #[arg(long, env = "QCOM_PRIORITY")]
    pub priority: Option<u8>,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Write one JSON object per step to FILE (BENCHMARK_LOG=NAME writes NAME.jsonl).
    #[arg(long, value_name = "FILE")]
    pub benchmark_log: Option<PathBuf>,
    /// Fail (exit 1) unless the fastest step takes less than MS milliseconds.
    #[arg(long, env = "ASSERT_MIN_STEP_TIME", value_name = "MS", value_parser = crate::gate::parse_time_limit)]
    pub assert_min_step_time: Option<f64>,
    /// Print each kernel's time per step, share, GFLOP/s and bytes, heaviest first.
    #[arg(long)]
    pub profile: bool,
    /// With --profile: also write the profile as a Chrome trace (JSON, opens in Perfetto).
    #[arg(long, value_name = "FILE", requires = "profile")]
    pub profile_trace: Option<PathBuf>,
    /// The most host memory `--device amd-emu` hands out as VRAM, e.g. 2G (default: half the host's, at most
    /// 24 GiB); a model that needs more is refused at load.
    #[arg(long, value_name = "SIZE", value_parser = pilot_core::bounds::parse_size)]
    pub max_memory: Option<u64>,
    /// Run only an artifact signed by the holder of this public key (from `pilot keygen`).
    #[arg(long, env = "PILOT_TRUSTED_KEY", value_name = "FILE")]
    pub trusted_key: Option<PathBuf>,
    /// Run on the fake KGSL and write the first step's submission (command stream and every GPU buffer) to FILE as
    /// Mesa's .rd capture, which Mesa's cffdump decodes.
    #[arg(long, value_name = "FILE")]
    pub rd_capture: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct LoadArgs {
    pub artifact: PathBuf,
    #[arg(long, default_value_t = 10)]
    pub times: usize,
    /// The deep check: also every buffer's own checksum (the integrity record is always checked).
    #[arg(long)]
    pub verify: bool,
    #[arg(long)]
    pub device: Option<String>,
    #[arg(long)]
    pub threads: Option<usize>,
    /// KGSL context priority for --device qcom: 0 (highest) .. 15 (lowest).
    #[arg(long, env = "QCOM_PRIORITY")]
    pub priority: Option<u8>,
    /// Fail (exit 1) unless the fastest load takes less than S seconds.
    #[arg(long, env = "ASSERT_MIN_LOAD_TIME", value_name = "S", value_parser = crate::gate::parse_time_limit)]
    pub assert_min_load_time: Option<f64>,
    /// The most host memory `--device amd-emu` hands out as VRAM, e.g. 2G (default: half the host's, at most
    /// 24 GiB); a model that needs more is refused at load.
    #[arg(long, value_name = "SIZE", value_parser = pilot_core::bounds::parse_size)]
    pub max_memory: Option<u64>,
    /// Load only an artifact signed by the holder of this public key (from `pilot keygen`).
    #[arg(long, env = "PILOT_TRUSTED_KEY", value_name = "FILE")]
    pub trusted_key: Option<PathBuf>,
}

fn open_session(
    path: &Path,
    device: Option<&str>,
    opts: devices::DeviceOptions,
    trusted: Option<&VerifyingKey>,
    capture: Option<&RdCaptureOut>,
) -> anyhow::Result<Session> {
    let artifact = Artifact::open(path)?;
    keys::check_trusted(&artifact, trusted)?;
    let device = match capture {
        Some(c) => c.device()?,
        None => devices::open(device, &artifact.manifest.target, opts)?,
    };
    Ok(Session::new(artifact, device)?)
}

/// splitmix64: a tiny, well-known seeded generator for reproducible random inputs.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Standard normal (Box–Muller).
    fn normal(&mut self) -> f64 {
        let u = 1.0 - self.unit();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * self.unit()).cos()
    }
}

/// Seeded random contents for an input: normal floats, uniform bytes, small integers, 0/1 bools.
/// An input too large for this machine's memory is an error, not an abort.
pub fn random_input(spec: &TensorSpec, rng_seed: u64) -> anyhow::Result<Vec<u8>> {
    let mut rng = SplitMix(rng_seed);
    let n = spec.elements();
    let mut out = Vec::new();
    if out.try_reserve_exact(spec.nbytes()).is_err() {
        bail!("input `{}`: cannot allocate {} bytes for random values", spec.name, spec.nbytes());
    }
    for _ in 0..n {
        match spec.dtype {
            DType::F32 => out.extend_from_slice(&(rng.normal() as f32).to_le_bytes()),
            DType::F64 => out.extend_from_slice(&rng.normal().to_le_bytes()),
            DType::F16 => out.extend_from_slice(&half::f16::from_f64(rng.normal()).to_le_bytes()),
            DType::BF16 => out.extend_from_slice(&half::bf16::from_f64(rng.normal()).to_le_bytes()),
            DType::U8 | DType::I8 => out.push(rng.next() as u8),
            DType::Bool => out.push((rng.next() & 1) as u8),
            // 0 or 1: valid as an attention mask, a token id, a flag or an index into any axis
            // (values up to 15 made a transformer's mask meaningless and every output NaN).
            d => {
                let v = rng.next() % 2;
                out.extend_from_slice(&v.to_le_bytes()[..d.size()]);
            }
        }
    }
    Ok(out)
}

fn parse_input(arg: &str) -> anyhow::Result<(&str, &Path)> {
    match arg.split_once('=') {
        Some((name, file)) if !name.is_empty() && !file.is_empty() => Ok((name, Path::new(file))),
        _ => bail!("--input expects NAME=FILE.npy, got `{arg}`"),
    }
}

fn build_inputs(session: &Session, args: &RunArgs) -> anyhow::Result<Vec<Vec<u8>>> {
    let specs = session.inputs();
    let mut given: Vec<Option<Vec<u8>>> = vec![None; specs.len()];
    for arg in &args.inputs {
        let (name, file) = parse_input(arg)?;
        let Some(i) = specs.iter().position(|s| s.name == name) else {
            let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
            bail!("the artifact has no input `{name}` (inputs: {})", names.join(", "));
        };
        let a = npy::read(file).with_context(|| format!("{}", file.display()))?;
        let s = &specs[i];
        if a.dtype != s.dtype || a.shape != s.shape {
            bail!(
                "{}: {} {:?} given for input `{name}`, which is {} {:?}",
                file.display(),
                a.dtype,
                a.shape,
                s.dtype,
                s.shape
            );
        }
        given[i] = Some(a.data);
    }
    given
        .into_iter()
        .zip(specs)
        .enumerate()
        .map(|(i, (g, s))| match g {
            Some(data) => Ok(data),
            None => random_input(s, args.seed.wrapping_mul(1000).wrapping_add(i as u64)),
        })
        .collect()
}

/// Replaces every character outside `[A-Za-z0-9._-]` with `_` (README.md, `--save-outputs`).
pub fn file_name_for(output: &str) -> String {
    output.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect()
}

fn benchmark_log_path(args: &RunArgs) -> Option<PathBuf> {
    args.benchmark_log.clone().or_else(|| {
        std::env::var("BENCHMARK_LOG").ok().filter(|n| !n.is_empty()).map(|n| PathBuf::from(format!("{n}.jsonl")))
    })
}

/// `pilot run`. Returns false when a gate failed.
pub fn run(args: &RunArgs) -> anyhow::Result<bool> {
    if args.steps == 0 {
        bail!("--steps must be at least 1");
    }
    let opts = devices::DeviceOptions {
        threads: args.threads,
        profile: args.profile,
        priority: args.priority,
        max_memory: args.max_memory,
    };
    let trusted = keys::trusted_key(args.trusted_key.as_deref())?;
    let capture = match &args.rd_capture {
        Some(p) => Some(RdCaptureOut::new(p, args.device.as_deref(), &args.artifact)?),
        None => None,
    };
    let device = args.device.as_deref();
    let mut session = open_session(&args.artifact, device, opts, trusted.as_ref(), capture.as_ref())?;
    let outcome = run_steps(&mut session, args);
    // The capture is written even when a step failed: it shows what was submitted.
    let written = capture.map(RdCaptureOut::write);
    let passed = outcome?;
    written.transpose()?;
    Ok(passed)
}

/// The steps of `pilot run` and what follows them (counters, profile, outputs, the step-time gate).
fn run_steps(session: &mut Session, args: &RunArgs) -> anyhow::Result<bool> {
    let inputs = build_inputs(session, args)?;
    let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let mut log = match benchmark_log_path(args) {
        Some(p) => Some(std::io::BufWriter::new(
            pilot_core::fsio::create_regular(&p).with_context(|| format!("creating {}", p.display()))?,
        )),
        None => None,
    };
    let mut best = f64::INFINITY;
    let before = session.device_counters();
    for step in 0..args.steps {
        let st = Instant::now();
        let v = session.enqueue(&refs)?;
        let mt = Instant::now();
        session.finish(v)?;
        let et = Instant::now();
        let enqueue_ms = (mt - st).as_secs_f64() * 1e3;
        let wall_ms = (et - st).as_secs_f64() * 1e3;
        best = best.min(wall_ms);
        println!("enqueue {enqueue_ms:7.2} ms -- total run {wall_ms:7.2} ms");
        if let Some(log) = &mut log {
            let line = serde_json::json!({"step": step, "wall_ms": wall_ms, "enqueue_ms": enqueue_ms});
            writeln!(log, "{line}")?;
        }
    }
    if let Some(mut log) = log {
        log.flush()?;
    }
    print_counters(&before, &session.device_counters(), args.steps);
    if args.profile {
        crate::profile::report(session, args.steps, args.profile_trace.as_deref())?;
    }
    if let Some(dir) = &args.save_outputs {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        for (spec, data) in session.output_specs().iter().zip(session.outputs()) {
            let path = dir.join(format!("{}.npy", file_name_for(&spec.name)));
            let a = npy::Array { dtype: spec.dtype, shape: spec.shape.clone(), data: data.clone() };
            npy::write(&path, &a).with_context(|| format!("writing {}", path.display()))?;
        }
    }
    if let Some(limit) = args.assert_min_step_time {
        if best >= limit {
            eprintln!("ASSERT_MIN_STEP_TIME: fastest step took {best:.3} ms, the limit is {limit} ms");
            return Ok(false);
        }
        println!("fastest step {best:.3} ms < {limit} ms");
    }
    Ok(true)
}

/// The device's counters per step over the run, for devices that keep them (QCOM, usb+amd).
fn print_counters(before: &[(&str, u64)], after: &[(&str, u64)], steps: usize) {
    let delta = |name: &str| -> Option<u64> {
        let b = before.iter().find(|(n, _)| *n == name).map_or(0, |c| c.1);
        after.iter().find(|(n, _)| *n == name).map(|c| c.1.saturating_sub(b))
    };
    if let (Some(usb), Some(bytes), Some(clock)) =
        (delta("usb_transactions"), delta("usb_bytes"), delta("bridge_clock_ns"))
    {
        let per = |v: u64| v as f64 / steps.max(1) as f64;
        println!(
            "device  {:.1} USB transactions/step, {:.0} bytes/step, bridge clock {:.3} ms/step",
            per(usb),
            per(bytes),
            per(clock) / 1e6
        );
        return;
    }
    let (Some(ioctls), Some(host), Some(gpu)) = (delta("ioctls"), delta("host_submit_ns"), delta("gpu_command_ns"))
    else {
        return;
    };
    let dwords = after.iter().find(|(n, _)| *n == "step_dwords").map_or(0, |c| c.1);
    let per = |v: u64| v as f64 / steps as f64;
    println!(
        "device  {:.1} ioctls/step, {dwords} dwords/step, host {:.1} µs/step in submit, {:.2} ms/step in GPU_COMMAND",
        per(ioctls),
        per(host) / 1e3,
        per(gpu) / 1e6
    );
}

/// `pilot load`. Returns false when a gate failed.
pub fn load(args: &LoadArgs) -> anyhow::Result<bool> {
    if args.times == 0 {
        bail!("--times must be at least 1");
    }
    let trusted = keys::trusted_key(args.trusted_key.as_deref())?;
    let mut best = f64::INFINITY;
    for i in 0..args.times {
        let st = Instant::now();
        let artifact = Artifact::open(&args.artifact)?;
        keys::check_trusted(&artifact, trusted.as_ref())?;
        let parsed = st.elapsed();
        if args.verify {
            artifact.verify_checksums()?;
        }
        let opts = devices::DeviceOptions {
            threads: args.threads,
            profile: false,
            priority: args.priority,
            max_memory: args.max_memory,
        };
        let device = devices::open(args.device.as_deref(), &artifact.manifest.target, opts)?;
        let clock = |c: &[(&str, u64)]| c.iter().find(|(n, _)| *n == "bridge_clock_ns").map(|x| x.1);
        let opened = clock(&device.counters());
        let session = Session::new(artifact, device)?;
        let total = st.elapsed().as_secs_f64();
        if let (Some(a), Some(b)) = (opened, clock(&session.device_counters())) {
            // The bridge's clock: modelled time on the simulator, the transport's time on hardware.
            println!("load {i}: bridge clock: boot {:.1} ms, load {:.1} ms", a as f64 / 1e6, (b - a) as f64 / 1e6);
        }
        best = best.min(total);
        let t = session.load_times();
        println!(
            "load {i}: {:8.3} ms (parse+verify {:.3} ms, upload {:.3} ms, programs {:.3} ms, link {:.3} ms)",
            total * 1e3,
            parsed.as_secs_f64() * 1e3,
            t.allocate_upload.as_secs_f64() * 1e3,
            t.programs.as_secs_f64() * 1e3,
            t.link.as_secs_f64() * 1e3
        );
    }
    if let Some(limit) = args.assert_min_load_time {
        if best >= limit {
            eprintln!("ASSERT_MIN_LOAD_TIME: fastest load took {best:.4} s, the limit is {limit} s");
            return Ok(false);
        }
        println!("fastest load {best:.4} s < {limit} s");
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_names_become_safe_file_names() {
        assert_eq!(file_name_for("save_infer_model/scale_0.tmp_1"), "save_infer_model_scale_0.tmp_1");
        assert_eq!(file_name_for("a b:c"), "a_b_c");
    }

    #[test]
    fn random_inputs_are_seeded() {
        let spec = TensorSpec { name: "x".into(), shape: vec![2, 3], dtype: DType::F32, buffer: 0, slices: vec![] };
        assert_eq!(random_input(&spec, 7).unwrap(), random_input(&spec, 7).unwrap());
        assert_ne!(random_input(&spec, 7).unwrap(), random_input(&spec, 8).unwrap());
        assert_eq!(random_input(&spec, 7).unwrap().len(), 24);
    }

    #[test]
    fn random_inputs_beyond_memory_are_an_error() {
        let shape = vec![1 << 20, 1 << 20, 1 << 20];
        let spec = TensorSpec { name: "huge".into(), shape, dtype: DType::F32, buffer: 0, slices: vec![] };
        let err = random_input(&spec, 0).unwrap_err().to_string();
        assert!(err.starts_with("input `huge`: cannot allocate"), "{err}");
    }

    #[test]
    fn input_arguments_need_name_and_file() {
        assert!(parse_input("x=a.npy").is_ok());
        assert!(parse_input("x").is_err());
        assert!(parse_input("=a.npy").is_err());
    }
}
