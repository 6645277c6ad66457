//! `EmuDevice` through the `Device` interface, on kernels clang-19 builds for gfx1100: the step is
//! linked once (kernargs in VRAM) and replayed, offsets and copies land where they should, and what
//! the device cannot run is a one-line error naming the program or kernel.

mod rdna3_support;

use pilot_core::device::{Arg, BufferUse, Device, ProgramFormat, ProgramSpec, StepOp};
use pilot_rdna3::device::{EmuDevice, VRAM_BASE};

const SOURCE: &str = r#"
#define GID (__builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x())
__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void axpy(global const float *x, global float *y) {
  y[GID] = 2.0f * x[GID] + y[GID];
}
__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void wild(global float *y) {
  y[GID + 0x10000000u] = 1.0f;
}
// pilot's barrier(): fences around s_barrier; the acquire fence is clang's buffer_gl0_inv.
__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void reverse(global float *y) {
  local float t[64];
  uint l = __builtin_amdgcn_workitem_id_x();
  t[l] = y[GID];
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
  y[GID] = t[63 - l];
}
__kernel void unpinned(global float *y) { y[GID] = 0.0f; }
// y[g + offs[1]] = x[g + offs[0]]: offsets the compiler cannot see.
__kernel __attribute__((reqd_work_group_size(64, 1, 1)))
void stray(global const int *x, global int *y, global const int *offs) {
  y[GID + offs[1]] = x[GID + offs[0]];
}
"#;

fn floats(b: &[u8]) -> Vec<f32> {
    b.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn bytes(f: &[f32]) -> Vec<u8> {
    f.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The artifact's view of program `name`: its `amdgpu` record as pilot's reader derives it (what the
/// compiler records), where the code object has that kernel.
fn spec<'a>(name: &'a str, code: &'a [u8], arg_count: usize) -> ProgramSpec<'a> {
    let record = pilot_amd_codeobj::CodeObject::parse(code).ok().and_then(|o| Some(o.kernel(name)?.dispatch_record()));
    let amdgpu = record.map(|r| &*Box::leak(Box::new(r)));
    ProgramSpec { name, format: ProgramFormat::AmdCodeObject, code, arg_count, amdgpu, ir3: None }
}

#[test]
fn a_linked_step_replays_with_offsets_and_copies() {
    let Some(co) = rdna3_support::build("emu_device", SOURCE) else { return };
    let mut dev = EmuDevice::new(2);
    let axpy = dev.load_program(&spec("axpy", &co, 2)).unwrap();
    let record = dev.dispatch_record(axpy).unwrap();
    assert_eq!((record.arg_offsets.as_slice(), record.wave32), (&[0, 8][..], true));
    let x = dev.alloc(4 * 300, BufferUse::Weight).unwrap();
    let y = dev.alloc(4 * 256, BufferUse::Output).unwrap();
    let copy = dev.alloc(4 * 256, BufferUse::Scratch).unwrap();
    let (xa, _) = dev.address(x).unwrap();
    assert!(xa >= VRAM_BASE && xa % 4096 == 0);
    let xs: Vec<f32> = (0..300).map(|i| i as f32).collect();
    dev.copy_in(x, 0, &bytes(&xs)).unwrap();
    dev.copy_in(y, 0, &bytes(&[1.0; 256])).unwrap();
    // x from element 44 on: the argument's offset must reach the kernel through the kernarg segment.
    let ops = [
        StepOp::Dispatch {
            program: axpy,
            args: vec![Arg { buffer: x, offset: 44 * 4 }, Arg { buffer: y, offset: 0 }],
            global: [256, 1, 1],
            local: [64, 1, 1],
        },
        StepOp::Copy { src: Arg { buffer: y, offset: 0 }, dst: Arg { buffer: copy, offset: 0 }, len: 4 * 256 },
    ];
    let step = dev.link_step(&ops).unwrap();
    let t1 = dev.submit(step).unwrap();
    let t2 = dev.submit(step).unwrap();
    dev.wait(t2).unwrap();
    assert_eq!((t1, t2), (1, 2));
    // Two submissions of 4 work-groups of 64 work-items: 2 wave32 waves each.
    let counters = dev.counters();
    assert_eq!(&counters[..3], &[("dispatches", 2), ("workgroups", 8), ("waves", 16)]);
    assert!(counters[3].0 == "wave_instructions" && counters[3].1 >= 16 * 5, "{counters:?}");
    let mut out = vec![0u8; 4 * 256];
    dev.copy_out(copy, 0, &mut out).unwrap();
    let want: Vec<f32> = (0..256).map(|i| 1.0 + 4.0 * (i + 44) as f32).collect();
    assert_eq!(floats(&out), want);
    assert_eq!(dev.wait(3).unwrap_err().to_string(), "wait failed: timeline value 3 was never submitted (last is 2)");
}

#[test]
fn workgroup_barriers_with_fences_run() {
    let Some(co) = rdna3_support::build("emu_device", SOURCE) else { return };
    let kernel = pilot_rdna3::CodeObjectKernel::load(&co, "reverse").unwrap();
    let text: Vec<String> = kernel.insts.iter().map(|i| i.to_string()).collect();
    assert!(text.iter().any(|t| t == "buffer_gl0_inv"), "{text:?}");
    let mut dev = EmuDevice::new(2);
    let reverse = dev.load_program(&spec("reverse", &co, 1)).unwrap();
    let y = dev.alloc(4 * 128, BufferUse::Output).unwrap();
    dev.copy_in(y, 0, &bytes(&(0..128).map(|i| i as f32).collect::<Vec<_>>())).unwrap();
    let ops = [StepOp::Dispatch {
        program: reverse,
        args: vec![Arg { buffer: y, offset: 0 }],
        global: [128, 1, 1],
        local: [64, 1, 1],
    }];
    let step = dev.link_step(&ops).unwrap();
    dev.submit(step).unwrap();
    let mut out = vec![0u8; 4 * 128];
    dev.copy_out(y, 0, &mut out).unwrap();
    let want: Vec<f32> = (0..128).map(|i| (i / 64 * 64 + 63 - i % 64) as f32).collect();
    assert_eq!(floats(&out), want);
}

#[test]
fn what_cannot_run_is_a_one_line_error() {
    let Some(co) = rdna3_support::build("emu_device", SOURCE) else { return };
    let mut dev = EmuDevice::new(1);
    let err = |e: pilot_core::DeviceError| e.to_string();
    assert_eq!(err(dev.load_program(&spec("nope", &co, 1)).unwrap_err()), "program `nope`: not in the code object");
    assert_eq!(
        err(dev.load_program(&spec("axpy", &co, 3)).unwrap_err()),
        "program `axpy`: takes 2 arguments, the artifact says 3"
    );
    assert_eq!(
        err(dev.load_program(&spec("unpinned", &co, 1)).unwrap_err()),
        "program `unpinned`: the code object records no reqd_work_group_size"
    );
    let elf = ProgramSpec { format: ProgramFormat::Elf, ..spec("axpy", &co, 2) };
    assert_eq!(err(dev.load_program(&elf).unwrap_err()), "program `axpy`: Elf is not an AMD code object");
    assert!(dev.load_program(&spec("axpy", b"not an elf", 2)).unwrap_err().to_string().starts_with("program `axpy`: "));

    let axpy = dev.load_program(&spec("axpy", &co, 2)).unwrap();
    let wild = dev.load_program(&spec("wild", &co, 1)).unwrap();
    let y = dev.alloc(256, BufferUse::Output).unwrap();
    let a = Arg { buffer: y, offset: 0 };
    let dispatch = |program, args: Vec<Arg>, global, local| StepOp::Dispatch { program, args, global, local };
    assert_eq!(
        err(dev.link_step(&[dispatch(axpy, vec![a, a], [64, 1, 1], [32, 1, 1])]).unwrap_err()),
        "link_step failed: `axpy`: launched with [32, 1, 1], built for [64, 1, 1]"
    );
    assert_eq!(
        err(dev.link_step(&[dispatch(axpy, vec![a, a], [96, 1, 1], [64, 1, 1])]).unwrap_err()),
        "link_step failed: `axpy`: global [96, 1, 1] is not whole work-groups of [64, 1, 1]"
    );
    assert_eq!(
        err(dev.link_step(&[dispatch(axpy, vec![a], [64, 1, 1], [64, 1, 1])]).unwrap_err()),
        "link_step failed: `axpy`: the dispatch passes 1 arguments, the program takes 2"
    );
    let past = Arg { buffer: y, offset: 257 };
    assert_eq!(
        err(dev.link_step(&[dispatch(axpy, vec![a, past], [64, 1, 1], [64, 1, 1])]).unwrap_err()),
        "link_step: range 257+0 outside buffer of 256 bytes"
    );
    assert_eq!(err(dev.copy_in(y, 200, &[0; 64]).unwrap_err()), "copy_in: range 200+64 outside buffer of 256 bytes");

    // A kernel that stores outside VRAM stops the submission with the emulator's fault, on one line.
    let step = dev.link_step(&[dispatch(wild, vec![a], [64, 1, 1], [64, 1, 1])]).unwrap();
    let e = err(dev.submit(step).unwrap_err());
    assert!(e.starts_with("submit failed: rdna3 wild: `global_store_b32") && !e.contains('\n'), "{e}");
    assert_eq!(
        err(dev.alloc(1 << 40, BufferUse::Scratch).unwrap_err()),
        format!("out of device memory allocating {} bytes", 1u64 << 40)
    );
    dev.free(y).unwrap();
    assert_eq!(err(dev.free(y).unwrap_err()), "invalid buffer handle 0");
}

/// #26 confinement: kernels reach live buffers and kernarg segments in whole pages, nothing between them, as the
/// usb+amd driver maps them: the rest of a buffer's last page runs; a page past it, read or written, and a freed
/// buffer fail the submission in one line.
#[test]
fn a_kernel_straying_past_its_buffer_or_into_a_freed_one_fails() {
    let Some(co) = rdna3_support::build("emu_device", SOURCE) else { return };
    let mut dev = EmuDevice::new(2);
    let stray = dev.load_program(&spec("stray", &co, 3)).unwrap();
    let [x, y, offs, z] = [0; 4].map(|_| dev.alloc(256, BufferUse::Input).unwrap());
    let (xa, za) = (dev.address(x).unwrap().0, dev.address(z).unwrap().0);
    dev.copy_in(x, 0, &(0..64i32).flat_map(|i| (3 * i).to_le_bytes()).collect::<Vec<_>>()).unwrap();
    dev.copy_in(z, 0, &[7; 256]).unwrap();
    let args = [x, y, offs].map(|buffer| Arg { buffer, offset: 0 }).to_vec();
    let step = dev.link_step(&[StepOp::Dispatch { program: stray, args, global: [64, 1, 1], local: [64, 1, 1] }]);
    let step = step.unwrap();
    let run = |dev: &mut EmuDevice, offs_v: [i32; 2]| {
        dev.copy_in(offs, 0, &offs_v.iter().flat_map(|o| o.to_le_bytes()).collect::<Vec<_>>()).unwrap();
        dev.submit(step).map(|_| {
            let mut out = [0u8; 256];
            dev.copy_out(y, 0, &mut out).unwrap();
            out.chunks(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect::<Vec<_>>()
        })
    };
    assert_eq!(run(&mut dev, [0, 0]).unwrap(), (0..64).map(|i| 3 * i).collect::<Vec<_>>());
    assert_eq!(run(&mut dev, [960, 0]).unwrap()[..4], [0; 4], "the rest of x's page");
    let to_z = ((za - xa) / 4) as i32;
    assert_eq!(run(&mut dev, [to_z, 0]).unwrap()[0], 0x0707_0707, "a live neighbour");
    for (offs_v, what) in [([1024, 0], "global_load"), ([0, 1024], "global_store")] {
        let e = run(&mut dev, offs_v).unwrap_err().to_string();
        assert!(e.starts_with("submit failed: rdna3 stray: `") && e.contains(what) && !e.contains('\n'), "{e}");
    }
    dev.free(z).unwrap();
    let e = run(&mut dev, [to_z, 0]).unwrap_err().to_string();
    assert!(e.starts_with("submit failed: rdna3 stray: `global_load"), "a freed buffer: {e}");
}

/// #26 item 13: the artifact's `amdgpu` record is checked on load, as the usb+amd device checks it.
#[test]
fn the_artifacts_dispatch_record_must_match_the_code_object() {
    let Some(co) = rdna3_support::build("emu_device", SOURCE) else { return };
    let mut dev = EmuDevice::new(1);
    let good = spec("axpy", &co, 2);
    let mut edited = good.amdgpu.unwrap().clone();
    edited.vgprs += 8;
    let e = dev.load_program(&ProgramSpec { amdgpu: Some(&edited), ..good }).unwrap_err().to_string();
    assert!(e.starts_with("program `axpy`: the artifact's amdgpu record") && e.contains("differs"), "{e}");
    let e = dev.load_program(&ProgramSpec { amdgpu: None, ..good }).unwrap_err().to_string();
    assert_eq!(e, "program `axpy`: the artifact carries no amdgpu dispatch record");
    dev.load_program(&good).unwrap();
}

/// #26 item 5: VRAM is host memory; the device hands out no more than its cap (default: half the host's).
#[test]
fn vram_past_the_cap_is_out_of_memory() {
    let mut dev = EmuDevice::with_max_vram(1, 1 << 20);
    let a = dev.alloc(512 << 10, BufferUse::Weight).unwrap();
    let e = dev.alloc(600 << 10, BufferUse::Weight).unwrap_err();
    assert!(matches!(e, pilot_core::DeviceError::OutOfMemory { size } if size == 600 << 10), "{e}");
    dev.free(a).unwrap();
    // What a 24 GiB artifact asks for on a default device of a smaller host: refused, not committed.
    let mut dev = EmuDevice::new(1);
    let e = dev.alloc(pilot_rdna3::device::MAX_VRAM as usize + 1, BufferUse::Weight).unwrap_err();
    assert!(matches!(e, pilot_core::DeviceError::OutOfMemory { .. }), "{e}");
}
