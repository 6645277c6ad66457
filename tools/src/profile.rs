//! `pilot run --profile`: per kernel, the time per step, its share, its GFLOP/s and the bytes its
//! arguments span, heaviest first; `--profile-trace FILE` writes the same as a Chrome trace (JSON,
//! opens in Perfetto or chrome://tracing).
//!
//! FLOPs come from the compiler (`pilot:kernel_flops` in the artifact's metadata: one count per
//! program, in program order); artifacts without it show no GFLOP/s. Bytes are what the kernel's
//! arguments span (each argument's extent as the artifact records it for verification): the data a
//! kernel touches at least once, so bytes / time is a lower bound on the bandwidth it needs.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context};
use pilot_core::artifact::{Manifest, ParamKind};
use pilot_core::device::StepOp;
use pilot_core::Session;

/// The metadata key under which the compiler records each program's FLOPs per dispatch.
pub const FLOPS_KEY: &str = "pilot:kernel_flops";

/// One step operation's profile, averaged over the steps run.
#[derive(Clone, Debug, PartialEq)]
pub struct OpProfile {
    pub name: String,
    /// Seconds per step.
    pub secs: f64,
    /// Floating-point operations per dispatch, when the artifact records them.
    pub flops: Option<u64>,
    /// Bytes the operation's arguments span.
    pub bytes: u64,
}

impl OpProfile {
    pub fn gflops(&self) -> Option<f64> {
        self.flops.filter(|_| self.secs > 0.0).map(|f| f as f64 / self.secs / 1e9)
    }
}

/// Each program's FLOPs from the metadata, when present and one per program.
fn program_flops(m: &Manifest) -> Option<Vec<u64>> {
    let (_, v) = m.metadata.props.iter().find(|(k, _)| k == FLOPS_KEY)?;
    let flops: Vec<u64> = v.split_whitespace().map(str::parse).collect::<Result<_, _>>().ok()?;
    (flops.len() == m.programs.len()).then_some(flops)
}

fn program_bytes(m: &Manifest, program: usize) -> u64 {
    m.programs[program]
        .params
        .iter()
        .map(|p| match p.kind {
            ParamKind::Buffer { bytes } => bytes,
            ParamKind::Image { width, height } => u64::from(width) * u64::from(height) * 4 * p.dtype.size() as u64,
        })
        .sum()
}

/// Step operations in step order with their time per step, FLOPs and bytes.
pub fn collect(m: &Manifest, times: &[(String, Duration)], steps: usize) -> Vec<OpProfile> {
    let flops = program_flops(m);
    m.step
        .iter()
        .zip(times)
        .map(|(op, (name, t))| {
            let secs = t.as_secs_f64() / steps.max(1) as f64;
            match op {
                StepOp::Dispatch { program, .. } => {
                    let p = program.0 as usize;
                    OpProfile {
                        name: name.clone(),
                        secs,
                        flops: flops.as_ref().map(|f| f[p]),
                        bytes: program_bytes(m, p),
                    }
                }
                StepOp::Copy { .. } => OpProfile { name: name.clone(), secs, flops: None, bytes: 0 },
            }
        })
        .collect()
}

/// The table, heaviest first, with a total line.
pub fn table(ops: &[OpProfile]) -> String {
    let total: f64 = ops.iter().map(|o| o.secs).sum();
    let mut sorted: Vec<&OpProfile> = ops.iter().collect();
    sorted.sort_by(|a, b| b.secs.total_cmp(&a.secs));
    let mut s = format!("{:>10} {:>7} {:>9} {:>10}  kernel\n", "ms/step", "share", "GFLOP/s", "MB");
    for o in sorted {
        let g = o.gflops().map_or("-".to_string(), |g| format!("{g:.1}"));
        s += &format!(
            "{:>10.4} {:>6.1}% {g:>9} {:>10.3}  {}\n",
            o.secs * 1e3,
            100.0 * o.secs / total.max(f64::MIN_POSITIVE),
            o.bytes as f64 / 1e6,
            o.name
        );
    }
    let flops: u64 = ops.iter().filter_map(|o| o.flops).sum();
    let g = if total > 0.0 && flops > 0 { format!("{:.1}", flops as f64 / total / 1e9) } else { "-".into() };
    s += &format!("{:>10.4} {:>6.1}% {g:>9} {:>10}  total\n", total * 1e3, 100.0, "");
    s
}

/// A Chrome trace of one average step: the operations back to back in step order (the CPU device
/// runs them in order), each with its FLOPs, bytes and GFLOP/s as arguments.
pub fn chrome_trace(ops: &[OpProfile]) -> serde_json::Value {
    let mut ts = 0.0;
    let events: Vec<serde_json::Value> = ops
        .iter()
        .map(|o| {
            let dur = o.secs * 1e6;
            let e = serde_json::json!({
                "name": o.name, "cat": "kernel", "ph": "X", "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                "args": {"flops": o.flops, "bytes": o.bytes, "gflops_per_s": o.gflops()},
            });
            ts += dur;
            e
        })
        .collect();
    serde_json::json!({"traceEvents": events, "displayTimeUnit": "ms"})
}

/// Prints the profile of `session` over `steps` steps; writes the trace to `trace` when given.
pub fn report(session: &Session, steps: usize, trace: Option<&Path>) -> anyhow::Result<()> {
    let Some(times) = session.profile() else { bail!("--profile: this device does not profile") };
    let ops = collect(&session.artifact().manifest, &times, steps);
    print!("{}", table(&ops));
    if let Some(path) = trace {
        let mut f = std::io::BufWriter::new(
            pilot_core::fsio::create_regular(path).with_context(|| format!("creating {}", path.display()))?,
        );
        serde_json::to_writer(&mut f, &chrome_trace(&ops))?;
        f.flush()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(name: &str, ms: f64, flops: Option<u64>, bytes: u64) -> OpProfile {
        OpProfile { name: name.into(), secs: ms / 1e3, flops, bytes }
    }

    #[test]
    fn table_sorts_heaviest_first_and_reports_rates() {
        let t = table(&[op("small", 1.0, Some(1_000_000), 4_000_000), op("big", 3.0, Some(30_000_000_000), 8)]);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[1].ends_with("big") && lines[1].contains("10000.0"), "{t}");
        assert!(lines[2].ends_with("small") && lines[2].contains("1.0") && lines[2].contains("4.000"), "{t}");
        assert!(lines[3].ends_with("total") && lines[3].contains("4.0000"), "{t}");
    }

    #[test]
    fn trace_lays_operations_back_to_back() {
        let v = chrome_trace(&[op("a", 1.0, None, 0), op("b", 2.0, Some(2_000_000), 16)]);
        let ev = v["traceEvents"].as_array().unwrap();
        assert_eq!(ev[0]["ts"], 0.0);
        assert_eq!(ev[1]["ts"], 1000.0);
        assert_eq!(ev[1]["dur"], 2000.0);
        assert_eq!(ev[1]["args"]["gflops_per_s"], 1.0);
        assert!(ev[0]["args"]["gflops_per_s"].is_null());
    }
}
