//! The fake command processor: checks a decoded PM4 stream against its own register file, CP_LOAD_STATE6 state
//! and GPU memory at submit time, turning it into [`Step`]s, and runs those steps later.
//!
//! Everything here reads the stream with the fake's own tables ([`super::packets`], [`super::regs`],
//! [`super::descriptors`]), never with the encoder's. A register outside the table is refused; at each launch every
//! register the dispatch depends on must have been written, and the descriptor-table base registers must equal the
//! addresses CP_LOAD_STATE6 loaded. Everything a command stream says is static (no indirect packets), so registers
//! and addresses are checked at submit; descriptor contents (memory the CPU may rewrite) are read at execution.

use super::descriptors::{self, ImageView, Sampler};
use super::order::{Access, Footprint, Ordering};
use super::packets::{self, Packet};
use super::regs::*;
use super::{Executor, GpuMemory, MemError};
use crate::fake_shader::{FakeShader, ShaderArg, FAKE_MAGIC};
use std::collections::HashMap;
use std::fmt;

/// How a dispatch was launched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaunchPacket {
    /// CP_RUN_OPENCL (Qualcomm CL binaries): the grid comes from the registers.
    RunOpenCl,
    /// CP_EXEC_CS (ir3 binaries): the group counts come from the packet.
    ExecCs,
}

/// One kernel launch as the command processor saw it: what an [`Executor`] needs to run it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dispatch {
    pub context: u32,
    /// The KGSL timestamp of the submission it belongs to (0 until it executes).
    pub submission: u32,
    /// Dword offset of the launch packet in its command object.
    pub offset: usize,
    pub launch: LaunchPacket,
    /// The kernel's name when the shader is a fake shader (known at execution).
    pub kernel: Option<String>,
    /// Shader image (SP_CS_BASE) and its size in 128-byte units.
    pub shader_addr: u64,
    pub instr_units: u32,
    pub prg_offset: u32,
    pub sp_mode_cntl: u32,
    pub cs_cntl_0: u32,
    pub cs_cntl_1: u32,
    /// SP_CS_CNTL_0 decoded: full and half register footprints (vec4 registers), BRANCHSTACK, and the fibers per
    /// wave THREADSIZE selects (64 or 128).
    pub full_regs: u32,
    pub half_regs: u32,
    pub branchstack: u32,
    pub wave_size: u32,
    /// Private memory per fiber (SP_CS_PVT_MEM_PARAM, bytes) and the shared memory per work-group SP_CS_CNTL_1
    /// SHARED_SIZE allows at most (bytes).
    pub private_mem_bytes: u32,
    pub shared_mem_bytes: u32,
    /// SP_CS_CONST_CONFIG_0 (ir3 work-group id / size / local id register ids).
    pub const_config_0: u32,
    /// SP_CS_CONST_CONFIG_0 decoded, `None` for ir3's "unused" id 0xfc: the register (`gpr * 4 + component`) the
    /// work-group id is loaded into, the const component the local size is read from, the register the local
    /// invocation id is loaded into. Meaningful for CP_EXEC_CS launches (the CL path's ids are Qualcomm's).
    pub work_group_id_reg: Option<u32>,
    pub local_size_const: Option<u32>,
    pub local_id_reg: Option<u32>,
    pub groups: [u32; 3],
    pub local: [u32; 3],
    /// Exact work items per axis.
    pub global: [u32; 3],
    /// Constant file loaded by CP_LOAD_STATE6 (`const_units` vec4).
    pub consts: u64,
    pub const_units: u32,
    /// Its contents as read at execution (`const_units * 4` dwords; `c0.x` first).
    pub const_file: Vec<u32>,
    pub stack: u64,
    pub pvt_mem_param: u32,
    pub hw_stack_offset: u32,
    pub border_color: u64,
    /// SP_CS_CONFIG: the texture, sampler and IBO counts.
    pub cs_config: u32,
    /// Descriptor tables loaded by CP_LOAD_STATE6 (0 when none).
    pub texture_table: u64,
    pub ibo_table: u64,
    pub sampler_table: u64,
    /// Descriptors as read from the tables at execution, raw and as the fake decodes them.
    pub textures: Vec<[u32; 16]>,
    pub ibos: Vec<[u32; 16]>,
    pub samplers: Vec<[u32; 4]>,
    pub texture_views: Vec<ImageView>,
    pub ibo_views: Vec<ImageView>,
    pub sampler_states: Vec<Sampler>,
}

impl Dispatch {
    /// `(textures, samplers, IBOs)` as SP_CS_CONFIG declares them.
    pub const fn counts(&self) -> (u32, u32, u32) {
        (CONFIG_NTEX.get(self.cs_config), CONFIG_NSAMP.get(self.cs_config), CONFIG_NUAV.get(self.cs_config))
    }

    /// How messages name the dispatch.
    pub fn describe(&self) -> String {
        let kernel = self.kernel.as_ref().map_or(String::new(), |k| format!(" `{k}`"));
        format!("dispatch{kernel} (PM4 dword {} of submission {})", self.offset, self.submission)
    }
}

/// Something the GPU does at execution time.
#[derive(Clone, Debug)]
pub(super) enum Step {
    Write32 { va: u64, value: u32 },
    Wait { offset: usize, va: u64, function: u32, reference: u32, mask: u32 },
    Counter { va: u64 },
    Invalidate,
    WaitForIdle,
    Launch(Box<Dispatch>),
}

/// Why a stream cannot run, at a packet offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamError {
    pub offset: usize,
    pub what: String,
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PM4 dword {}: {}", self.offset, self.what)
    }
}

/// A table CP_LOAD_STATE6 loaded: address and number of units.
type Loaded = Option<(u64, u32)>;

/// The register file and loaded state of one context, as of the end of the streams validated so far.
#[derive(Clone, Debug, Default)]
pub(super) struct CpState {
    regs: HashMap<u32, u32>,
    marker: Option<u32>,
    /// SP_UPDATE_CNTL invalidated the compute state and UAVs since the last launch.
    updated: bool,
    consts: Loaded,
    shader: Loaded,
    samplers: Loaded,
    textures: Loaded,
    ibos: Loaded,
}

/// Answers whether GPU memory is mapped.
pub(super) trait Visible {
    fn visible(&self, va: u64, len: u64) -> bool;
}

fn addr(lo: u32, hi: u32) -> u64 {
    (hi as u64) << 32 | lo as u64
}

/// ir3's "unused" register or const id (`regid(63, 0)`).
const UNUSED_ID: u32 = 0xfc;

/// The most fibers a work-group can have with this register footprint: the a630's register file holds
/// 384 × 32 vec4 per wave slot group of 128 (tinygrad `QCOMProgram.max_threads`), at most 1024.
fn max_fibers(full: u32, half: u32) -> u32 {
    let regs = (full + half.div_ceil(2)).max(1);
    ((384 * 32) / (regs * 128) * 128).min(1024)
}

impl CpState {
    /// Decodes and checks a command object and returns what to execute. The state advances only on success.
    pub(super) fn validate(
        &mut self,
        context: u32,
        words: &[u32],
        mem: &dyn Visible,
    ) -> Result<Vec<Step>, StreamError> {
        let mut next = self.clone();
        let mut steps = Vec::new();
        for (offset, p) in packets::decode(words)? {
            let err = |what: String| StreamError { offset, what };
            match p {
                Packet::Regs { reg, values } => {
                    for (i, v) in values.iter().enumerate() {
                        let r = reg + i as u32;
                        let Some((known, _)) = writable(r) else {
                            return Err(err(format!(
                                "register {r:#x} is not in the fake's a6xx compute register table"
                            )));
                        };
                        if known == SP_UPDATE_CNTL
                            && UPDATE_CNTL_CS_STATE.get(*v) == 1
                            && UPDATE_CNTL_CS_UAV.get(*v) == 1
                        {
                            next.updated = true;
                        }
                        next.regs.insert(r, *v);
                    }
                }
                Packet::Op { opcode, name, payload: d } => {
                    if let Some(step) = next.op(context, offset, opcode, name, &d, mem).map_err(err)? {
                        steps.push(step);
                    }
                }
            }
        }
        *self = next;
        Ok(steps)
    }

    fn op(
        &mut self,
        context: u32,
        offset: usize,
        opcode: u32,
        name: &str,
        d: &[u32],
        mem: &dyn Visible,
    ) -> Result<Option<Step>, String> {
        let check = |va: u64, len: u64| {
            if mem.visible(va, len) {
                Ok(())
            } else {
                Err(format!("{name}: {va:#x}+{len:#x} is outside any GPU allocation"))
            }
        };
        Ok(match opcode {
            CP_WAIT_MEM_WRITES => None,
            CP_WAIT_FOR_IDLE => Some(Step::WaitForIdle),
            CP_SET_MARKER => {
                self.marker = Some(SET_MARKER_MODE.get(d[0]));
                None
            }
            CP_EVENT_WRITE => {
                let known = EVENT_WRITE_EVENT.mask() | EVENT_WRITE_TIMESTAMP.mask() | EVENT_WRITE_IRQ.mask();
                if d[0] & !known != 0 {
                    return Err(format!("{name} dword 0 {:#x} sets unknown bits", d[0]));
                }
                match (EVENT_WRITE_EVENT.get(d[0]), d.len()) {
                    (CACHE_FLUSH_TS, 4) => {
                        let va = addr(d[1], d[2]);
                        check(va, 4)?;
                        Some(Step::Write32 { va, value: d[3] })
                    }
                    (CACHE_INVALIDATE, 1) => Some(Step::Invalidate),
                    (event, n) => {
                        return Err(format!("{name}: event {event} with {n} payload dwords is not supported"))
                    }
                }
            }
            CP_WAIT_REG_MEM => {
                let function = WAIT_REG_MEM_FUNCTION.get(d[0]);
                let known = WAIT_REG_MEM_FUNCTION.mask() | WAIT_REG_MEM_POLL.mask();
                if WAIT_REG_MEM_POLL.get(d[0]) != POLL_MEMORY
                    || d[0] & !known != 0
                    || !matches!(function, WRITE_GE | WRITE_EQ)
                {
                    return Err(format!("{name} mode {:#x} is not supported", d[0]));
                }
                let va = addr(d[1], d[2]);
                check(va, 4)?;
                Some(Step::Wait { offset, va, function, reference: d[3], mask: d[4] })
            }
            CP_REG_TO_MEM => {
                let (reg, cnt) = (REG_TO_MEM_REG.get(d[0]), REG_TO_MEM_CNT.get(d[0]));
                if reg != CP_ALWAYS_ON_COUNTER.offset || cnt != 2 || REG_TO_MEM_64B.get(d[0]) != 1 || d[0] >> 31 != 0 {
                    return Err(format!("{name} {:#x}: only the 64-bit always-on counter can be stored", d[0]));
                }
                let va = addr(d[1], d[2]);
                check(va, 8)?;
                Some(Step::Counter { va })
            }
            CP_LOAD_STATE6 | CP_LOAD_STATE6_GEOM | CP_LOAD_STATE6_FRAG => {
                self.load_state(opcode, name, d, check)?;
                None
            }
            CP_RUN_OPENCL | CP_EXEC_CS => {
                Some(Step::Launch(Box::new(self.launch(context, offset, opcode, name, d, mem)?)))
            }
            _ => return Err(format!("{name} is decoded but not executed")),
        })
    }

    fn load_state(
        &mut self,
        opcode: u32,
        name: &str,
        d: &[u32],
        check: impl Fn(u64, u64) -> Result<(), String>,
    ) -> Result<(), String> {
        if opcode != CP_LOAD_STATE6_FRAG {
            return Err(format!("{name} is not used for compute state (CP_LOAD_STATE6_FRAG is)"));
        }
        let (dst, st, src) =
            (LOAD_STATE_DST_OFF.get(d[0]), LOAD_STATE_STATE_TYPE.get(d[0]), LOAD_STATE_STATE_SRC.get(d[0]));
        let (sb, units) = (LOAD_STATE_STATE_BLOCK.get(d[0]), LOAD_STATE_NUM_UNIT.get(d[0]));
        if dst != 0 || src != SS6_INDIRECT || units == 0 {
            return Err(format!("{name}: destination {dst}, source {src}, {units} units (only indirect loads at 0)"));
        }
        let src_addr = addr(d[1], d[2]);
        let (slot, unit_bytes) = match (st, sb) {
            (ST6_CONSTANTS, SB6_CS_SHADER) => (&mut self.consts, 16),
            (ST6_SHADER, SB6_CS_SHADER) => (&mut self.shader, 128),
            (ST6_SHADER, SB6_CS_TEX) => (&mut self.samplers, 16),
            (ST6_CONSTANTS, SB6_CS_TEX) => (&mut self.textures, 64),
            (ST6_UAV, SB6_CS_SHADER) => (&mut self.ibos, 64),
            _ => return Err(format!("{name}: state type {st} / block {sb} is not compute state")),
        };
        *slot = Some((src_addr, units));
        check(src_addr, unit_bytes * units as u64)
    }

    fn need(&self, r: Reg, packet: &str) -> Result<u32, String> {
        self.regs
            .get(&r.offset)
            .copied()
            .ok_or_else(|| format!("{packet}: {} ({:#x}) was never written", r.name, r.offset))
    }

    fn need64(&self, r: Reg, packet: &str) -> Result<u64, String> {
        let hi = self.regs.get(&(r.offset + 1)).copied();
        let hi =
            hi.ok_or_else(|| format!("{packet}: the high half of {} ({:#x}) was never written", r.name, r.offset))?;
        Ok(addr(self.need(r, packet)?, hi))
    }

    fn field_is(&self, r: Reg, f: Field, want: u32, packet: &str) -> Result<u32, String> {
        let v = self.need(r, packet)?;
        if f.get(v) != want {
            return Err(format!(
                "{packet}: {} is {} in {} = {v:#x}, the launch needs {want}",
                f.mesa_name(),
                f.get(v),
                r.name
            ));
        }
        Ok(v)
    }

    fn launch(
        &mut self,
        context: u32,
        offset: usize,
        opcode: u32,
        name: &str,
        d: &[u32],
        mem: &dyn Visible,
    ) -> Result<Dispatch, String> {
        if self.marker != Some(RM6_COMPUTE) {
            return Err(format!("{name}: CP_SET_MARKER has not entered RM6_COMPUTE mode"));
        }
        if !std::mem::take(&mut self.updated) {
            return Err(format!(
                "{name}: SP_UPDATE_CNTL has not invalidated CS_STATE and CS_UAV since the last launch"
            ));
        }
        // Mode and control registers.
        // tinygrad's QCOMComputeQueue.exec: ISAMMODE CL for Qualcomm's binaries; GL plus constant demotion for ir3.
        let ir3 = opcode == CP_EXEC_CS;
        let isam = if ir3 { ISAMMODE_GL } else { ISAMMODE_CL };
        self.field_is(SP_MODE_CNTL, MODE_CNTL_ISAMMODE, isam, name)?;
        let sp_mode_cntl = self.field_is(SP_MODE_CNTL, MODE_CNTL_CONSTANT_DEMOTION_ENABLE, ir3 as u32, name)?;
        self.field_is(TPL1_MODE_CNTL, TPL1_MODE_CNTL_ISAMMODE, isam, name)?;
        let cs_cntl_0 = self.need(SP_CS_CNTL_0, name)?;
        let cs_cntl_1 = self.need(SP_CS_CNTL_1, name)?;
        self.field_is(SP_CS_CONST_CONFIG, CONST_CONFIG_ENABLED, 1, name)?;
        let const_config_0 = self.need(SP_CS_CONST_CONFIG_0, name)?;
        let threadsize = CNTL_0_THREADSIZE.get(cs_cntl_0);
        self.field_is(SP_CS_WGE_CNTL, WGE_CNTL_THREADSIZE, threadsize, name)?;
        let (full_regs, half_regs) = (CNTL_0_FULLREGFOOTPRINT.get(cs_cntl_0), CNTL_0_HALFREGFOOTPRINT.get(cs_cntl_0));

        // The grid.
        let nd0 = self.field_is(SP_CS_NDRANGE_0, NDRANGE_KERNELDIM, 3, name)?;
        let local = [NDRANGE_LOCALSIZEX, NDRANGE_LOCALSIZEY, NDRANGE_LOCALSIZEZ].map(|f| f.get(nd0) + 1);
        let global =
            [self.need(SP_CS_NDRANGE_1, name)?, self.need(SP_CS_NDRANGE_3, name)?, self.need(SP_CS_NDRANGE_5, name)?];
        for r in [SP_CS_NDRANGE_2, SP_CS_NDRANGE_4, SP_CS_NDRANGE_6] {
            if self.need(r, name)? != 0 {
                return Err(format!("{name}: {} (a global offset) is not 0", r.name));
            }
        }
        let (groups, launch) = if opcode == CP_EXEC_CS {
            if d[0] != 0 {
                return Err(format!("{name}: dword 0 is {:#x}, not 0", d[0]));
            }
            ([d[1], d[2], d[3]], LaunchPacket::ExecCs)
        } else {
            let g = [SP_CS_KERNEL_GROUP_X, SP_CS_KERNEL_GROUP_Y, SP_CS_KERNEL_GROUP_Z];
            ([self.need(g[0], name)?, self.need(g[1], name)?, self.need(g[2], name)?], LaunchPacket::RunOpenCl)
        };
        let fibers = local.iter().product::<u32>();
        let max = max_fibers(full_regs, half_regs);
        if fibers > max {
            return Err(format!(
                "{name}: a work-group of {fibers} fibers needs more registers than the a630 has: SP_CS_CNTL_0's \
                 footprint ({full_regs} full, {half_regs} half vec4) allows {max}"
            ));
        }
        for i in 0..3 {
            if global[i] == 0 || global[i].div_ceil(local[i]) != groups[i] {
                return Err(format!(
                    "{name}: {} work items in groups of {} need {} work-groups, the launch has {}",
                    global[i],
                    local[i],
                    global[i].div_ceil(local[i]),
                    groups[i]
                ));
            }
        }

        // The program.
        let shader_addr = self.need64(SP_CS_BASE, name)?;
        let instr_units = self.need(SP_CS_INSTR_SIZE, name)?;
        if self.shader != Some((shader_addr, instr_units)) {
            return Err(format!(
                "{name}: SP_CS_BASE {shader_addr:#x} / SP_CS_INSTR_SIZE {instr_units} are not the shader CP_LOAD_STATE6 \
                 loaded ({:?})",
                self.shader
            ));
        }
        let prg_offset = self.need(SP_CS_PROGRAM_COUNTER_OFFSET, name)?;
        if prg_offset as u64 >= instr_units as u64 * 128 {
            return Err(format!("{name}: SP_CS_PROGRAM_COUNTER_OFFSET {prg_offset} is past the shader"));
        }

        // Private memory.
        let pvt_mem_param = self.need(SP_CS_PVT_MEM_PARAM, name)?;
        self.need(SP_CS_PVT_MEM_SIZE, name)?;
        let stack = self.need64(SP_CS_PVT_MEM_BASE, name)?;
        let hw_stack_offset = PVT_MEM_STACK_OFFSET_OFFSET.get(self.need(SP_CS_PVT_MEM_STACK_OFFSET, name)?);
        if stack != 0 && !mem.visible(stack, hw_stack_offset as u64 * 4) {
            return Err(format!(
                "{name}: private memory {stack:#x}+{:#x} is outside any GPU allocation",
                hw_stack_offset as u64 * 4
            ));
        }

        // Constants and descriptor tables.
        let (consts, const_units) = self.consts.ok_or_else(|| format!("{name}: no constants were loaded"))?;
        let id = |f: Field| Some(f.get(const_config_0)).filter(|&v| v != UNUSED_ID);
        let local_size_const = id(CONST_CONFIG_0_WGSIZECONSTID);
        if let Some(c) = local_size_const.filter(|_| ir3) {
            if c + 3 > const_units * 4 {
                return Err(format!(
                    "{name}: the local size at const component {c} (SP_CS_CONST_CONFIG_0 WGSIZECONSTID) is past the \
                     {const_units} vec4 CP_LOAD_STATE6 loaded"
                ));
            }
        }
        let config = self.field_is(SP_CS_CONFIG, CONFIG_ENABLED, 1, name)?;
        for f in [CONFIG_BINDLESS_TEX, CONFIG_BINDLESS_SAMP, CONFIG_BINDLESS_UAV, CONFIG_BINDLESS_UBO] {
            self.field_is(SP_CS_CONFIG, f, 0, name)?;
        }
        let (ntex, nsamp, nuav) = (CONFIG_NTEX.get(config), CONFIG_NSAMP.get(config), CONFIG_NUAV.get(config));
        if ir3 && nsamp != ntex {
            // ir3 samples every texture with its own sampler state (ir3_compiler_nir.c, tex instructions).
            return Err(format!(
                "{name}: SP_CS_CONFIG declares {ntex} textures and {nsamp} samplers; ir3 needs one each"
            ));
        }
        for (size, n, what) in [(SP_CS_TSIZE, ntex, "textures"), (SP_CS_USIZE, nuav, "IBOs")] {
            let v = self.need(size, name)?;
            if v < n {
                return Err(format!("{name}: {} is {v}, fewer than the {n} {what} SP_CS_CONFIG declares", size.name));
            }
        }
        let tables = [
            ("texture", ntex, self.textures, SP_CS_TEXMEMOBJ_BASE),
            ("sampler", nsamp, self.samplers, SP_CS_SAMPLER_BASE),
            ("IBO", nuav, self.ibos, SP_CS_UAV_BASE),
        ];
        let mut table_addr = [0u64; 3];
        for (i, (what, n, loaded, base)) in tables.into_iter().enumerate() {
            if n == 0 {
                continue;
            }
            let Some((va, units)) = loaded else {
                return Err(format!(
                    "{name}: SP_CS_CONFIG declares {n} {what}s, CP_LOAD_STATE6 loaded no {what} table"
                ));
            };
            if units != n {
                return Err(format!("{name}: SP_CS_CONFIG declares {n} {what}s, CP_LOAD_STATE6 loaded {units}"));
            }
            let reg = self.need64(base, name)?;
            if reg != va {
                return Err(format!(
                    "{name}: {} is {reg:#x}, but CP_LOAD_STATE6 loaded the {what} table from {va:#x}",
                    base.name
                ));
            }
            table_addr[i] = va;
        }
        let border_color = if nsamp > 0 { self.need64(TPL1_CS_BORDER_COLOR_BASE, name)? } else { 0 };
        if nsamp > 0 && !mem.visible(border_color, 16) {
            return Err(format!("{name}: border color {border_color:#x} is outside any GPU allocation"));
        }
        Ok(Dispatch {
            context,
            submission: 0,
            offset,
            launch,
            kernel: None,
            shader_addr,
            instr_units,
            prg_offset,
            sp_mode_cntl,
            cs_cntl_0,
            cs_cntl_1,
            full_regs,
            half_regs,
            branchstack: CNTL_0_BRANCHSTACK.get(cs_cntl_0),
            wave_size: if threadsize == THREAD64 { 64 } else { 128 },
            private_mem_bytes: PVT_MEM_PARAM_MEMSIZEPERITEM.get(pvt_mem_param) * 512,
            shared_mem_bytes: (CNTL_1_SHARED_SIZE.get(cs_cntl_1) + 1) * 1024,
            const_config_0,
            work_group_id_reg: id(CONST_CONFIG_0_WGIDCONSTID),
            local_size_const,
            local_id_reg: id(CONST_CONFIG_0_LOCALIDREGID),
            groups,
            local,
            global,
            consts,
            const_units,
            const_file: Vec::new(),
            stack,
            pvt_mem_param,
            hw_stack_offset,
            border_color,
            cs_config: config,
            texture_table: table_addr[0],
            sampler_table: table_addr[1],
            ibo_table: table_addr[2],
            textures: Vec::new(),
            ibos: Vec::new(),
            samplers: Vec::new(),
            texture_views: Vec::new(),
            ibo_views: Vec::new(),
            sampler_states: Vec::new(),
        })
    }
}

/// Where a step stopped.
pub(super) enum Progress {
    Done,
    /// A CP_WAIT_REG_MEM is not satisfied yet.
    Stalled(String),
}

fn read_words<const N: usize>(mem: &dyn GpuMemory, va: u64) -> Result<[u32; N], MemError> {
    let mut w = [0u32; N];
    mem.read(va, bytemuck::cast_slice_mut(&mut w))?;
    Ok(w)
}

/// Reads and decodes the launch's descriptors and checks that every image lies in GPU memory.
fn resolve_descriptors(d: &mut Dispatch, mem: &dyn GpuMemory) -> Result<(), String> {
    let (ntex, nsamp, nuav) = d.counts();
    for (name, table, n, ibo) in [("texture", d.texture_table, ntex, false), ("IBO", d.ibo_table, nuav, true)] {
        for i in 0..n {
            let desc = read_words::<16>(mem, table + 64 * i as u64).map_err(|e| e.to_string())?;
            let view = descriptors::image(&desc, ibo).map_err(|e| format!("{name} {i} descriptor: {e}"))?;
            mem.check(view.base, view.span()).map_err(|e| format!("{name} {i}: {e}"))?;
            let (raw, views) =
                if ibo { (&mut d.ibos, &mut d.ibo_views) } else { (&mut d.textures, &mut d.texture_views) };
            raw.push(desc);
            views.push(view);
        }
    }
    for i in 0..nsamp {
        let words = read_words::<4>(mem, d.sampler_table + 16 * i as u64).map_err(|e| e.to_string())?;
        d.sampler_states.push(descriptors::sampler(&words).map_err(|e| format!("sampler {i}: {e}"))?);
        d.samplers.push(words);
    }
    Ok(())
}

/// The constant file CP_LOAD_STATE6 loaded, as it is in memory now.
fn read_const_file(d: &Dispatch, mem: &dyn GpuMemory) -> Result<Vec<u32>, String> {
    let mut words = vec![0u32; d.const_units as usize * 4];
    mem.read(d.consts, bytemuck::cast_slice_mut(&mut words)).map_err(|e| format!("constant file: {e}"))?;
    Ok(words)
}

/// What a CP_EXEC_CS launch of ir3 code needs from memory: the local size at the const component
/// SP_CS_CONST_CONFIG_0 names equal to SP_CS_NDRANGE_0's, and an `end` instruction inside the SP_CS_INSTR_SIZE
/// units CP_LOAD_STATE6 loaded (otherwise the shader runs past its instructions).
fn check_ir3(d: &Dispatch, mem: &dyn GpuMemory) -> Result<(), String> {
    if let Some(c) = d.local_size_const {
        let at = c as usize;
        let held = &d.const_file[at..at + 3];
        if held != d.local {
            return Err(format!(
                "the constant file holds {held:?} at the local size's const component {c} (SP_CS_CONST_CONFIG_0 \
                 WGSIZECONSTID), SP_CS_NDRANGE_0 launches {:?}",
                d.local
            ));
        }
    }
    let mut code = vec![0u64; d.instr_units as usize * 16];
    mem.read(d.shader_addr, bytemuck::cast_slice_mut(&mut code)).map_err(|e| format!("shader: {e}"))?;
    if !code.iter().any(|&w| w & A6XX_END_MASK == A6XX_END) {
        return Err(format!(
            "no `end` instruction in the {} bytes SP_CS_INSTR_SIZE ({}) loads from SP_CS_BASE {:#x}: the shader \
             runs past its instructions",
            code.len() * 8,
            d.instr_units,
            d.shader_addr
        ));
    }
    Ok(())
}

/// The fake shader at the dispatch's shader address, if it is one.
pub(super) fn fake_shader(d: &Dispatch, mem: &dyn GpuMemory) -> Option<FakeShader> {
    let mut magic = [0u8; 8];
    mem.read(d.shader_addr, &mut magic).ok()?;
    if magic != *FAKE_MAGIC {
        return None;
    }
    let mut image = vec![0u8; d.instr_units as usize * 128];
    mem.read(d.shader_addr, &mut image).ok()?;
    FakeShader::decode(&image)
}

/// What the dispatch reads and writes: its textures and IBOs, and, for a fake shader, its buffer arguments (the
/// pointers in the constant file and the sizes the shader declares). A real shader's buffers are unknown.
fn footprint(d: &Dispatch, shader: Option<&FakeShader>, mem: &dyn GpuMemory) -> Result<Footprint, String> {
    let image = |what: &str, i: usize, v: &ImageView| Access { va: v.base, len: v.span(), what: format!("{what} {i}") };
    let mut f = Footprint {
        reads: d.texture_views.iter().enumerate().map(|(i, v)| image("texture", i, v)).collect(),
        writes: d.ibo_views.iter().enumerate().map(|(i, v)| image("IBO", i, v)).collect(),
    };
    for (i, arg) in shader.map_or(&[][..], |s| &s.args).iter().enumerate() {
        if let ShaderArg::Buffer { offset_words, bytes, written } = *arg {
            let at = offset_words as u64 * 4;
            if at + 8 > d.const_units as u64 * 16 {
                return Err(format!("argument {i}: constant-file byte {at} is outside the loaded constants"));
            }
            let mut ptr = [0u8; 8];
            mem.read(d.consts + at, &mut ptr).map_err(|e| format!("argument {i}: constant file: {e}"))?;
            let access =
                Access { va: u64::from_le_bytes(ptr), len: bytes as u64, what: format!("buffer argument {i}") };
            if written {
                f.writes.push(access)
            } else {
                f.reads.push(access)
            }
        }
    }
    Ok(f)
}

/// Runs `steps` of submission `submission` from `*pc` until they end or a wait is unsatisfied. Launches are
/// checked for ordering, handed to `executor` and appended to `log`; `ticks` is the always-on counter.
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    steps: &[Step],
    pc: &mut usize,
    submission: u32,
    mem: &mut dyn GpuMemory,
    executor: &mut dyn Executor,
    ordering: &mut Ordering,
    log: &mut Vec<Dispatch>,
    ticks: u64,
) -> Result<Progress, String> {
    while let Some(step) = steps.get(*pc) {
        match step {
            Step::Write32 { va, value } => mem.write(*va, &value.to_le_bytes()).map_err(|e| e.to_string())?,
            Step::Wait { offset, va, function, reference, mask } => {
                let v = read_words::<1>(mem, *va).map_err(|e| e.to_string())?[0];
                let ok = match *function {
                    WRITE_GE => v & mask >= *reference,
                    _ => v & mask == *reference,
                };
                if !ok {
                    let op = if *function == WRITE_GE { ">=" } else { "==" };
                    return Ok(Progress::Stalled(format!(
                        "CP_WAIT_REG_MEM at PM4 dword {offset} waits for [{va:#x}] {op} {reference}, it holds {v}"
                    )));
                }
            }
            Step::Counter { va } => mem.write(*va, &ticks.to_le_bytes()).map_err(|e| e.to_string())?,
            Step::Invalidate => ordering.invalidate(),
            Step::WaitForIdle => ordering.wait_for_idle(),
            Step::Launch(d) => {
                let mut d = (**d).clone();
                d.submission = submission;
                let offset = d.offset;
                let at = |e: String| format!("launch at PM4 dword {offset}: {e}");
                resolve_descriptors(&mut d, mem).map_err(at)?;
                d.const_file = read_const_file(&d, mem).map_err(at)?;
                if d.launch == LaunchPacket::ExecCs {
                    check_ir3(&d, mem).map_err(at)?;
                }
                let shader = fake_shader(&d, mem);
                d.kernel = shader.as_ref().map(|s| s.name.clone());
                let touched = footprint(&d, shader.as_ref(), mem).map_err(at)?;
                ordering.launch(d.describe(), touched)?;
                executor.dispatch(&d, mem).map_err(at)?;
                log.push(d);
            }
        }
        *pc += 1;
    }
    Ok(Progress::Done)
}
