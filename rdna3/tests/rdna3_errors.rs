//! The emulator refuses what it cannot run faithfully, with errors that name the kernel, the
//! instruction and the fault; and it honours what the descriptor and the dispatch registers say.

mod rdna3_support;

use pilot_rdna3::{dispatch, tables, CodeObjectKernel, Dispatch, EmuError, KernelDescriptor};
use rdna3_support::{f32_bytes, kernargs, Arg, Device, BASE};

fn elementwise() -> Option<Vec<u8>> {
    rdna3_support::build("elementwise", rdna3_support::ELEMENTWISE)
}

fn run(co: &[u8], name: &str, dev: &mut Device, args: &[Arg], tweak: impl Fn(&mut Dispatch)) -> Result<(), EmuError> {
    let kernel = CodeObjectKernel::load(co, name)?;
    let kernarg = dev.alloc(&kernargs(args));
    let mut d = Dispatch::for_kernel(&kernel, [1, 1, 1], [64, 1, 1], kernarg)?;
    tweak(&mut d);
    dispatch(&kernel, &d, &mut dev.mem).map(|_| ())
}

#[test]
fn out_of_bounds_store_names_kernel_and_instruction() {
    let Some(co) = elementwise() else { return };
    let mut dev = Device::new();
    let a = dev.alloc(&f32_bytes(&[1.0; 64]));
    let outside = BASE + dev.mem.bytes.len() as u64 - 64; // the last 16 floats fit, the rest do not
    let err = run(&co, "fma_f32", &mut dev, &[Arg::Ptr(a), Arg::Ptr(a), Arg::Ptr(outside)], |_| {}).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("fma_f32") && msg.contains("global_load_b32") && msg.contains("outside device memory"),
        "{msg}"
    );
}

#[test]
fn a_wrong_user_sgpr_layout_stops_with_a_precise_error() {
    let Some(co) = elementwise() else { return };
    let mut dev = Device::new();
    let a = dev.alloc(&f32_bytes(&[1.0; 64]));
    let args = [Arg::Ptr(a), Arg::Ptr(a), Arg::Ptr(a)];
    run(&co, "fma_f32", &mut dev, &args, |_| {}).expect("the right layout runs");
    // The kernarg pointer one SGPR late, as a runtime that forgot a user SGPR would program it.
    let err = run(&co, "fma_f32", &mut dev, &args, |d| d.user_sgprs.insert(0, 0)).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("s_load") && msg.contains("out of bounds"), "{msg}");
}

#[test]
fn a_wrong_kernarg_offset_gives_wrong_results() {
    let Some(co) = elementwise() else { return };
    let kernel = CodeObjectKernel::load(&co, "fma_f32").unwrap();
    for (shift, want) in [(0u64, 2.0f32.mul_add(3.0, 1.0)), (8, 3.0f32.mul_add(1.0, 1.0))] {
        let mut dev = Device::new();
        let (a, b) = (dev.alloc(&f32_bytes(&[2.0; 64])), dev.alloc(&f32_bytes(&[3.0; 64])));
        let c = dev.alloc(&f32_bytes(&[1.0; 64]));
        // Segment (a, b, c, c); 8 bytes late the kernel sees (b, c, c): c = b * c + c.
        let kernarg = dev.alloc(&kernargs(&[Arg::Ptr(a), Arg::Ptr(b), Arg::Ptr(c), Arg::Ptr(c)]));
        let d = Dispatch::for_kernel(&kernel, [1, 1, 1], [64, 1, 1], kernarg + shift).unwrap();
        dispatch(&kernel, &d, &mut dev.mem).unwrap();
        assert_eq!(dev.f32s(c, 64), vec![want; 64], "kernarg offset {shift}");
    }
}

#[test]
fn vgprs_past_the_descriptor_allocation_are_an_error() {
    let Some(co) = elementwise() else { return };
    let mut dev = Device::new();
    let a = dev.alloc(&f32_bytes(&[1.0; 64]));
    let c = dev.zeros(64 * 6 * 4);
    // transcendental uses more than 8 VGPRs; claim 8 (GRANULATED_WORKITEM_VGPR_COUNT = 0).
    let err = run(&co, "transcendental", &mut dev, &[Arg::Ptr(a), Arg::Ptr(c)], |d| d.rsrc1 &= !0x3f).unwrap_err();
    assert!(err.to_string().contains("past the 8 VGPRs"), "{err}");
}

#[test]
fn a_hang_is_reported_after_the_step_limit() {
    let Some(co) = rdna3_support::build("control", rdna3_support::CONTROL) else { return };
    let mut dev = Device::new();
    let a = dev.alloc(&rdna3_support::i32_bytes(&[1000; 64]));
    let o = dev.zeros(256);
    let err = run(&co, "diverge", &mut dev, &[Arg::Ptr(a), Arg::Ptr(o)], |d| d.step_limit = 20).unwrap_err();
    assert!(err.to_string().contains("still running after 20 instructions"), "{err}");
}

#[test]
fn the_descriptor_denormal_mode_is_honoured() {
    let Some(keep) = rdna3_support::build("denorm-keep", rdna3_support::MUL_TINY) else { return };
    let flush = rdna3_support::build_with("denorm-flush", rdna3_support::FTZ, &["-cl-denorms-are-zero"]).unwrap();
    let x = 1e-20f32; // x * x = 1e-40, an f32 denormal
    for (co, want) in [(keep, x * x), (flush, 0.0)] {
        let mut dev = Device::new();
        let (a, c) = (dev.alloc(&f32_bytes(&[x; 64])), dev.zeros(256));
        run(&co, "mul_tiny", &mut dev, &[Arg::Ptr(a), Arg::Ptr(c)], |_| {}).unwrap();
        assert_eq!(dev.f32s(c, 1)[0], want);
    }
}

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn descriptor() -> KernelDescriptor {
    let mut kd = [0u8; 64];
    kd[48..52].copy_from_slice(&0x60af_0000u32.to_le_bytes()); // 8 VGPRs, no flush
    kd[56..58].copy_from_slice(&0x0400u16.to_le_bytes()); // wave32
    KernelDescriptor::parse(&kd).unwrap()
}

const S_ENDPGM: u32 = 0xbfb0_0000;

#[test]
fn unknown_encodings_name_the_word_offset_and_kernel() {
    // 0xf8000000: an EXP (export) word, which compute kernels never contain.
    let err = CodeObjectKernel::from_parts("k", descriptor(), &words(&[S_ENDPGM, 0xf800_0000, 0])).unwrap_err();
    assert_eq!(err.to_string(), "rdna3 k: unknown encoding 0xf8000000 at offset 0x4");
}

#[test]
fn unimplemented_instructions_are_an_error_when_reached() {
    let op = tables::VOP3.iter().find(|i| i.name == "v_sad_u32").unwrap().op as u32;
    // v_sad_u32 v0, v0, v0, v0
    let code = words(&[0xd400_0000 | 1 << 26 | op << 16, 0x0402_0100 | 0x100, S_ENDPGM]);
    let kernel = CodeObjectKernel::from_parts("k", descriptor(), &code).unwrap();
    let mut dev = Device::new();
    let mut d = Dispatch::for_kernel(&kernel, [1, 1, 1], [32, 1, 1], 0).unwrap();
    d.user_sgprs.clear();
    let err = dispatch(&kernel, &d, &mut dev.mem).unwrap_err().to_string();
    assert!(err.starts_with("rdna3 k: `v_sad_u32") && err.ends_with("not implemented by the emulator"), "{err}");
}

#[test]
fn wave64_kernels_are_refused() {
    let mut kd = descriptor();
    kd.code_properties = 0;
    let kernel = CodeObjectKernel::from_parts("k", kd, &words(&[S_ENDPGM])).unwrap();
    let d = Dispatch::for_kernel(&kernel, [1, 1, 1], [64, 1, 1], 0).unwrap();
    let err = dispatch(&kernel, &d, &mut Device::new().mem).unwrap_err();
    assert!(err.to_string().contains("wave64"), "{err}");
}
