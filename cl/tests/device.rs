//! The OpenCL device on whatever platform this machine has (PoCL in CI). Every test skips with a
//! note when no OpenCL platform is present, and fails under `PILOT_REQUIRE=1`.

use std::sync::Arc;

use pilot_cl::{list_devices, ClDevice};
use pilot_core::device::{
    Arg, BufferId, BufferUse, Device, DeviceError, HostBytes, ImageChannel, ImageDesc, ProgramFormat, ProgramId,
    ProgramSpec, StepOp,
};

/// The default device, or `None` (with a note) when this machine has no OpenCL.
fn open() -> Option<ClDevice> {
    match ClDevice::open(None) {
        Ok(dev) => Some(dev),
        Err(e @ DeviceError::Unavailable(_)) => {
            pilot_test_support::opencl_missing(e);
            None
        }
        Err(e) => panic!("opening the OpenCL device: {e}"),
    }
}

fn floats(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn unfloats(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn read_f32(dev: &mut ClDevice, id: BufferId, offset: u64, n: usize) -> Vec<f32> {
    let mut out = vec![0u8; n * 4];
    dev.copy_out(id, offset, &mut out).unwrap();
    unfloats(&out)
}

fn load(dev: &mut ClDevice, source: &str, name: &str, arg_count: usize) -> ProgramId {
    let spec = ProgramSpec {
        name,
        format: ProgramFormat::OpenClSource,
        code: source.as_bytes(),
        arg_count,
        amdgpu: None,
        ir3: None,
    };
    dev.load_program(&spec).unwrap_or_else(|e| panic!("{e}"))
}

const ARITH: &str = r#"
__kernel void add(__global float* out, __global const float* a, __global const float* b) {
    size_t i = get_global_id(0);
    out[i] = a[i] + b[i];
}

__kernel void scale(__global float* out, __global const float* x) {
    size_t i = get_global_id(0);
    out[i] = 2.0f * x[i] + 1.0f;
}
"#;

const IMAGES: &str = r#"
__constant sampler_t smp = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP | CLK_FILTER_NEAREST;

// dst(x, y) = 2 * src(w - 1 - x, y); reads one pixel past the right edge for x = 0 when `shift` is 1,
// where CLK_ADDRESS_CLAMP gives (0, 0, 0, 0).
__kernel void mirror(__write_only image2d_t dst, __read_only image2d_t src, __global const int* shift) {
    int x = get_global_id(0), y = get_global_id(1);
    int w = get_image_width(src);
    float4 v = read_imagef(src, smp, (int2)(w - 1 - x + shift[0], y));
    write_imagef(dst, (int2)(x, y), 2.0f * v);
}
"#;

#[test]
fn reports_itself() {
    let Some(dev) = open() else { return };
    let info = dev.info();
    assert_eq!(info.backend, "cl");
    assert_eq!(info.arch, dev.device_name());
    assert!(!dev.device_name().is_empty());
    let limits = dev.limits();
    assert!(limits.max_work_group_size >= 1 && limits.max_work_item_sizes[0] >= 1);
    assert!(limits.base_address_align.is_power_of_two());
    let all = list_devices().unwrap();
    assert!(all.iter().any(|d| d.selector == dev.selector() && d.name == dev.device_name()), "{all:?}");
    eprintln!("OpenCL device {} on {}: {limits:?}", dev.device_name(), dev.platform_name());
}

#[test]
fn bad_selectors_are_refused() {
    let Some(_dev) = open() else { return };
    let e = ClDevice::open(Some("99:0")).err().unwrap();
    assert!(matches!(e, DeviceError::Unavailable(_)), "{e}");
    assert!(e.to_string().starts_with("device not available: OpenCL: no platform 99"), "{e}");
    let e = ClDevice::open(Some("zero")).err().unwrap();
    assert!(e.to_string().contains("bad device selector `zero`"), "{e}");
}

#[test]
fn buffers_round_trip() {
    let Some(mut dev) = open() else { return };
    let id = dev.alloc(1000, BufferUse::Scratch).unwrap();
    let mut back = vec![0xAAu8; 1000];
    dev.copy_out(id, 0, &mut back).unwrap();
    assert!(back.iter().all(|&b| b == 0), "alloc is zero-filled");
    let data: Vec<u8> = (0..200u32).map(|i| (i * 7 + 3) as u8).collect();
    dev.copy_in(id, 13, &data).unwrap();
    dev.copy_out(id, 0, &mut back).unwrap();
    assert_eq!(&back[13..213], &data[..]);
    assert!(back[..13].iter().chain(&back[213..]).all(|&b| b == 0));
    let mut part = vec![0u8; 50];
    dev.copy_out(id, 20, &mut part).unwrap();
    assert_eq!(part, &data[7..57]);

    let e = dev.copy_in(id, 990, &[0u8; 11]).unwrap_err();
    assert!(matches!(e, DeviceError::OutOfBounds { offset: 990, len: 11, size: 1000, .. }), "{e}");
    assert!(dev.copy_out(id, u64::MAX, &mut part).is_err());

    let owner: Arc<dyn AsRef<[u8]> + Send + Sync> = Arc::new(data.clone());
    let imported = dev.import(HostBytes::new(owner, 100..150).unwrap(), BufferUse::Weight).unwrap();
    dev.copy_out(imported, 0, &mut part).unwrap();
    assert_eq!(part, &data[100..150]);

    let empty = dev.alloc(0, BufferUse::Scratch).unwrap();
    dev.copy_in(empty, 0, &[]).unwrap();
    assert!(dev.copy_out(empty, 0, &mut [0u8; 1]).is_err());

    dev.free(id).unwrap();
    assert!(matches!(dev.copy_out(id, 0, &mut part), Err(DeviceError::InvalidHandle { kind: "buffer", .. })));
}

fn image_round_trip(channel: ImageChannel) {
    let Some(mut dev) = open() else { return };
    let (width, height) = (5u32, 3u32);
    let row = width as usize * 4 * channel.size();
    let desc = ImageDesc { width, height, pitch: row as u32 + 24, channel };
    let id = dev.alloc_image(desc, BufferUse::Scratch).unwrap();

    let mut back = vec![0xAAu8; desc.bytes()];
    dev.copy_out(id, 0, &mut back).unwrap();
    for r in 0..height as usize {
        let start = r * desc.pitch as usize;
        assert!(back[start..start + row].iter().all(|&b| b == 0), "alloc_image is zero-filled");
    }

    // Finite values in either format (byte i of a half is never part of a NaN pattern here).
    let data: Vec<u8> = match channel {
        ImageChannel::F32 => floats(&(0..desc.bytes() / 4).map(|i| i as f32 * 0.5 - 3.0).collect::<Vec<_>>()),
        ImageChannel::F16 => {
            (0..desc.bytes() / 2).flat_map(|i| half::f16::from_f32(i as f32 * 0.25 - 2.0).to_le_bytes()).collect()
        }
    };
    dev.copy_in(id, 0, &data).unwrap();
    dev.copy_out(id, 0, &mut back).unwrap();
    for r in 0..height as usize {
        let start = r * desc.pitch as usize;
        assert_eq!(&back[start..start + row], &data[start..start + row], "row {r}");
    }

    let e = dev.copy_in(id, 0, &data[..data.len() - 1]).unwrap_err();
    assert!(e.to_string().contains("moves whole"), "{e}");
    let e = dev.copy_out(id, 4, &mut back[..desc.bytes() - 4]).unwrap_err();
    assert!(e.to_string().contains("moves whole"), "{e}");
    let e = dev.copy_out(id, 4, &mut back).unwrap_err();
    assert!(matches!(e, DeviceError::OutOfBounds { .. }), "{e}");

    let short = ImageDesc { pitch: row as u32 - 1, ..desc };
    let e = dev.alloc_image(short, BufferUse::Scratch).unwrap_err();
    assert!(e.to_string().contains("shorter than a row"), "{e}");
}

#[test]
fn float_images_round_trip() {
    image_round_trip(ImageChannel::F32);
}

#[test]
fn half_images_round_trip() {
    image_round_trip(ImageChannel::F16);
}

/// `acc += input[off..]` then `res = 2 * acc + 1`, submitted several times.
#[test]
fn kernels_sharing_a_source_run_as_a_step() {
    let Some(mut dev) = open() else { return };
    let n = 64usize;
    let add = load(&mut dev, ARITH, "add", 3);
    let scale = load(&mut dev, ARITH, "scale", 2);
    assert_eq!(dev.built_sources(), 1, "one build for two kernels of one source");

    let align = dev.limits().base_address_align;
    let input = dev.alloc(align as usize + n * 4, BufferUse::Input).unwrap();
    let acc = dev.alloc(n * 4, BufferUse::State).unwrap();
    let res = dev.alloc(n * 4, BufferUse::Output).unwrap();
    let x: Vec<f32> = (0..n).map(|i| i as f32 - 20.0).collect();
    dev.copy_in(input, align, &floats(&x)).unwrap();

    let arg = |buffer, offset| Arg { buffer, offset };
    let step = dev
        .link_step(&[
            StepOp::Dispatch {
                program: add,
                args: vec![arg(acc, 0), arg(acc, 0), arg(input, align)],
                global: [n as u32, 1, 1],
                local: [0, 0, 0],
            },
            StepOp::Dispatch {
                program: scale,
                args: vec![arg(res, 0), arg(acc, 0)],
                global: [n as u32, 1, 1],
                local: [16, 1, 1],
            },
        ])
        .unwrap();
    assert!(dev.profile(step).is_none(), "profiling is off");

    for k in 1..=4 {
        let t = dev.submit(step).unwrap();
        assert_eq!(t, k);
        dev.wait(t).unwrap();
        let want: Vec<f32> = x.iter().map(|v| 2.0 * (k as f32 * v) + 1.0).collect();
        assert_eq!(read_f32(&mut dev, res, 0, n), want, "after {k} submissions");
    }
    // Several submissions in flight, then one wait; copy_out is ordered after them anyway.
    let last = (0..3).map(|_| dev.submit(step).unwrap()).last().unwrap();
    assert_eq!(last, 7);
    let want: Vec<f32> = x.iter().map(|v| 2.0 * (7.0 * v) + 1.0).collect();
    assert_eq!(read_f32(&mut dev, res, 0, n), want);
    dev.wait(3).unwrap();
    dev.wait(last).unwrap();
    dev.synchronize().unwrap();

    let e = dev.free(acc).unwrap_err();
    assert!(e.to_string().contains("referenced by a linked step"), "{e}");
}

#[test]
fn image_kernels_sample_and_write() {
    let Some(mut dev) = open() else { return };
    if !dev.limits().image_support {
        let what = format!("OpenCL image support ({} has none)", dev.device_name());
        pilot_test_support::missing(&what, "use an OpenCL platform with images (PoCL has them)");
        return;
    }
    let mirror = load(&mut dev, IMAGES, "mirror", 3);
    let (w, h) = (4u32, 2u32);
    let src_desc = ImageDesc { width: w, height: h, pitch: w * 16 + 16, channel: ImageChannel::F32 };
    let dst_desc = ImageDesc { width: w, height: h, pitch: w * 8, channel: ImageChannel::F16 };
    let src = dev.alloc_image(src_desc, BufferUse::Input).unwrap();
    let dst = dev.alloc_image(dst_desc, BufferUse::Output).unwrap();
    let shift = dev.alloc(4, BufferUse::Input).unwrap();

    // Pixel (x, y) channel c holds 100 y + 10 x + c.
    let value = |x: u32, y: u32, c: u32| (100 * y + 10 * x + c) as f32;
    let mut bytes = vec![0u8; src_desc.bytes()];
    for y in 0..h {
        for x in 0..w {
            for c in 0..4 {
                let at = (y * src_desc.pitch + x * 16 + c * 4) as usize;
                bytes[at..at + 4].copy_from_slice(&value(x, y, c).to_le_bytes());
            }
        }
    }
    dev.copy_in(src, 0, &bytes).unwrap();

    let arg = |buffer| Arg { buffer, offset: 0 };
    let step = dev
        .link_step(&[StepOp::Dispatch {
            program: mirror,
            args: vec![arg(dst), arg(src), arg(shift)],
            global: [w, h, 1],
            local: [0, 0, 0],
        }])
        .unwrap();
    for s in [0i32, 1] {
        dev.copy_in(shift, 0, &s.to_le_bytes()).unwrap();
        let t = dev.submit(step).unwrap();
        dev.wait(t).unwrap();
        let mut out = vec![0u8; dst_desc.bytes()];
        dev.copy_out(dst, 0, &mut out).unwrap();
        for y in 0..h {
            for x in 0..w {
                for c in 0..4 {
                    let at = (y * dst_desc.pitch + x * 8 + c * 2) as usize;
                    let got = half::f16::from_le_bytes([out[at], out[at + 1]]).to_f32();
                    let sx = (w - 1 - x) as i32 + s;
                    let want = if sx >= w as i32 { 0.0 } else { 2.0 * value(sx as u32, y, c) };
                    assert_eq!(got, want, "shift {s} pixel ({x}, {y}) channel {c}");
                }
            }
        }
    }

    let e = dev
        .link_step(&[StepOp::Dispatch {
            program: mirror,
            args: vec![Arg { buffer: dst, offset: 64 }, arg(src), arg(shift)],
            global: [w, h, 1],
            local: [0, 0, 0],
        }])
        .unwrap_err();
    assert!(e.to_string().contains("is bound whole"), "{e}");
}

#[test]
fn build_errors_carry_the_log() {
    let Some(mut dev) = open() else { return };
    let source = "__kernel void broken(__global float* out) {\n  out[0] = undeclared_thing;\n}\n";
    let spec = ProgramSpec {
        name: "broken",
        format: ProgramFormat::OpenClSource,
        code: source.as_bytes(),
        arg_count: 1,
        amdgpu: None,
        ir3: None,
    };
    let e = dev.load_program(&spec).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, DeviceError::Program { .. }), "{msg}");
    assert!(msg.starts_with("program `broken`: build failed: CL_BUILD_PROGRAM_FAILURE (-11): "), "{msg}");
    assert!(msg.contains("undeclared_thing"), "the log names the error: {msg}");
    assert!(!msg.contains('\n'), "one line: {msg}");
    eprintln!("{msg}");
}

#[test]
fn bad_programs_are_refused() {
    let Some(mut dev) = open() else { return };
    let spec = |name, format, arg_count| ProgramSpec {
        name,
        format,
        code: ARITH.as_bytes(),
        arg_count,
        amdgpu: None,
        ir3: None,
    };
    let e = dev.load_program(&spec("add", ProgramFormat::Elf, 3)).unwrap_err();
    assert!(e.to_string().contains("cannot run on OpenCL"), "{e}");
    let e = dev.load_program(&spec("nope", ProgramFormat::OpenClSource, 3)).unwrap_err();
    assert!(e.to_string().contains("no kernel of that name"), "{e}");
    let e = dev.load_program(&spec("add", ProgramFormat::OpenClSource, 2)).unwrap_err();
    assert!(e.to_string().contains("takes 3 arguments"), "{e}");
    assert_eq!(dev.built_sources(), 1, "failed loads reuse the one build");

    let add = load(&mut dev, ARITH, "add", 3);
    let b = dev.alloc(256, BufferUse::Scratch).unwrap();
    let arg = Arg { buffer: b, offset: 0 };
    let dispatch = |args: Vec<Arg>, global, local| StepOp::Dispatch { program: add, args, global, local };
    let e = dev.link_step(&[dispatch(vec![arg, arg], [4, 1, 1], [0; 3])]).unwrap_err();
    assert!(e.to_string().contains("passes 2 arguments"), "{e}");
    let e = dev.link_step(&[dispatch(vec![arg; 3], [6, 1, 1], [4, 1, 1])]).unwrap_err();
    assert!(e.to_string().contains("not a multiple of local size"), "{e}");
    let e = dev.link_step(&[dispatch(vec![arg; 3], [4, 1, 1], [0; 3]), StepOp::Copy { src: arg, dst: arg, len: 257 }]);
    assert!(matches!(e, Err(DeviceError::OutOfBounds { .. })));
}

#[test]
fn misaligned_offsets_are_refused() {
    let Some(mut dev) = open() else { return };
    let align = dev.limits().base_address_align;
    let add = load(&mut dev, ARITH, "add", 3);
    let b = dev.alloc(4 * align as usize, BufferUse::Scratch).unwrap();
    let arg = |offset| Arg { buffer: b, offset };
    let e = dev
        .link_step(&[StepOp::Dispatch {
            program: add,
            args: vec![arg(0), arg(align), arg(4)],
            global: [4, 1, 1],
            local: [0; 3],
        }])
        .unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains(&format!("offset 4 into buffer {} is not a multiple", b.0)), "{msg}");
    assert!(msg.contains(&format!("base address alignment ({align} bytes)")), "{msg}");
    eprintln!("{msg}");
    // Nothing was pinned by the failed link.
    dev.free(b).unwrap();
}

#[test]
fn copies_shift_a_queue_in_place() {
    let Some(mut dev) = open() else { return };
    let q = dev.alloc(32, BufferUse::State).unwrap();
    let other = dev.alloc(16, BufferUse::Scratch).unwrap();
    dev.copy_in(q, 0, &floats(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])).unwrap();
    let step = dev
        .link_step(&[
            // Overlapping ranges in one buffer: staged through a temporary.
            StepOp::Copy { src: Arg { buffer: q, offset: 4 }, dst: Arg { buffer: q, offset: 0 }, len: 28 },
            StepOp::Copy { src: Arg { buffer: q, offset: 0 }, dst: Arg { buffer: other, offset: 4 }, len: 12 },
            StepOp::Copy { src: Arg { buffer: q, offset: 0 }, dst: Arg { buffer: other, offset: 0 }, len: 0 },
        ])
        .unwrap();
    let t = dev.submit(step).unwrap();
    dev.wait(t).unwrap();
    assert_eq!(read_f32(&mut dev, q, 0, 8), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 7.0]);
    assert_eq!(read_f32(&mut dev, other, 0, 4), [0.0, 1.0, 2.0, 3.0]);
}

#[test]
fn profiling_times_every_op() {
    let Some(dev) = open() else { return };
    let mut dev = dev.with_profiling(true);
    let add = load(&mut dev, ARITH, "add", 3);
    let scale = load(&mut dev, ARITH, "scale", 2);
    let n = 1 << 12;
    let a = dev.alloc(n * 4, BufferUse::Scratch).unwrap();
    let b = dev.alloc(n * 4, BufferUse::Scratch).unwrap();
    let arg = |buffer| Arg { buffer, offset: 0 };
    let step = dev
        .link_step(&[
            StepOp::Dispatch {
                program: add,
                args: vec![arg(a), arg(a), arg(b)],
                global: [n as u32, 1, 1],
                local: [0; 3],
            },
            StepOp::Dispatch { program: scale, args: vec![arg(b), arg(a)], global: [n as u32, 1, 1], local: [0; 3] },
            StepOp::Copy { src: arg(a), dst: arg(b), len: 64 },
        ])
        .unwrap();
    assert_eq!(dev.profile(step).unwrap(), vec![std::time::Duration::ZERO; 3]);
    dev.submit(step).unwrap();
    dev.submit(step).unwrap();
    let t = dev.submit(step).unwrap();
    dev.wait(t).unwrap();
    let once = dev.profile(step).unwrap();
    assert_eq!(once.len(), 3);
    assert!(once[..2].iter().all(|d| !d.is_zero()), "{once:?}");
    let t = dev.submit(step).unwrap();
    dev.wait(t).unwrap();
    let twice = dev.profile(step).unwrap();
    assert!(twice.iter().zip(&once).all(|(b, a)| b >= a) && twice[0] > once[0], "{once:?} then {twice:?}");
}

#[test]
fn waiting_on_an_unsubmitted_value_fails() {
    let Some(mut dev) = open() else { return };
    dev.wait(0).unwrap();
    let e = dev.wait(1).unwrap_err();
    assert!(e.to_string().contains("timeline value 1 was never submitted (last is 0)"), "{e}");
    dev.synchronize().unwrap();
    assert!(matches!(dev.submit(pilot_core::device::StepId(3)), Err(DeviceError::InvalidHandle { kind: "step", .. })));
}
