//! Golden QCOM streams: a step of two dependent dispatches with textures, an image (IBO), samplers and buffers,
//! encoded by pilot (`CmdStream`, `ArgsBlock`) and compared dword for dword with streams written out here by hand.
//!
//! The expected dwords are tinygrad 0.14.0's `QCOMComputeQueue.memory_barrier` / `exec` / `signal` and
//! `QCOMArgsState._tex` for the same launch (headers from `ops_qcom.pkt4_hdr`/`pkt7_hdr`, values from Mesa's
//! constants in `runtime/autogen/mesa.py`), not pilot's output: a change in pilot's encoding must change this file on
//! purpose. Addresses are fixed: argument blocks at 0x7f80001000 / 0x7f80002000, shaders at 0x7f80100000 (0x300 bytes)
//! / 0x7f80110000 (0x180 bytes), stack 0x7f80200000, dummy page 0x7f80300000, timeline 0x7f80400000, border colors
//! 0x7f80500000, images at 0x7f80600000 (k0's IBO, k1's texture) and 0x7f80700000, buffers at 0x7f80800000 and
//! 0x7f80900000.

use pilot_qcom::dispatch::{
    ArgsBlock, ArgsLayout, CmdStream, Exec, Image, ImageFormat, KernelInfo, Launch, ShaderKind, SAMPLER_CLAMP_NEAREST,
};
use pilot_qcom::reloc::{A6xx, Addr, FnResolve, Sym, ValueSym, Word};

fn va(sym: Sym) -> Option<u64> {
    Some(match sym {
        Sym::Args(0) => 0x7f_8000_1000,
        Sym::Args(1) => 0x7f_8000_2000,
        Sym::Program(0) => 0x7f_8010_0000,
        Sym::Program(1) => 0x7f_8011_0000,
        Sym::Backend(A6xx::Stack) => 0x7f_8020_0000,
        Sym::Backend(A6xx::Dummy) => 0x7f_8030_0000,
        Sym::Timeline => 0x7f_8040_0000,
        Sym::Backend(A6xx::BorderColor) => 0x7f_8050_0000,
        Sym::Buffer(0) => 0x7f_8060_0000,
        Sym::Buffer(1) => 0x7f_8070_0000,
        Sym::Buffer(2) => 0x7f_8080_0000,
        Sym::Buffer(3) => 0x7f_8090_0000,
        _ => return None,
    })
}

const OUT: Image = Image { format: ImageFormat::Rgba32F, width: 16, height: 4, pitch: 256 };
const IN: Image = Image { format: ImageFormat::Rgba16F, width: 16, height: 4, pitch: 128 };

/// k0 reads texture `IN` and buffer 2 and writes IBO `OUT`; k1 reads `OUT` as a texture and writes buffer 3 + 512.
fn step() -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let kind = ShaderKind::QcomCl;
    let (l0, l1) = (ArgsLayout::new(kind, 1, 1, 2).unwrap(), ArgsLayout::new(kind, 1, 0, 2).unwrap());
    let mut a0 = ArgsBlock::new(l0);
    a0.set_ptr(0, Addr::base(Sym::Buffer(2))).unwrap();
    a0.set_ibo(0, &OUT, Addr::base(Sym::Buffer(0))).unwrap();
    a0.set_texture(0, &IN, Addr::base(Sym::Buffer(1))).unwrap();
    a0.set_sampler(0, SAMPLER_CLAMP_NEAREST).unwrap();
    let mut a1 = ArgsBlock::new(l1);
    a1.set_ptr(8, Addr::new(Sym::Buffer(3), 512)).unwrap();
    a1.set_texture(0, &OUT, Addr::base(Sym::Buffer(0))).unwrap();
    a1.set_sampler(0, SAMPLER_CLAMP_NEAREST).unwrap();
    let exec = |n: u32, kernel: KernelInfo, launch: Launch, layout: ArgsLayout| Exec {
        kind,
        kernel,
        launch,
        layout,
        shader: Addr::base(Sym::Program(n)),
        args: Addr::base(Sym::Args(n)),
        stack: Addr::base(Sym::Backend(A6xx::Stack)),
        border_color: Addr::base(Sym::Backend(A6xx::BorderColor)),
        dummy: Addr::base(Sym::Backend(A6xx::Dummy)),
    };
    let k0 = KernelInfo { image_size: 0x300, fregs: 3, hregs: 1, ..Default::default() };
    let k1 = KernelInfo { image_size: 0x180, fregs: 2, ..Default::default() };
    let e0 = exec(0, k0, Launch::from_global([16, 4, 1], [16, 1, 1]).unwrap(), l0);
    let e1 = exec(1, k1, Launch::from_global([100, 1, 1], [32, 1, 1]).unwrap(), l1);
    // As `QcomDevice::link_step` encodes a step: a barrier before each dispatch, then the timeline signal.
    let dummy = Addr::base(Sym::Backend(A6xx::Dummy));
    let mut s = CmdStream::new();
    for e in [&e0, &e1] {
        s.memory_barrier(dummy);
        s.exec(e).unwrap();
    }
    s.signal(Addr::base(Sym::Timeline), Word::Value(ValueSym::Timeline, 0), dummy);
    let resolve = FnResolve(va, |_| Some(7));
    (s.buf().link(&resolve).unwrap(), a0.buf().link(&resolve).unwrap(), a1.buf().link(&resolve).unwrap())
}

#[rustfmt::skip]
const STREAM: [u32; 210] = [
0x70460004, 0x00000004, 0x80300000, 0x0000007f, 0x00000000, // memory barrier: CACHE_FLUSH_TS to the dummy page
    0x70460001, 0x00000031, // CACHE_INVALIDATE
    0x70928000, // CP_WAIT_MEM_WRITES
    0x70268000, // CP_WAIT_FOR_IDLE
    0x70e50001, 0x00000008, // k0 (texture -> IBO): CP_SET_MARKER RM6_COMPUTE
    0x40bb0801, 0x00000060, // SP_UPDATE_CNTL = CS_STATE | CS_UAV
    0x40bb0801, 0x00000000, // SP_UPDATE_CNTL = 0
    0x40a9ba01, 0x00000080, // SP_CS_TSIZE
    0x48aa0001, 0x00000040, // SP_CS_USIZE
    0x40ab0001, 0x00000002, // SP_MODE_CNTL ISAMMODE_CL
    0x40ae0f01, 0x00000020, // SP_PERFCTR_SHADER_MASK CS
    0x40b30901, 0x00000001, // TPL1_MODE_CNTL ISAMMODE_CL
    0x40b60001, 0x00000000, // TPL1_DBG_ECO_CNTL
    0x70268000, // CP_WAIT_FOR_IDLE
    0x40b9908c, 0x0000003f, 0x00000010, 0x00000000, 0x00000004, 0x00000000, 0x00000001, 0x00000000, 0x00ccc0cf, 0x000000fc, 0x00000001, 0x00000004, 0x00000001, // SP_CS_NDRANGE_0..6 (local [16, 1, 1], global [16, 4, 1]), CONST_CONFIG_0, WGE_CNTL, KERNEL_GROUP [1, 4, 1]
    0x40a9b08a, 0x00000182, 0x00000041, 0x00000000, 0x00000000, 0x80100000, 0x0000007f, 0x00000000, 0x80200000, 0x0000007f, 0x00000000, // SP_CS_CNTL_0, CNTL_1, BOOLEAN_CF_MASK, PROGRAM_COUNTER_OFFSET, BASE, PVT_MEM_PARAM, PVT_MEM_BASE, PVT_MEM_SIZE
    0x70348003, 0x40364000, 0x80001000, 0x0000007f, // CP_LOAD_STATE6_FRAG constants (256 vec4)
    0x70348003, 0x01b60000, 0x80100000, 0x0000007f, // CP_LOAD_STATE6_FRAG shader (6 units)
    0x48b98385, 0xfcfcfcfc, 0xfcfcfcfc, 0xfcfcfcfc, 0x000000fc, 0x00000100, // SP_REG_PROG_ID_0..3, SP_CS_CONST_CONFIG
    0x48a9bd01, 0x00001000, // SP_CS_PVT_MEM_STACK_OFFSET
    0x40a9bc01, 0x00000006, // SP_CS_INSTR_SIZE
    0x70348003, 0x00960000, 0x80001880, 0x0000007f, // CP_LOAD_STATE6_FRAG samplers (2)
    0x48a9e202, 0x80001880, 0x0000007f, // SP_CS_SAMPLER_BASE
    0x40b18002, 0x80500000, 0x0000007f, // TPL1_CS_BORDER_COLOR_BASE
    0x70348003, 0x00564000, 0x80001840, 0x0000007f, // CP_LOAD_STATE6_FRAG textures (1)
    0x40a9e602, 0x80001840, 0x0000007f, // SP_CS_TEXMEMOBJ_BASE
    0x70348003, 0x0076c000, 0x80001800, 0x0000007f, // CP_LOAD_STATE6_FRAG IBOs (1)
    0x40a9f202, 0x80001800, 0x0000007f, // SP_CS_UAV_BASE
    0x48a9bb01, 0x00440300, // SP_CS_CONFIG
    0x70310001, 0x00000000, // CP_RUN_OPENCL
    0x70460004, 0x00000004, 0x80300000, 0x0000007f, 0x00000000, // write-back: CACHE_FLUSH_TS to the dummy page
    0x70460004, 0x00000004, 0x80300000, 0x0000007f, 0x00000000, // memory barrier: CACHE_FLUSH_TS to the dummy page
    0x70460001, 0x00000031, // CACHE_INVALIDATE
    0x70928000, // CP_WAIT_MEM_WRITES
    0x70268000, // CP_WAIT_FOR_IDLE
    0x70e50001, 0x00000008, // k1 (the IBO as a texture -> buffer): CP_SET_MARKER RM6_COMPUTE
    0x40bb0801, 0x00000060, // SP_UPDATE_CNTL = CS_STATE | CS_UAV
    0x40bb0801, 0x00000000, // SP_UPDATE_CNTL = 0
    0x40a9ba01, 0x00000080, // SP_CS_TSIZE
    0x48aa0001, 0x00000040, // SP_CS_USIZE
    0x40ab0001, 0x00000002, // SP_MODE_CNTL ISAMMODE_CL
    0x40ae0f01, 0x00000020, // SP_PERFCTR_SHADER_MASK CS
    0x40b30901, 0x00000001, // TPL1_MODE_CNTL ISAMMODE_CL
    0x40b60001, 0x00000000, // TPL1_DBG_ECO_CNTL
    0x70268000, // CP_WAIT_FOR_IDLE
    0x40b9908c, 0x0000007f, 0x00000064, 0x00000000, 0x00000001, 0x00000000, 0x00000001, 0x00000000, 0x00ccc0cf, 0x000000fc, 0x00000004, 0x00000001, 0x00000001, // SP_CS_NDRANGE_0..6 (local [32, 1, 1], global [100, 1, 1]), CONST_CONFIG_0, WGE_CNTL, KERNEL_GROUP [4, 1, 1]
    0x40a9b08a, 0x00000100, 0x00000041, 0x00000000, 0x00000000, 0x80110000, 0x0000007f, 0x00000000, 0x80200000, 0x0000007f, 0x00000000, // SP_CS_CNTL_0, CNTL_1, BOOLEAN_CF_MASK, PROGRAM_COUNTER_OFFSET, BASE, PVT_MEM_PARAM, PVT_MEM_BASE, PVT_MEM_SIZE
    0x70348003, 0x40364000, 0x80002000, 0x0000007f, // CP_LOAD_STATE6_FRAG constants (256 vec4)
    0x70348003, 0x00f60000, 0x80110000, 0x0000007f, // CP_LOAD_STATE6_FRAG shader (3 units)
    0x48b98385, 0xfcfcfcfc, 0xfcfcfcfc, 0xfcfcfcfc, 0x000000fc, 0x00000100, // SP_REG_PROG_ID_0..3, SP_CS_CONST_CONFIG
    0x48a9bd01, 0x00001000, // SP_CS_PVT_MEM_STACK_OFFSET
    0x40a9bc01, 0x00000003, // SP_CS_INSTR_SIZE
    0x70348003, 0x00960000, 0x80002840, 0x0000007f, // CP_LOAD_STATE6_FRAG samplers (2)
    0x48a9e202, 0x80002840, 0x0000007f, // SP_CS_SAMPLER_BASE
    0x40b18002, 0x80500000, 0x0000007f, // TPL1_CS_BORDER_COLOR_BASE
    0x70348003, 0x00564000, 0x80002800, 0x0000007f, // CP_LOAD_STATE6_FRAG textures (1)
    0x40a9e602, 0x80002800, 0x0000007f, // SP_CS_TEXMEMOBJ_BASE
    0x48a9bb01, 0x00040300, // SP_CS_CONFIG
    0x70310001, 0x00000000, // CP_RUN_OPENCL
    0x70460004, 0x00000004, 0x80300000, 0x0000007f, 0x00000000, // write-back: CACHE_FLUSH_TS to the dummy page
    0x70268000, // signal: CP_WAIT_FOR_IDLE
    0x70460004, 0x00000004, 0x80400000, 0x0000007f, 0x00000007, // CACHE_FLUSH_TS writes timeline value 7
    0x70460004, 0x00000004, 0x80300000, 0x0000007f, 0x00000000, // CACHE_FLUSH_TS to the dummy page
];

/// The nonzero dwords of the argument blocks: (dword index, value).
#[rustfmt::skip]
const ARGS_0: &[(usize, u32)] = &[
    (0, 0x80800000), (1, 0x0000007f), // buffer argument at constant-file word 0
    (512, 0x20800000), (513, 0x00020010), (514, 0x20008002), (516, 0x80600000), (517, 0x0000007f), (518, 0x40000000), (519, 0x0000000d), // IBO 0: 16x4 RGBA32F, pitch 256
    (528, 0x18806888), (529, 0x00020010), (530, 0x20004001), (532, 0x80700000), (533, 0x0000007f), (534, 0x40000000), (535, 0x0000000d), // texture 0: 16x4 RGBA16F, pitch 128
    (544, 0x00001b60), (545, 0x00000030), // sampler 0 (clamp to border, nearest, unnormalized) and tinygrad's zero sampler 1
];

#[rustfmt::skip]
const ARGS_1: &[(usize, u32)] = &[
    (2, 0x80900200), (3, 0x0000007f), // buffer argument at constant-file word 2, 512 bytes in
    (512, 0x20806888), (513, 0x00020010), (514, 0x20008002), (516, 0x80600000), (517, 0x0000007f), (518, 0x40000000), (519, 0x0000000d), // texture 0: k0's IBO, 16x4 RGBA32F
    (528, 0x00001b60), (529, 0x00000030), // samplers
];

fn check_block(got: &[u32], want: &[(usize, u32)], name: &str) {
    assert_eq!(got.len(), 0x900 / 4, "{name}: block size");
    for (i, w) in got.iter().enumerate() {
        let expected = want.iter().find(|(at, _)| *at == i).map_or(0, |(_, v)| *v);
        assert_eq!(*w, expected, "{name} dword {i}: pilot {w:#010x}, golden {expected:#010x}");
    }
}

#[test]
fn a_two_dispatch_image_step_matches_the_golden_stream() {
    let (stream, args0, args1) = step();
    for (i, (got, want)) in stream.iter().zip(STREAM.iter()).enumerate() {
        assert_eq!(got, want, "stream dword {i}: pilot {got:#010x}, golden {want:#010x}");
    }
    assert_eq!(stream.len(), STREAM.len(), "stream length");
    check_block(&args0, ARGS_0, "argument block 0");
    check_block(&args1, ARGS_1, "argument block 1");
}
