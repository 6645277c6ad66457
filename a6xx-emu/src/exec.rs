//! The executor: runs a decoded program over a grid of work-groups.
//!
//! Model: every fiber (thread) runs the scalar program on its own registers, in lockstep only at
//! `bar`; results equal the hardware's wherever the program has no cross-fiber operations (which
//! fault) and no races between fibers of a wave (which this order resolves one way). Work-group fibers run in order, each until `bar` or `end`; a work-group's fibers share its
//! local memory, each wave of `wave_size` fibers its shared registers (`r48`–`r55`) and preamble
//! (`shps`…`shpe`, run by the wave's first fiber), and the work-group its copy of the constants
//! (which the preamble may write with `stc`).
//!
//! Registers (a6xx merged register file, as Mesa's `ir3_collect_info` counts them): full register
//! `rN.c` is the pair of half registers `hr(2·(4N+c))` (low 16 bits) and the next (high).

use std::fmt;

use crate::decode::Instr;
use crate::memory::Memory;
use crate::DecodeError;

/// What the program declares about itself (from the ir3 variant: `info.max_reg`, the threadsize).
#[derive(Clone, Copy, Debug)]
pub struct ProgramInfo {
    /// Highest vec4 full register used (`ir3_info.max_reg`, half registers merged); -1 for none.
    /// A register above it faults.
    pub max_reg: i32,
    /// Fibers per wave: 64 or 128.
    pub wave_size: u32,
}

/// A program ready to run: its words decoded once (an undecodable word faults only when reached).
pub struct Program {
    code: Vec<Result<Instr, DecodeError>>,
    info: ProgramInfo,
}

impl Program {
    /// Decodes `code` (little-endian 64-bit words).
    pub fn decode(code: &[u8], info: ProgramInfo) -> Result<Program, Fault> {
        if code.is_empty() || !code.len().is_multiple_of(8) {
            return Err(Fault::Setup(format!("program of {} bytes is not whole 64-bit instructions", code.len())));
        }
        if info.wave_size != 64 && info.wave_size != 128 {
            return Err(Fault::Setup(format!("wave size {} is not 64 or 128", info.wave_size)));
        }
        Ok(Program { code: crate::decode_all(code), info })
    }

    pub fn instrs(&self) -> &[Result<Instr, DecodeError>] {
        &self.code
    }

    pub fn info(&self) -> ProgramInfo {
        self.info
    }
}

/// One dispatch: everything the command stream gave the shader. A fake KGSL fills it from the
/// registers and state its `CP_EXEC_CS` finds, nothing else: the program at `SP_CS_OBJ_START`
/// (`SP_CS_INSTRLEN` instructions) with `ProgramInfo { max_reg: SP_CS_CNTL_0.FULLREGFOOTPRINT - 1,
/// wave_size: 64 or 128 from THREADSIZE }`; `consts`, `textures`, `samplers`, `ibos` from the
/// `CP_LOAD_STATE6` loads for the compute stage (constants up to the const length, descriptors up to
/// `SP_CS_CONFIG`'s counts); `grid`/`local_size` from `HLSQ_CS_NDRANGE_*` and `CP_EXEC_CS`;
/// `local_id_reg`/`wg_id_reg` from `HLSQ_CS_CNTL_0.LOCALIDREGID`/`WGIDCONSTID` (a register id
/// despite the name; 0xfc means none); `local_mem_bytes` from `SP_CS_CNTL_1.SHARED_SIZE`;
/// `private_mem_bytes` from `SP_CS_PVT_MEM_PARAM`.
pub struct Dispatch<'a> {
    /// The constant file, 32-bit values (`c0.x` = index 0); reading past it faults.
    pub consts: &'a [u32],
    /// Work-groups in x, y, z.
    pub grid: [u32; 3],
    /// Fibers per work-group in x, y, z.
    pub local_size: [u32; 3],
    /// Register (`gpr * 4 + component`) the local invocation id x, y, z are loaded into.
    pub local_id_reg: Option<u16>,
    /// Register (`gpr * 4 + component`) the work-group id x, y, z are loaded into.
    pub wg_id_reg: Option<u16>,
    /// Bytes of local (`l[]`) memory per work-group.
    pub local_mem_bytes: u32,
    /// Bytes of private (`p[]`) memory per fiber.
    pub private_mem_bytes: u32,
    /// Texture descriptors (`A6XX_TEX_CONST`), by `t#` index.
    pub textures: &'a [[u32; 16]],
    /// Sampler descriptors (`A6XX_TEX_SAMP`), by `s#` index.
    pub samplers: &'a [[u32; 4]],
    /// Image descriptors (`A6XX_TEX_CONST` layout), by the index `ldib`/`stib` name.
    pub ibos: &'a [[u32; 16]],
    /// Instructions one fiber may execute before the dispatch faults as hung.
    pub fiber_step_limit: u64,
    /// Host threads to spread work-groups over (1 = in order on the caller's thread).
    pub threads: usize,
}

/// Counters of a finished dispatch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Instructions executed, summed over fibers (a `(rptN)` instruction counts once).
    pub instructions: u64,
    /// Per instruction: whether any fiber executed it.
    pub executed: Vec<bool>,
}

impl Stats {
    fn add(&mut self, o: Stats) {
        self.instructions += o.instructions;
        if self.executed.len() < o.executed.len() {
            self.executed.resize(o.executed.len(), false);
        }
        for (a, b) in self.executed.iter_mut().zip(o.executed) {
            *a |= b;
        }
    }
}

/// Why a dispatch stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Fault {
    #[error("a6xx: {0}")]
    Setup(String),
    #[error("a6xx fault at instruction {pc} (byte {:#x}), work-group {wg:?} fiber {fiber}: {reason}", pc * 8)]
    At { pc: usize, wg: [u32; 3], fiber: u32, reason: String },
}

/// Runs `program` over the grid of `d` against `mem`. Deterministic for programs without races.
pub fn run(program: &Program, d: &Dispatch, mem: &dyn Memory) -> Result<Stats, Fault> {
    let n = d.local_size.iter().map(|&v| v as u64).product::<u64>();
    if n == 0 || n > 1024 {
        return Err(Fault::Setup(format!("work-group size {:?} is not 1..=1024 fibers", d.local_size)));
    }
    for r in [d.local_id_reg, d.wg_id_reg].into_iter().flatten() {
        if r as usize + 3 > 224 {
            return Err(Fault::Setup(format!("id register {r} (three components from it) is past r55.w")));
        }
    }
    let groups: Vec<[u32; 3]> =
        (0..d.grid[2]).flat_map(|z| (0..d.grid[1]).flat_map(move |y| (0..d.grid[0]).map(move |x| [x, y, z]))).collect();
    let threads = d.threads.max(1).min(groups.len().max(1));
    if threads == 1 {
        let mut stats = Stats::default();
        for wg in &groups {
            stats.add(Group::new(program, d, *wg).run(mem)?);
        }
        return Ok(stats);
    }
    let chunk = groups.len().div_ceil(threads);
    let results: Vec<Result<Stats, Fault>> = std::thread::scope(|s| {
        let handles: Vec<_> = groups
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    let mut total = Stats::default();
                    for wg in part {
                        total.add(Group::new(program, d, *wg).run(mem)?);
                    }
                    Ok(total)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("emulator thread panicked")).collect()
    });
    let mut stats = Stats::default();
    for r in results {
        stats.add(r?);
    }
    Ok(stats)
}

/// Half-register slots of the private file (r0–r47) and of the shared file (r48–r55).
pub(crate) const PRIVATE_SLOTS: usize = 384;
const SHARED_SLOTS: usize = 64;

/// Registers written by an instruction whose result arrives later, and the producer's offset.
#[derive(Clone)]
pub(crate) struct Pending {
    set: [u64; 7],
    from: Vec<u32>,
}

impl Pending {
    fn new() -> Pending {
        Pending { set: [0; 7], from: vec![0; PRIVATE_SLOTS + SHARED_SLOTS] }
    }
    pub(crate) fn get(&self, slot: usize) -> Option<u32> {
        (self.set[slot / 64] >> (slot % 64) & 1 != 0).then(|| self.from[slot])
    }
    pub(crate) fn mark(&mut self, slot: usize, pc: usize) {
        self.set[slot / 64] |= 1 << (slot % 64);
        self.from[slot] = pc as u32;
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.set == [0; 7]
    }
    pub(crate) fn clear(&mut self) {
        self.set = [0; 7];
    }
}

pub(crate) struct Fiber {
    pub(crate) pc: usize,
    pub(crate) regs: Vec<u16>,
    pub(crate) a0: i16,
    pub(crate) a1: u16,
    pub(crate) p0: [u32; 4],
    pub(crate) ss: Pending,
    /// Sources still being read by an in-flight instruction: overwriting them needs (ss) (`war_ss`),
    /// or (ss) or (sy) (`war_any`, sources of texture and other (sy) producers).
    pub(crate) war_ss: Pending,
    pub(crate) war_any: Pending,
    pub(crate) sy: Pending,
    state: FiberState,
    pub(crate) in_preamble: bool,
    /// Private (`p[]`) memory.
    pub(crate) private: Vec<u8>,
    steps: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum FiberState {
    Running,
    AtBarrier,
    Done,
}

pub(crate) enum Flow {
    Next,
    Jump(i64),
    Barrier,
    End,
}

/// Where a register lives.
#[derive(Clone, Copy)]
pub(crate) enum Loc {
    /// Half-register slots `[first, first + n)` of the private file.
    Private(usize, usize),
    /// … of the wave's shared file.
    Shared(usize, usize),
    A0,
    P0(usize),
}

pub(crate) struct Group<'a> {
    pub(crate) program: &'a Program,
    pub(crate) textures: &'a [[u32; 16]],
    pub(crate) samplers: &'a [[u32; 4]],
    pub(crate) ibos: &'a [[u32; 16]],
    wg: [u32; 3],
    pub(crate) consts: Vec<u32>,
    pub(crate) local: Vec<u8>,
    pub(crate) shared: Vec<Vec<u16>>,
    pub(crate) preamble_done: Vec<bool>,
    /// Per wave: the `stc` whose constants an (ss) has not made visible yet.
    pub(crate) const_written: Vec<Option<u32>>,
    pub(crate) fibers: Vec<Fiber>,
    stats: Stats,
    step_limit: u64,
}

/// Why the current instruction cannot go on.
pub(crate) struct Stop(pub(crate) String);

pub(crate) type R<T> = Result<T, Stop>;

pub(crate) fn stop<T>(msg: impl fmt::Display) -> R<T> {
    Err(Stop(msg.to_string()))
}

impl<'a> Group<'a> {
    fn new(program: &'a Program, d: &'a Dispatch<'a>, wg: [u32; 3]) -> Group<'a> {
        let n = (d.local_size[0] * d.local_size[1] * d.local_size[2]) as usize;
        let waves = n.div_ceil(program.info.wave_size as usize);
        let mut fibers = Vec::with_capacity(n);
        let mut shared = vec![vec![0u16; SHARED_SLOTS]; waves];
        for i in 0..n {
            let mut f = Fiber {
                pc: 0,
                regs: vec![0; PRIVATE_SLOTS],
                a0: 0,
                a1: 0,
                p0: [0; 4],
                ss: Pending::new(),
                war_ss: Pending::new(),
                war_any: Pending::new(),
                sy: Pending::new(),
                state: FiberState::Running,
                in_preamble: false,
                private: vec![0; d.private_mem_bytes as usize],
                steps: 0,
            };
            let (lx, ly) = (d.local_size[0] as usize, d.local_size[1] as usize);
            let lid = [(i % lx) as u32, (i / lx % ly) as u32, (i / (lx * ly)) as u32];
            for (base, vals) in [(d.local_id_reg, lid), (d.wg_id_reg, wg)] {
                let Some(r) = base else { continue };
                for (k, v) in vals.iter().enumerate() {
                    // Full registers r0-r47 are per fiber, r48-r55 per wave (the shared file).
                    let (file, s) = match 2 * (r as usize + k) {
                        s if s < PRIVATE_SLOTS => (&mut f.regs, s),
                        s => (&mut shared[i / program.info.wave_size as usize], s - PRIVATE_SLOTS),
                    };
                    file[s] = *v as u16;
                    file[s + 1] = (*v >> 16) as u16;
                }
            }
            fibers.push(f);
        }
        Group {
            program,
            textures: d.textures,
            samplers: d.samplers,
            ibos: d.ibos,
            wg,
            consts: d.consts.to_vec(),
            local: vec![0; d.local_mem_bytes as usize],
            shared,
            preamble_done: vec![false; waves],
            const_written: vec![None; waves],
            fibers,
            stats: Stats { instructions: 0, executed: vec![false; program.code.len()] },
            step_limit: d.fiber_step_limit,
        }
    }

    fn run(mut self, mem: &'a dyn Memory) -> Result<Stats, Fault> {
        loop {
            for i in 0..self.fibers.len() {
                while self.fibers[i].state == FiberState::Running {
                    let pc = self.fibers[i].pc;
                    if let Err(Stop(reason)) = self.step(i, mem) {
                        return Err(Fault::At { pc, wg: self.wg, fiber: i as u32, reason });
                    }
                }
            }
            if self.fibers.iter().all(|f| f.state == FiberState::Done) {
                return Ok(self.stats);
            }
            // Every live fiber waits at a barrier (fibers that ended count as arrived).
            for f in &mut self.fibers {
                if f.state == FiberState::AtBarrier {
                    f.state = FiberState::Running;
                }
            }
        }
    }

    fn step(&mut self, i: usize, mem: &'a dyn Memory) -> R<()> {
        let pc = self.fibers[i].pc;
        let program = self.program;
        let instr = match program.code.get(pc) {
            Some(Ok(instr)) => instr,
            Some(Err(e)) => return stop(e),
            None => return stop("ran past the end of the program (no `end`)"),
        };
        self.stats.instructions += 1;
        self.stats.executed[pc] = true;
        let f = &mut self.fibers[i];
        f.steps += 1;
        if f.steps > self.step_limit {
            return stop(format!("the fiber executed more than {} instructions (a hang?)", self.step_limit));
        }
        if instr.ss {
            f.ss.clear();
            f.war_ss.clear();
            f.war_any.clear();
            let w = i / program.info.wave_size as usize;
            self.const_written[w] = None;
        }
        if instr.sy {
            f.sy.clear();
            f.war_any.clear();
        }
        let war = crate::exec_ops::war_kind(instr);
        let reads = std::cell::RefCell::new(Vec::new());
        let flow = Exec { g: self, fiber: i, pc, instr, mem, reads: war.map(|_| &reads) }.run()?;
        let f = &mut self.fibers[i];
        if let Some(needs_ss) = war {
            let set = if needs_ss { &mut f.war_ss } else { &mut f.war_any };
            for s in reads.into_inner() {
                set.mark(s, pc);
            }
        }
        match flow {
            Flow::Next => f.pc += 1,
            Flow::Jump(off) => {
                let t = pc as i64 + off;
                if t < 0 || t as usize >= self.program.code.len() {
                    return stop(format!("branch to instruction {t}, outside the program"));
                }
                f.pc = t as usize;
            }
            Flow::Barrier => {
                f.pc += 1;
                f.state = FiberState::AtBarrier;
            }
            Flow::End => f.state = FiberState::Done,
        }
        Ok(())
    }
}

/// One instruction of one fiber.
pub(crate) struct Exec<'g, 'a> {
    pub(crate) g: &'g mut Group<'a>,
    pub(crate) fiber: usize,
    pub(crate) pc: usize,
    pub(crate) instr: &'g Instr,
    pub(crate) mem: &'g dyn Memory,
    /// For an instruction that reads its sources late (ir3's `is_war_hazard_producer`): the
    /// register slots it read.
    pub(crate) reads: Option<&'g std::cell::RefCell<Vec<usize>>>,
}
