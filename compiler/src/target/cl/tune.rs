//! Local sizes for `--nolocals`: kernels have no work-group structure, so any local size is
//! correct; the fastest is found when compiling by timing candidates on this machine's OpenCL
//! device (as the seed's `optimize_local_size` does on the car), and recorded in the artifact.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use pilot_cl::ClDevice;
use pilot_core::device::{Arg, BufferId, BufferUse, Device, ProgramSpec, StepOp};

use crate::error::{CompileError, Result};
use crate::program::Program;
use crate::target::Built;

/// Work-group sizes tried, in work-items. Each candidate costs a kernel build on drivers that
/// specialize kernels per local size (PoCL does), so the ladder is short.
const TOTALS: [u32; 7] = [1, 4, 16, 32, 64, 128, 256];
/// Timed runs per candidate after a warm-up run; the fastest counts.
const RUNS: usize = 2;

fn tool(e: impl std::fmt::Display) -> CompileError {
    CompileError::Tool(format!("--nolocals: timing local sizes on OpenCL: {e}"))
}

/// Candidate local sizes for `global`: for each total of [`TOTALS`], the work-group filled along
/// dimension 0 first with powers of two that divide the NDRange.
pub fn candidates(global: [u32; 3]) -> Vec<[u32; 3]> {
    let mut out: Vec<[u32; 3]> = Vec::new();
    for total in TOTALS {
        let mut local = [1u32; 3];
        let mut room = total;
        for d in 0..3 {
            while room > 1 && global[d].is_multiple_of(local[d] * 2) {
                local[d] *= 2;
                room /= 2;
            }
        }
        if !out.contains(&local) {
            out.push(local);
        }
    }
    out
}

/// Sets every kernel's local size in `built` to the fastest candidate on the OpenCL device.
/// Returns the device's name, for the report.
pub fn tune(p: &Program, built: &mut Built) -> Result<String> {
    let mut dev = ClDevice::open(None).map_err(tool)?;
    let name = dev.device_name().to_string();
    let mut bufs: HashMap<u32, BufferId> = HashMap::new();
    for k in &built.kernels {
        for &b in &k.args {
            if bufs.contains_key(&b) {
                continue;
            }
            let buf = &p.bufs[b as usize];
            let id = match buf.image_desc(built.pitch_align) {
                Some(desc) => dev.alloc_image(desc, BufferUse::Scratch),
                None => dev.alloc(buf.nbytes().max(1), BufferUse::Scratch),
            }
            .map_err(tool)?;
            bufs.insert(b, id);
        }
    }
    let code = built.codes[0].clone();
    for k in &mut built.kernels {
        let spec = ProgramSpec {
            name: &k.name,
            format: built.format,
            code: &code,
            arg_count: k.args.len(),
            amdgpu: None,
            ir3: None,
        };
        let program = dev.load_program(&spec).map_err(tool)?;
        let args: Vec<Arg> = k.args.iter().map(|b| Arg { buffer: bufs[b], offset: 0 }).collect();
        let mut best: Option<(Duration, [u32; 3])> = None;
        for local in candidates(k.global) {
            let op = StepOp::Dispatch { program, args: args.clone(), global: k.global, local };
            // A candidate the kernel cannot launch with (its own work-group limit) is skipped.
            let Ok(step) = dev.link_step(std::slice::from_ref(&op)) else { continue };
            let warm = dev.submit(step).map_err(tool)?;
            dev.wait(warm).map_err(tool)?;
            let mut fastest = Duration::MAX;
            for _ in 0..RUNS {
                let t = Instant::now();
                let v = dev.submit(step).map_err(tool)?;
                dev.wait(v).map_err(tool)?;
                fastest = fastest.min(t.elapsed());
            }
            if best.is_none_or(|(d, _)| fastest < d) {
                best = Some((fastest, local));
            }
        }
        k.local = best.map(|(_, l)| l).ok_or_else(|| tool(format!("kernel `{}`: no local size launches", k.name)))?;
    }
    Ok(name)
}
