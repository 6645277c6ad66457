use super::*;
use crate::dispatch::{
    ArgsBlock, ArgsLayout, CmdStream, Exec, Image, ImageFormat, KernelInfo, Launch, ShaderKind, SAMPLER_CLAMP_NEAREST,
};
use crate::kgsl::{Context, GpuObject, KgslDevice, DEFAULT_PRIORITY};
use crate::reloc::{A6xx, Addr, FnResolve, Sym, ValueSym, Word};
use std::collections::HashMap;
use std::sync::Arc;

struct Rig {
    fake: Arc<FakeKgsl>,
    dev: KgslDevice,
    ctx: Context,
    objs: HashMap<Sym, GpuObject>,
    cmd: GpuObject,
}

const SYMS: [(Sym, u64); 9] = [
    (Sym::Args(0), 0x2000),
    (Sym::Args(1), 0x2000),
    (Sym::Program(0), 0x1000),
    (Sym::Backend(A6xx::Stack), 0x4000),
    (Sym::Backend(A6xx::Dummy), 0x1000),
    (Sym::Timeline, 0x1000),
    (Sym::Backend(A6xx::BorderColor), 0x1000),
    (Sym::Buffer(1), 0x1000),
    (Sym::Buffer(2), 64 * 512),
];

fn rig_with(fake: FakeKgsl) -> Rig {
    let fake = Arc::new(fake);
    let dev = KgslDevice::from_file(fake.clone()).unwrap();
    let ctx = dev.create_context(DEFAULT_PRIORITY).unwrap();
    let mut objs: HashMap<Sym, GpuObject> = SYMS.iter().map(|(s, size)| (*s, dev.alloc(*size).unwrap())).collect();
    // The shader: `nop`s (zeros) and an a6xx `end` (as ir3-disasm decodes it) at instruction 5.
    objs.get_mut(&Sym::Program(0)).unwrap().write_u32s(40, &[0, 0x0300_0000]).unwrap();
    let cmd = dev.alloc(0x10000).unwrap();
    Rig { fake, dev, ctx, objs, cmd }
}

fn rig() -> Rig {
    rig_with(FakeKgsl::new())
}

impl Rig {
    fn va(&self, s: Sym) -> u64 {
        self.objs[&s].va()
    }

    fn link(&self, s: &CmdStream, timeline: u64) -> Vec<u32> {
        let vas: HashMap<Sym, u64> = self.objs.iter().map(|(s, o)| (*s, o.va())).collect();
        s.buf().link(&FnResolve(|s| vas.get(&s).copied(), |_| Some(timeline))).unwrap()
    }

    fn submit(&mut self, words: &[u32]) -> crate::kgsl::Result<u32> {
        self.cmd.write_u32s(0, words).unwrap();
        // SAFETY: the stream lives in `cmd`, which outlives the submission, and only touches the rig's objects.
        unsafe { self.ctx.submit(self.cmd.va(), words.len()) }
    }

    fn timeline(&self) -> u32 {
        self.objs[&Sym::Timeline].read_u32(0).unwrap()
    }
}

fn exec(kind: ShaderKind, layout: ArgsLayout) -> Exec {
    Exec {
        kind,
        kernel: KernelInfo { image_size: 0x300, fregs: 3, hregs: 1, ..Default::default() },
        launch: Launch::from_global([100, 1, 1], [32, 1, 1]).unwrap(),
        layout,
        shader: Addr::base(Sym::Program(0)),
        args: Addr::base(Sym::Args(0)),
        stack: Addr::base(Sym::Backend(A6xx::Stack)),
        border_color: Addr::base(Sym::Backend(A6xx::BorderColor)),
        dummy: Addr::base(Sym::Backend(A6xx::Dummy)),
    }
}

/// One step as tinygrad submits it: wait for the previous value, barrier, timestamp, launch, signal.
fn step(e: &Exec) -> CmdStream {
    let timeline = Addr::base(Sym::Timeline);
    let dummy = Addr::base(Sym::Backend(A6xx::Dummy));
    let mut s = CmdStream::new();
    s.wait_ge(timeline, Word::Value(ValueSym::Timeline, -1));
    s.memory_barrier(dummy);
    s.timestamp(Addr::base(Sym::Buffer(1)));
    s.exec(e).unwrap();
    s.signal(timeline, Word::Value(ValueSym::Timeline, 0), dummy);
    s
}

#[test]
fn bring_up_records_context_power_and_frees_everything() {
    let r = rig();
    assert_eq!(r.dev.info().arch(), "a630");
    assert_eq!(r.fake.context_flags(r.ctx.id()), Some(0x04008A12));
    r.ctx.set_max_power().unwrap();
    assert_eq!(r.fake.power_level(), Some(1));
    assert_eq!(r.dev.alloc(10).unwrap().len(), 4096);
    let fake = r.fake.clone();
    assert_eq!(fake.live(), (SYMS.len() + 1, SYMS.len() + 1, 1));
    drop(r);
    assert_eq!(fake.live(), (0, 0, 0));
}

#[test]
fn other_chips_are_refused() {
    let fake = Arc::new(FakeKgsl::new().with_chip_id(0x0703_0001));
    let err = KgslDevice::from_file(fake).unwrap_err();
    assert_eq!(err.to_string(), "unsupported GPU: chip_id=0x07030001 (a730); only a630 is supported");
}

#[test]
fn a_step_runs_signals_and_reports_its_dispatch() {
    let mut r = rig();
    let e = exec(ShaderKind::QcomCl, ArgsLayout::new(ShaderKind::QcomCl, 0, 0, 0).unwrap());
    let words = r.link(&step(&e), 1);
    let ts = r.submit(&words).unwrap();
    assert_eq!(ts, 1);
    r.ctx.wait(ts, 1000).unwrap();
    assert_eq!(r.ctx.retired().unwrap(), 1);
    assert_eq!(r.timeline(), 1);
    let d = r.fake.take_dispatches();
    assert_eq!(d.len(), 1);
    let d = &d[0];
    assert_eq!(d.launch, LaunchPacket::RunOpenCl);
    assert_eq!((d.shader_addr, d.instr_units), (r.va(Sym::Program(0)), 6));
    assert_eq!((d.consts, d.const_units), (r.va(Sym::Args(0)), 256));
    assert_eq!((d.global, d.local, d.groups), ([100, 1, 1], [32, 1, 1], [4, 1, 1]));
    assert_eq!((d.stack, d.hw_stack_offset, d.sp_mode_cntl), (r.va(Sym::Backend(A6xx::Stack)), 4096, 2));
    assert!(d.textures.is_empty() && d.ibos.is_empty() && d.samplers.is_empty());

    let words = r.link(&step(&e), 2);
    let ts = r.submit(&words).unwrap();
    r.ctx.wait(ts, 1000).unwrap();
    assert_eq!(r.timeline(), 2);
    let mut ticks = [0u8; 8];
    r.objs[&Sym::Buffer(1)].read(8, &mut ticks).unwrap();
    assert!(u64::from_le_bytes(ticks) > 0);
}

#[test]
fn descriptors_are_read_at_execution() {
    let mut r = rig();
    let kind = ShaderKind::Ir3 { wgid: 0, wgsz: 0xfc, lid: 1 };
    let layout = ArgsLayout::new(kind, 1, 1, 1).unwrap();
    let img = Image { format: ImageFormat::Rgba16F, width: 64, height: 64, pitch: 512 };
    let mut args = ArgsBlock::new(layout);
    args.set_ptr(0, Addr::base(Sym::Buffer(1))).unwrap();
    args.set_texture(0, &img, Addr::base(Sym::Buffer(2))).unwrap();
    args.set_ibo(0, &img, Addr::base(Sym::Buffer(2))).unwrap();
    args.set_sampler(0, SAMPLER_CLAMP_NEAREST).unwrap();
    let vas: HashMap<Sym, u64> = r.objs.iter().map(|(s, o)| (*s, o.va())).collect();
    let linked = args.buf().link(&FnResolve(|s| vas.get(&s).copied(), |_| None)).unwrap();
    r.objs.get_mut(&Sym::Args(0)).unwrap().write_u32s(0, &linked).unwrap();

    let words = r.link(&step(&exec(kind, layout)), 1);
    let ts = r.submit(&words).unwrap();
    r.ctx.wait(ts, 1000).unwrap();
    let d = r.fake.take_dispatches().pop().unwrap();
    assert_eq!(d.launch, LaunchPacket::ExecCs);
    assert_eq!(d.const_config_0, 0x01fc_fc00);
    assert_eq!(d.textures, [img.descriptor(r.va(Sym::Buffer(2)), false).unwrap()]);
    assert_eq!(d.ibos, [img.descriptor(r.va(Sym::Buffer(2)), true).unwrap()]);
    assert_eq!(d.samplers, [SAMPLER_CLAMP_NEAREST]);
    assert_eq!(d.border_color, r.va(Sym::Backend(A6xx::BorderColor)));

    // An image that runs past its buffer faults the context at execution.
    let tall = Image { height: 65, ..img };
    let mut args = ArgsBlock::new(layout);
    args.set_texture(0, &tall, Addr::base(Sym::Buffer(2))).unwrap();
    args.set_ibo(0, &img, Addr::base(Sym::Buffer(2))).unwrap();
    let linked = args.buf().link(&FnResolve(|s| vas.get(&s).copied(), |_| None)).unwrap();
    r.objs.get_mut(&Sym::Args(0)).unwrap().write_u32s(0, &linked).unwrap();
    let words = r.link(&step(&exec(kind, layout)), 2);
    let err = r.submit(&words).unwrap_err().to_string();
    let packets = crate::pm4::decode_with_offsets(&words).unwrap();
    let is_exec =
        |p: &crate::pm4::Packet| matches!(p, crate::pm4::Packet::Op { opcode: crate::pm4::Opcode::ExecCs, .. });
    let launch_at = packets.iter().find(|(_, p)| is_exec(p)).unwrap().0;
    assert_eq!(
        err,
        format!(
            "IOCTL_KGSL_GPU_COMMAND failed: context 1 faulted: launch at PM4 dword {launch_at}: texture 0: GPU access \
             {:#x}+{:#x} is outside any GPU allocation",
            r.va(Sym::Buffer(2)),
            tall.span()
        )
    );
    assert!(r.ctx.wait(2, 0).unwrap_err().to_string().contains("context 1 faulted"));
}

#[test]
fn bad_streams_are_rejected_with_their_offset() {
    let mut r = rig();
    let e = exec(ShaderKind::QcomCl, ArgsLayout::new(ShaderKind::QcomCl, 0, 0, 0).unwrap());
    let good = r.link(&step(&e), 1);

    let mut flipped = good.clone();
    assert_eq!(flipped[7], 0x70460004);
    flipped[7] ^= 1 << 15;
    assert_eq!(
        r.submit(&flipped).unwrap_err().to_string(),
        "IOCTL_KGSL_GPU_COMMAND failed: command object 0: PM4 dword 7: type-7 header 0x70468004 has a bad parity bit"
    );

    let cut = &good[..good.len() - 2];
    let last = good.len() - 5;
    assert_eq!(
        r.submit(cut).unwrap_err().to_string(),
        format!(
            "IOCTL_KGSL_GPU_COMMAND failed: command object 0: PM4 dword {last}: header 0x70460004 announces 4 payload \
             dwords, only 2 remain"
        )
    );

    let mut outside = CmdStream::new();
    outside.signal(Addr::new(Sym::Timeline, 0x1000), Word::Imm(1), Addr::base(Sym::Backend(A6xx::Dummy)));
    let words = r.link(&outside, 1);
    let va = r.va(Sym::Timeline) + 0x1000;
    assert_eq!(
        r.submit(&words).unwrap_err().to_string(),
        format!(
            "IOCTL_KGSL_GPU_COMMAND failed: command object 0: PM4 dword 1: CP_EVENT_WRITE: {va:#x}+0x4 is outside any \
             GPU allocation"
        )
    );

    let mut no_shader = CmdStream::new();
    no_shader.pkt7(crate::pm4::Opcode::RunOpenCl, &[Word::Imm(0)]);
    assert_eq!(
        r.submit(&r.link(&no_shader, 1)).unwrap_err().to_string(),
        "IOCTL_KGSL_GPU_COMMAND failed: command object 0: PM4 dword 0: CP_RUN_OPENCL: CP_SET_MARKER has not entered \
         RM6_COMPUTE mode"
    );
    // Nothing was queued by the rejected submissions.
    assert_eq!(r.submit(&good).unwrap(), 1);
}

#[test]
fn waits_stall_until_memory_satisfies_them() {
    let mut r = rig();
    let kick = Addr::base(Sym::Buffer(1));
    let mut s = CmdStream::new();
    s.wait_ge(kick, Word::Imm(1));
    s.signal(Addr::base(Sym::Timeline), Word::Imm(7), Addr::base(Sym::Backend(A6xx::Dummy)));
    let ts = r.submit(&r.link(&s, 0)).unwrap();
    let err = r.ctx.wait(ts, 0).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID failed: timestamp 1 of context 1 cannot retire: CP_WAIT_REG_MEM at \
             PM4 dword 0 waits for [{:#x}] >= 1, it holds 0",
            r.va(Sym::Buffer(1))
        )
    );
    assert_eq!(r.ctx.retired().unwrap(), 0);
    assert_eq!(
        r.ctx.wait(5, 0).unwrap_err().to_string(),
        "IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID failed: timestamp 5 was never submitted on context 1 (last is 1)"
    );
    r.objs.get_mut(&Sym::Buffer(1)).unwrap().write_u32s(0, &[1]).unwrap();
    r.ctx.wait(ts, 0).unwrap();
    assert_eq!(r.timeline(), 7);
}

/// Writes the linked argument block `block` as `Sym::Args(n)`.
fn write_args(r: &mut Rig, n: u32, block: &ArgsBlock) {
    let vas: HashMap<Sym, u64> = r.objs.iter().map(|(s, o)| (*s, o.va())).collect();
    let linked = block.buf().link(&FnResolve(|s| vas.get(&s).copied(), |_| None)).unwrap();
    r.objs.get_mut(&Sym::Args(n)).unwrap().write_u32s(0, &linked).unwrap();
}

/// The dword offset of the first type-4 header writing `reg` in `words`.
fn reg_write_at(words: &[u32], reg: u32) -> usize {
    let packets = crate::pm4::decode_with_offsets(words).unwrap();
    packets.iter().find(|(_, p)| matches!(p, crate::pm4::Packet::Reg { reg: r, .. } if *r == reg)).unwrap().0
}

#[test]
fn writes_outside_the_register_table_are_refused() {
    let mut r = rig();
    let mut s = CmdStream::new();
    s.pkt4(0xa9be, &[Word::Imm(0)]);
    assert_eq!(
        r.submit(&r.link(&s, 1)).unwrap_err().to_string(),
        "IOCTL_KGSL_GPU_COMMAND failed: command object 0: PM4 dword 0: register 0xa9be is not in the fake's a6xx \
         compute register table"
    );
}

#[test]
fn launches_need_every_state_register_and_the_loaded_table_addresses() {
    let mut r = rig();
    let kind = ShaderKind::QcomCl;
    let layout = ArgsLayout::new(kind, 1, 1, 2).unwrap();
    let img = Image { format: ImageFormat::Rgba32F, width: 16, height: 16, pitch: 256 };
    let mut args = ArgsBlock::new(layout);
    args.set_texture(0, &img, Addr::base(Sym::Buffer(2))).unwrap();
    args.set_ibo(0, &img, Addr::base(Sym::Buffer(2))).unwrap();
    args.set_sampler(0, SAMPLER_CLAMP_NEAREST).unwrap();
    write_args(&mut r, 0, &args);
    let good = r.link(&step(&exec(kind, layout)), 1);

    // The texture table's base register pointing at the IBO table.
    let mut swapped = good.clone();
    let at = reg_write_at(&good, 0xa9e6);
    swapped[at + 1] = r.va(Sym::Args(0)) as u32 + layout.ibo_off;
    let e = r.submit(&swapped).unwrap_err().to_string();
    let tex = r.va(Sym::Args(0)) + layout.tex_off as u64;
    assert!(
        e.ends_with(&format!(
            "CP_RUN_OPENCL: SP_CS_TEXMEMOBJ_BASE is {:#x}, but CP_LOAD_STATE6 loaded the texture table from {tex:#x}",
            tex - 0x40
        )),
        "{e}"
    );

    // SP_CS_TSIZE never written: its write goes to TPL1_DBG_ECO_CNTL instead.
    let mut missing = good.clone();
    let at = reg_write_at(&good, 0xa9ba);
    missing[at] = crate::pm4::pkt4_hdr(0xb600, 1);
    let e = r.submit(&missing).unwrap_err().to_string();
    assert!(e.ends_with("CP_RUN_OPENCL: SP_CS_TSIZE (0xa9ba) was never written"), "{e}");
    assert_eq!(r.submit(&good).unwrap(), 1);
}

/// An ir3 launch (CP_EXEC_CS) whose local size sits at const component 16, on a fresh rig; the linked stream.
fn ir3_rig(local_size_written: bool, image_size: u32) -> (Rig, Vec<u32>) {
    let mut r = rig();
    let kind = ShaderKind::Ir3 { wgid: 0x10, wgsz: 16, lid: 0 };
    let layout = ArgsLayout::new(kind, 0, 0, 0).unwrap();
    let mut e = exec(kind, layout);
    e.kernel.image_size = image_size;
    let mut args = ArgsBlock::new(layout);
    if local_size_written {
        args.set_local_size(kind, e.launch.local).unwrap();
    }
    write_args(&mut r, 0, &args);
    let words = r.link(&step(&e), 1);
    (r, words)
}

#[test]
fn ir3_launches_are_decoded_for_the_executor() {
    let (mut r, words) = ir3_rig(true, 0x300);
    let ts = r.submit(&words).unwrap();
    r.ctx.wait(ts, 0).unwrap();
    let d = r.fake.take_dispatches().pop().unwrap();
    assert_eq!((d.launch, d.full_regs, d.half_regs, d.wave_size, d.branchstack), (LaunchPacket::ExecCs, 3, 1, 64, 0));
    assert_eq!((d.work_group_id_reg, d.local_size_const, d.local_id_reg), (Some(0x10), Some(16), Some(0)));
    assert_eq!((d.private_mem_bytes, d.shared_mem_bytes), (0, 2048));
    assert_eq!(d.const_file.len(), 1024);
    assert_eq!(d.const_file[16..19], [32, 1, 1]);
    assert_eq!(d.sp_mode_cntl, 5, "ISAMMODE GL with constant demotion");
}

#[test]
fn inconsistent_ir3_launches_are_refused() {
    let fault = |(mut r, words): (Rig, Vec<u32>)| r.submit(&words).unwrap_err().to_string();
    // The const file without the local size at WGSIZECONSTID.
    let e = fault(ir3_rig(false, 0x300));
    assert!(
        e.ends_with(
            "the constant file holds [0, 0, 0] at the local size's const component 16 (SP_CS_CONST_CONFIG_0 \
             WGSIZECONSTID), SP_CS_NDRANGE_0 launches [32, 1, 1]"
        ),
        "{e}"
    );
    // SP_CS_INSTR_SIZE of 1 unit: the `end` at instruction 5 is in, at instruction 20 it is not.
    let (mut r, words) = ir3_rig(true, 0x80);
    r.objs.get_mut(&Sym::Program(0)).unwrap().write_u32s(40, &[0, 0]).unwrap();
    r.objs.get_mut(&Sym::Program(0)).unwrap().write_u32s(160, &[0, 0x0300_0000]).unwrap();
    let e = fault((r, words));
    assert!(e.contains("no `end` instruction in the 128 bytes SP_CS_INSTR_SIZE (1) loads from SP_CS_BASE"), "{e}");

    let (mut r, good) = ir3_rig(true, 0x300);
    let patched = |reg: u32, value: u32| {
        let mut w = good.clone();
        let at = good.len() - 1 - good.iter().rev().position(|&x| x == crate::pm4::pkt4_hdr(reg, 1)).unwrap();
        w[at + 1] = value;
        w
    };
    // SP_MODE_CNTL without constant demotion (ISAMMODE GL alone).
    let e = r.submit(&patched(0xab00, 4)).unwrap_err().to_string();
    assert!(
        e.ends_with(
            "CP_EXEC_CS: A6XX_SP_MODE_CNTL_CONSTANT_DEMOTION_ENABLE is 0 in SP_MODE_CNTL = 0x4, the launch needs 1"
        ),
        "{e}"
    );
    // TPL1_MODE_CNTL in CL mode.
    let e = r.submit(&patched(0xb309, 1)).unwrap_err().to_string();
    assert!(
        e.ends_with("CP_EXEC_CS: A6XX_TPL1_MODE_CNTL_ISAMMODE is 1 in TPL1_MODE_CNTL = 0x1, the launch needs 2"),
        "{e}"
    );
    // SP_CS_CNTL_0 with THREAD128 while SP_CS_WGE_CNTL says THREAD64.
    let at = reg_write_at(&good, 0xa9b0);
    let mut w = good.clone();
    w[at + 1] |= 1 << 20;
    let e = r.submit(&w).unwrap_err().to_string();
    assert!(
        e.ends_with("CP_EXEC_CS: A6XX_SP_CS_WGE_CNTL_THREADSIZE is 0 in SP_CS_WGE_CNTL = 0xfc, the launch needs 1"),
        "{e}"
    );
    // A footprint of 63 full registers leaves room for 128 fibers per work-group, not for 256.
    let mut w = good.clone();
    w[at + 1] = (w[at + 1] & !(0x3f << 7)) | (63 << 7);
    let nd = reg_write_at(&good, 0xb990);
    w[nd + 1] = (w[nd + 1] & 0x3) | (255 << 2);
    let e = r.submit(&w).unwrap_err().to_string();
    assert!(
        e.ends_with(
            "CP_EXEC_CS: a work-group of 256 fibers needs more registers than the a630 has: SP_CS_CNTL_0's \
             footprint (63 full, 1 half vec4) allows 128"
        ),
        "{e}"
    );
    let ts = r.submit(&good).unwrap();
    r.ctx.wait(ts, 0).unwrap();
}

#[test]
fn dependent_dispatches_need_a_barrier_between_them() {
    let mut r = rig();
    let kind = ShaderKind::QcomCl;
    let img = Image { format: ImageFormat::Rgba32F, width: 16, height: 16, pitch: 256 };
    // Dispatch 0 writes the image as an IBO; dispatch 1 reads it as a texture.
    let (wl, rl) = (ArgsLayout::new(kind, 0, 1, 0).unwrap(), ArgsLayout::new(kind, 1, 0, 2).unwrap());
    let mut writer = ArgsBlock::new(wl);
    writer.set_ibo(0, &img, Addr::base(Sym::Buffer(2))).unwrap();
    let mut reader = ArgsBlock::new(rl);
    reader.set_texture(0, &img, Addr::base(Sym::Buffer(2))).unwrap();
    reader.set_sampler(0, SAMPLER_CLAMP_NEAREST).unwrap();
    write_args(&mut r, 0, &writer);
    write_args(&mut r, 1, &reader);
    let (e0, e1) = (exec(kind, wl), Exec { args: Addr::base(Sym::Args(1)), ..exec(kind, rl) });
    let two = |barrier: bool| {
        let dummy = Addr::base(Sym::Backend(A6xx::Dummy));
        let mut s = CmdStream::new();
        s.memory_barrier(dummy);
        s.exec(&e0).unwrap();
        if barrier {
            s.memory_barrier(dummy);
        }
        s.exec(&e1).unwrap();
        s.signal(Addr::base(Sym::Timeline), Word::Value(ValueSym::Timeline, 0), dummy);
        s
    };
    let ts = r.submit(&r.link(&two(true), 1)).unwrap();
    r.ctx.wait(ts, 0).unwrap();
    assert_eq!(r.fake.take_dispatches().len(), 2);

    let words = r.link(&two(false), 2);
    let launches: Vec<usize> = crate::pm4::decode_with_offsets(&words)
        .unwrap()
        .into_iter()
        .filter(|(_, p)| matches!(p, crate::pm4::Packet::Op { opcode: crate::pm4::Opcode::RunOpenCl, .. }))
        .map(|(o, _)| o)
        .collect();
    let e = r.submit(&words).unwrap_err().to_string();
    let (va, span) = (r.va(Sym::Buffer(2)), img.span());
    // The launch sequence's own CP_WAIT_FOR_IDLE orders the dispatches; only the invalidate is missing.
    assert_eq!(
        e,
        format!(
            "IOCTL_KGSL_GPU_COMMAND failed: context 1 faulted: dispatch (PM4 dword {} of submission 2) reads texture 0 \
             {va:#x}+{span:#x}, which dispatch (PM4 dword {} of submission 2) wrote (IBO 0 {va:#x}+{span:#x}), with no \
             CACHE_INVALIDATE between them",
            launches[1], launches[0]
        )
    );
}

/// Stores 42 through the first buffer pointer of the constant file.
struct StoreFortyTwo;

impl Executor for StoreFortyTwo {
    fn dispatch(&mut self, d: &Dispatch, mem: &mut dyn GpuMemory) -> Result<(), String> {
        let mut ptr = [0u8; 8];
        mem.read(d.consts, &mut ptr).map_err(|e| e.to_string())?;
        mem.write(u64::from_le_bytes(ptr), &42u32.to_le_bytes()).map_err(|e| e.to_string())
    }
}

#[test]
fn executors_see_dispatches_and_memory() {
    let mut r = rig_with(FakeKgsl::new().with_executor(Box::new(StoreFortyTwo)));
    let layout = ArgsLayout::new(ShaderKind::QcomCl, 0, 0, 0).unwrap();
    let out = r.va(Sym::Buffer(1)) + 16;
    r.objs.get_mut(&Sym::Args(0)).unwrap().write(0, &out.to_le_bytes()).unwrap();
    let ts = r.submit(&r.link(&step(&exec(ShaderKind::QcomCl, layout)), 1)).unwrap();
    r.ctx.wait(ts, 0).unwrap();
    assert_eq!(r.objs[&Sym::Buffer(1)].read_u32(16).unwrap(), 42);

    // A pointer outside GPU memory faults the context, and the fault sticks.
    r.objs.get_mut(&Sym::Args(0)).unwrap().write(0, &0x10u64.to_le_bytes()).unwrap();
    let err = r.submit(&r.link(&step(&exec(ShaderKind::QcomCl, layout)), 2)).unwrap_err().to_string();
    assert!(err.ends_with("GPU access 0x10+0x4 is outside any GPU allocation"), "{err}");
    assert!(r.submit(&r.link(&step(&exec(ShaderKind::QcomCl, layout)), 3)).is_err());
}

#[test]
fn user_memory_is_gpu_visible_until_freed() {
    let mut r = rig();
    let mut host = vec![0u32; 4096];
    // SAFETY: `host` outlives the mapping and is not borrowed while the fake writes it.
    let map = unsafe { r.dev.map_user(host.as_mut_ptr().cast::<u8>().add(64), 1024) }.unwrap();
    let mut s = CmdStream::new();
    s.signal(Addr::base(Sym::Buffer(9)), Word::Imm(5), Addr::base(Sym::Backend(A6xx::Dummy)));
    let vas: HashMap<Sym, u64> = r.objs.iter().map(|(s, o)| (*s, o.va())).chain([(Sym::Buffer(9), map.va())]).collect();
    let words = s.buf().link(&FnResolve(|s| vas.get(&s).copied(), |_| None)).unwrap();
    let ts = r.submit(&words).unwrap();
    r.ctx.wait(ts, 0).unwrap();
    assert_eq!(host[16], 5);
    drop(map);
    assert!(r.submit(&words).unwrap_err().to_string().contains("is outside any GPU allocation"));
}

#[test]
fn raw_ioctl_misuse_is_refused() {
    let fake = FakeKgsl::new();
    let f: &dyn KgslFile = &fake;
    let mut alloc = kgsl_gpuobj_alloc { size: 100, flags: crate::kgsl::ALLOC_FLAGS, ..Default::default() };
    // SAFETY: no metadata pointer.
    unsafe { crate::ioctl::gpuobj_alloc(f, &mut alloc) }.unwrap();
    assert_eq!((alloc.id, alloc.mmapsize), (1, 4096));
    let mut no_svm = kgsl_gpuobj_alloc { size: 100, ..Default::default() };
    // SAFETY: no metadata pointer.
    let err = unsafe { crate::ioctl::gpuobj_alloc(f, &mut no_svm) }.unwrap_err();
    assert_eq!(err.to_string(), "only USE_CPU_MAP allocations are supported");
    assert_eq!(
        f.mmap(8192, 0x1000).unwrap_err().to_string(),
        "mmap of GPU object 1: 8192 bytes, object has 4096 (mapped once)"
    );
    let ptr = f.mmap(4096, 0x1000).unwrap();
    let mut info = kgsl_gpuobj_info { id: 1, ..Default::default() };
    crate::ioctl::gpuobj_info(f, &mut info).unwrap();
    assert_eq!((info.gpuaddr, info.size), (ptr.as_ptr() as u64, 4096));
    let mut free = kgsl_gpuobj_free { id: 2, ..Default::default() };
    // SAFETY: immediate free, nothing in flight.
    assert_eq!(unsafe { crate::ioctl::gpuobj_free(f, &mut free) }.unwrap_err().to_string(), "no GPU object 2");
    let mut wait = kgsl_device_waittimestamp_ctxtid { context_id: 9, timestamp: 1, timeout: 0 };
    assert_eq!(crate::ioctl::wait_timestamp(f, &mut wait).unwrap_err().to_string(), "no context 9");
    let mut short = [0u8; 4];
    // SAFETY: rejected on size before anything is read.
    let err = unsafe { f.ioctl(IOCTL_KGSL_GPU_COMMAND, &mut short) }.unwrap_err();
    assert_eq!(err.to_string(), "argument of 4 bytes for request 0xc040094a");
    // SAFETY: the mapping made above, unused afterwards.
    unsafe { f.munmap(ptr, 4096) }.unwrap();
    assert_eq!(fake.live(), (1, 0, 0));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    #[test]
    fn the_fake_reconstructs_launch_dimensions(
        global in proptest::array::uniform3(1u32..5000),
        local in proptest::array::uniform3(1u32..8),
        ir3 in proptest::bool::ANY,
    ) {
        let mut r = rig();
        let kind = if ir3 { ShaderKind::Ir3 { wgid: 1, wgsz: 0xfc, lid: 0 } } else { ShaderKind::QcomCl };
        let mut e = exec(kind, ArgsLayout::new(kind, 0, 0, 0).unwrap());
        e.launch = Launch::from_global(global, local).unwrap();
        let ts = r.submit(&r.link(&step(&e), 1)).unwrap();
        r.ctx.wait(ts, 0).unwrap();
        let d = r.fake.take_dispatches().pop().unwrap();
        proptest::prop_assert_eq!((d.global, d.local, d.groups), (global, local, e.launch.groups));
        proptest::prop_assert_eq!(d.launch, if ir3 { LaunchPacket::ExecCs } else { LaunchPacket::RunOpenCl });
    }
}

#[test]
fn the_first_submission_is_captured_even_when_refused() {
    let capture = rd::RdCapture::new();
    let mut r = rig_with(FakeKgsl::new().with_rd_capture(capture.clone()));
    r.objs.get_mut(&Sym::Buffer(1)).unwrap().write_u32s(0, &[0xdead_beef]).unwrap();
    let refused = [crate::pm4::pkt7_hdr(0x7e, 1), 0];
    assert!(r.submit(&refused).is_err());
    let e = exec(ShaderKind::QcomCl, ArgsLayout::new(ShaderKind::QcomCl, 0, 0, 0).unwrap());
    let good = r.link(&step(&e), 1);
    r.submit(&good).unwrap();

    let file = capture.take().expect("a submission was made").unwrap();
    let words: Vec<u32> = file.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(words[..3], [rd::section::GPU_ID, 4, 630]);
    // The stream section is the last: the refused submission's two dwords at the command object.
    let n = words.len();
    let va = r.cmd.va();
    assert_eq!(words[n - 5..], [rd::section::CMDSTREAM_ADDR, 12, va as u32, 2, (va >> 32) as u32]);
    // Every GPU object is there with its contents, the buffer's first word included.
    let buf = r.va(Sym::Buffer(1));
    let at = words.windows(5).position(|w| w == [rd::section::GPUADDR, 12, buf as u32, 0x1000, (buf >> 32) as u32]);
    let at = at.expect("the buffer's RD_GPUADDR");
    assert_eq!(words[at + 5..at + 8], [rd::section::BUFFER_CONTENTS, 0x1000, 0xdead_beef]);
    let objects = words.windows(2).filter(|w| w == &[rd::section::GPUADDR, 12]).count();
    assert_eq!(objects, SYMS.len() + 1, "every object and the command buffer");
    assert!(capture.take().is_none(), "taken once");
}
