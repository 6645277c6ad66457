//! Doorbell-driven execution on the simulated GPU after a register-level cold boot: a clang-19-built gfx1100
//! kernel dispatched by PM4 from registers only (program address, RSRC, user SGPRs, threads) computes the right
//! numbers on the RDNA3 emulator; indirect buffers, waits and signals; SDMA copies, writes, fences and polls;
//! unknown opcodes, bad lengths and addresses outside VRAM stop the queue with a fault naming the offset.

mod sim_gpu_support;
use pilot_amd_codeobj::CodeObject;
use pilot_usb_sim::Board;
use sim_gpu_support::boot::*;
use sim_gpu_support::pm4::{self, reg, sdma};
use sim_gpu_support::*;
use std::process::Command;

const VRAM: u64 = 64 * MB;
/// Physical VRAM the tests put things at.
const CODE: u64 = 0x40_0000;
const KERNARGS: u64 = 0x50_0000;
const A: u64 = 0x60_0000;
const B: u64 = 0x61_0000;
const C: u64 = 0x62_0000;
const SIGNAL: u64 = 0x70_0000;
const IB: u64 = 0x71_0000;

const SRC: &str = r#"
kernel void fma_idx(global float *c, global const float *a, global const float *b, global const uint *np) {
  uint n = np[0];
  uint i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  float s = 0.0f;
  for (uint k = 0; k < n; k++) s += a[i] * b[i] + (float)k;
  c[i] = s;
}
kernel void lds_reverse(global float *c, global const float *a) {
  local float t[64];
  uint l = __builtin_amdgcn_workitem_id_x();
  uint g = __builtin_amdgcn_workgroup_id_x() * 64;
  t[l] = a[g + l];
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
  c[g + l] = t[63 - l] * 2.0f;
}
"#;

/// The gfx1100 code object (built once), or `None` when clang-19 is absent (a failure under `PILOT_REQUIRE=1`).
fn code_object() -> Option<Vec<u8>> {
    static BUILT: std::sync::OnceLock<Option<Vec<u8>>> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| build("gfx1100")).clone()
}

/// [`code_object`] for gfx1201.
fn code_object_gfx1201() -> Option<Vec<u8>> {
    static BUILT: std::sync::OnceLock<Option<Vec<u8>>> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| build("gfx1201")).clone()
}

fn build(mcpu: &str) -> Option<Vec<u8>> {
    pilot_test_support::clang_19()?;
    let dir = std::env::temp_dir().join(format!("pilot-sim-gpu-{}-{mcpu}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cl, obj, co) = (dir.join("k.cl"), dir.join("k.o"), dir.join("k.co"));
    std::fs::write(&cl, SRC).unwrap();
    let run = |cmd: &mut Command| {
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    run(Command::new("clang-19")
        .args(["-x", "cl", "-cl-std=CL1.2", "-target", "amdgcn-amd-amdhsa", "-nogpulib", "-O2", "-c"])
        .arg(format!("-mcpu={mcpu}"))
        .arg(&cl)
        .arg("-o")
        .arg(&obj));
    run(Command::new("ld.lld-19").arg("-shared").arg(&obj).arg("-o").arg(&co));
    let bytes = std::fs::read(&co).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    Some(bytes)
}

/// A booted gfx1100 with its queues up.
fn booted() -> Option<(Rig, Regs, Producer)> {
    booted_on(Board::Navi31)
}

fn booted_on(board: Board) -> Option<(Rig, Regs, Producer)> {
    let (mut rig, r, fw) = rig(board, VRAM)?;
    rig.cold_boot(&r, VRAM, &fw);
    // Kernels reach VRAM only through the page table (the simulator refuses them the system aperture).
    rig.page_tables(&r, VRAM);
    Some((rig, r, Producer::default()))
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The PM4 for one dispatch of `name` over `groups` workgroups of 64, kernargs at KERNARGS, then a signal.
fn dispatch_stream(co: &CodeObject, name: &str, groups: u32, value: u32) -> Vec<u32> {
    dispatch_stream_at(VA_BASE, co, name, groups, value)
}

/// [`dispatch_stream`] with VRAM physical `p` at GPU address `base + p`.
fn dispatch_stream_at(base: u64, co: &CodeObject, name: &str, groups: u32, value: u32) -> Vec<u32> {
    let k = co.kernel(name).unwrap();
    let code = base + CODE + k.code_offset;
    let kernargs = base + KERNARGS;
    let d = &k.descriptor;
    let lds = d.group_segment_fixed_size.div_ceil(512);
    let mut user = vec![kernargs as u32, (kernargs >> 32) as u32];
    user.resize(k.user_sgprs as usize, 0);
    let signal = base + SIGNAL;
    [
        pm4::acquire_mem(),
        pm4::set_sh(reg::PGM_LO, &[(code >> 8) as u32, (code >> 40) as u32]),
        pm4::set_sh(reg::RSRC1, &[d.compute_pgm_rsrc1, d.compute_pgm_rsrc2 | lds << 15]),
        pm4::set_sh(reg::RSRC3, &[d.compute_pgm_rsrc3]),
        pm4::set_sh(reg::TMPRING_SIZE, &[0]),
        pm4::set_sh(reg::USER_DATA_0, &user),
        pm4::set_sh(reg::NUM_THREAD_X, &[64, 1, 1]),
        pm4::dispatch([groups, 1, 1]),
        pm4::cs_partial_flush(),
        pm4::release_mem(signal, value),
    ]
    .concat()
}

/// The register writes and DISPATCH_DIRECT of `name` with its kernargs at physical `kernargs`; no barrier, no signal.
fn dispatch_only(base: u64, co: &CodeObject, name: &str, groups: u32, kernargs: u64) -> Vec<u32> {
    let k = co.kernel(name).unwrap();
    let code = base + CODE + k.code_offset;
    let ka = base + kernargs;
    let d = &k.descriptor;
    let lds = d.group_segment_fixed_size.div_ceil(512);
    let mut user = vec![ka as u32, (ka >> 32) as u32];
    user.resize(k.user_sgprs as usize, 0);
    [
        pm4::set_sh(reg::PGM_LO, &[(code >> 8) as u32, (code >> 40) as u32]),
        pm4::set_sh(reg::RSRC1, &[d.compute_pgm_rsrc1, d.compute_pgm_rsrc2 | lds << 15]),
        pm4::set_sh(reg::RSRC3, &[d.compute_pgm_rsrc3]),
        pm4::set_sh(reg::TMPRING_SIZE, &[0]),
        pm4::set_sh(reg::USER_DATA_0, &user),
        pm4::set_sh(reg::NUM_THREAD_X, &[64, 1, 1]),
        pm4::dispatch([groups, 1, 1]),
    ]
    .concat()
}

fn load(rig: &mut Rig, co: &CodeObject, args: &[u64], scalars: &[u32]) {
    load_at(rig, VA_BASE, co, args, scalars)
}

/// [`load`] with VRAM physical `p` at GPU address `base + p`.
fn load_at(rig: &mut Rig, base: u64, co: &CodeObject, args: &[u64], scalars: &[u32]) {
    rig.put_vram(CODE, &co.image);
    let mut ka = Vec::new();
    for a in args {
        ka.extend_from_slice(&(base + a).to_le_bytes());
    }
    for s in scalars {
        ka.extend_from_slice(&s.to_le_bytes());
    }
    ka.resize(ka.len().div_ceil(4) * 4, 0);
    rig.put_vram(KERNARGS, &ka);
}

#[test]
fn dispatch_direct_runs_the_code_object_from_registers() {
    let Some(bytes) = code_object() else { return };
    let Some(rig) = booted() else { return };
    runs_fma_and_lds_kernels(&bytes, rig);
}

#[test]
fn gfx1201_dispatch_direct_runs_gfx12_code_from_registers() {
    let Some(bytes) = code_object_gfx1201() else { return };
    let Some(rig) = booted_on(Board::Navi48) else { return };
    runs_fma_and_lds_kernels(&bytes, rig);
}

fn runs_fma_and_lds_kernels(bytes: &[u8], (mut rig, r, mut p): (Rig, Regs, Producer)) {
    let co = CodeObject::parse(bytes).unwrap();
    let n = 256usize;
    let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 7.0).collect();
    let b: Vec<f32> = (0..n).map(|i| 1.0 / (i as f32 + 1.0)).collect();
    rig.put_vram(A, &f32_bytes(&a));
    rig.put_vram(B, &f32_bytes(&b));
    rig.put_vram(SIGNAL + 512, &3u32.to_le_bytes());
    load(&mut rig, &co, &[C, A, B, SIGNAL + 512], &[]);
    let t0 = rig.sim.now();
    let s = dispatch_stream(&co, "fma_idx", (n / 64) as u32, 1);
    rig.submit_compute(&mut p, &s);
    assert_eq!(rig.u32_at(SIGNAL), 1, "signal: {:?}", rig.sim.gpu_faults());
    let got = f32s(&rig.vram(C, 4 * n));
    for (i, ((g, x), y)) in got.iter().zip(&a).zip(&b).enumerate() {
        let want = (0..3).fold(0.0f32, |s, k| s + (x * y + k as f32));
        assert!((g - want).abs() <= 1e-5 * want.abs().max(1.0), "c[{i}] = {g} != {want}");
    }
    assert!(rig.sim.gpu_dispatched().instructions > 0);
    assert!(rig.sim.now() - t0 >= std::time::Duration::from_micros(5), "a dispatch has modelled time");
    // The rptr report follows the ring (dwords).
    assert_eq!(u64::from(rig.u32_at(RPTR)), p.compute_wptr);

    // LDS from RSRC2 and a barrier, through an indirect buffer.
    load(&mut rig, &co, &[C, A], &[]);
    let s = dispatch_stream(&co, "lds_reverse", (n / 64) as u32, 2);
    rig.put_vram(IB, &pm4::bytes(&s));
    let ib = rig.mc(&r, IB);
    rig.submit_compute(&mut p, &pm4::indirect_buffer(ib, s.len() as u32));
    assert_eq!(rig.u32_at(SIGNAL), 2, "{:?}", rig.sim.gpu_faults());
    let got = f32s(&rig.vram(C, 4 * n));
    for (i, v) in got.iter().enumerate() {
        let (g, l) = (i / 64 * 64, i % 64);
        assert_eq!(*v, a[g + 63 - l] * 2.0, "c[{i}]");
    }
    assert!(rig.sim.gpu_faults().is_empty(), "{:?}", rig.sim.gpu_faults());
}

#[test]
fn a_dispatch_without_the_lds_field_or_wave32_faults() {
    let Some(bytes) = code_object() else { return };
    let Some((mut rig, _, mut p)) = booted() else { return };
    let co = CodeObject::parse(&bytes).unwrap();
    rig.put_vram(A, &[0; 1024]);
    load(&mut rig, &co, &[C, A], &[]);
    let mut s = dispatch_stream(&co, "lds_reverse", 1, 1);
    // RSRC2 as the descriptor has it (no LDS): the kernel's LDS accesses fall outside.
    let at = s.iter().position(|&d| d == reg::RSRC1 - 0x2C00).unwrap();
    s[at + 2] &= !(0x1FF << 15);
    rig.submit_compute(&mut p, &s);
    assert_eq!(rig.u32_at(SIGNAL), 0);
    let f = rig.sim.gpu_faults();
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].engine.contains("compute queue") && f[0].to_string().contains("rdna3"), "{}", f[0]);
    // A wave64 dispatch (DISPATCH_INITIATOR without CS_W32_EN) is refused.
    let Some((mut rig, _, mut p)) = booted() else { return };
    load(&mut rig, &co, &[C, A], &[]);
    let mut s = dispatch_stream(&co, "lds_reverse", 1, 1);
    let at = s.iter().position(|&d| d == 1 | 1 << 2 | 1 << 15).unwrap();
    s[at] &= !(1 << 15);
    rig.submit_compute(&mut p, &s);
    assert_eq!(rig.u32_at(SIGNAL), 0);
    assert!(rig.sim.gpu_faults()[0].reason.contains("wave64"), "{:?}", rig.sim.gpu_faults());
}

#[test]
fn an_unknown_pm4_opcode_stops_the_queue_at_its_offset() {
    let Some((mut rig, r, mut p)) = booted() else { return };
    let signal = rig.mc(&r, SIGNAL);
    let s = [pm4::pkt3(0x10, &[0]), pm4::pkt3(0x99, &[1, 2]), pm4::release_mem(signal, 7)].concat();
    rig.submit_compute(&mut p, &s);
    assert_eq!(rig.u32_at(SIGNAL), 0, "the signal after the bad packet never arrives");
    let f = rig.sim.gpu_faults();
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].offset, Some(8));
    assert!(f[0].reason.contains("unknown PM4 opcode 0x99"), "{}", f[0]);
    // The queue stays stopped.
    rig.submit_compute(&mut p, &pm4::release_mem(signal, 8));
    assert_eq!(rig.u32_at(SIGNAL), 0);
}

#[test]
fn bad_lengths_and_addresses_outside_vram_fault() {
    for (what, s) in [
        ("RELEASE_MEM with a 5-dword body", pm4::pkt3(0x49, &[0, 1 << 29, 0, 0, 0])),
        ("not one of the bridge's windows", pm4::release_mem(0x1_0000, 1)),
        ("in no aperture", pm4::release_mem(0x1_0000_0000, 1)),
        ("runs past", pm4::pkt3(0x76, &[0x3FF, 1, 2])),
    ] {
        let Some((mut rig, _, mut p)) = booted() else { return };
        rig.submit_compute(&mut p, &s);
        let f = rig.sim.gpu_faults();
        assert_eq!(f.len(), 1, "{what}: {f:?}");
        assert!(f[0].to_string().contains(what), "{what}: {}", f[0]);
        assert_eq!(f[0].offset, Some(0));
    }
    // Past the end of VRAM through the aperture.
    let Some((mut rig, r, mut p)) = booted() else { return };
    let beyond = rig.mc(&r, VRAM);
    rig.submit_compute(&mut p, &pm4::release_mem(beyond, 1));
    assert_eq!(rig.sim.gpu_faults().len(), 1);
}

#[test]
fn wait_reg_mem_holds_the_queue_until_the_host_writes() {
    let Some((mut rig, r, mut p)) = booted() else { return };
    let (flag, signal) = (rig.mc(&r, SIGNAL + 64), rig.mc(&r, SIGNAL));
    rig.submit_compute(&mut p, &[pm4::wait_mem_geq(flag, 5), pm4::release_mem(signal, 9)].concat());
    assert_eq!(rig.u32_at(SIGNAL), 0);
    rig.put_vram(SIGNAL + 64, &4u32.to_le_bytes());
    assert_eq!(rig.u32_at(SIGNAL), 0);
    rig.put_vram(SIGNAL + 64, &5u32.to_le_bytes());
    assert_eq!(rig.u32_at(SIGNAL), 9);
    assert!(rig.sim.gpu_faults().is_empty());
}

#[test]
fn sdma_copies_writes_fences_and_polls() {
    let Some((mut rig, r, mut p)) = booted() else { return };
    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + 3) as u8).collect();
    rig.put_vram(A, &data);
    let (a, c, sig, flag) = (rig.mc(&r, A), rig.mc(&r, C), rig.mc(&r, SIGNAL), rig.mc(&r, SIGNAL + 64));
    let stream = [
        sdma::copy_linear(a + 3, c + 1, 99_000),
        sdma::write(rig.mc(&r, SIGNAL + 128), &[0x1111, 0x2222]),
        sdma::timestamp(rig.mc(&r, SIGNAL + 256)),
        sdma::poll_eq(flag, 0xABCD),
        sdma::fence(sig, 42),
        sdma::trap(),
    ]
    .concat();
    rig.submit_sdma(&mut p, &stream);
    assert_eq!(rig.vram(C, 99_004)[1..99_001], data[3..99_003]);
    assert_eq!(rig.vram(SIGNAL + 128, 8), [0x11, 0x11, 0, 0, 0x22, 0x22, 0, 0]);
    assert_ne!(rig.vram(SIGNAL + 256, 8), [0; 8], "timestamp");
    assert_eq!(rig.u32_at(SIGNAL), 0, "the fence waits for the poll");
    rig.put_vram(SIGNAL + 64, &0xABCDu32.to_le_bytes());
    assert_eq!(rig.u32_at(SIGNAL), 42, "{:?}", rig.sim.gpu_faults());
    assert_eq!(u64::from(rig.u32_at(SDMA_RPTR)), p.sdma_wptr, "rptr write-back in bytes");
    // An unknown op stops the queue and names its offset.
    let before = p.sdma_wptr;
    rig.submit_sdma(&mut p, &[sdma::fence(sig, 43), vec![0x77]].concat());
    assert_eq!(rig.u32_at(SIGNAL), 43);
    let f = rig.sim.gpu_faults();
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].engine.contains("SDMA0") && f[0].reason.contains("unknown SDMA packet op 119"), "{}", f[0]);
    assert_eq!(f[0].offset, Some(before + 16));
}

#[test]
fn sdma_reaches_the_bridge_sram_and_releases_a_copy_out() {
    let Some((mut rig, r, mut p)) = booted() else { return };
    let data: Vec<u8> = (0..4096u32).map(|i| (i ^ 0x5A) as u8).collect();
    rig.put_vram(A, &data);
    // The host arms a 4 KB SRAM read; the GPU copies VRAM into SRAM and writes 0x82200C to release it.
    let a = rig.mc(&r, A);
    let mut got = vec![0u8; 4096];
    rig.b.sram_read_arm(got.len()).unwrap();
    rig.submit_sdma(&mut p, &[sdma::copy_linear(a, 0x20_0000, 4096), sdma::write(0x82_200C, &[0])].concat());
    rig.b.sram_read_finish(&mut got).unwrap();
    assert_eq!(got, data);
}

#[test]
fn gfx1201_refuses_interleaved_thread_counts_and_gfx11_code() {
    let (Some(g11), Some(g12)) = (code_object(), code_object_gfx1201()) else { return };
    // GC 12's COMPUTE_NUM_THREAD_X has INTERLEAVE_BITS in 13-15 (gc_12_0_0), which the simulator refuses.
    let Some((mut rig, _, mut p)) = booted_on(Board::Navi48) else { return };
    let co = CodeObject::parse(&g12).unwrap();
    load(&mut rig, &co, &[C, A, B, SIGNAL + 512], &[]);
    let mut s = dispatch_stream(&co, "fma_idx", 1, 1);
    let at = s.iter().position(|&d| d == reg::NUM_THREAD_X - 0x2C00).unwrap();
    s[at + 1] |= 1 << 13;
    rig.submit_compute(&mut p, &s);
    assert_eq!(rig.u32_at(SIGNAL), 0);
    let f = rig.sim.gpu_faults();
    assert!(f.len() == 1 && f[0].reason.contains("INTERLEAVE_BITS"), "{f:?}");
    // gfx11 machine code on the gfx12 board: its memory instructions do not decode as gfx12's.
    let Some((mut rig, _, mut p)) = booted_on(Board::Navi48) else { return };
    let co = CodeObject::parse(&g11).unwrap();
    load(&mut rig, &co, &[C, A, B, SIGNAL + 512], &[]);
    let s = dispatch_stream(&co, "fma_idx", 1, 1);
    rig.submit_compute(&mut p, &s);
    assert_eq!(rig.u32_at(SIGNAL), 0);
    let f = rig.sim.gpu_faults();
    assert!(f.len() == 1 && f[0].reason.contains("unknown encoding"), "{f:?}");
}

#[test]
fn hdp_flush_barrier_copy_data_and_event_write() {
    let Some((mut rig, r, mut p)) = booted() else { return };
    // The HDP flush barrier: write BIF_BX_PF0_GPU_HDP_FLUSH_REQ, wait for DONE (NBIO segment 2 + 0x106/0x107).
    let (req, done) = (0xD20 + 0x106, 0xD20 + 0x107);
    let barrier = pm4::pkt3(0x3C, &[3 | 1 << 6, req, done, 0xFFFF_FFFF, 0xFFFF_FFFF, 4]);
    let (dst, clock) = (rig.mc(&r, SIGNAL + 32), rig.mc(&r, SIGNAL + 40));
    let copy_imm = pm4::pkt3(0x40, &[5 | 5 << 8, 0x1234_5678, 0, dst as u32, (dst >> 32) as u32]);
    let copy_clock = pm4::pkt3(0x40, &[9 | 5 << 8 | 1 << 16, 0, 0, clock as u32, (clock >> 32) as u32]);
    let signal = rig.mc(&r, SIGNAL);
    let s = [barrier, pm4::cs_partial_flush(), copy_imm, copy_clock, pm4::release_mem(signal, 3)].concat();
    rig.submit_compute(&mut p, &s);
    assert_eq!(rig.u32_at(SIGNAL), 3, "{:?}", rig.sim.gpu_faults());
    assert_eq!(rig.u32_at(SIGNAL + 32), 0x1234_5678);
    assert_ne!(rig.vram(SIGNAL + 40, 8), [0; 8], "GPU clock");
    assert_eq!(rig.rreg(done), 0xFFFF_FFFF);
}

#[test]
fn page_tables_translate_for_the_psp_the_queues_and_the_shaders() {
    let Some(bytes) = code_object() else { return };
    let Some((mut rig, r, fw)) = rig(Board::Navi31, VRAM) else { return };
    // The system aperture only (PSP ring and fences by MC address), no AGP: msg1 is reached at VA_SRAM through
    // MMHUB's context 0, and every queue and shader address below is a VA.
    let fb = rig.mc(&r, 0);
    rig.wreg(r.mm_ap_low, (fb >> 18) as u32);
    rig.wreg(r.mm_ap_high, ((fb + VRAM - 1) >> 18) as u32);
    rig.page_tables(&r, VRAM);
    rig.psp_to_queues(&r, VRAM, &fw);
    assert!(rig.sim.gpu_faults().is_empty(), "{:?}", rig.sim.gpu_faults());
    let mut p = Producer::default();
    let co = CodeObject::parse(&bytes).unwrap();
    let a: Vec<f32> = (0..64).map(|i| i as f32).collect();
    rig.put_vram(A, &f32_bytes(&a));
    load_at(&mut rig, VA_BASE, &co, &[C, A], &[]);
    rig.submit_compute(&mut p, &dispatch_stream_at(VA_BASE, &co, "lds_reverse", 1, 1));
    assert_eq!(rig.u32_at(SIGNAL), 1, "{:?}", rig.sim.gpu_faults());
    assert_eq!(f32s(&rig.vram(C, 8)), [126.0, 124.0]);
    // SDMA: VRAM VA -> SRAM VA (4 KB pages), released by a write through cq_buf's VA.
    let mut got = vec![0u8; 8192];
    rig.b.sram_read_arm(got.len()).unwrap();
    rig.submit_sdma(
        &mut p,
        &[sdma::copy_linear(VA_BASE + A, VA_SRAM, 8192), sdma::write(VA_CQ_BUF + 0xC, &[0])].concat(),
    );
    rig.b.sram_read_finish(&mut got).unwrap();
    assert_eq!(got, rig.vram(A, 8192));
    // A VA inside the context with no valid entry faults.
    rig.submit_compute(&mut p, &pm4::release_mem(VA_BASE + (3 << 29), 1));
    let f = rig.sim.gpu_faults();
    assert!(f.len() == 1 && f[0].reason.contains("is not valid"), "{f:?}");
}

#[test]
fn blind_spot_acquire_mem_a_dispatch_reading_an_earlier_ones_output_needs_flush_and_invalidate() {
    let Some(bytes) = code_object() else { return };
    let co = CodeObject::parse(&bytes).unwrap();
    let run = |barrier: Vec<u32>| {
        let (mut rig, _, mut p) = booted().unwrap();
        let a: Vec<f32> = (0..64).map(|i| i as f32).collect();
        rig.put_vram(A, &f32_bytes(&a));
        rig.put_vram(B, &f32_bytes(&[2.0; 64]));
        rig.put_vram(SIGNAL + 512, &1u32.to_le_bytes());
        // fma_idx writes C = 2a; lds_reverse then reads C (a second kernarg block) and writes B.
        load(&mut rig, &co, &[C, A, B, SIGNAL + 512], &[]);
        let fb = VA_BASE;
        let mut second = Vec::new();
        for x in [B, C] {
            second.extend_from_slice(&(fb + x).to_le_bytes());
        }
        rig.put_vram(KERNARGS + 0x1000, &second);
        let s = [
            pm4::acquire_mem_inv(),
            dispatch_only(fb, &co, "fma_idx", 1, KERNARGS),
            barrier,
            dispatch_only(fb, &co, "lds_reverse", 1, KERNARGS + 0x1000),
            pm4::cs_partial_flush(),
            pm4::release_mem(fb + SIGNAL, 1),
        ]
        .concat();
        rig.submit_compute(&mut p, &s);
        let got = f32s(&rig.vram(B, 4 * 64));
        (rig.u32_at(SIGNAL), got, rig.sim.gpu_faults())
    };
    // With CS_PARTIAL_FLUSH and ACQUIRE_MEM (GLV/GL1 invalidate) between them: B = 2 * reverse(2a).
    let (signal, got, faults) = run([pm4::cs_partial_flush(), pm4::acquire_mem_inv()].concat());
    assert_eq!((signal, faults), (1, vec![]));
    assert_eq!(got, (0..64).map(|i| 4.0 * (63 - i) as f32).collect::<Vec<_>>());
    // Without them, or with an invalidate that leaves GL1 (or the flush) out: the queue stops, naming both.
    for barrier in [vec![], pm4::acquire_mem_inv(), [pm4::cs_partial_flush(), pm4::acquire_mem()].concat()] {
        let (signal, _, faults) = run(barrier);
        assert_eq!(signal, 0);
        let f: Vec<String> = faults.iter().map(|f| f.to_string()).collect();
        assert!(
            f.iter().any(|f| f.contains("which dispatch") && f.contains("stored to with no CS_PARTIAL_FLUSH")),
            "{f:?}"
        );
    }
}

/// Issue 25, item A (HDP): the host's writes through BAR0 reach the GPU's engines only through an HDP flush. Ring bytes
/// the host wrote with no flush before the doorbell stop the queue with a fault naming the HDP; a poll waits until the
/// flush lands the value it waits for.
#[test]
fn blind_spot_hdp_host_writes_reach_the_engines_only_after_an_hdp_flush() {
    let Some((mut rig, r, mut p)) = booted() else { return };
    let flush = rig.hdp_flush.take().expect("the rig knows the flush register");
    let signal = rig.mc(&r, SIGNAL);
    rig.submit_compute(&mut p, &pm4::release_mem(signal, 7));
    let host = rig.vram(COMPUTE_RING, 4);
    assert_eq!(u32_at(&host, 0), pm4::release_mem(0, 0)[0], "the host reads its own write back");
    assert_eq!(rig.sim.vram_gpu_view(COMPUTE_RING as usize, 4), [0; 4], "the GPU does not see it");
    let f = rig.sim.gpu_faults();
    assert!(f.len() == 1 && f[0].reason.contains("still in HDP's write buffer"), "{f:?}");
    assert_eq!(rig.u32_at(SIGNAL), 0);

    let Some((mut rig, r, mut p)) = booted() else { return };
    let (a, c, sig, flag) = (rig.mc(&r, A), rig.mc(&r, C), rig.mc(&r, SIGNAL), rig.mc(&r, SIGNAL + 64));
    let stream = [sdma::poll_eq(flag, 0xABCD), sdma::copy_linear(a, c, 64), sdma::fence(sig, 42)].concat();
    rig.submit_sdma(&mut p, &stream);
    let data: Vec<u8> = (0..64).collect();
    rig.put_vram_unflushed(A, &data);
    rig.put_vram_unflushed(SIGNAL + 64, &0xABCDu32.to_le_bytes());
    assert_eq!(rig.u32_at(SIGNAL), 0, "the poll still sees the old flag");
    rig.wreg(flush, 0);
    assert_eq!(rig.u32_at(SIGNAL), 42, "{:?}", rig.sim.gpu_faults());
    assert_eq!(rig.vram(C, 64), data);
}
