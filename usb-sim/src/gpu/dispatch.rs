//! DISPATCH_DIRECT: the kernel runs on pilot's RDNA3 emulator ([`pilot_rdna3`]) from what the hardware reads —
//! registers only, never the kernel descriptor:
//! - the program at `COMPUTE_PGM_LO/HI << 8` (a GC-hub address), its machine code read from simulated VRAM
//!   and decoded from there up to `s_code_end`, or up to the first undecodable word after an `s_endpgm`;
//! - `COMPUTE_PGM_RSRC1/2/3` (VGPRs, float modes, USER_SGPR_COUNT, system SGPRs, work-item id VGPRs, LDS in
//!   512-byte units), `COMPUTE_USER_DATA_0..` for the user SGPRs, `COMPUTE_NUM_THREAD_X/Y/Z` (NUM_THREAD_FULL,
//!   bits 0-15; NUM_THREAD_PARTIAL, bits 16-31, is refused),
//!   the workgroup counts from the packet, `COMPUTE_DISPATCH_INITIATOR` (bit 0 compute shader enable, bit 15
//!   wave32 — wave64 is refused), and for a kernel with `COMPUTE_PGM_RSRC2.SCRATCH_EN` the scratch region
//!   `COMPUTE_TMPRING_SIZE` and `COMPUTE_DISPATCH_SCRATCH_BASE` describe ([`super::scratch`]: checked before the
//!   waves run, their slots overwritten with seeded bytes after).
//!
//! A load of what an earlier dispatch stored, with no flush and invalidate between them, stops the queue with a fault
//! naming both ([`super::coherence`]).
//!
//! The board picks the instruction set: Navi31 runs gfx11 code, Navi48 gfx12 (RDNA4). GC 12's compute registers
//! differ in three fields a dispatch reads (tinygrad `autogen/am/regs.py`, `gc_11_0_0` vs `gc_12_0_0`):
//! `COMPUTE_NUM_THREAD_*.NUM_THREAD_FULL` is bits 0-12 with INTERLEAVE_BITS in 13-15 (refused when set),
//! `COMPUTE_TMPRING_SIZE.WAVESIZE` is bits 12-29 (gfx11: 12-26), and `COMPUTE_PGM_RSRC2` bit 6 is DYNAMIC_VGPR
//! (refused) where gfx11 has TRAP_PRESENT. gfx12 waves get their workgroup ID in TTMP7/TTMP9 as well
//! ([`pilot_rdna3::dispatch`]).
//!
//! Kernels are confined ([`super::confine`]): an access to the GPU's own memory, like one to memory the page table
//! does not map,
//! stops the dispatch and latches the VM protection fault; the fault names the dispatch (its number since
//! power-on and program address), the instruction and the address.
//!
//! `PILOT_SIM_EXEC` unset or `emulator` runs the code; any other value is refused (there is no host stand-in).
//! Workgroups run on `PILOT_SIM_THREADS` host threads (1 to [`MAX_THREADS`]; default: the machine's parallelism,
//! at most 8). A dispatch runs under the emulator's budget ([`pilot_rdna3::Budget::from_env`]); one that
//! exceeds it is a hang: the queue stops before the step's signal, as a hung GPU's would, and the driver's
//! wait times out.

use super::kernel_mem::KernelVram;
use super::mem::{Fabric, Hub};
use super::regs::{Reg, USER_DATA_COUNT};
use super::Gpu;
use pilot_rdna3::decode::decode_at;
use pilot_rdna3::kernel::props;
use pilot_rdna3::{CodeObjectKernel, Dispatch, Isa, KernelDescriptor};
use std::sync::Arc;
use std::time::Duration;

/// The most machine code read for one program.
const MAX_CODE: usize = 4 << 20;
const INITIATOR_COMPUTE_SHADER_EN: u32 = 1;
const INITIATOR_CS_W32_EN: u32 = 1 << 15;
/// gfx12's COMPUTE_PGM_RSRC2.DYNAMIC_VGPR.
const RSRC2_GFX12_DYNAMIC_VGPR: u32 = 1 << 6;

/// How many bytes of `code` form the program: up to `s_code_end`, or the first word that does not decode
/// once an `s_endpgm` was seen. `None`: `code` ended first (read more).
fn program_len(isa: Isa, name: &str, code: &[u8]) -> Result<Option<usize>, String> {
    let words: Vec<u32> = code.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))).collect();
    // An instruction is at most 3 dwords: stop early enough that the last one is whole.
    let limit = words.len().saturating_sub(3);
    let (mut at, mut ended) = (0usize, false);
    while at < limit {
        match decode_at(isa, name, &words, at) {
            Ok(i) if i.info.name == "s_code_end" => return Ok(Some(4 * at)),
            Ok(i) => {
                ended |= i.info.name == "s_endpgm";
                at += i.words as usize;
            }
            Err(_) if ended => return Ok(Some(4 * at)),
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(None)
}

/// The most host threads `PILOT_SIM_THREADS` may ask for.
pub const MAX_THREADS: usize = 256;

/// Host threads for a dispatch's workgroups: `PILOT_SIM_THREADS` (1 to [`MAX_THREADS`]), else the machine's
/// parallelism (at most 8).
fn threads() -> Result<usize, String> {
    match std::env::var("PILOT_SIM_THREADS") {
        Err(_) => Ok(std::thread::available_parallelism().map_or(1, |n| n.get().min(8))),
        Ok(v) => v
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_THREADS).contains(n))
            .ok_or_else(|| format!("PILOT_SIM_THREADS={v}: expected 1 to {MAX_THREADS} threads")),
    }
}

impl Gpu {
    /// Runs one DISPATCH_DIRECT of `grid` workgroups; the modelled time it takes.
    pub(super) fn dispatch(
        &mut self,
        grid: [u32; 3],
        initiator: u32,
        fabric: &mut dyn Fabric,
    ) -> Result<Duration, String> {
        match std::env::var("PILOT_SIM_EXEC").as_deref() {
            Err(_) | Ok("emulator") => {}
            Ok(other) => {
                return Err(format!(
                    "PILOT_SIM_EXEC={other}: the simulated GPU runs code objects on the emulator only (unset it or use `emulator`)"
                ))
            }
        }
        let isa = match self.board {
            super::board::Board::Navi31 => Isa::Gfx11,
            super::board::Board::Navi48 => Isa::Gfx12,
        };
        let gfx12 = isa == Isa::Gfx12;
        if initiator & INITIATOR_COMPUTE_SHADER_EN == 0 {
            return Err(format!("DISPATCH_INITIATOR {initiator:#x} without COMPUTE_SHADER_EN"));
        }
        if initiator & INITIATOR_CS_W32_EN == 0 {
            return Err(format!(
                "DISPATCH_INITIATOR {initiator:#x}: wave64 dispatches are not emulated (set CS_W32_EN)"
            ));
        }
        let pgm = (u64::from(self.get(Reg::PgmLo)) | u64::from(self.get(Reg::PgmHi)) << 32) << 8;
        let (rsrc1, rsrc2, rsrc3) = (self.get(Reg::Rsrc1), self.get(Reg::Rsrc2), self.get(Reg::Rsrc3));
        let num_thread = [Reg::NumThreadX, Reg::NumThreadY, Reg::NumThreadZ].map(|r| self.get(r));
        if num_thread.iter().any(|n| n >> 16 != 0) {
            return Err(format!(
                "COMPUTE_NUM_THREAD {num_thread:#x?}: partial workgroups (NUM_THREAD_PARTIAL) are not emulated"
            ));
        }
        let full_mask = if gfx12 { 0x1FFF } else { 0xFFFF };
        if gfx12 && num_thread.iter().any(|n| n & 0xE000 != 0) {
            return Err(format!("COMPUTE_NUM_THREAD {num_thread:#x?}: INTERLEAVE_BITS are not emulated"));
        }
        if gfx12 && rsrc2 & RSRC2_GFX12_DYNAMIC_VGPR != 0 {
            return Err(format!("COMPUTE_PGM_RSRC2 {rsrc2:#x}: DYNAMIC_VGPR is not emulated"));
        }
        let workgroup = num_thread.map(|n| n & full_mask);
        let items = workgroup.iter().map(|&n| u64::from(n)).product::<u64>();
        if grid.contains(&0) || items == 0 || items > 1024 {
            return Err(format!(
                "dispatch of {grid:?} workgroups of {workgroup:?} work-items (1 to 1024 per workgroup)"
            ));
        }
        let user_count = (rsrc2 >> 1) & 0x1F;
        if user_count > USER_DATA_COUNT {
            return Err(format!(
                "USER_SGPR_COUNT {user_count} exceeds the {USER_DATA_COUNT} COMPUTE_USER_DATA registers"
            ));
        }
        let base = self.map.index(Reg::UserData0);
        let user_sgprs: Vec<u32> = (0..user_count).map(|i| self.stored(base + i)).collect();
        let scratch = self.scratch_plan(gfx12, rsrc2, fabric)?;
        let kernel = self.program(isa, pgm, rsrc1, rsrc2, rsrc3, fabric)?;
        let d = Dispatch {
            grid,
            workgroup,
            user_sgprs,
            rsrc1,
            rsrc2,
            lds_bytes: ((rsrc2 >> 15) & 0x1FF) * 512,
            scratch_bytes: scratch.per_item,
            step_limit: pilot_rdna3::dispatch::DEFAULT_STEP_LIMIT,
            budget: pilot_rdna3::Budget::from_env()?,
        };
        let ranges = self.kernel_translations(fabric.vram());
        let protected = self.protected(fabric);
        let threads = threads()?;
        let vram = fabric.vram();
        let caches = self.coherence.begin(vram.len());
        let mem = KernelVram::new(vram, ranges, protected)
            .ok_or("VRAM is not word-aligned in host memory")?
            .with_caches(&caches);
        let ran = pilot_rdna3::dispatch_parallel(&kernel, &d, &mem, threads);
        let stray = mem.stray();
        drop(mem);
        let hazard = caches.finish();
        let stats = match (ran, stray) {
            (Ok(stats), _) => stats,
            (Err(e), Some(stray)) => {
                self.latch_vm_fault(&stray);
                return Err(format!("dispatch {} ({e}): {stray}", self.dispatched.dispatches + 1));
            }
            (Err(e), None) => return Err(format!("dispatch {} ({e})", self.dispatched.dispatches + 1)),
        };
        if let Some(hazard) = hazard {
            return Err(hazard);
        }
        self.scratch_spill(&scratch, stats.waves, fabric)?;
        self.dispatched.instructions += stats.instructions;
        self.dispatched.dispatches += 1;
        Ok(self.timing.dispatch(stats.instructions, self.board.gc_info().cus()))
    }

    /// The program at `pgm`, decoded once and reused while its bytes are unchanged.
    fn program(
        &mut self,
        isa: Isa,
        pgm: u64,
        rsrc1: u32,
        rsrc2: u32,
        rsrc3: u32,
        fabric: &mut dyn Fabric,
    ) -> Result<Arc<CodeObjectKernel>, String> {
        let start = match self.mem(Hub::Gc, fabric, self.now).resolve(pgm, 4)? {
            super::mem::Target::Vram(off) => off,
            super::mem::Target::Bridge(_) => return Err(format!("program address {pgm:#x} is not in VRAM")),
        };
        let vram = fabric.vram();
        let name = format!("program@{pgm:#x}");
        let descriptor = KernelDescriptor {
            group_segment_fixed_size: ((rsrc2 >> 15) & 0x1FF) * 512,
            private_segment_fixed_size: 0,
            kernarg_size: 0,
            entry_offset: 0,
            rsrc3,
            rsrc1,
            rsrc2,
            code_properties: props::WAVEFRONT_SIZE32,
            kernarg_preload: 0,
        };
        if let Some((code, k)) = self.kernels.get(&pgm) {
            if vram.get(start..start + code.len()) == Some(&code[..]) && k.descriptor == descriptor {
                return Ok(k.clone());
            }
        }
        // Read 64 KB, then four times more while the program runs past what was read.
        let mut window = 64 << 10;
        let len = loop {
            let end = (start + window).min(vram.len());
            if let Some(len) = program_len(isa, &name, &vram[start..end])? {
                break len;
            }
            if end == vram.len() || window >= MAX_CODE {
                return Err(format!("no end of the program within {} bytes of {pgm:#x}", end - start));
            }
            window *= 4;
        };
        let code = vram[start..start + len].to_vec();
        let k = Arc::new(CodeObjectKernel::from_parts_of(isa, &name, descriptor, &code).map_err(|e| e.to_string())?);
        self.kernels.insert(pgm, (code, k.clone()));
        Ok(k)
    }
}
