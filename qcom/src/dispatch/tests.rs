use super::*;
use crate::pm4::{decode_with_offsets, Packet};
use crate::reloc::{A6xx, FnResolve, Resolve, Sym, ValueSym};

const WORKED_EXAMPLE: &str = "
70bc8006 00000015 80400000 0000007f 00000005 ffffffff 00000020
70460004 00000004 80300000 0000007f 00000000  70460001 00000031  70928000  70268000
70e50001 00000008  40bb0801 00000060  40bb0801 00000000  40a9ba01 00000080  48aa0001 00000040
40ab0001 00000002  40ae0f01 00000020  40b30901 00000001  40b60001 00000000  70268000
40b9908c 0000007f 00000080 0 00000001 0 00000001 0 00ccc0cf 000000fc 00000004 00000001 00000001
40a9b08a 00000182 00000041 0 0 80100000 0000007f 0 80200000 0000007f 0
70348003 40364000 80001000 0000007f   70348003 01b60000 80100000 0000007f
48b98385 fcfcfcfc fcfcfcfc fcfcfcfc 000000fc 00000100   48a9bd01 00001000   40a9bc01 00000006
48a9bb01 00000100   70310001 00000000   70460004 00000004 80300000 0000007f 00000000
70268000  70460004 00000004 80400000 0000007f 00000006  70460004 00000004 80300000 0000007f 00000000";

fn resolver() -> impl Resolve<A6xx> {
    FnResolve(
        |s| match s {
            Sym::Args(0) => Some(0x7f_8000_1000),
            Sym::Program(0) => Some(0x7f_8010_0000),
            Sym::Backend(A6xx::Stack) => Some(0x7f_8020_0000),
            Sym::Backend(A6xx::Dummy) => Some(0x7f_8030_0000),
            Sym::Timeline => Some(0x7f_8040_0000),
            Sym::Backend(A6xx::BorderColor) => Some(0x7f_8050_0000),
            _ => None,
        },
        |ValueSym::Timeline| Some(6),
    )
}

fn example_exec(kind: ShaderKind, tex: u32, ibo: u32, samp: u32) -> Exec {
    Exec {
        kind,
        kernel: KernelInfo { image_size: 0x300, fregs: 3, hregs: 1, ..Default::default() },
        launch: Launch::from_groups([4, 1, 1], [32, 1, 1]).unwrap(),
        layout: ArgsLayout::new(kind, tex, ibo, samp).unwrap(),
        shader: Addr::base(Sym::Program(0)),
        args: Addr::base(Sym::Args(0)),
        stack: Addr::base(Sym::Backend(A6xx::Stack)),
        border_color: Addr::base(Sym::Backend(A6xx::BorderColor)),
        dummy: Addr::base(Sym::Backend(A6xx::Dummy)),
    }
}

#[test]
fn worked_example_matches_dword_for_dword() {
    let want: Vec<u32> = WORKED_EXAMPLE.split_whitespace().map(|w| u32::from_str_radix(w, 16).unwrap()).collect();
    assert_eq!(want.len(), 97);
    let timeline = Addr::base(Sym::Timeline);
    let dummy = Addr::base(Sym::Backend(A6xx::Dummy));
    let mut s = CmdStream::new();
    s.wait_ge(timeline, Word::Value(ValueSym::Timeline, -1));
    s.memory_barrier(dummy);
    s.exec(&example_exec(ShaderKind::QcomCl, 0, 0, 0)).unwrap();
    s.signal(timeline, Word::Value(ValueSym::Timeline, 0), dummy);
    let got = s.buf().link(&resolver()).unwrap();
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "dword {i}: got {g:#010x}, want {w:#010x}");
    }
    assert_eq!(got.len(), want.len());
    assert_eq!(decode_with_offsets(&got).unwrap().len(), 28);
}

#[test]
fn relink_patches_only_the_timeline() {
    let mut s = CmdStream::new();
    s.wait_ge(Addr::base(Sym::Timeline), Word::Value(ValueSym::Timeline, -1));
    let mut linked = s.buf().link(&resolver()).unwrap();
    assert_eq!(linked[4], 5);
    let later = FnResolve(|s| resolver().addr(s), |_| Some(41));
    s.buf().patch(&mut linked, &later).unwrap();
    assert_eq!(linked[4], 40);
}

#[test]
fn timestamp_reads_the_always_on_counter() {
    let mut s = CmdStream::new();
    s.timestamp(Addr::base(Sym::Timeline));
    let got = s.buf().link(&resolver()).unwrap();
    assert_eq!(got, [0x70268000, 0x703e8003, 0x40080980, 0x8040_0008, 0x7f]);
}

fn packets(e: &Exec) -> Vec<Packet> {
    let mut s = CmdStream::new();
    s.exec(e).unwrap();
    decode_with_offsets(&s.buf().link(&resolver()).unwrap()).unwrap().into_iter().map(|(_, p)| p).collect()
}

fn op(opcode: Opcode, payload: &[u32]) -> Packet {
    Packet::Op { opcode, payload: payload.to_vec() }
}

fn regw(reg: u32, values: &[u32]) -> Packet {
    Packet::Reg { reg, values: values.to_vec() }
}

#[test]
fn samplers_textures_and_ibos_are_loaded_in_order() {
    let e = example_exec(ShaderKind::QcomCl, 1, 2, 2);
    let p = packets(&e);
    let l = e.layout;
    assert_eq!((l.ibo_off, l.tex_off, l.samp_off, l.size), (2048, 2048 + 128, 2048 + 192, 2304));
    let args = 0x7f_8000_1000u64;
    let lo = |off: u32| (args + off as u64) as u32;
    let i = p.iter().position(|x| *x == regw(reg::SP_CS_INSTR_SIZE, &[6])).unwrap();
    assert_eq!(
        p[i + 1..i + 9],
        [
            op(Opcode::LoadState6Frag, &[0x0096_0000, lo(l.samp_off), 0x7f]),
            regw(reg::SP_CS_SAMPLER_BASE, &[lo(l.samp_off), 0x7f]),
            regw(reg::TPL1_CS_BORDER_COLOR_BASE, &[0x8050_0000, 0x7f]),
            op(Opcode::LoadState6Frag, &[0x0056_4000, lo(l.tex_off), 0x7f]),
            regw(reg::SP_CS_TEXMEMOBJ_BASE, &[lo(l.tex_off), 0x7f]),
            op(Opcode::LoadState6Frag, &[0x00b6_c000, lo(l.ibo_off), 0x7f]),
            regw(reg::SP_CS_UAV_BASE, &[lo(l.ibo_off), 0x7f]),
            regw(reg::SP_CS_CONFIG, &[0x100 | 1 << 9 | 2 << 17 | 2 << 22]),
        ]
    );
}

#[test]
fn ir3_launches_with_exec_cs() {
    let kind = ShaderKind::Ir3 { wgid: 0x3, wgsz: 0x10, lid: 0 };
    let p = packets(&example_exec(kind, 0, 0, 0));
    assert!(p.contains(&regw(reg::SP_MODE_CNTL, &[0x5])));
    assert!(p.contains(&regw(reg::TPL1_MODE_CNTL, &[0x2])));
    let n = p.len();
    assert_eq!(p[n - 3], regw(reg::SP_CS_CONST_CONFIG_0, &[0x00fc_1003, 0xfc]));
    assert_eq!(p[n - 2], op(Opcode::ExecCs, &[0, 4, 1, 1]));
    assert_eq!(p[n - 1], op(Opcode::EventWrite, &[4, 0x8030_0000, 0x7f, 0]));
    let l = ArgsLayout::new(kind, 2, 1, 2).unwrap();
    assert_eq!((l.tex_off, l.ibo_off, l.samp_off), (2048, 2048 + 128, 2048 + 192));
}

#[test]
fn kernel_derived_values() {
    let k = KernelInfo { image_size: 0x301, pvtmem: 600, shmem: 0, fregs: 3, hregs: 1, ..Default::default() };
    assert_eq!(k.instr_units(), 7);
    assert_eq!(k.pvtmem_per_item(), 2);
    assert_eq!(k.pvtmem_size_total(), 512);
    assert_eq!(k.hw_stack_offset(), 1024 * 128 * 16);
    assert_eq!(KernelInfo::default().hw_stack_offset(), 4096);
    assert_eq!(k.shared_size(), 1);
    assert_eq!(KernelInfo { shmem: 4096, ..k }.shared_size(), 3);
    assert_eq!(k.max_threads(), 1024);
    assert_eq!(KernelInfo { fregs: 40, hregs: 3, ..k }.max_threads(), 256);
    assert_eq!(KernelInfo { fregs: 63, hregs: 3, ..k }.max_threads(), 128);
    let big = KernelInfo { fregs: 64, ..k };
    assert_eq!(big.validate().unwrap_err().to_string(), "dispatch: fregs 64 does not fit its field (max 63)");
}

#[test]
fn launch_validation() {
    let l = Launch::from_global([100, 1, 1], [32, 1, 1]).unwrap();
    assert_eq!((l.groups, l.global), ([4, 1, 1], [100, 1, 1]));
    assert_eq!(l.ndrange_0(), 0x7f);
    assert_eq!(
        Launch::from_groups([1, 1, 1], [2048, 1, 1]).unwrap_err().to_string(),
        "dispatch: local size [2048, 1, 1] must be within 1..=1024 per axis"
    );
    assert!(Launch::from_global([0, 1, 1], [1, 1, 1]).is_err());
    let mut e = example_exec(ShaderKind::QcomCl, 0, 0, 0);
    e.kernel.fregs = 63;
    e.launch = Launch::from_groups([1, 1, 1], [256, 1, 1]).unwrap();
    let err = CmdStream::new().exec(&e).unwrap_err().to_string();
    assert_eq!(err, "dispatch: too many resources requested for launch: 256 threads per group, the kernel allows 128");
}

#[test]
fn descriptors_match_the_fact_sheet() {
    let f = Image { format: ImageFormat::Rgba32F, width: 64, height: 16, pitch: 1024 };
    let d = f.descriptor(0x7f_8000_1000, false).unwrap();
    assert_eq!(d[0], 0x20806888);
    assert_eq!(d[1], 0x00080040);
    assert_eq!(d[2], 0x20020004);
    assert_eq!(&d[3..8], &[0, 0x8000_1000, 0x7f, 0x4000_0000, 13]);
    assert!(d[8..].iter().all(|w| *w == 0));
    assert_eq!(f.descriptor(0, true).unwrap()[0], 0x20800000);
    let h = Image { format: ImageFormat::Rgba16F, width: 64, height: 16, pitch: 512 };
    let d = h.descriptor(0, false).unwrap();
    assert_eq!((d[0], d[2]), (0x18806888, 0x20010003));
    assert_eq!(h.descriptor(0, true).unwrap()[0], 0x18800000);
    let d = h.descriptor(0x7f_8000_1000, true).unwrap();
    assert_eq!(parse_image_descriptor(&d).unwrap(), (h, 0x7f_8000_1000, true));
    let d = f.descriptor(0x1000, false).unwrap();
    assert_eq!(parse_image_descriptor(&d).unwrap(), (f, 0x1000, false));
    let bad = Image { pitch: 500, ..h };
    assert_eq!(
        bad.validate().unwrap_err().to_string(),
        "dispatch: image pitch 500 invalid for a row of 512 bytes (multiple of 64 needed)"
    );
}

#[test]
fn args_block_places_descriptors_with_relocations() {
    let layout = ArgsLayout::new(ShaderKind::QcomCl, 1, 1, 2).unwrap();
    let mut a = ArgsBlock::new(layout);
    let img = Image { format: ImageFormat::Rgba16F, width: 64, height: 16, pitch: 512 };
    a.set_ptr(0, Addr::new(Sym::Buffer(1), 0x40)).unwrap();
    a.set_u32(8, 77).unwrap();
    a.set_ibo(0, &img, Addr::base(Sym::Buffer(2))).unwrap();
    a.set_texture(0, &img, Addr::base(Sym::Buffer(3))).unwrap();
    a.set_sampler(0, SAMPLER_CLAMP_NEAREST).unwrap();
    assert!(a.set_texture(1, &img, Addr::base(Sym::Buffer(3))).is_err());
    assert!(a.set_u32(2048, 1).is_err());
    let r = FnResolve(|s| if let Sym::Buffer(i) = s { Some(0x1_0000_0000 * i as u64) } else { None }, |_| None);
    let w = a.buf().link(&r).unwrap();
    assert_eq!(w.len(), layout.size as usize / 4);
    assert_eq!(&w[0..3], &[0x40, 1, 77]);
    let ibo = 2048 / 4;
    assert_eq!(&w[ibo..ibo + 8], &[0x18800000, 0x00080040, 0x20010003, 0, 0, 2, 0x4000_0000, 13]);
    let tex = ibo + 16;
    assert_eq!(&w[tex..tex + 6], &[0x18806888, 0x00080040, 0x20010003, 0, 0, 3]);
    let samp = tex + 16;
    assert_eq!(&w[samp..samp + 8], &[0x1b60, 0x30, 0, 0, 0, 0, 0, 0]);
    assert_eq!(layout.footprint(), 4096);
}

#[test]
fn generated_packers_match_mesa_and_invert() {
    use crate::a6xx::{IsamMode, ThreadSize, SP_CS_CNTL_0, SP_CS_CONFIG, SP_MODE_CNTL};
    // The worked example's SP_CS_CNTL_0 (hregs 1, fregs 3) and Mesa's masks (A6XX_SP_CS_CNTL_0_*__MASK).
    let c = SP_CS_CNTL_0::new().with_halfregfootprint(1).with_fullregfootprint(3);
    assert_eq!(c.bits(), 0x182);
    assert_eq!((c.halfregfootprint(), c.fullregfootprint(), c.threadsize()), (1, 3, Some(ThreadSize::THREAD64)));
    assert_eq!(SP_CS_CNTL_0(u32::MAX).with_branchstack(0).bits(), !0x000f_c000);
    assert_eq!(SP_CS_CNTL_0::new().with_mergedregs(true).bits(), 0x8000_0000);
    assert_eq!(SP_CS_CNTL_0::OFFSET, 0xa9b0);
    let cfg = SP_CS_CONFIG(0x100 | 1 << 9 | 2 << 17 | 2 << 22);
    assert_eq!((cfg.enabled(), cfg.ntex(), cfg.nsamp(), cfg.nuav()), (true, 1, 2, 2));
    assert_eq!((SP_CS_CONFIG::NTEX_MAX, SP_CS_CONFIG::NSAMP_MAX, SP_CS_CONFIG::NUAV_MAX), (0xff, 0x1f, 0x7f));
    assert_eq!(SP_MODE_CNTL(0x5).isammode(), Some(IsamMode::GL));
    assert_eq!(SP_MODE_CNTL(0x6).isammode(), None);
    assert_eq!(crate::a6xx::offset::SP_CS_NDRANGE_0, crate::pm4::reg::SP_CS_NDRANGE_0);
}

#[cfg(debug_assertions)]
#[test]
#[should_panic(expected = "SP_CS_CNTL_0.HALFREGFOOTPRINT out of range")]
fn generated_packers_reject_wide_values_in_debug_builds() {
    let _ = crate::a6xx::SP_CS_CNTL_0::new().with_halfregfootprint(0x40);
}
