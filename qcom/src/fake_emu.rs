//! [`EmuExecutor`]: the fake KGSL executes the a6xx machine code it is given on pilot's a6xx shader-ISA emulator
//! (`pilot-a6xx-emu`), so an ir3 program runs through the backend's whole path — command stream, constants,
//! descriptors, machine code — with no source code anywhere in the loop.
//!
//! Everything the emulator gets comes from what the fake's command processor decoded for the `CP_EXEC_CS` with its
//! own register tables ([`Dispatch`]'s decoded fields), never from the runtime on the side:
//! - the program: `SP_CS_INSTR_SIZE` × 128 bytes at `SP_CS_BASE` (the shader `CP_LOAD_STATE6` loaded), from
//!   `SP_CS_PROGRAM_COUNTER_OFFSET`;
//! - the register footprint `SP_CS_CNTL_0.FULLREGFOOTPRINT` (half registers merged into it on a6xx, as Mesa's
//!   `ir3_collect_info` counts them and `fd6_compute.cc` programs it) and the wave size from
//!   `SP_CS_CNTL_0.THREADSIZE` (THREAD64 or THREAD128);
//! - the constant file: the `CP_LOAD_STATE6` constant upload (`const_units` vec4), as the fake read it at execution;
//! - the work-group id and local id registers from `SP_CS_CONST_CONFIG_0.WGIDCONSTID`/`LOCALIDREGID` (register ids
//!   despite the first name; `regid(63, 0)` = 0xfc is none). The local size reaches the shader only through the
//!   constant file the stream uploaded (tinygrad's `ops_qcom.py` writes it at `WGSIZECONSTID`; the fake checks it);
//! - local memory `(SP_CS_CNTL_1.SHARED_SIZE + 1)` KiB per work-group, private memory
//!   `SP_CS_PVT_MEM_PARAM.MEMSIZEPERITEM` × 512 bytes per fiber;
//! - textures, samplers and IBOs: the descriptors the fake read from the tables `CP_LOAD_STATE6` loaded;
//! - the grid: `CP_EXEC_CS`'s group counts, the work-group size from `SP_CS_NDRANGE_0`.
//!
//! GPU memory is the fake's, through [`GpuMemory`]: every emulated access is bounds-checked against the GPU
//! allocations. A fault (an unimplemented instruction, a missing sync flag, a register past the footprint, memory
//! outside every allocation, ...) fails the dispatch with the emulator's message and faults the context.

use crate::fake::{Dispatch, Executor, GpuMemory, LaunchPacket};
use pilot_a6xx_emu as emu;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Instructions one fiber may execute before the dispatch faults as hung.
pub const FIBER_STEP_LIMIT: u64 = 1 << 26;

/// Totals over the dispatches an [`EmuExecutor`] ran, shared with whoever holds a [`EmuExecutor::counters`] handle.
#[derive(Debug, Default)]
pub struct EmuCounters {
    /// Dispatches run to the end.
    pub dispatches: AtomicU64,
    /// Instructions executed, summed over fibers (a `(rptN)` instruction counts once).
    pub instructions: AtomicU64,
}

/// An [`Executor`] that runs ir3 programs (CP_EXEC_CS launches) on the a6xx emulator. See the module docs.
#[derive(Debug)]
pub struct EmuExecutor {
    threads: usize,
    counters: Arc<EmuCounters>,
}

impl Default for EmuExecutor {
    fn default() -> Self {
        Self::new()
    }
}

impl EmuExecutor {
    /// Spreads each dispatch's work-groups over the host's available parallelism.
    pub fn new() -> Self {
        EmuExecutor { threads: std::thread::available_parallelism().map_or(1, |n| n.get()), counters: Arc::default() }
    }

    /// Runs work-groups on `threads` host threads (1: in order on the caller's thread).
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self
    }

    /// A handle on the running totals.
    pub fn counters(&self) -> Arc<EmuCounters> {
        self.counters.clone()
    }
}

/// The fake's GPU memory as the emulator's [`emu::Memory`]; one access at a time.
struct EmuMemory<'a>(Mutex<&'a mut dyn GpuMemory>);

impl<'a> EmuMemory<'a> {
    fn lock(&self) -> std::sync::MutexGuard<'_, &'a mut dyn GpuMemory> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl emu::Memory for EmuMemory<'_> {
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), String> {
        self.lock().read(addr, out).map_err(|e| e.to_string())
    }

    fn write(&self, addr: u64, data: &[u8]) -> Result<(), String> {
        self.lock().write(addr, data).map_err(|e| e.to_string())
    }

    fn atomic32(&self, addr: u64, f: &mut dyn FnMut(u32) -> u32) -> Result<u32, String> {
        if !addr.is_multiple_of(4) {
            return Err(format!("atomic at unaligned GPU address {addr:#x}"));
        }
        let mut m = self.lock();
        let mut old = [0u8; 4];
        m.read(addr, &mut old).map_err(|e| e.to_string())?;
        let old = u32::from_le_bytes(old);
        m.write(addr, &f(old).to_le_bytes()).map_err(|e| e.to_string())?;
        Ok(old)
    }
}

/// The program bytes the registers point at: the loaded shader from SP_CS_PROGRAM_COUNTER_OFFSET on.
fn program_bytes(d: &Dispatch, mem: &dyn GpuMemory) -> Result<Vec<u8>, String> {
    if !d.prg_offset.is_multiple_of(8) {
        return Err(format!("SP_CS_PROGRAM_COUNTER_OFFSET {} is not a whole instruction", d.prg_offset));
    }
    let mut code = vec![0u8; d.instr_units as usize * 128];
    mem.read(d.shader_addr, &mut code).map_err(|e| format!("shader: {e}"))?;
    Ok(code.split_off(d.prg_offset as usize))
}

impl Executor for EmuExecutor {
    fn dispatch(&mut self, d: &Dispatch, mem: &mut dyn GpuMemory) -> Result<(), String> {
        if let Some(kernel) = &d.kernel {
            return Err(format!(
                "the a6xx emulator cannot run `{kernel}`: it is a `--qcom-compiler fake` program (OpenCL C), which \
                 runs with PILOT_FAKE_EXEC=cl"
            ));
        }
        if d.launch != LaunchPacket::ExecCs {
            return Err("the a6xx emulator runs CP_EXEC_CS launches (ir3 programs), not CP_RUN_OPENCL".into());
        }
        for i in 0..3 {
            if d.global[i] != d.groups[i] * d.local[i] {
                return Err(format!(
                    "CP_EXEC_CS with a partial work-group is not modelled: {:?} work items, {:?} groups of {:?}",
                    d.global, d.groups, d.local
                ));
            }
        }
        let code = program_bytes(d, mem)?;
        let info = emu::ProgramInfo { max_reg: d.full_regs as i32 - 1, wave_size: d.wave_size };
        let program = emu::Program::decode(&code, info).map_err(|e| e.to_string())?;
        let reg = |r: Option<u32>| r.map(|r| r as u16);
        let dispatch = emu::Dispatch {
            consts: &d.const_file,
            grid: d.groups,
            local_size: d.local,
            local_id_reg: reg(d.local_id_reg),
            wg_id_reg: reg(d.work_group_id_reg),
            local_mem_bytes: d.shared_mem_bytes,
            private_mem_bytes: d.private_mem_bytes,
            textures: &d.textures,
            samplers: &d.samplers,
            ibos: &d.ibos,
            fiber_step_limit: FIBER_STEP_LIMIT,
            threads: self.threads,
        };
        let stats = emu::run(&program, &dispatch, &EmuMemory(Mutex::new(mem))).map_err(|e| e.to_string())?;
        self.counters.dispatches.fetch_add(1, Ordering::Relaxed);
        self.counters.instructions.fetch_add(stats.instructions, Ordering::Relaxed);
        Ok(())
    }
}
