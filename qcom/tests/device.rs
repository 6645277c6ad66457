#![cfg(feature = "fake")]
//! `QcomDevice` over the fake KGSL: programs from fake blobs, a two-kernel step with buffers and images, replays,
//! and the failure paths.

use pilot_core::device::{
    Arg, BufferId, BufferUse, Device, DeviceError, ImageChannel, ImageDesc, ProgramFormat, ProgramId, ProgramSpec,
    StepOp,
};
use pilot_qcom::device::QcomDevice;
use pilot_qcom::dispatch::{parse_image_descriptor, ImageFormat, SAMPLER_CLAMP_NEAREST};
use pilot_qcom::fake::{Dispatch, Executor, FakeKgsl, GpuMemory, LaunchPacket};
use pilot_qcom::fake_shader::write_blob as write_fake;
use pilot_qcom::fake_shader::{FakeShader, ShaderArg};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Records the 2 KiB constant file of every dispatch as the GPU sees it at execution.
struct Capture(Arc<Mutex<Vec<Vec<u8>>>>);

impl Executor for Capture {
    fn dispatch(&mut self, d: &Dispatch, mem: &mut dyn GpuMemory) -> Result<(), String> {
        let mut consts = vec![0u8; 2048];
        mem.read(d.consts, &mut consts).map_err(|e| e.to_string())?;
        self.0.lock().unwrap().push(consts);
        Ok(())
    }
}

/// Fails every dispatch.
struct Boom;

impl Executor for Boom {
    fn dispatch(&mut self, _: &Dispatch, _: &mut dyn GpuMemory) -> Result<(), String> {
        Err("boom".into())
    }
}

fn device(fake: FakeKgsl) -> (Arc<FakeKgsl>, QcomDevice) {
    let fake = Arc::new(fake);
    let dev = QcomDevice::with_file(Box::new(fake.clone()), "fake-kgsl").unwrap();
    (fake, dev)
}

fn shader(name: &str, args: Vec<ShaderArg>) -> FakeShader {
    FakeShader { name: name.into(), args, source: format!("__kernel void {name}() {{}}") }
}

fn load(dev: &mut QcomDevice, s: &FakeShader) -> ProgramId {
    let code = write_fake(s);
    dev.load_program(&ProgramSpec {
        name: &s.name,
        format: ProgramFormat::AdrenoBlob,
        code: &code,
        arg_count: s.args.len(),
        amdgpu: None,
        ir3: None,
    })
    .unwrap()
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

/// k0 writes an image from a buffer; k1 reads the image and a buffer into a buffer.
fn programs() -> (FakeShader, FakeShader) {
    let k0 = shader(
        "k0_fill",
        vec![ShaderArg::Ibo { index: 0 }, ShaderArg::Buffer { offset_words: 0, bytes: 64, written: false }],
    );
    let k1 = shader(
        "k1_read",
        vec![
            ShaderArg::Buffer { offset_words: 2, bytes: 400, written: true },
            ShaderArg::Texture { index: 0 },
            ShaderArg::Buffer { offset_words: 4, bytes: 64, written: false },
        ],
    );
    (k0, k1)
}

const IMG: ImageDesc = ImageDesc { width: 16, height: 4, pitch: 256, channel: ImageChannel::F32 };

#[test]
fn a_two_kernel_step_replays_with_one_gpu_command_per_submit() {
    let consts = Arc::new(Mutex::new(Vec::new()));
    let (fake, mut dev) = device(FakeKgsl::new().with_executor(Box::new(Capture(consts.clone()))));
    assert_eq!((dev.info().backend.as_str(), dev.info().arch.as_str()), ("fake-kgsl", "a630"));
    assert_eq!(fake.context_flags(dev.context_id()), Some(0x04008A12));

    let (s0, s1) = programs();
    let (p0, p1) = (load(&mut dev, &s0), load(&mut dev, &s1));
    let a = dev.alloc(256, BufferUse::Input).unwrap();
    let b = dev.alloc(1024, BufferUse::Output).unwrap();
    let img = dev.alloc_image(IMG, BufferUse::Scratch).unwrap();
    let va = |dev: &QcomDevice, id: BufferId| dev.buffer_va(id).unwrap();
    let (a_va, b_va, img_va) = (va(&dev, a), va(&dev, b), va(&dev, img));

    let ops = [
        StepOp::Dispatch {
            program: p0,
            args: vec![Arg { buffer: img, offset: 0 }, Arg { buffer: a, offset: 0 }],
            global: [16, 4, 1],
            local: [16, 1, 1],
        },
        StepOp::Dispatch {
            program: p1,
            args: vec![Arg { buffer: b, offset: 512 }, Arg { buffer: img, offset: 0 }, Arg { buffer: a, offset: 64 }],
            global: [100, 1, 1],
            local: [32, 1, 1],
        },
    ];
    let step = dev.link_step(&ops).unwrap();
    let dwords = dev.step_dwords(step);
    assert!(dwords > 100, "{dwords}");

    dev.copy_in(a, 0, &[7u8; 256]).unwrap();
    for want in 1..=3u64 {
        let before = dev.ioctl_count();
        assert_eq!(dev.submit(step).unwrap(), want);
        assert_eq!(dev.ioctl_count() - before, 1, "one GPU_COMMAND per submit");
    }
    dev.wait(3).unwrap();
    dev.wait(1).unwrap();
    dev.synchronize().unwrap();
    assert_eq!(dev.step_dwords(step), dwords, "the step is not re-encoded");
    let err = dev.wait(4).unwrap_err().to_string();
    assert_eq!(err, "wait failed: timeline value 4 was never submitted (last is 3)");

    let ds = fake.take_dispatches();
    let consts = consts.lock().unwrap().clone();
    assert_eq!((ds.len(), consts.len()), (6, 6));
    for (n, (d, c)) in ds.iter().zip(&consts).enumerate() {
        assert_eq!(d.launch, LaunchPacket::RunOpenCl);
        assert_eq!(d.const_units, 256);
        assert_ne!(d.stack, 0);
        if n % 2 == 0 {
            assert_eq!(d.shader_addr, dev.program_va(p0).unwrap());
            assert_eq!((d.global, d.local, d.groups), ([16, 4, 1], [16, 1, 1], [1, 4, 1]));
            assert_eq!(d.counts(), (0, 0, 1));
            assert_eq!(u64_at(c, 0), a_va);
            let (image, base, ibo) = parse_image_descriptor(&d.ibos[0]).unwrap();
            assert!(ibo);
            assert_eq!(base, img_va);
            assert_eq!((image.width, image.height, image.pitch, image.format), (16, 4, 256, ImageFormat::Rgba32F));
            assert!(d.textures.is_empty() && d.samplers.is_empty());
        } else {
            assert_eq!(d.shader_addr, dev.program_va(p1).unwrap());
            assert_eq!((d.global, d.local, d.groups), ([100, 1, 1], [32, 1, 1], [4, 1, 1]));
            assert_eq!(d.counts(), (1, 2, 0));
            assert_eq!((u64_at(c, 8), u64_at(c, 16)), (b_va + 512, a_va + 64));
            let (image, base, ibo) = parse_image_descriptor(&d.textures[0]).unwrap();
            assert!(!ibo);
            assert_eq!(base, img_va);
            assert_eq!((image.width, image.height, image.pitch, image.format), (16, 4, 256, ImageFormat::Rgba32F));
            assert_eq!(d.samplers, [SAMPLER_CLAMP_NEAREST, [0; 4]]);
            assert_ne!(d.border_color, 0);
        }
        // Every replay runs the same prebuilt argument blocks.
        assert_eq!(d.consts, ds[n % 2].consts);
    }
    assert_ne!(ds[0].consts, ds[1].consts);

    // Buffers a step uses stay; the others go. CPU copies see the buffer's bytes.
    let err = dev.free(a).unwrap_err().to_string();
    assert_eq!(err, "free failed: buffer 0 is referenced by a linked step");
    let mut back = [0u8; 4];
    dev.copy_out(a, 252, &mut back).unwrap();
    assert_eq!(back, [7; 4]);
    assert!(matches!(dev.copy_out(a, 253, &mut back), Err(DeviceError::OutOfBounds { .. })));
    let spare = dev.alloc(10, BufferUse::Scratch).unwrap();
    dev.free(spare).unwrap();
    assert!(matches!(dev.free(spare), Err(DeviceError::InvalidHandle { kind: "buffer", .. })));

    drop(dev);
    assert_eq!(fake.live(), (0, 0, 0), "everything is freed");
}

#[test]
fn half_images_and_plain_no_executor() {
    let (fake, mut dev) = device(FakeKgsl::new());
    let s = shader("k_half", vec![ShaderArg::Texture { index: 0 }, ShaderArg::Ibo { index: 0 }]);
    let p = load(&mut dev, &s);
    let desc = ImageDesc { width: 64, height: 2, pitch: 512, channel: ImageChannel::F16 };
    let (src, dst) =
        (dev.alloc_image(desc, BufferUse::Input).unwrap(), dev.alloc_image(desc, BufferUse::Output).unwrap());
    let args = vec![Arg { buffer: src, offset: 0 }, Arg { buffer: dst, offset: 0 }];
    let step = dev.link_step(&[StepOp::Dispatch { program: p, args, global: [64, 2, 1], local: [64, 1, 1] }]).unwrap();
    let v = dev.submit(step).unwrap();
    dev.wait(v).unwrap();
    let d = fake.take_dispatches().pop().unwrap();
    let (t, tbase, _) = parse_image_descriptor(&d.textures[0]).unwrap();
    let (o, obase, _) = parse_image_descriptor(&d.ibos[0]).unwrap();
    assert_eq!((t.format, t.width, t.height, t.pitch), (ImageFormat::Rgba16F, 64, 2, 512));
    assert_eq!((tbase, obase), (dev.buffer_va(src).unwrap(), dev.buffer_va(dst).unwrap()));
    assert_eq!(o, t);
    // An image the a630 cannot describe is refused at allocation.
    let odd = ImageDesc { pitch: 520, ..desc };
    assert!(dev.alloc_image(odd, BufferUse::Scratch).unwrap_err().to_string().starts_with("alloc_image failed: "));
}

#[test]
fn bad_programs_are_refused_at_load() {
    let (_fake, mut dev) = device(FakeKgsl::new());
    let (s0, _) = programs();
    let code = write_fake(&s0);
    fn spec(code: &[u8]) -> ProgramSpec<'_> {
        ProgramSpec { name: "k0_fill", format: ProgramFormat::AdrenoBlob, code, arg_count: 2, amdgpu: None, ir3: None }
    }
    let mut e = dev.load_program(&spec(&code[..code.len() / 2])).unwrap_err().to_string();
    assert!(e.starts_with("program `k0_fill`: adreno blob: "), "{e}");
    let mut corrupt = code.clone();
    corrupt[0x18] = 3; // num_sections
    e = dev.load_program(&spec(&corrupt)).unwrap_err().to_string();
    assert_eq!(e, "program `k0_fill`: adreno blob: num_sections at offset 0x18: 3 sections, at least 12 needed");
    e = dev.load_program(&ProgramSpec { arg_count: 3, ..spec(&code) }).unwrap_err().to_string();
    assert_eq!(e, "program `k0_fill`: the blob has 2 arguments, the program says 3");
    e = dev.load_program(&ProgramSpec { format: ProgramFormat::OpenClSource, ..spec(&code) }).unwrap_err().to_string();
    assert_eq!(e, "program `k0_fill`: format OpenClSource cannot run on the a630 (it takes AdrenoBlob or A6xxIr3)");
    e = dev.load_program(&ProgramSpec { format: ProgramFormat::A6xxIr3, ..spec(&code) }).unwrap_err().to_string();
    assert_eq!(e, "program `k0_fill`: ir3 code without its `ir3` dispatch record");
    e = dev.load_program(&ProgramSpec { name: "k9", ..spec(&code) }).unwrap_err().to_string();
    assert!(e.contains("expected `k9`"), "{e}");
    assert_eq!(load(&mut dev, &s0), ProgramId(0));
}

#[test]
fn bad_steps_are_refused_at_link() {
    let (_fake, mut dev) = device(FakeKgsl::new());
    let (s0, s1) = programs();
    let (p0, _p1) = (load(&mut dev, &s0), load(&mut dev, &s1));
    let a = dev.alloc(256, BufferUse::Input).unwrap();
    let img = dev.alloc_image(IMG, BufferUse::Scratch).unwrap();
    let args = vec![Arg { buffer: img, offset: 0 }, Arg { buffer: a, offset: 0 }];
    let dispatch = |args: Vec<Arg>, local: [u32; 3]| StepOp::Dispatch { program: p0, args, global: [64, 32, 2], local };
    let link = |dev: &mut QcomDevice, op: StepOp| dev.link_step(&[op]).unwrap_err().to_string();

    let e = link(&mut dev, dispatch(args.clone(), [2048, 1, 1]));
    assert!(e.starts_with("link_step failed: dispatch 0 (`k0_fill`): local size [2048, 1, 1] must be within"), "{e}");
    let e = link(&mut dev, dispatch(args.clone(), [32, 32, 2]));
    assert_eq!(
        e,
        "link_step failed: dispatch 0 (`k0_fill`): local size [32, 32, 2] is 2048 work-items per group; the kernel's \
         register footprint (4 full, 0 half) allows at most 1024"
    );
    let e = link(&mut dev, dispatch(vec![args[1], args[1]], [8, 8, 1]));
    assert_eq!(
        e,
        "link_step failed: dispatch 0 (`k0_fill`): argument 0 (Ibo) needs an image, buffer 0 is a plain buffer"
    );
    let e = link(&mut dev, dispatch(vec![args[0], Arg { buffer: a, offset: 300 }], [8, 8, 1]));
    assert!(e.ends_with("argument 1: offset 300 is past the end of buffer 0 (256 bytes)"), "{e}");
    let e = link(&mut dev, dispatch(vec![args[0]], [8, 8, 1]));
    assert!(e.ends_with("1 arguments given, the kernel takes 2"), "{e}");
    let copy = StepOp::Copy { src: Arg { buffer: a, offset: 0 }, dst: Arg { buffer: a, offset: 128 }, len: 64 };
    assert!(matches!(dev.link_step(&[copy]), Err(DeviceError::Unsupported(_))));
    assert!(matches!(dev.submit(pilot_core::device::StepId(0)), Err(DeviceError::InvalidHandle { kind: "step", .. })));
    // Nothing got linked, so the buffers can go.
    dev.free(a).unwrap();
    dev.free(img).unwrap();
}

#[test]
fn a_faulting_dispatch_fails_the_submit() {
    let (_fake, mut dev) = device(FakeKgsl::new().with_executor(Box::new(Boom)));
    let (s0, _) = programs();
    let p0 = load(&mut dev, &s0);
    let a = dev.alloc(256, BufferUse::Input).unwrap();
    let img = dev.alloc_image(IMG, BufferUse::Scratch).unwrap();
    let args = vec![Arg { buffer: img, offset: 0 }, Arg { buffer: a, offset: 0 }];
    let step = dev.link_step(&[StepOp::Dispatch { program: p0, args, global: [16, 4, 1], local: [16, 1, 1] }]).unwrap();
    let e = dev.submit(step).unwrap_err().to_string();
    assert!(e.contains("context 1 faulted") && e.contains("boom"), "{e}");
    // The context stays faulted; nothing was handed out to wait on.
    assert!(dev.submit(step).unwrap_err().to_string().contains("context 1 faulted"));
    assert!(dev.wait(1).is_err());
    dev.synchronize().unwrap();
}

#[test]
fn missing_node_and_other_chips_are_unavailable() {
    let e = QcomDevice::open_path(Path::new("/nonexistent/kgsl-3d0"), 8).unwrap_err();
    assert!(matches!(e, DeviceError::Unavailable(_)));
    assert_eq!(e.to_string(), "device not available: /nonexistent/kgsl-3d0: No such file or directory");
    if !Path::new("/dev/kgsl-3d0").exists() {
        assert!(matches!(QcomDevice::open(8), Err(DeviceError::Unavailable(_))));
    }
    let fake = Arc::new(FakeKgsl::new().with_chip_id(0x0703_0001));
    let e = QcomDevice::with_file(Box::new(fake.clone()), "fake-kgsl").unwrap_err();
    assert_eq!(
        e.to_string(),
        "device not available: unsupported GPU: chip_id=0x07030001 (a730); only a630 is supported"
    );
    assert_eq!(fake.live(), (0, 0, 0));
}

/// The shared hazard policy: a barrier before the first dispatch and before one that touches a buffer an earlier
/// one touched, none between independent ones; the fake, which faults a context on an unordered read of an earlier
/// write, runs both steps.
#[test]
fn barriers_go_only_between_dependent_dispatches() {
    use pilot_qcom::dispatch::CmdStream;
    use pilot_qcom::reloc::{A6xx, Addr, Sym};
    let mut barrier = CmdStream::new();
    barrier.memory_barrier(Addr::base(Sym::Backend(A6xx::Dummy)));
    let barrier = barrier.buf().len();

    let (fake, mut dev) = device(FakeKgsl::new());
    let copy = shader(
        "k_copy",
        vec![
            ShaderArg::Buffer { offset_words: 0, bytes: 64, written: false },
            ShaderArg::Buffer { offset_words: 2, bytes: 64, written: true },
        ],
    );
    let p = load(&mut dev, &copy);
    let [a, b, c, d] = [0; 4].map(|_| dev.alloc(64, BufferUse::Scratch).unwrap());
    let op = |src: BufferId, dst: BufferId| StepOp::Dispatch {
        program: p,
        args: vec![Arg { buffer: src, offset: 0 }, Arg { buffer: dst, offset: 0 }],
        global: [16, 1, 1],
        local: [16, 1, 1],
    };
    let independent = dev.link_step(&[op(a, b), op(c, d)]).unwrap();
    let dependent = dev.link_step(&[op(a, b), op(b, d)]).unwrap();
    assert_eq!(dev.step_dwords(dependent), dev.step_dwords(independent) + barrier);
    for step in [independent, dependent, independent] {
        let v = dev.submit(step).unwrap();
        dev.wait(v).unwrap();
    }
    assert_eq!(fake.take_dispatches().len(), 6);
}
