//! The fake KGSL running fake-compiled kernels on OpenCL ([`pilot_qcom::fake_exec::ClExecutor`]): streams built
//! with the crate's own encoders, results checked in GPU memory. Every test skips with a note when this machine
//! has no OpenCL, and fails under `PILOT_REQUIRE=1`.
#![cfg(feature = "fake-cl")]

use std::collections::HashMap;
use std::sync::Arc;

use half::f16;
use pilot_qcom::dispatch::{
    ArgsBlock, ArgsLayout, CmdStream, Exec, Image, ImageFormat, KernelInfo, Launch, ShaderKind, SAMPLER_CLAMP_NEAREST,
};
use pilot_qcom::fake::FakeKgsl;
use pilot_qcom::fake_exec::fake_with_opencl;
use pilot_qcom::fake_shader::{FakeShader, ShaderArg};
use pilot_qcom::kgsl::{Context, GpuObject, KgslDevice, DEFAULT_PRIORITY};
use pilot_qcom::reloc::{A6xx, Addr, FnResolve, Sym, ValueSym, Word};

/// A fake KGSL with the OpenCL executor, or `None` (with a note) when this machine has no OpenCL.
fn fake() -> Option<FakeKgsl> {
    match fake_with_opencl() {
        Ok(f) => Some(f),
        Err(e) => {
            pilot_test_support::opencl_missing(e);
            None
        }
    }
}

struct Rig {
    _fake: Arc<FakeKgsl>,
    dev: KgslDevice,
    ctx: Context,
    objs: HashMap<Sym, GpuObject>,
    cmd: GpuObject,
    timeline: u32,
}

impl Rig {
    fn new(fake: FakeKgsl) -> Rig {
        let fake = Arc::new(fake);
        let dev = KgslDevice::from_file(fake.clone()).unwrap();
        let ctx = dev.create_context(DEFAULT_PRIORITY).unwrap();
        let cmd = dev.alloc(0x10000).unwrap();
        let mut rig = Rig { _fake: fake, dev, ctx, objs: HashMap::new(), cmd, timeline: 0 };
        for (sym, size) in [
            (Sym::Backend(A6xx::Stack), 0x4000),
            (Sym::Backend(A6xx::Dummy), 0x1000),
            (Sym::Timeline, 0x1000),
            (Sym::Backend(A6xx::BorderColor), 0x1000),
        ] {
            rig.alloc(sym, size);
        }
        rig
    }

    fn alloc(&mut self, sym: Sym, size: u64) {
        let obj = self.dev.alloc(size).unwrap();
        self.objs.insert(sym, obj);
    }

    fn obj(&mut self, sym: Sym) -> &mut GpuObject {
        self.objs.get_mut(&sym).unwrap()
    }

    fn va(&self, sym: Sym) -> u64 {
        self.objs[&sym].va()
    }

    fn resolve(&self) -> impl Fn(Sym) -> Option<u64> + '_ {
        |s| self.objs.get(&s).map(GpuObject::va)
    }

    /// Uploads `shader` as program 0 and `args` as argument block 0.
    fn load(&mut self, shader: &[u8], args: &ArgsBlock) {
        self.alloc(Sym::Program(0), shader.len() as u64);
        self.obj(Sym::Program(0)).write(0, shader).unwrap();
        self.alloc(Sym::Args(0), args.layout().footprint() as u64);
        let linked = args.buf().link(&FnResolve(self.resolve(), |_| None)).unwrap();
        self.obj(Sym::Args(0)).write_u32s(0, &linked).unwrap();
    }

    /// One launch of program 0 with argument block 0 as one GPU_COMMAND: barrier, exec, signal the timeline.
    fn launch(&mut self, image_size: u32, layout: ArgsLayout, launch: Launch) -> Result<(), String> {
        let e = Exec {
            kind: ShaderKind::QcomCl,
            kernel: KernelInfo { image_size, fregs: 3, hregs: 1, ..Default::default() },
            launch,
            layout,
            shader: Addr::base(Sym::Program(0)),
            args: Addr::base(Sym::Args(0)),
            stack: Addr::base(Sym::Backend(A6xx::Stack)),
            border_color: Addr::base(Sym::Backend(A6xx::BorderColor)),
            dummy: Addr::base(Sym::Backend(A6xx::Dummy)),
        };
        let (timeline, dummy) = (Addr::base(Sym::Timeline), Addr::base(Sym::Backend(A6xx::Dummy)));
        let mut s = CmdStream::new();
        s.memory_barrier(dummy);
        s.exec(&e).unwrap();
        s.signal(timeline, Word::Value(ValueSym::Timeline, 0), dummy);
        self.timeline += 1;
        let value = self.timeline as u64;
        let words = s.buf().link(&FnResolve(self.resolve(), |_| Some(value))).unwrap();
        self.cmd.write_u32s(0, &words).unwrap();
        // SAFETY: the stream lives in `cmd`, which outlives the submission, and touches only the rig's objects,
        // which the test does not borrow until the wait returns.
        let ts = unsafe { self.ctx.submit(self.cmd.va(), words.len()) }.map_err(|e| e.to_string())?;
        self.ctx.wait(ts, 1000).map_err(|e| e.to_string())?;
        assert_eq!(self.obj(Sym::Timeline).read_u32(0).unwrap(), self.timeline);
        Ok(())
    }
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

const ADD: &str = r#"
__kernel void k0_add(__global float* out, __global const float* a, __global const float* b) {
    size_t i = get_global_id(0);
    if (i >= 1000) return;
    out[i] = a[i] + b[i];
}
"#;

#[test]
fn buffers_round_trip_through_opencl() {
    let Some(fake) = fake() else { return };
    let mut r = Rig::new(fake);
    let n = 1000usize;
    let bytes = (n * 4) as u32;
    let shader = FakeShader {
        name: "k0_add".into(),
        args: vec![
            ShaderArg::Buffer { offset_words: 0, bytes, written: true },
            ShaderArg::Buffer { offset_words: 2, bytes, written: false },
            ShaderArg::Buffer { offset_words: 4, bytes, written: false },
        ],
        source: ADD.into(),
    }
    .encode();
    for (i, size) in [(1, 0x1000), (2, 0x1000), (3, 0x1000)] {
        r.alloc(Sym::Buffer(i), size);
    }
    let layout = ArgsLayout::new(ShaderKind::QcomCl, 0, 0, 0).unwrap();
    let mut args = ArgsBlock::new(layout);
    args.set_ptr(0, Addr::base(Sym::Buffer(3))).unwrap();
    args.set_ptr(8, Addr::base(Sym::Buffer(1))).unwrap();
    args.set_ptr(16, Addr::base(Sym::Buffer(2))).unwrap();
    r.load(&shader, &args);
    // Past the kernel's 4000 bytes the output keeps what it held.
    r.obj(Sym::Buffer(3)).write(0, &[0xab; 0x1000]).unwrap();

    for round in 0..2 {
        let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 + round as f32).collect();
        let b: Vec<f32> = (0..n).map(|i| 1000.0 - i as f32 * 3.25).collect();
        r.obj(Sym::Buffer(1)).write(0, &f32_bytes(&a)).unwrap();
        r.obj(Sym::Buffer(2)).write(0, &f32_bytes(&b)).unwrap();
        // 1000 items in groups of 64: 16 groups, 1024 work-items.
        r.launch(shader.len() as u32, layout, Launch::from_global([n as u32, 1, 1], [64, 1, 1]).unwrap()).unwrap();
        let mut out = vec![0u8; 0x1000];
        r.objs[&Sym::Buffer(3)].read(0, &mut out).unwrap();
        let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
        assert_eq!(out[..n * 4], f32_bytes(&want)[..], "round {round}");
        assert!(out[n * 4..].iter().all(|&x| x == 0xab), "round {round}: bytes past the kernel's range changed");
        // Inputs are not written back.
        let mut back = vec![0u8; n * 4];
        r.objs[&Sym::Buffer(1)].read(0, &mut back).unwrap();
        assert_eq!(back, f32_bytes(&a));
    }
}

const IMAGES: &str = r#"
__constant sampler_t smp = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP | CLK_FILTER_NEAREST;

// out(x, y) = 2 * a(x, y) + b(x + 1, y); b reads (0, 0, 0, 0) past its right edge.
__kernel void k1_img(write_only image2d_t out, read_only image2d_t a, read_only image2d_t b) {
    int x = get_global_id(0), y = get_global_id(1);
    float4 v = 2.0f * read_imagef(a, smp, (int2)(x, y)) + read_imagef(b, smp, (int2)(x + 1, y));
    write_imagef(out, (int2)(x, y), v);
}
"#;

/// The IBO's bytes after a launch (or the launch's error), and the bytes expected with clamp-to-border and with
/// clamp-to-edge sampling.
type ImageRun = (Result<Vec<u8>, String>, Vec<u8>, Vec<u8>);

/// Runs `k1_img` on 5x3 images with `sampler` as sampler 0; returns the IBO's bytes and the expected bytes when the
/// sampler reads (0, 0, 0, 0) past the right edge (clamp to border) and when it repeats the edge pixel.
fn run_images(sampler: [u32; 4]) -> Option<ImageRun> {
    let fake = fake()?;
    let mut r = Rig::new(fake);
    let (w, h) = (5u32, 3u32);
    // Float texture (row 80 bytes, pitch 128), half texture (row 40, pitch 64), float IBO (row 80, pitch 256).
    let ta = Image { format: ImageFormat::Rgba32F, width: w, height: h, pitch: 128 };
    let tb = Image { format: ImageFormat::Rgba16F, width: w, height: h, pitch: 64 };
    let out = Image { format: ImageFormat::Rgba32F, width: w, height: h, pitch: 256 };
    let shader = FakeShader {
        name: "k1_img".into(),
        args: vec![ShaderArg::Ibo { index: 0 }, ShaderArg::Texture { index: 0 }, ShaderArg::Texture { index: 1 }],
        source: IMAGES.into(),
    }
    .encode();
    for (i, img) in [(1, ta), (2, tb), (3, out)] {
        r.alloc(Sym::Buffer(i), img.span());
    }
    let layout = ArgsLayout::new(ShaderKind::QcomCl, 2, 1, 1).unwrap();
    let mut args = ArgsBlock::new(layout);
    args.set_ibo(0, &out, Addr::base(Sym::Buffer(3))).unwrap();
    args.set_texture(0, &ta, Addr::base(Sym::Buffer(1))).unwrap();
    args.set_texture(1, &tb, Addr::base(Sym::Buffer(2))).unwrap();
    args.set_sampler(0, sampler).unwrap();
    r.load(&shader, &args);

    let pa = |x: u32, y: u32, c: u32| x as f32 + 10.0 * y as f32 + 0.25 * c as f32;
    let pb = |x: u32, y: u32, c: u32| 0.5 * x as f32 + y as f32 - c as f32;
    let mut a = vec![0u8; ta.span() as usize];
    let mut b = vec![0u8; tb.span() as usize];
    for y in 0..h {
        for x in 0..w {
            for c in 0..4 {
                let at = (y * ta.pitch + x * 16 + c * 4) as usize;
                a[at..at + 4].copy_from_slice(&pa(x, y, c).to_le_bytes());
                let at = (y * tb.pitch + x * 8 + c * 2) as usize;
                b[at..at + 2].copy_from_slice(&f16::from_f32(pb(x, y, c)).to_le_bytes());
            }
        }
    }
    r.obj(Sym::Buffer(1)).write(0, &a).unwrap();
    r.obj(Sym::Buffer(2)).write(0, &b).unwrap();
    let fill = vec![0xcd; out.span() as usize];
    r.obj(Sym::Buffer(3)).write(0, &fill).unwrap();

    let ran = r.launch(shader.len() as u32, layout, Launch::from_groups([1, h, 1], [w, 1, 1]).unwrap());
    let (mut border, mut edge) = (fill.clone(), fill);
    for y in 0..h {
        for x in 0..w {
            for c in 0..4 {
                let at = (y * out.pitch + x * 16 + c * 4) as usize;
                let right = if x + 1 < w { pb(x + 1, y, c) } else { 0.0 };
                border[at..at + 4].copy_from_slice(&(2.0 * pa(x, y, c) + right).to_le_bytes());
                let right = pb((x + 1).min(w - 1), y, c);
                edge[at..at + 4].copy_from_slice(&(2.0 * pa(x, y, c) + right).to_le_bytes());
            }
        }
    }
    let got = ran.map(|()| {
        let mut got = vec![0u8; out.span() as usize];
        r.objs[&Sym::Buffer(3)].read(0, &mut got).unwrap();
        got
    });
    Some((got, border, edge))
}

#[test]
fn textures_and_pitched_ibos_round_trip_through_opencl() {
    let Some((got, border, _)) = run_images(SAMPLER_CLAMP_NEAREST) else { return };
    assert_eq!(got.unwrap(), border, "the IBO's pixels, with its row padding untouched");
}

#[test]
fn the_kernel_samples_with_the_dispatchs_sampler() {
    // Clamp to edge (WRAP_S/T/R = 1): the pixel past the right edge repeats the last one.
    let Some((got, border, edge)) = run_images([0x0920, 0x30, 0, 0]) else { return };
    let got = got.unwrap();
    assert_eq!(got, edge);
    assert_ne!(got, border);
    // Normalized coordinates (no UNNORM_COORDS) with the kernel's integer coordinates: an error, not numbers.
    let Some((got, _, _)) = run_images([0x1b60, 0x10, 0, 0]) else { return };
    let e = got.unwrap_err();
    assert!(e.contains("reads images at integer coordinates, which OpenCL defines only with unnormalized"), "{e}");
    // A filter the a630 path does not use (XY_MAG = 3) is refused when the descriptor is read.
    let Some((got, _, _)) = run_images([0x1b66, 0x30, 0, 0]) else { return };
    let e = got.unwrap_err();
    assert!(
        e.ends_with("sampler 0: A6XX_TEX_SAMP_0_XY_MAG is 3: only nearest and linear filtering are supported"),
        "{e}"
    );
}

#[test]
fn non_fake_shaders_and_bad_pointers_fault_the_context() {
    let Some(fake) = fake() else { return };
    let mut r = Rig::new(fake);
    let layout = ArgsLayout::new(ShaderKind::QcomCl, 0, 0, 0).unwrap();
    let args = ArgsBlock::new(layout);
    let machine_code: Vec<u8> = [0xdead_beef_u32; 64].iter().flat_map(|w| w.to_le_bytes()).collect();
    r.load(&machine_code, &args);
    let launch = Launch::from_groups([1, 1, 1], [32, 1, 1]).unwrap();
    let err = r.launch(machine_code.len() as u32, layout, launch).unwrap_err();
    let shader = r.va(Sym::Program(0));
    assert!(err.starts_with("IOCTL_KGSL_GPU_COMMAND failed: context 1 faulted: launch at PM4 dword "), "{err}");
    assert!(
        err.ends_with(&format!(
            ": shader at {shader:#x} is not a fake shader (it starts [ef, be, ad, de, ef, be, ad, de]): this executor \
             only runs programs compiled with `--qcom-compiler fake`"
        )),
        "{err}"
    );
    assert!(r.ctx.wait(1, 0).unwrap_err().to_string().contains("context 1 faulted"));

    // A fake shader whose buffer pointer (left 0 in the constant file) is outside GPU memory, on a fresh context.
    r.ctx = r.dev.create_context(DEFAULT_PRIORITY).unwrap();
    let shader = FakeShader {
        name: "k2_fill".into(),
        args: vec![ShaderArg::Buffer { offset_words: 2, bytes: 64, written: true }],
        source: "__kernel void k2_fill(__global float* out) { out[get_global_id(0)] = 1.0f; }".into(),
    }
    .encode();
    r.load(&shader, &args);
    let err = r.launch(shader.len() as u32, layout, launch).unwrap_err();
    assert!(
        err.ends_with(
            ": k2_fill: argument 0: buffer 0x0+0x40 (pointer at constant-file byte 8) is outside any GPU allocation"
        ),
        "{err}"
    );
}
