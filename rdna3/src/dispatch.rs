//! The dispatch: what the simulated GPU does for DISPATCH_DIRECT with a gfx11 compute kernel.
//!
//! [`Dispatch`] holds what the hardware reads from its registers (COMPUTE_PGM_RSRC1/2,
//! COMPUTE_USER_DATA_*, COMPUTE_NUM_THREAD_*, the dispatch's workgroup counts); [`Dispatch::for_kernel`]
//! fills them the way a runtime does from the kernel descriptor. Each wave starts with the state
//! LLVM's AMDGPUUsage "Initial Kernel Execution State" describes: the user SGPRs first, then the
//! enabled system SGPRs (workgroup id X, Y, Z, workgroup info, private segment wave offset), and the
//! work-item ids packed into v0 (X bits 0-9, Y 10-19, Z 20-29) as gfx11 packs them.

use super::isa::Isa;
use super::kernel::{props, CodeObjectKernel};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::memory::{Memory, SharedMemory};
use super::wave::{Ctx, State, Wave, LANES};
use super::EmuError;

/// A dispatch as the hardware sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dispatch {
    /// Workgroups in X, Y, Z.
    pub grid: [u32; 3],
    /// Work-items per workgroup in X, Y, Z (COMPUTE_NUM_THREAD_*).
    pub workgroup: [u32; 3],
    /// COMPUTE_USER_DATA_0.. : the first USER_SGPR_COUNT SGPRs of each wave (missing ones read 0).
    pub user_sgprs: Vec<u32>,
    pub rsrc1: u32,
    pub rsrc2: u32,
    /// LDS per workgroup in bytes.
    pub lds_bytes: u32,
    /// Scratch per work-item in bytes.
    pub scratch_bytes: u32,
    /// Instructions one wave may execute before the emulator calls it a hang.
    pub step_limit: u64,
    /// Wave instructions the whole dispatch may execute, over all its waves ([`Budget`]).
    pub budget: Budget,
}

/// What a whole dispatch may use before the emulator stops it: wave instructions over all its waves and,
/// optionally, host wall time. [`Budget::from_env`] reads `PILOT_EMU_MAX_INSTRUCTIONS` and `PILOT_EMU_TIMEOUT_S`.
/// A dispatch also stops once [`cancel_flag`] is set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    pub instructions: u64,
    pub wall: Option<Duration>,
}

/// Wave instructions a dispatch may execute by default (about a minute of emulation on one host thread).
pub const DEFAULT_DISPATCH_INSTRUCTIONS: u64 = 4_000_000_000;

impl Default for Budget {
    fn default() -> Self {
        Budget { instructions: DEFAULT_DISPATCH_INSTRUCTIONS, wall: None }
    }
}

impl Budget {
    /// The default budget with `PILOT_EMU_MAX_INSTRUCTIONS` (a positive integer) and `PILOT_EMU_TIMEOUT_S`
    /// (positive seconds, at most a day) applied; a malformed value is an error naming the variable.
    pub fn from_env() -> Result<Budget, String> {
        let mut b = Budget::default();
        if let Ok(v) = std::env::var("PILOT_EMU_MAX_INSTRUCTIONS") {
            b.instructions = v
                .parse::<u64>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("PILOT_EMU_MAX_INSTRUCTIONS={v}: expected a positive integer"))?;
        }
        if let Ok(v) = std::env::var("PILOT_EMU_TIMEOUT_S") {
            let s = v.parse::<f64>().ok().filter(|s| *s > 0.0 && *s <= 86_400.0);
            let s = s.ok_or_else(|| format!("PILOT_EMU_TIMEOUT_S={v}: expected seconds in (0, 86400]"))?;
            b.wall = Some(Duration::from_secs_f64(s));
        }
        Ok(b)
    }
}

static CANCEL: AtomicBool = AtomicBool::new(false);

/// The process-wide cancellation flag: while it is set, every running dispatch stops within a few
/// thousand instructions per wave with an "interrupted" error. Whoever sets it (a signal check) clears it.
pub fn cancel_flag() -> &'static AtomicBool {
    &CANCEL
}

/// Instructions a wave runs between two charges to its dispatch's [`Budget`] (a power of two).
pub(super) const CHARGE_EVERY: u64 = 1 << 14;

/// A running dispatch's use of its [`Budget`], shared by its host threads.
pub(super) struct Meter {
    used: AtomicU64,
    budget: Budget,
    deadline: Option<Instant>,
}

impl Meter {
    fn new(budget: Budget) -> Meter {
        Meter { used: AtomicU64::new(0), budget, deadline: budget.wall.map(|w| Instant::now() + w) }
    }

    /// Adds `n` wave instructions; an error once the dispatch is over budget, late or cancelled.
    pub(super) fn charge(&self, n: u64) -> Result<(), String> {
        let used = self.used.fetch_add(n, Ordering::Relaxed).saturating_add(n);
        if used > self.budget.instructions {
            return Err(format!(
                "the dispatch ran past its budget of {} wave instructions (PILOT_EMU_MAX_INSTRUCTIONS)",
                self.budget.instructions
            ));
        }
        if self.deadline.is_some_and(|d| Instant::now() > d) {
            let s = self.budget.wall.unwrap_or_default().as_secs_f64();
            return Err(format!("the dispatch ran past its {s} s limit (PILOT_EMU_TIMEOUT_S)"));
        }
        if CANCEL.load(Ordering::Relaxed) {
            return Err("interrupted".into());
        }
        Ok(())
    }
}

/// What a dispatch did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub workgroups: u64,
    pub waves: u64,
    /// Wave instructions executed (one per wave, however many lanes are active).
    pub instructions: u64,
}

pub const DEFAULT_STEP_LIMIT: u64 = 200_000_000;

impl Dispatch {
    /// The registers a runtime programs for `kernel` from its descriptor, with the kernarg segment at
    /// `kernarg_addr`. User SGPRs are laid out in the descriptor's order; only the kernarg segment
    /// pointer and the dispatch id (0) can be provided here.
    pub fn for_kernel(
        kernel: &CodeObjectKernel,
        grid: [u32; 3],
        workgroup: [u32; 3],
        kernarg_addr: u64,
    ) -> Result<Self, EmuError> {
        let kd = &kernel.descriptor;
        let err = |msg: &str| EmuError::Dispatch { kernel: kernel.name.clone(), msg: msg.to_string() };
        let p = kd.code_properties;
        for (bit, what) in [
            (props::PRIVATE_SEGMENT_BUFFER, "a private segment buffer descriptor"),
            (props::DISPATCH_PTR, "a dispatch packet pointer"),
            (props::QUEUE_PTR, "a queue pointer"),
            (props::FLAT_SCRATCH_INIT, "flat scratch init"),
            (props::PRIVATE_SEGMENT_SIZE, "the private segment size"),
        ] {
            if p & bit != 0 {
                return Err(err(&format!("the kernel wants {what} in its user SGPRs, which is not emulated")));
            }
        }
        if kd.kernarg_preload != 0 {
            return Err(err("kernarg preloading is not emulated"));
        }
        let mut user = Vec::new();
        if p & props::KERNARG_SEGMENT_PTR != 0 {
            user.extend([kernarg_addr as u32, (kernarg_addr >> 32) as u32]);
        }
        if p & props::DISPATCH_ID != 0 {
            user.extend([0, 0]);
        }
        Ok(Dispatch {
            grid,
            workgroup,
            user_sgprs: user,
            rsrc1: kd.rsrc1,
            rsrc2: kd.rsrc2,
            lds_bytes: kd.group_segment_fixed_size,
            scratch_bytes: kd.private_segment_fixed_size,
            step_limit: DEFAULT_STEP_LIMIT,
            budget: Budget::default(),
        })
    }

    fn user_sgpr_count(&self) -> usize {
        ((self.rsrc2 >> 1) & 31) as usize
    }

    fn threads(&self) -> u64 {
        self.workgroup.iter().map(|&x| u64::from(x)).product()
    }
}

/// User SGPRs the hardware loads: COMPUTE_USER_DATA_0..15.
pub const MAX_USER_SGPRS: usize = 16;
/// The operand code of TTMP0 (trap-handler temporaries; gfx12 hands the workgroup ID over in two of them).
const TTMP0: usize = 108;
/// Work-items one dispatch may have: the grid size in work-items is a 32-bit quantity (HSA's
/// `grid_size_x/y/z` are 32-bit, and so is the product pilot's verifier allows).
pub const MAX_WORK_ITEMS: u64 = u32::MAX as u64;
/// Scratch bytes per work-item the emulator provides: what COMPUTE_TMPRING_SIZE.WAVESIZE (15 bits) gives
/// in the simulated GPU's reading (4 bytes a unit: a 256-byte unit shared by 64 lanes, see pilot-usb-sim's
/// `gpu/scratch.rs`); gfx12's wider field is cut to the same bound.
pub const MAX_SCRATCH_PER_ITEM: u32 = 0x7FFF * 4;

fn check(kernel: &CodeObjectKernel, d: &Dispatch) -> Result<(), EmuError> {
    let err = |msg: String| EmuError::Dispatch { kernel: kernel.name.clone(), msg };
    if !kernel.descriptor.wave32() {
        return Err(err("the kernel is built for wave64, which is not emulated".into()));
    }
    let threads = d.threads();
    if threads == 0 || threads > 1024 {
        return Err(err(format!("workgroup {:?} is not 1 to 1024 work-items", d.workgroup)));
    }
    workgroup_count(d).map_err(err)?;
    if d.user_sgpr_count() > MAX_USER_SGPRS {
        return Err(err(format!(
            "USER_SGPR_COUNT {} exceeds the {MAX_USER_SGPRS} COMPUTE_USER_DATA registers",
            d.user_sgpr_count()
        )));
    }
    if d.scratch_bytes > MAX_SCRATCH_PER_ITEM {
        return Err(err(format!(
            "{} scratch bytes per work-item exceed the {MAX_SCRATCH_PER_ITEM} the emulator provides",
            d.scratch_bytes
        )));
    }
    if d.user_sgprs.len() > d.user_sgpr_count() {
        return Err(err(format!(
            "{} user SGPR values for USER_SGPR_COUNT {}",
            d.user_sgprs.len(),
            d.user_sgpr_count()
        )));
    }
    Ok(())
}

/// The id of the `i`th workgroup, X fastest.
fn workgroup_id(d: &Dispatch, i: u64) -> [u32; 3] {
    let [gx, gy, _] = d.grid.map(|x| x as u64);
    [(i % gx) as u32, (i / gx % gy) as u32, (i / (gx * gy)) as u32]
}

/// The number of workgroups, refused when zero or when the grid passes [`MAX_WORK_ITEMS`] work-items.
fn workgroup_count(d: &Dispatch) -> Result<u64, String> {
    let [x, y, z] = d.grid.map(u64::from);
    let groups = x.checked_mul(y).and_then(|xy| xy.checked_mul(z));
    let items = groups.and_then(|g| g.checked_mul(d.threads()));
    match (groups, items) {
        (Some(g), Some(n)) if g > 0 && n <= MAX_WORK_ITEMS => Ok(g),
        _ => Err(format!("grid {:?} of workgroups {:?} is not 1 to {MAX_WORK_ITEMS} work-items", d.grid, d.workgroup)),
    }
}

/// Runs `d` of `kernel` to completion, workgroup by workgroup, against `mem`.
pub fn dispatch(kernel: &CodeObjectKernel, d: &Dispatch, mem: &mut dyn Memory) -> Result<Stats, EmuError> {
    run_sequential(kernel, d, mem, None)
}

/// [`dispatch`] that also marks in `executed` (one flag per instruction of `kernel.insts`, at least
/// that long) every instruction some wave executed: for tests that check which opcodes they cover.
pub fn dispatch_traced(
    kernel: &CodeObjectKernel,
    d: &Dispatch,
    mem: &mut dyn Memory,
    executed: &mut [bool],
) -> Result<Stats, EmuError> {
    if executed.len() < kernel.insts.len() {
        return Err(EmuError::Dispatch {
            kernel: kernel.name.clone(),
            msg: format!("{} trace flags for {} instructions", executed.len(), kernel.insts.len()),
        });
    }
    run_sequential(kernel, d, mem, Some(executed))
}

fn run_sequential(
    kernel: &CodeObjectKernel,
    d: &Dispatch,
    mem: &mut dyn Memory,
    mut trace: Option<&mut [bool]>,
) -> Result<Stats, EmuError> {
    check(kernel, d)?;
    let meter = Meter::new(d.budget);
    let mut stats = Stats::default();
    let mut lds = vec![0u8; d.lds_bytes as usize];
    for i in 0..workgroup_count(d).expect("checked") {
        run_workgroup(kernel, d, &meter, workgroup_id(d, i), mem, &mut lds, &mut stats, trace.as_deref_mut())?;
    }
    Ok(stats)
}

/// [`dispatch`] with the workgroups spread over `threads` host threads. Workgroups run in no fixed
/// order (as on the GPU); global atomics are atomic across threads. On an error the other threads stop
/// after their current workgroup, and the error of the lowest-numbered thread that failed is returned.
pub fn dispatch_parallel(
    kernel: &CodeObjectKernel,
    d: &Dispatch,
    mem: &dyn SharedMemory,
    threads: usize,
) -> Result<Stats, EmuError> {
    check(kernel, d)?;
    let total = workgroup_count(d).expect("checked");
    let meter = Meter::new(d.budget);
    let next = AtomicU64::new(0);
    let failed = AtomicBool::new(false);
    let worker = || -> Result<Stats, EmuError> {
        let mut stats = Stats::default();
        let mut lds = vec![0u8; d.lds_bytes as usize];
        let mut m = mem;
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= total || failed.load(Ordering::Relaxed) {
                return Ok(stats);
            }
            if let Err(e) = run_workgroup(kernel, d, &meter, workgroup_id(d, i), &mut m, &mut lds, &mut stats, None) {
                failed.store(true, Ordering::Relaxed);
                return Err(e);
            }
        }
    };
    let results: Vec<Result<Stats, EmuError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads.max(1)).map(|_| s.spawn(worker)).collect();
        handles.into_iter().map(|h| h.join().expect("an emulator thread panicked")).collect()
    });
    let mut stats = Stats::default();
    for r in results {
        let r = r?;
        stats.workgroups += r.workgroups;
        stats.waves += r.waves;
        stats.instructions += r.instructions;
    }
    Ok(stats)
}

fn initial_wave(isa: Isa, d: &Dispatch, wg: [u32; 3], index: usize, threads: usize) -> Result<Wave, String> {
    let nvgpr = (((d.rsrc1 & 0x3f) + 1) * 8).min(256) as usize;
    let scratch_len = d.scratch_bytes as usize * LANES;
    let mut scratch = Vec::new();
    scratch
        .try_reserve_exact(scratch_len)
        .map_err(|_| format!("cannot allocate {scratch_len} bytes of scratch for a wave"))?;
    scratch.resize(scratch_len, 0);
    let mut w = Wave {
        s: [0; 128],
        scc: false,
        v: vec![0; nvgpr * LANES],
        nvgpr,
        pc: 0,
        state: State::Running,
        scratch,
        private_size: d.scratch_bytes as usize,
        flush_f32: (d.rsrc1 >> 16) & 3 == 0,
        flush_f16: (d.rsrc1 >> 18) & 3 == 0,
        executed: 0,
    };
    let count = d.user_sgpr_count();
    w.s[..d.user_sgprs.len()].copy_from_slice(&d.user_sgprs);
    let mut next = count;
    for (bit, value) in [(7, wg[0]), (8, wg[1]), (9, wg[2]), (10, 0), (0, 0)] {
        // ENABLE_SGPR_WORKGROUP_ID_X/Y/Z, ENABLE_SGPR_WORKGROUP_INFO, ENABLE_PRIVATE_SEGMENT (wave offset).
        if d.rsrc2 >> bit & 1 != 0 {
            w.s[next] = value;
            next += 1;
        }
    }
    if isa == Isa::Gfx12 {
        // gfx12's architected SGPRs: the workgroup ID in TTMP9 (X) and TTMP7 (Y in bits 15:0, Z in 31:16), which is
        // where clang-19 reads it (LLVM AMDGPUUsage, "Initial Kernel Execution State"; s_getreg-free `ttmp9`).
        w.s[TTMP0 + 9] = wg[0];
        w.s[TTMP0 + 7] = wg[1] & 0xffff | wg[2] << 16;
    }
    let ids = (d.rsrc2 >> 11) & 3; // ENABLE_VGPR_WORKITEM_ID: 0 X, 1 XY, 2 XYZ
    let [wx, wy, _] = d.workgroup.map(|x| x as usize);
    let mut exec = 0u32;
    for lane in 0..LANES {
        let t = index * LANES + lane;
        if t >= threads {
            break;
        }
        exec |= 1 << lane;
        let (x, y, z) = (t % wx, t / wx % wy, t / (wx * wy));
        let mut v0 = x as u32;
        if ids >= 1 {
            v0 |= (y as u32) << 10;
        }
        if ids >= 2 {
            v0 |= (z as u32) << 20;
        }
        w.v[lane] = v0;
    }
    w.s[super::decode::operand::EXEC_LO as usize] = exec;
    Ok(w)
}

/// Runs a workgroup's waves in turn, each until it ends or reaches `s_barrier`; a barrier opens once
/// every wave still running has reached it.
#[allow(clippy::too_many_arguments)]
fn run_workgroup(
    kernel: &CodeObjectKernel,
    d: &Dispatch,
    meter: &Meter,
    wg: [u32; 3],
    mem: &mut dyn Memory,
    lds: &mut [u8],
    stats: &mut Stats,
    trace: Option<&mut [bool]>,
) -> Result<(), EmuError> {
    let threads = d.threads() as usize;
    lds.fill(0);
    let dispatch_err = |msg: String| EmuError::Dispatch { kernel: kernel.name.clone(), msg };
    let waves = (0..threads.div_ceil(LANES)).map(|i| initial_wave(kernel.isa, d, wg, i, threads));
    let mut waves: Vec<Wave> = waves.collect::<Result<_, _>>().map_err(dispatch_err)?;
    let mut ctx = Ctx { kernel, mem, lds, trace, meter };
    loop {
        for w in waves.iter_mut().filter(|w| w.state != State::Done) {
            w.run(&mut ctx, d.step_limit)?;
        }
        if waves.iter().all(|w| w.state == State::Done) {
            break;
        }
    }
    // The instructions since each wave's last charge (a workgroup of short waves charges only here).
    meter.charge(waves.iter().map(|w| w.executed % CHARGE_EVERY).sum()).map_err(dispatch_err)?;
    stats.workgroups += 1;
    stats.waves += waves.len() as u64;
    stats.instructions += waves.iter().map(|w| w.executed).sum::<u64>();
    Ok(())
}
