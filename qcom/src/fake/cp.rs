//! The fake command processor: checks a decoded PM4 stream against the register file and GPU memory at submit
//! time, turning it into [`Step`]s, and runs those steps later.
//!
//! Everything a command stream says is static (no indirect packets), so all addresses and launch parameters are
//! checked at submit; only descriptor contents (which live in memory the CPU may rewrite) are read at execution.

use super::{Executor, GpuMemory, MemError};
use crate::dispatch::parse_image_descriptor;
use crate::pm4::{addr64, load_state, reg, wait_reg_mem, Opcode, Packet};
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
    /// Dword offset of the launch packet in its command object.
    pub offset: usize,
    pub launch: LaunchPacket,
    /// Shader image (SP_CS_BASE) and its size in 128-byte units.
    pub shader_addr: u64,
    pub instr_units: u32,
    pub prg_offset: u32,
    pub sp_mode_cntl: u32,
    pub cs_cntl_0: u32,
    pub cs_cntl_1: u32,
    /// SP_CS_CONST_CONFIG_0 (ir3 work-group id / size / local id register ids).
    pub const_config_0: u32,
    pub groups: [u32; 3],
    pub local: [u32; 3],
    /// Exact work items per axis.
    pub global: [u32; 3],
    /// Constant file loaded by CP_LOAD_STATE6 (`const_units` vec4).
    pub consts: u64,
    pub const_units: u32,
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
    /// Descriptors as read from the tables at execution.
    pub textures: Vec<[u32; 16]>,
    pub ibos: Vec<[u32; 16]>,
    pub samplers: Vec<[u32; 4]>,
}

impl Dispatch {
    /// `(textures, samplers, IBOs)` as SP_CS_CONFIG declares them.
    pub const fn counts(&self) -> (u32, u32, u32) {
        ((self.cs_config >> 9) & 0xff, (self.cs_config >> 17) & 0x1f, (self.cs_config >> 22) & 0x7f)
    }
}

/// Something the GPU does at execution time.
#[derive(Clone, Debug)]
pub(super) enum Step {
    Write32 { va: u64, value: u32 },
    Wait { offset: usize, va: u64, function: u32, reference: u32, mask: u32 },
    RegToMem { va: u64, values: Vec<u32>, counter: bool },
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

/// The register file and loaded state of one context, as of the end of the streams validated so far.
#[derive(Clone, Debug, Default)]
pub(super) struct CpState {
    regs: HashMap<u32, u32>,
    consts: Option<(u64, u32)>,
    shader: Option<(u64, u32)>,
    samplers: Option<(u64, u32)>,
    textures: Option<(u64, u32)>,
    ibos: Option<(u64, u32)>,
}

/// Answers whether GPU memory is mapped.
pub(super) trait Visible {
    fn visible(&self, va: u64, len: u64) -> bool;
}

impl CpState {
    fn reg(&self, r: u32) -> Option<u32> {
        self.regs.get(&r).copied()
    }

    fn reg64(&self, r: u32) -> Option<u64> {
        Some(addr64(self.reg(r)?, self.reg(r + 1)?))
    }

    /// Checks `packets` (with their dword offsets) and returns what to execute. The state advances only on success.
    pub(super) fn validate(
        &mut self,
        context: u32,
        packets: &[(usize, Packet)],
        mem: &dyn Visible,
    ) -> Result<Vec<Step>, StreamError> {
        let mut next = self.clone();
        let mut steps = Vec::new();
        for (offset, p) in packets {
            let offset = *offset;
            let err = |what: String| StreamError { offset, what };
            let check = |name: &str, va: u64, len: u64| {
                if mem.visible(va, len) {
                    Ok(())
                } else {
                    Err(err(format!("{name}: {va:#x}+{len:#x} is outside any GPU allocation")))
                }
            };
            match p {
                Packet::Reg { reg, values } => {
                    for (i, v) in values.iter().enumerate() {
                        next.regs.insert(reg + i as u32, *v);
                    }
                }
                Packet::Op { opcode, payload: d } => match opcode {
                    Opcode::WaitForIdle | Opcode::WaitMemWrites | Opcode::SetMarker => {}
                    Opcode::EventWrite => {
                        if d.len() == 4 {
                            let va = addr64(d[1], d[2]);
                            check("CP_EVENT_WRITE", va, 4)?;
                            steps.push(Step::Write32 { va, value: d[3] });
                        }
                    }
                    Opcode::WaitRegMem => {
                        let function = d[0] & wait_reg_mem::FUNCTION_MASK;
                        if d[0] & wait_reg_mem::POLL_MASK != wait_reg_mem::POLL_MEMORY
                            || d[0] & (wait_reg_mem::SIGNED_COMPARE | wait_reg_mem::WRITE_MEMORY) != 0
                            || !matches!(function, wait_reg_mem::WRITE_GE | wait_reg_mem::WRITE_EQ)
                        {
                            return Err(err(format!("CP_WAIT_REG_MEM mode {:#x} is not supported", d[0])));
                        }
                        let va = addr64(d[1], d[2]);
                        check("CP_WAIT_REG_MEM", va, 4)?;
                        steps.push(Step::Wait { offset, va, function, reference: d[3], mask: d[4] });
                    }
                    Opcode::RegToMem => {
                        let (r, cnt, b64) = (d[0] & 0x3ffff, (d[0] >> 18) & 0xfff, d[0] & (1 << 30) != 0);
                        if d[0] >> 31 != 0 || cnt == 0 {
                            return Err(err(format!("CP_REG_TO_MEM {:#x} is not supported", d[0])));
                        }
                        let va = addr64(d[1], d[2]);
                        check("CP_REG_TO_MEM", va, 4 * cnt as u64)?;
                        let counter = r == reg::CP_ALWAYS_ON_COUNTER && cnt == 2 && b64;
                        let values = (r..r + cnt).map(|x| next.reg(x).unwrap_or(0)).collect();
                        steps.push(Step::RegToMem { va, values, counter });
                    }
                    Opcode::LoadState6 | Opcode::LoadState6Geom | Opcode::LoadState6Frag => {
                        next.load_state(*opcode, d).map_err(&err)?;
                        let (st, sb, units) = ((d[0] >> 14) & 3, (d[0] >> 18) & 0xf, d[0] >> 22);
                        let unit_bytes = match (st, sb) {
                            (load_state::ST_SHADER, load_state::SB6_CS_SHADER) => 128,
                            (load_state::ST_SHADER, load_state::SB6_CS_TEX) => 16,
                            (load_state::ST_CONSTANTS, load_state::SB6_CS_SHADER) => 16,
                            _ => 64,
                        };
                        check("CP_LOAD_STATE6_FRAG", addr64(d[1], d[2]), unit_bytes * units as u64)?;
                    }
                    Opcode::RunOpenCl | Opcode::ExecCs => {
                        let launch = next.launch(context, offset, *opcode, d, mem).map_err(err)?;
                        steps.push(Step::Launch(Box::new(launch)));
                    }
                },
            }
        }
        *self = next;
        Ok(steps)
    }

    fn load_state(&mut self, opcode: Opcode, d: &[u32]) -> Result<(), String> {
        if opcode != Opcode::LoadState6Frag {
            return Err(format!("{opcode} is not used for compute state"));
        }
        let (dst, st, sb, units) = (d[0] & 0x3fff, (d[0] >> 14) & 3, (d[0] >> 18) & 0xf, d[0] >> 22);
        if dst != 0 {
            return Err(format!("CP_LOAD_STATE6_FRAG destination offset {dst} is not 0"));
        }
        let src = Some((addr64(d[1], d[2]), units));
        match (st, sb) {
            (load_state::ST_CONSTANTS, load_state::SB6_CS_SHADER) => self.consts = src,
            (load_state::ST_SHADER, load_state::SB6_CS_SHADER) => self.shader = src,
            (load_state::ST_SHADER, load_state::SB6_CS_TEX) => self.samplers = src,
            (load_state::ST_CONSTANTS, load_state::SB6_CS_TEX) => self.textures = src,
            (load_state::ST6_UAV, load_state::SB6_CS_SHADER) => self.ibos = src,
            _ => return Err(format!("CP_LOAD_STATE6_FRAG state type {st} / block {sb} is not compute state")),
        }
        Ok(())
    }

    fn need(&self, r: u32, name: &str) -> Result<u32, String> {
        self.reg(r).ok_or_else(|| format!("{name} ({r:#x}) was never written"))
    }

    fn launch(
        &self,
        context: u32,
        offset: usize,
        opcode: Opcode,
        d: &[u32],
        mem: &dyn Visible,
    ) -> Result<Dispatch, String> {
        let nd0 = self.need(reg::SP_CS_NDRANGE_0, "SP_CS_NDRANGE_0")?;
        if nd0 & 3 != 3 {
            return Err(format!("{opcode}: SP_CS_NDRANGE_0 KERNELDIM is {}, not 3", nd0 & 3));
        }
        let local = [((nd0 >> 2) & 0x3ff) + 1, ((nd0 >> 12) & 0x3ff) + 1, (nd0 >> 22) + 1];
        let mut global = [0; 3];
        let mut groups = [0; 3];
        for i in 0..3 {
            global[i] = self.need(reg::SP_CS_NDRANGE_0 + 1 + 2 * i as u32, "SP_CS_NDRANGE global size")?;
            groups[i] = self.need(reg::SP_CS_KERNEL_GROUP_X + i as u32, "SP_CS_KERNEL_GROUP")?;
        }
        let launch = if opcode == Opcode::ExecCs {
            groups = [d[1], d[2], d[3]];
            LaunchPacket::ExecCs
        } else {
            LaunchPacket::RunOpenCl
        };
        for i in 0..3 {
            if global[i] == 0 || global[i].div_ceil(local[i]) != groups[i] {
                return Err(format!(
                    "{opcode}: {} work items in groups of {} need {} work-groups, the launch has {}",
                    global[i],
                    local[i],
                    global[i].div_ceil(local[i]),
                    groups[i]
                ));
            }
        }
        let shader_addr = self
            .reg64(reg::SP_CS_BASE)
            .ok_or_else(|| format!("{opcode}: SP_CS_BASE ({:#x}) was never written", reg::SP_CS_BASE))?;
        let instr_units = self.need(reg::SP_CS_INSTR_SIZE, "SP_CS_INSTR_SIZE")?;
        match self.shader {
            Some((va, units)) if va == shader_addr && units == instr_units => {}
            _ => {
                return Err(format!("{opcode}: the shader loaded by CP_LOAD_STATE6 is not SP_CS_BASE/SP_CS_INSTR_SIZE"))
            }
        }
        if !mem.visible(shader_addr, instr_units as u64 * 128) {
            return Err(format!("{opcode}: shader {shader_addr:#x} is outside any GPU allocation"));
        }
        let (consts, const_units) = self.consts.ok_or_else(|| format!("{opcode}: no constants were loaded"))?;
        let config = self.need(reg::SP_CS_CONFIG, "SP_CS_CONFIG")?;
        let (ntex, nsamp, nuav) = ((config >> 9) & 0xff, (config >> 17) & 0x1f, (config >> 22) & 0x7f);
        for (name, n, loaded) in
            [("textures", ntex, self.textures), ("samplers", nsamp, self.samplers), ("IBOs", nuav, self.ibos)]
        {
            let have = loaded.map_or(0, |(_, u)| u);
            if n != 0 && have != n {
                return Err(format!("{opcode}: SP_CS_CONFIG declares {n} {name}, CP_LOAD_STATE6 loaded {have}"));
            }
        }
        let hw_stack_offset = self.reg(reg::SP_CS_PVT_MEM_STACK_OFFSET).unwrap_or(0);
        let stack = self.reg64(reg::SP_CS_PVT_MEM_BASE).unwrap_or(0);
        if stack != 0 && !mem.visible(stack, hw_stack_offset as u64 * 4) {
            return Err(format!(
                "{opcode}: private memory {stack:#x}+{:#x} is outside any GPU allocation",
                hw_stack_offset as u64 * 4
            ));
        }
        let border_color = self.reg64(reg::TPL1_CS_BORDER_COLOR_BASE).unwrap_or(0);
        if nsamp > 0 && !mem.visible(border_color, 16) {
            return Err(format!("{opcode}: border color {border_color:#x} is outside any GPU allocation"));
        }
        Ok(Dispatch {
            context,
            offset,
            launch,
            shader_addr,
            instr_units,
            prg_offset: self.reg(reg::SP_CS_PROGRAM_COUNTER_OFFSET).unwrap_or(0),
            sp_mode_cntl: self.reg(reg::SP_MODE_CNTL).unwrap_or(0),
            cs_cntl_0: self.reg(reg::SP_CS_CNTL_0).unwrap_or(0),
            cs_cntl_1: self.reg(reg::SP_CS_CNTL_1).unwrap_or(0),
            const_config_0: self.reg(reg::SP_CS_CONST_CONFIG_0).unwrap_or(0),
            groups,
            local,
            global,
            consts,
            const_units,
            stack,
            pvt_mem_param: self.reg(reg::SP_CS_PVT_MEM_PARAM).unwrap_or(0),
            hw_stack_offset,
            border_color,
            cs_config: config,
            texture_table: self.textures.map_or(0, |(va, _)| va),
            ibo_table: self.ibos.map_or(0, |(va, _)| va),
            sampler_table: self.samplers.map_or(0, |(va, _)| va),
            textures: Vec::new(),
            ibos: Vec::new(),
            samplers: Vec::new(),
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

/// Fills in the descriptors of a launch from memory and checks that every image lies in GPU memory.
fn resolve_descriptors(d: &mut Dispatch, mem: &dyn GpuMemory) -> Result<(), String> {
    let (ntex, nsamp, nuav) = d.counts();
    for (name, table, n, ibo) in [("texture", d.texture_table, ntex, false), ("IBO", d.ibo_table, nuav, true)] {
        let mut list = Vec::with_capacity(n as usize);
        for i in 0..n {
            let desc = read_words::<16>(mem, table + 64 * i as u64).map_err(|e| e.to_string())?;
            let (image, va, is_ibo) = parse_image_descriptor(&desc).map_err(|e| format!("{name} {i}: {e}"))?;
            if is_ibo != ibo {
                return Err(format!("{name} {i}: descriptor dword 0 {:#x} is the wrong kind", desc[0]));
            }
            mem.check(va, image.span()).map_err(|e| format!("{name} {i}: {e}"))?;
            list.push(desc);
        }
        if ibo {
            d.ibos = list;
        } else {
            d.textures = list;
        }
    }
    d.samplers = (0..nsamp)
        .map(|i| read_words::<4>(mem, d.sampler_table + 16 * i as u64))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Runs `steps` from `*pc` until they end or a wait is unsatisfied. Launches are appended to `log` and handed to
/// `executor`; `ticks` is the always-on counter.
pub(super) fn run(
    steps: &[Step],
    pc: &mut usize,
    mem: &mut dyn GpuMemory,
    executor: &mut dyn Executor,
    log: &mut Vec<Dispatch>,
    ticks: u64,
) -> Result<Progress, String> {
    while let Some(step) = steps.get(*pc) {
        match step {
            Step::Write32 { va, value } => mem.write(*va, &value.to_le_bytes()).map_err(|e| e.to_string())?,
            Step::Wait { offset, va, function, reference, mask } => {
                let v = read_words::<1>(mem, *va).map_err(|e| e.to_string())?[0];
                let ok = match *function {
                    wait_reg_mem::WRITE_GE => v & mask >= *reference,
                    _ => v & mask == *reference,
                };
                if !ok {
                    let op = if *function == wait_reg_mem::WRITE_GE { ">=" } else { "==" };
                    return Ok(Progress::Stalled(format!(
                        "CP_WAIT_REG_MEM at PM4 dword {offset} waits for [{va:#x}] {op} {reference}, it holds {v}"
                    )));
                }
            }
            Step::RegToMem { va, values, counter } => {
                let mut bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
                if *counter {
                    bytes = ticks.to_le_bytes().to_vec();
                }
                mem.write(*va, &bytes).map_err(|e| e.to_string())?;
            }
            Step::Launch(d) => {
                let mut d = (**d).clone();
                resolve_descriptors(&mut d, mem).map_err(|e| format!("launch at PM4 dword {}: {e}", d.offset))?;
                executor.dispatch(&d, mem).map_err(|e| format!("launch at PM4 dword {}: {e}", d.offset))?;
                log.push(d);
            }
        }
        *pc += 1;
    }
    Ok(Progress::Done)
}
