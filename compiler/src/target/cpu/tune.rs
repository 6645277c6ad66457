//! The register-tile shape of each heavy kernel, chosen by timing: for a host build (the artifact
//! runs on the machine that compiles it), every kernel worth at least [`MIN_TUNED_FLOPS`] that
//! offers more than one shape ([`super::upcast::Tiling`]) is compiled once per shape, each run on
//! zeroed buffers of the kernel's sizes on one thread, interleaved, and the fastest kept. Every
//! shape sums each output's reduction in the same order, so the choice changes speed, never
//! results.
//!
//! Choices are cached per kernel (a hash of the C compiler, its flags, the shapes offered and the
//! kernel's default source) in a text file: [`cache_path`]. `PILOT_CPU_TUNE=0` turns timing off (the default
//! shapes, as for cross builds and `--cpu` baselines, which cannot be timed here).

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pilot_core::cpu::CpuDevice;
use pilot_core::device::{Arg, BufferId, BufferUse, Device, ProgramFormat, ProgramSpec, StepOp};

use super::isa::{CpuTarget, VecUnit};
use super::render::{self, CKernel};
use super::upcast::Tiling;
use crate::error::{CompileError, Result};
use crate::program::Program;

/// Floating-point work below which a kernel keeps its default shape (timing it would cost more
/// than any shape saves).
pub const MIN_TUNED_FLOPS: u64 = 4 << 20;

/// Wall time spent timing one kernel's shapes, at most (each shape runs at least [`MIN_RUNS`]).
const BUDGET: Duration = Duration::from_millis(60);

/// Timed runs of each shape, at least; the fastest counts.
const MIN_RUNS: usize = 3;

fn tool(e: impl std::fmt::Display) -> CompileError {
    CompileError::Tool(format!("timing register tiles on this CPU: {e}"))
}

/// Whether this build may be timed here: a host build (no `--cpu` baseline, the host's arch) and
/// `PILOT_CPU_TUNE` not `0`.
pub fn enabled(cpu: &CpuTarget) -> bool {
    cpu.native() && std::env::var("PILOT_CPU_TUNE").map_or(true, |v| v != "0")
}

/// The cache file: `PILOT_CPU_TUNE_CACHE`, else `$XDG_CACHE_HOME/pilot/cpu-tilings`, else
/// `$HOME/.cache/pilot/cpu-tilings`; `None` when none of them is set.
pub fn cache_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PILOT_CPU_TUNE_CACHE") {
        return Some(PathBuf::from(p));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("pilot").join("cpu-tilings"))
}

/// Lines `KEY BLOCK VECTORS TILES_OUTSIDE`; anything else is skipped (a damaged cache costs a
/// re-timing only).
fn read_cache(path: &Path) -> HashMap<u64, Tiling> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let key = u64::from_str_radix(f.next()?, 16).ok()?;
            let block = f.next()?.parse().ok()?;
            let vectors = f.next()?.parse().ok()?;
            let tiles_outside = f.next()? == "1";
            Some((key, Tiling { block, vectors, tiles_outside }))
        })
        .collect()
}

/// Appends the new choices in one write (lines from concurrent compiles do not interleave).
/// Failing to write the cache is not an error: the next compile times again.
fn append_cache(path: &Path, new: &[(u64, Tiling)]) {
    if new.is_empty() {
        return;
    }
    let mut text = String::new();
    for (key, t) in new {
        text.push_str(&format!("{key:016x} {} {} {}\n", t.block, t.vectors, u8::from(t.tiles_outside)));
    }
    let _ = path.parent().map(std::fs::create_dir_all);
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
        let _ = f.write_all(text.as_bytes());
    }
}

/// The variant of kernel `i` rendered with `t`, under an entry name of its own.
fn variant(p: &Program, i: usize, unit: VecUnit, t: Tiling, n: usize) -> CKernel {
    let k = &p.kernels[i];
    let mut ck = render::render(p, k, unit, Some(t));
    let name = format!("{}__tile{n}", k.name);
    ck.source = ck.source.replacen(&format!("void {}(", k.name), &format!("void {name}("), 1);
    ck.name = name;
    ck
}

/// Replaces each heavy kernel of `rendered` (rendered with default shapes) by its fastest shape on
/// this machine. Returns how many kernels were timed (cached choices not counted).
pub fn tune(
    p: &Program,
    rendered: &mut [CKernel],
    unit: VecUnit,
    cc: &Path,
    cpu: &CpuTarget,
    parallel: &dyn Fn(usize) -> bool,
) -> Result<usize> {
    let heavy: Vec<usize> = (0..rendered.len())
        .filter(|&i| rendered[i].tilings.len() > 1 && p.kernel_flops(&p.kernels[i]) >= MIN_TUNED_FLOPS)
        .collect();
    if heavy.is_empty() {
        return Ok(0);
    }
    let salt = format!("{} {:?}\n", cc.display(), super::cc::flags(cc, cpu));
    // The shapes offered are part of the key: a compiler that offers new ones times the kernel again.
    let key = |i: usize| {
        let offered = format!("{salt}{:?}\n{}", rendered[i].tilings, rendered[i].source);
        pilot_core::artifact::integrity::hash(offered.as_bytes())
    };
    let cache_file = cache_path();
    let cached = cache_file.as_deref().map(read_cache).unwrap_or_default();
    let mut chosen: Vec<(usize, Tiling)> = Vec::new();
    let mut to_time: Vec<usize> = Vec::new();
    for &i in &heavy {
        match cached.get(&key(i)) {
            Some(t) if rendered[i].tilings.contains(t) => chosen.push((i, *t)),
            _ => to_time.push(i),
        }
    }
    let mut fresh = Vec::new();
    if !to_time.is_empty() {
        for (i, t) in time_all(p, rendered, &to_time, unit, cc, cpu)? {
            fresh.push((key(i), t));
            chosen.push((i, t));
        }
    }
    if let Some(f) = &cache_file {
        append_cache(f, &fresh);
    }
    for (i, t) in chosen {
        let mut ck = render::render(p, &p.kernels[i], unit, Some(t));
        if !parallel(i) {
            ck.parts = 1;
        }
        rendered[i] = ck;
    }
    Ok(to_time.len())
}

/// Times every shape of the kernels `which` (one object per core, compiled in parallel) and
/// returns each kernel's fastest.
fn time_all(
    p: &Program,
    rendered: &[CKernel],
    which: &[usize],
    unit: VecUnit,
    cc: &Path,
    cpu: &CpuTarget,
) -> Result<Vec<(usize, Tiling)>> {
    let variants: Vec<(usize, Tiling, CKernel)> = which
        .iter()
        .flat_map(|&i| rendered[i].tilings.iter().enumerate().map(move |(n, &t)| (i, t, n)))
        .map(|(i, t, n)| (i, t, variant(p, i, unit, t, n)))
        .collect();
    let cores = std::thread::available_parallelism().map_or(1, usize::from).clamp(1, variants.len());
    let sources: Vec<(String, String)> = (0..cores)
        .map(|u| {
            let mut src = super::cmath::PRELUDE.to_string();
            for (_, _, ck) in variants.iter().skip(u).step_by(cores) {
                src.push('\n');
                src.push_str(&ck.source);
            }
            (format!("tune{u}"), src)
        })
        .collect();
    let codes = super::cc::compile_all(&sources, cc, cpu)?;
    let mut dev = CpuDevice::try_new(1).map_err(tool)?;
    let mut bufs: HashMap<u32, BufferId> = HashMap::new();
    let mut out = Vec::new();
    for &i in which {
        let args: Vec<Arg> = rendered[i]
            .args
            .iter()
            .map(|&b| {
                let id = match bufs.get(&b) {
                    Some(&id) => id,
                    None => {
                        let id = dev
                            .alloc(p.bufs[b as usize].nbytes() + super::READ_PAST, BufferUse::Scratch)
                            .map_err(tool)?;
                        bufs.insert(b, id);
                        id
                    }
                };
                Ok(Arg { buffer: id, offset: 0 })
            })
            .collect::<Result<_>>()?;
        let mut steps = Vec::new();
        for (v, (_, t, ck)) in variants.iter().enumerate().filter(|(_, (k, _, _))| *k == i) {
            let spec = ProgramSpec {
                name: &ck.name,
                format: ProgramFormat::Elf,
                code: &codes[v % cores],
                arg_count: ck.args.len(),
                amdgpu: None,
                ir3: None,
            };
            let program = dev.load_program(&spec).map_err(tool)?;
            let op = StepOp::Dispatch { program, args: args.clone(), global: [ck.parts, 1, 1], local: [1, 1, 1] };
            steps.push((*t, dev.link_step(std::slice::from_ref(&op)).map_err(tool)?));
        }
        let mut run = |step| -> Result<Duration> {
            let t = Instant::now();
            let v = dev.submit(step).map_err(tool)?;
            dev.wait(v).map_err(tool)?;
            Ok(t.elapsed())
        };
        let mut best = vec![Duration::MAX; steps.len()];
        let start = Instant::now();
        for (_, step) in &steps {
            run(*step)?; // warm-up: page faults, caches
        }
        let mut rounds = 0;
        while rounds < MIN_RUNS || start.elapsed() < BUDGET {
            for (n, (_, step)) in steps.iter().enumerate() {
                best[n] = best[n].min(run(*step)?);
            }
            rounds += 1;
            if rounds >= 50 {
                break;
            }
        }
        let fastest = (0..steps.len()).min_by_key(|&n| best[n]).expect("a kernel with shapes has at least two");
        out.push((i, steps[fastest].0));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{conv_stride2, depthwise, matmul, max_pool};
    use super::*;

    #[test]
    fn every_tile_shape_gives_the_same_bits() {
        let unit = CpuTarget::new(std::env::consts::ARCH, None).unwrap().vec_unit();
        let p = matmul(48, 70, 200);
        let tilings = render::render(&p, &p.kernels[0], unit, None).tilings;
        assert!(tilings.len() >= 2, "a 48x200 product offers several tile shapes: {tilings:?}");
        assert!(tilings.iter().any(|t| t.tiles_outside) && tilings.iter().any(|t| !t.tiles_outside), "{tilings:?}");
        same_bits(&p);
    }

    #[test]
    fn every_replicated_shape_of_a_depthwise_convolution_gives_the_same_bits() {
        let unit = CpuTarget::new(std::env::consts::ARCH, None).unwrap().vec_unit();
        let p = depthwise(6, 14, 14, 5);
        let tilings = render::render(&p, &p.kernels[0], unit, None).tilings;
        assert!(tilings.iter().any(|t| t.block > 1) && tilings.iter().any(|t| t.block == 1), "{tilings:?}");
        same_bits(&p);
    }

    #[test]
    fn every_shape_of_a_stride_2_convolution_gives_the_same_bits() {
        let (cin, cout, h, w, k) = (3, 16, 8, 40, 3);
        let p = conv_stride2(cin, cout, h, w, k);
        let (inputs, out) = same_bits(&p);
        // And the values of the convolution (f64 reference): every lane kept is the right phase.
        let (x, wt) = (&inputs[0], &inputs[1]);
        let wp = 2 * w + k - 2;
        let hp = 2 * h + k - 2 + crate::lower::ROW_SLACK.div_ceil(wp);
        for (i, &got) in out.iter().enumerate() {
            let (o, y, xx) = (i / (h * w), i / w % h, i % w);
            let mut want = 0f64;
            for c in 0..cin {
                for t in 0..k * k {
                    let (dy, dx) = (t / k, t % k);
                    want += x[(c * hp + 2 * y + dy) * wp + 2 * xx + dx] as f64
                        * wt[((o * cin + c) * k + dy) * k + dx] as f64;
                }
            }
            assert!((got as f64 - want).abs() < 1e-5, "output {i}: {got} != {want}");
        }
    }

    #[test]
    fn every_shape_of_a_max_pooling_gives_the_same_bits() {
        let unit = CpuTarget::new(std::env::consts::ARCH, None).unwrap().vec_unit();
        let (c, h, w, k) = (5, 10, 10, 5);
        let p = max_pool(c, h, w, k);
        let tilings = render::render(&p, &p.kernels[0], unit, None).tilings;
        assert!(tilings.iter().any(|t| t.block > 1) && tilings.iter().any(|t| t.block == 1), "{tilings:?}");
        // A NaN in a window makes its maximum NaN, as the scalar path's pl_fmaxf does.
        let (inputs, out) = same_bits_with(&p, 97);
        let x = &inputs[0];
        let wp = w + k - 1;
        let plane = x.len() / c;
        for (i, &got) in out.iter().enumerate() {
            let (ch, y, xx) = (i / (h * w), i / w % h, i % w);
            let window = (0..k * k).map(|t| x[ch * plane + (y + t / k) * wp + xx + t % k]);
            let want =
                window.fold(f32::NEG_INFINITY, |m, v| if m.is_nan() || v.is_nan() { f32::NAN } else { m.max(v) });
            assert!(got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()), "output {i}: {got} != {want}");
        }
        assert!(out.iter().any(|v| v.is_nan()) && out.iter().any(|v| !v.is_nan()), "NaNs reach some windows only");
    }

    /// Every tile shape `p`'s one kernel offers renders other source and writes the same output bits;
    /// every `nan_every`-th input element (when not 0) is a NaN. Returns the inputs (in the
    /// kernel's argument order) and the output.
    fn same_bits(p: &Program) -> (Vec<Vec<f32>>, Vec<f32>) {
        same_bits_with(p, 0)
    }

    fn same_bits_with(p: &Program, nan_every: usize) -> (Vec<Vec<f32>>, Vec<f32>) {
        let cpu = CpuTarget::new(std::env::consts::ARCH, None).unwrap();
        let unit = cpu.vec_unit();
        let k = &p.kernels[0];
        let tilings = render::render(p, k, unit, None).tilings;
        let variants: Vec<CKernel> = tilings.iter().enumerate().map(|(n, &t)| variant(p, 0, unit, t, n)).collect();
        let mut src = super::super::cmath::PRELUDE.to_string() + &variants[0].source;
        for v in &variants[1..] {
            assert_ne!(
                v.source,
                variants[0].source.replace(&variants[0].name, &v.name),
                "{} renders as shape 0",
                v.name
            );
            src.push_str(&v.source);
        }
        let cc = super::super::cc::find_cc(None, std::env::consts::ARCH).unwrap();
        let code = super::super::cc::compile_all(&[("t".into(), src)], &cc, &cpu).unwrap().remove(0);
        let mut dev = CpuDevice::try_new(1).unwrap();
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut fill = |n: usize| -> Vec<f32> {
            (0..n)
                .map(|i| {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    if nan_every > 0 && i % nan_every == nan_every - 1 {
                        f32::NAN
                    } else {
                        (rng >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                    }
                })
                .collect()
        };
        let mut inputs = Vec::new();
        let ids: Vec<BufferId> = variants[0]
            .args
            .iter()
            .map(|&b| {
                let buf = &p.bufs[b as usize];
                let id = dev.alloc(buf.nbytes() + crate::target::cpu::READ_PAST, BufferUse::Scratch).unwrap();
                if b != k.out {
                    let values = fill(buf.numel);
                    dev.copy_in(id, 0, &values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
                    inputs.push(values);
                }
                id
            })
            .collect();
        let mut outputs = Vec::new();
        for v in &variants {
            let spec = ProgramSpec {
                name: &v.name,
                format: ProgramFormat::Elf,
                code: &code,
                arg_count: v.args.len(),
                amdgpu: None,
                ir3: None,
            };
            let program = dev.load_program(&spec).unwrap();
            let args = ids.iter().map(|&buffer| Arg { buffer, offset: 0 }).collect();
            let op = StepOp::Dispatch { program, args, global: [v.parts, 1, 1], local: [1, 1, 1] };
            let step = dev.link_step(std::slice::from_ref(&op)).unwrap();
            let done = dev.submit(step).unwrap();
            dev.wait(done).unwrap();
            let mut out = vec![0u8; p.bufs[k.out as usize].nbytes()];
            dev.copy_out(ids[0], 0, &mut out).unwrap();
            outputs.push(out);
        }
        assert!(outputs[0].chunks(4).any(|c| c != [0; 4]), "the kernel wrote its output");
        for (t, out) in tilings.iter().zip(&outputs) {
            assert!(out == &outputs[0], "shape {t:?} gives other bits than {:?}", tilings[0]);
        }
        (inputs, outputs[0].chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect())
    }

    #[test]
    fn shapes_keep_half_to_all_but_four_registers_as_accumulators() {
        let unit = VecUnit { lanes: 16, regs: 32 };
        let shapes = super::super::tile::candidates(unit, 16, Some(48), false, 320, &|_| false);
        for t in &shapes {
            assert!((16..=28).contains(&(t.block * t.vectors)), "{t:?}");
            assert!(t.block * t.vectors * 16 >= 16 && 48 % t.block == 0, "{t:?}");
        }
        let has = |block, vectors| shapes.contains(&Tiling { block, vectors, tiles_outside: false });
        assert!(has(8, 2) && has(8, 3) && has(16, 1) && has(4, 4), "{shapes:?}");
        // 4 × 6 vectors (96 wide) computes 384 points for 320: more than 1/8 over the tightest.
        assert!(!has(4, 6), "{shapes:?}");
        // Without a blocked variable: 2 to 8 vectors of one replica.
        let unblocked = super::super::tile::candidates(unit, 16, None, false, 320, &|_| true);
        assert!(unblocked.iter().all(|t| t.block == 1 && (2..=8).contains(&t.vectors)), "{unblocked:?}");
    }
}
