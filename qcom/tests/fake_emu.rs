//! The fake KGSL executing a6xx machine code on the a6xx emulator ([`pilot_qcom::fake_emu::EmuExecutor`]): programs
//! encoded by Mesa's own assembler (`target/ir3-asm/ir3-asm`, Mesa's `ir3_parse_asm`), launched with the crate's
//! dispatch encoder (`ShaderKind::Ir3`, CP_EXEC_CS) through the fake's ioctls, results compared with Rust. Then the
//! ways a stream can be wrong — constant layout, register footprint, descriptors, a missing sync flag in the code —
//! each stop the emulator with a precise error or give wrong numbers.
//! Without the assembler the tests skip with a note, and fail under `PILOT_REQUIRE=1`.
#![cfg(feature = "fake-emu")]

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use half::f16;
use pilot_qcom::dispatch::{
    ArgsBlock, ArgsLayout, CmdStream, Exec, Image, ImageFormat, KernelInfo, Launch, ShaderKind, SAMPLER_CLAMP_NEAREST,
};
use pilot_qcom::fake::FakeKgsl;
use pilot_qcom::fake_emu::EmuExecutor;
use pilot_qcom::kgsl::{Context, GpuObject, KgslDevice, DEFAULT_PRIORITY};
use pilot_qcom::reloc::{A6xx, Addr, FnResolve, Sym, ValueSym, Word};

/// Mesa's assembler output: the code and the footprint Mesa computes for it.
struct Assembled {
    code: Vec<u8>,
    max_reg: i32,
}

fn ir3_asm() -> Option<PathBuf> {
    let p = pilot_test_support::require::repo_root().join("target/ir3-asm/ir3-asm");
    pilot_test_support::require::or_missing(p.is_file().then_some(p), "target/ir3-asm/ir3-asm", "run scripts/setup.sh")
}

fn assemble(src: &str) -> Option<Assembled> {
    let tool = ir3_asm()?;
    let dir = tempfile::tempdir().unwrap();
    let (i, o) = (dir.path().join("in.asm"), dir.path().join("out.bin"));
    std::fs::write(&i, src).unwrap();
    let out = Command::new(tool).arg(&i).arg(&o).output().unwrap();
    assert!(out.status.success(), "ir3-asm failed on:\n{src}\n{}", String::from_utf8_lossy(&out.stderr));
    let info = String::from_utf8(out.stdout).unwrap();
    let max_reg = info.split_whitespace().find_map(|kv| kv.strip_prefix("max_reg=")).unwrap().parse().unwrap();
    Some(Assembled { code: std::fs::read(&o).unwrap(), max_reg })
}

/// Local id x, y, z arrive in r0.x..z (register id 0), the work-group id in r1.x..z (register id 4).
const KIND: ShaderKind = ShaderKind::Ir3 { wgid: 4, wgsz: 0xfc, lid: 0 };

struct Rig {
    _fake: Arc<FakeKgsl>,
    _dev: KgslDevice,
    ctx: Context,
    objs: HashMap<Sym, GpuObject>,
    cmd: GpuObject,
    timeline: u32,
}

impl Rig {
    fn new() -> Rig {
        let fake = Arc::new(FakeKgsl::new().with_executor(Box::new(EmuExecutor::new().with_threads(1))));
        let dev = KgslDevice::from_file(fake.clone()).unwrap();
        let ctx = dev.create_context(DEFAULT_PRIORITY).unwrap();
        let cmd = dev.alloc(0x10000).unwrap();
        let mut rig = Rig { _fake: fake, _dev: dev, ctx, objs: HashMap::new(), cmd, timeline: 0 };
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
        let obj = self._dev.alloc(size).unwrap();
        self.objs.insert(sym, obj);
    }

    fn obj(&mut self, sym: Sym) -> &mut GpuObject {
        self.objs.get_mut(&sym).unwrap()
    }

    fn resolve(&self) -> impl Fn(Sym) -> Option<u64> + '_ {
        |s| self.objs.get(&s).map(GpuObject::va)
    }

    /// Uploads `code` as program 0 and `args` as argument block 0, then lets `patch` rewrite the block's words.
    fn load(&mut self, code: &[u8], args: &ArgsBlock, patch: impl FnOnce(&mut [u32])) {
        let size = code.len().div_ceil(128) * 128;
        self.alloc(Sym::Program(0), size as u64);
        self.obj(Sym::Program(0)).write(0, code).unwrap();
        self.alloc(Sym::Args(0), args.layout().footprint() as u64);
        let mut linked = args.buf().link(&FnResolve(self.resolve(), |_| None)).unwrap();
        patch(&mut linked);
        self.obj(Sym::Args(0)).write_u32s(0, &linked).unwrap();
    }

    /// One CP_EXEC_CS of program 0 with argument block 0: barrier, exec, signal the timeline; the fake's error if
    /// the submission or the dispatch fails.
    fn launch(&mut self, kernel: KernelInfo, layout: ArgsLayout, launch: Launch) -> Result<(), String> {
        let e = Exec {
            kind: KIND,
            kernel,
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
        s.exec(&e).map_err(|e| e.to_string())?;
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

    fn read_f32s(&self, sym: Sym, n: usize) -> Vec<f32> {
        let mut b = vec![0u8; n * 4];
        self.objs[&sym].read(0, &mut b).unwrap();
        b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
    }
}

fn kernel_info(a: &Assembled) -> KernelInfo {
    KernelInfo { image_size: a.code.len() as u32, fregs: (a.max_reg + 1) as u32, ..Default::default() }
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// `out[i] = a[i] * k + b[i]` over 4 work-groups of 64, as ir3 lays such a kernel out: the buffer addresses in
/// c0.xy (out), c0.zw (a), c1.xy (b), the scalar `k` in c2.x, the global id from the work-group and local ids.
const AXPY: &str = "mov.u32u32 r2.x, c0.x
mov.u32u32 r2.y, c0.y
mov.u32u32 r2.z, c0.z
mov.u32u32 r2.w, c0.w
mov.u32u32 r3.x, c1.x
mov.u32u32 r3.y, c1.y
shl.b r1.y, r1.x, 6
add.u r1.y, r1.y, r0.x
ldg.a.u32 r4.x, g[r2.z+(r1.y)<<2], 1
ldg.a.u32 r4.y, g[r3.x+(r1.y)<<2], 1
(sy)mad.f32 r5.x, c2.x, r4.x, r4.y
stg.a.u32 g[r2.x+(r1.y)<<2], r5.x, 1
end
";

const N: usize = 256;

struct Axpy {
    a: Vec<f32>,
    b: Vec<f32>,
    k: f32,
}

impl Axpy {
    fn new() -> Axpy {
        let a = (0..N).map(|i| i as f32 * 0.25 - 7.0).collect();
        let b = (0..N).map(|i| 100.0 - i as f32 * 1.5).collect();
        Axpy { a, b, k: 3.0 }
    }

    fn want(&self) -> Vec<f32> {
        self.a.iter().zip(&self.b).map(|(a, b)| a * self.k + b).collect()
    }

    /// Runs `src` with the kernel info `info` gives and the argument block `patch` may corrupt; returns `out`.
    fn run(
        &self,
        src: &str,
        info: impl FnOnce(&Assembled) -> KernelInfo,
        patch: impl FnOnce(&mut [u32]),
    ) -> Option<Result<Vec<f32>, String>> {
        let asm = assemble(src)?;
        let mut r = Rig::new();
        for (i, v) in [(1, &self.a), (2, &self.b)] {
            r.alloc(Sym::Buffer(i), (N * 4) as u64);
            r.obj(Sym::Buffer(i)).write(0, &f32_bytes(v)).unwrap();
        }
        r.alloc(Sym::Buffer(3), (N * 4) as u64);
        let layout = ArgsLayout::new(KIND, 0, 0, 0).unwrap();
        let mut args = ArgsBlock::new(layout);
        args.set_ptr(0, Addr::base(Sym::Buffer(3))).unwrap();
        args.set_ptr(8, Addr::base(Sym::Buffer(1))).unwrap();
        args.set_ptr(16, Addr::base(Sym::Buffer(2))).unwrap();
        args.set_u32(32, self.k.to_bits()).unwrap();
        r.load(&asm.code, &args, patch);
        let launch = Launch::from_groups([4, 1, 1], [64, 1, 1]).unwrap();
        Some(r.launch(info(&asm), layout, launch).map(|()| r.read_f32s(Sym::Buffer(3), N)))
    }
}

#[test]
fn an_ir3_program_runs_from_the_stream_alone() {
    let t = Axpy::new();
    let Some(got) = t.run(AXPY, kernel_info, |_| {}) else { return };
    assert_eq!(got.unwrap(), t.want());
}

#[test]
fn a_wrong_constant_layout_gives_wrong_numbers_or_a_fault() {
    let t = Axpy::new();
    // The scalar one dword off (c2.y instead of c2.x): c2.x reads 0, out = b.
    let Some(got) = t.run(AXPY, kernel_info, |w| w.swap(8, 9)) else { return };
    assert_eq!(got.unwrap(), t.b);
    // The `a` pointer's halves swapped: its loads fall outside every allocation.
    let e = t.run(AXPY, kernel_info, |w| w.swap(2, 3)).unwrap().unwrap_err();
    assert!(e.contains("a6xx fault at instruction 8") && e.contains("outside any GPU allocation"), "{e}");
}

#[test]
fn a_register_footprint_below_the_code_faults() {
    let t = Axpy::new();
    let e = t.run(AXPY, |a| KernelInfo { fregs: a.max_reg as u32, ..kernel_info(a) }, |_| {}).map(|r| r.unwrap_err());
    let Some(e) = e else { return };
    assert!(e.contains("a6xx fault at instruction") && e.contains("footprint"), "{e}");
}

#[test]
fn a_missing_sync_flag_faults() {
    let t = Axpy::new();
    let Some(r) = t.run(&AXPY.replace("(sy)mad", "mad"), kernel_info, |_| {}) else { return };
    let e = r.unwrap_err();
    assert!(e.contains("a6xx fault at instruction 10") && e.contains("(sy)"), "{e}");
}

/// `out(x, y) = a(x, y) + b(x, y)` on 16x8 images (a RGBA32F texture, b RGBA16F, out an RGBA32F IBO), 2x2 work-groups
/// of 8x4: texture sampling and image stores through the descriptors the stream loaded.
const IMAGES: &str = "shl.b r2.x, r1.x, 3
add.u r2.x, r2.x, r0.x
shl.b r2.y, r1.y, 2
add.u r2.y, r2.y, r0.y
isam (f32)(xyzw)r4.x, r2.x, s#0, t#0
isam (f32)(xyzw)r5.x, r2.x, s#1, t#1
(sy)add.f r6.x, r4.x, r5.x
add.f r6.y, r4.y, r5.y
add.f r6.z, r4.z, r5.z
add.f r6.w, r4.w, r5.w
stib.b.typed.2d.f32.4.imm r6.x, r2.x, 0
end
";

const W: u32 = 16;
const H: u32 = 8;

fn texel(x: u32, y: u32, c: u32) -> f32 {
    (x * 4 + c) as f32 * 0.5 - y as f32
}

/// Runs [`IMAGES`]; `patch` may corrupt the argument block (textures at 2048, 2112, the IBO at 2176).
/// The IBO's texels after the launch (or the launch's error), and the texels expected.
type ImageRun = (Result<Vec<f32>, String>, Vec<f32>);

fn run_images(patch: impl FnOnce(&mut [u32])) -> Option<ImageRun> {
    let asm = assemble(IMAGES)?;
    let mut r = Rig::new();
    let ta = Image { format: ImageFormat::Rgba32F, width: W, height: H, pitch: 320 };
    let tb = Image { format: ImageFormat::Rgba16F, width: W, height: H, pitch: 128 };
    let out = Image { format: ImageFormat::Rgba32F, width: W, height: H, pitch: 256 };
    let mut a = vec![0u8; ta.span() as usize];
    let mut b = vec![0u8; tb.span() as usize];
    for y in 0..H {
        for x in 0..W {
            for c in 0..4 {
                let oa = (y * ta.pitch + x * 16 + c * 4) as usize;
                a[oa..oa + 4].copy_from_slice(&texel(x, y, c).to_le_bytes());
                let ob = (y * tb.pitch + x * 8 + c * 2) as usize;
                b[ob..ob + 2].copy_from_slice(&f16::from_f32(texel(x, y, c) * 2.0).to_le_bytes());
            }
        }
    }
    for (i, bytes) in [(1, &a), (2, &b)] {
        r.alloc(Sym::Buffer(i), bytes.len() as u64);
        r.obj(Sym::Buffer(i)).write(0, bytes).unwrap();
    }
    r.alloc(Sym::Buffer(3), out.span());
    let layout = ArgsLayout::new(KIND, 2, 1, 2).unwrap();
    let mut args = ArgsBlock::new(layout);
    args.set_texture(0, &ta, Addr::base(Sym::Buffer(1))).unwrap();
    args.set_texture(1, &tb, Addr::base(Sym::Buffer(2))).unwrap();
    args.set_ibo(0, &out, Addr::base(Sym::Buffer(3))).unwrap();
    args.set_sampler(0, SAMPLER_CLAMP_NEAREST).unwrap();
    args.set_sampler(1, SAMPLER_CLAMP_NEAREST).unwrap();
    r.load(&asm.code, &args, patch);
    let launch = Launch::from_groups([2, 2, 1], [8, 4, 1]).unwrap();
    let got = r.launch(kernel_info(&asm), layout, launch).map(|()| {
        let all = r.read_f32s(Sym::Buffer(3), out.span() as usize / 4);
        (0..H).flat_map(|y| (0..W * 4).map(move |i| (y, i))).map(|(y, i)| all[(y * 64 + i) as usize]).collect()
    });
    let want = (0..H).flat_map(|y| (0..W).flat_map(move |x| (0..4).map(move |c| texel(x, y, c) * 3.0))).collect();
    Some((got, want))
}

#[test]
fn textures_and_images_come_from_the_loaded_descriptors() {
    let Some((got, want)) = run_images(|_| {}) else { return };
    assert_eq!(got.unwrap(), want);
}

#[test]
fn a_wrong_descriptor_gives_wrong_numbers_or_a_fault() {
    // Texture 0's pitch field (dword 2, bits 7..28) one row of 64 bytes short: rows land at the wrong texels.
    let pitch = |w: &mut [u32]| w[512 + 2] = (w[512 + 2] & !(0x3f_ffff << 7)) | (256 << 7);
    let Some((got, want)) = run_images(pitch) else { return };
    assert_ne!(got.unwrap(), want);
    // Texture 1 claims RGBA32F (FMT6 0x82) over its RGBA16F rows: the fake's descriptor check refuses the pitch.
    let format = |w: &mut [u32]| w[528] = (w[528] & !(0xff << 22)) | (0x82 << 22);
    let e = run_images(format).unwrap().0.unwrap_err();
    assert!(e.contains("texture 1 descriptor") && e.contains("PITCH"), "{e}");
    // Both textures bound to texture 0's image (texture 1's base address overwritten): wrong numbers.
    let Some((got, want)) = run_images(|w| (w[528 + 4], w[528 + 5]) = (w[512 + 4], w[512 + 5])) else { return };
    assert_ne!(got.unwrap(), want);
    // The IBO descriptor in a tiled mode: refused with the field's name.
    let e = run_images(|w| w[544] |= 3).unwrap().0.unwrap_err();
    assert!(e.contains("IBO 0 descriptor") && e.contains("TILE_MODE is 3"), "{e}");
}
