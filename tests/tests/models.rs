//! The model tests: openpilot-like and exporter-style models (built by `scripts/make_models.py`),
//! compiled for the CPU and for OpenCL (run on PoCL: plain, `--image`, `--image --float16`), stepped
//! through the runtime, and compared with onnxruntime on the same seeded inputs: scaled error
//! `|got - ref| / max(1, |ref|)` ≤ 1e-4, or ≤ 1e-2 where images are stored as half.

use std::collections::HashMap;
use std::process::Command;

use pilot_core::cpu::CpuDevice;
use pilot_core::npy;
use pilot_core::{Arch, Artifact, Backend, Session, Target};
use pilot_tests::models::{compare_with_onnxruntime, root, seeded_input, seeded_inputs, test_models};

/// What a model is compiled for and run on.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Cpu,
    Cl,
    ClImage,
    ClImageHalf,
    /// `--target qcom --qcom-compiler fake` on the fake KGSL (which runs each dispatch on PoCL).
    QcomFake,
    /// The same with `--image --float16 --nolocals`, as openpilot compiles for the car.
    QcomFakeImageHalf,
    /// `--target qcom --qcom-compiler ir3` on the fake KGSL, whose dispatches run the a6xx code on the emulator.
    QcomIr3,
    /// The same with `--image --float16 --nolocals`.
    QcomIr3ImageHalf,
}

impl Mode {
    fn options(self) -> pilot_compiler::CompileOptions {
        let backend = match self {
            Mode::Cpu => Backend::Cpu,
            Mode::QcomFake | Mode::QcomFakeImageHalf | Mode::QcomIr3 | Mode::QcomIr3ImageHalf => Backend::Qcom,
            _ => Backend::Cl,
        };
        let mut o = pilot_compiler::CompileOptions::new(Target::default_for(backend).unwrap());
        let ihn = matches!(self, Mode::QcomFakeImageHalf | Mode::QcomIr3ImageHalf);
        o.target.image = ihn || matches!(self, Mode::ClImage | Mode::ClImageHalf);
        o.target.float16 = ihn || self == Mode::ClImageHalf;
        o.target.nolocals = ihn;
        o.cl.qcom_compiler = match self {
            Mode::QcomIr3 | Mode::QcomIr3ImageHalf => pilot_compiler::target::qcom::QcomCompiler::Ir3,
            _ => pilot_compiler::target::qcom::QcomCompiler::Fake,
        };
        o
    }

    fn device(self) -> Box<dyn pilot_core::Device> {
        match self {
            Mode::Cpu => Box::new(CpuDevice::new(2)),
            Mode::QcomFake | Mode::QcomFakeImageHalf => {
                let fake = pilot_qcom::fake_exec::fake_with_opencl().expect("the fake KGSL runs on PoCL");
                Box::new(pilot_qcom::device::QcomDevice::with_file(Box::new(fake), "fake-kgsl").unwrap())
            }
            Mode::QcomIr3 | Mode::QcomIr3ImageHalf => {
                let emu = pilot_qcom::fake_emu::EmuExecutor::new();
                let fake = pilot_qcom::fake::FakeKgsl::new().with_executor(Box::new(emu));
                Box::new(pilot_qcom::device::QcomDevice::with_file(Box::new(fake), "fake-kgsl").unwrap())
            }
            _ => Box::new(pilot_cl::ClDevice::open(None).expect("the OpenCL tests need PoCL: run scripts/setup.sh")),
        }
    }

    fn tolerance(self) -> f64 {
        if matches!(self, Mode::ClImageHalf | Mode::QcomFakeImageHalf | Mode::QcomIr3ImageHalf) {
            1e-2
        } else {
            1e-4
        }
    }
}

struct Checked {
    worst: f64,
    kernels: usize,
}

fn compile_run_compare(name: &str, shapes: &[(&str, &[usize])], mode: Mode) -> Checked {
    let dir = tempfile::tempdir().unwrap();
    let model = test_models().join(format!("{name}.onnx"));
    let art = dir.path().join(format!("{name}.pkl"));
    let opts = pilot_compiler::CompileOptions {
        shapes: shapes.iter().map(|(n, s)| (n.to_string(), s.to_vec())).collect::<HashMap<_, _>>(),
        ..mode.options()
    };
    let report = pilot_compiler::compile(&model, &art, &opts, &|_| {}).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut session = Session::new(Artifact::open(&art).unwrap(), mode.device()).unwrap();
    let (arrays, feeds) = seeded_inputs(&session, dir.path());
    let refs: Vec<&[u8]> = arrays.iter().map(|a| a.data.as_slice()).collect();
    session.step(&refs).unwrap();
    let label = format!("{name} {mode:?}");
    let worst = compare_with_onnxruntime(&label, &model, &feeds, &session, mode.tolerance(), dir.path());
    // The artifact loads with Python's standard library alone and holds only builtins.
    let check = format!(
        "import io, pickle, struct\nf = open({:?}, 'rb')\nn = struct.unpack('<q', f.read(8))[0]\nops = f.read(n)\n\
         def gen():\n    while True:\n        h = f.read(8)\n        if not h: return\n        b = bytearray(struct.unpack('<q', h)[0]); f.readinto(b); yield pickle.PickleBuffer(b)\n\
         d = pickle.load(io.BytesIO(ops), buffers=gen())\nassert d['format'] == 'pilot', d['format']\nprint(len(d['programs']))",
        art.display().to_string()
    );
    let o = Command::new("python3").arg("-c").arg(check).output().unwrap();
    assert!(o.status.success(), "stdlib load: {}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), report.kernels.to_string());
    Checked { worst, kernels: report.kernels }
}

#[test]
fn vision_uint8_planes_with_depthwise_elu() {
    let c = compile_run_compare("vision", &[], Mode::Cpu);
    eprintln!("vision: {} kernels, worst scaled error {:.2e}", c.kernels, c.worst);
}

#[test]
fn policy_gru_like_with_features_buffer() {
    let c = compile_run_compare("policy", &[], Mode::Cpu);
    eprintln!("policy: {} kernels, worst scaled error {:.2e}", c.kernels, c.worst);
}

#[test]
fn dmonitoring_with_unfolded_batchnorm() {
    let c = compile_run_compare("dmonitoring", &[], Mode::Cpu);
    eprintln!("dmonitoring: {} kernels, worst scaled error {:.2e}", c.kernels, c.worst);
}

#[test]
fn exporter_shape_subgraphs_with_pinned_dynamic_dims() {
    let c = compile_run_compare("exporter", &[("x", &[2, 3, 8, 12])], Mode::Cpu);
    eprintln!("exporter: {} kernels, worst scaled error {:.2e}", c.kernels, c.worst);
}

/// A conv trunk into a bidirectional LSTM over 24 steps (`--float16` keeps its state in float32).
#[test]
fn ocr_conv_lstm_recognizer() {
    let c = compile_run_compare("ocr", &[], Mode::Cpu);
    eprintln!("ocr: {} kernels, worst scaled error {:.2e}", c.kernels, c.worst);
}

/// Every model in `mode` (OpenCL or the fake KGSL), compared with onnxruntime.
fn all_models_on(mode: Mode) {
    for (name, shapes) in [
        ("vision", &[][..]),
        ("policy", &[][..]),
        ("dmonitoring", &[][..]),
        ("exporter", &[("x", &[2usize, 3, 8, 12][..])][..]),
        ("ocr", &[][..]),
    ] {
        let c = compile_run_compare(name, shapes, mode);
        eprintln!("{name} {mode:?}: {} kernels, worst scaled error {:.2e}", c.kernels, c.worst);
    }
}

#[test]
fn models_on_opencl() {
    all_models_on(Mode::Cl);
}

#[test]
fn models_on_opencl_images() {
    all_models_on(Mode::ClImage);
}

#[test]
fn models_on_opencl_half_images() {
    all_models_on(Mode::ClImageHalf);
}

/// Grouped convolutions (groups of whole pixels), depthwise and pointwise ones, on the CPU and through
/// float and half images.
#[test]
fn grouped_convolutions_through_images() {
    for mode in [Mode::Cpu, Mode::ClImage, Mode::ClImageHalf] {
        let c = compile_run_compare("grouped", &[], mode);
        eprintln!("grouped {mode:?}: {} kernels, worst scaled error {:.2e}", c.kernels, c.worst);
    }
}

#[test]
fn models_on_the_fake_kgsl() {
    all_models_on(Mode::QcomFake);
}

#[test]
fn models_on_the_fake_kgsl_half_images_nolocals() {
    all_models_on(Mode::QcomFakeImageHalf);
}

/// The a6xx machine code Mesa's ir3 compiled, executed by the a6xx emulator behind the fake KGSL.
#[test]
fn models_on_the_fake_kgsl_ir3_emulated() {
    all_models_on(Mode::QcomIr3);
}

#[test]
fn models_on_the_fake_kgsl_ir3_emulated_half_images_nolocals() {
    all_models_on(Mode::QcomIr3ImageHalf);
}

#[test]
fn exporter_without_pinned_dims_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.pkl");
    let opts = pilot_compiler::CompileOptions::new(Target::default_for(Backend::Cpu).unwrap());
    let err =
        pilot_compiler::compile(&test_models().join("exporter.onnx"), &out, &opts, &|_| {}).unwrap_err().to_string();
    assert!(err.contains("dynamic dimension `batch`") && err.contains("--shape x="), "{err}");
    assert!(!out.exists(), "nothing is written on error");
}

#[test]
fn aarch64_cross_compile_for_the_comma_device() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("vision-a64.pkl");
    let aarch64 = Target::new(Backend::Cpu, Arch::Aarch64, Default::default()).unwrap();
    let opts = pilot_compiler::CompileOptions::new(aarch64);
    pilot_compiler::compile(&test_models().join("vision.onnx"), &out, &opts, &|_| {}).unwrap();
    let art = Artifact::open(&out).unwrap();
    assert_eq!(art.manifest.target.arch, "aarch64");
    // Every program is an aarch64 ELF object (e_machine 183 at offset 18).
    for p in &art.manifest.programs {
        let code = art.blob(p.blob);
        assert_eq!(&code[..4], b"\x7fELF");
        assert_eq!(u16::from_le_bytes([code[18], code[19]]), 183, "{}", p.name);
    }
    if std::env::consts::ARCH != "aarch64" {
        let err = Session::new(art, Box::new(CpuDevice::new(1))).err().expect("cannot run here").to_string();
        assert!(err.contains("aarch64"), "{err}");
    }
}

/// The image path really reads images: the convolutions and matmuls read `read_imagef`, images are
/// half with the a630's pitch, and `--nolocals` kernels have no local memory or work-group structure.
#[test]
fn image_mode_reads_images_and_nolocals_has_no_local_memory() {
    let dir = tempfile::tempdir().unwrap();
    let art = dir.path().join("vision-img.pkl");
    let mut opts = Mode::ClImageHalf.options();
    opts.target.nolocals = true;
    let report = pilot_compiler::compile(&test_models().join("vision.onnx"), &art, &opts, &|_| {}).unwrap();
    let a = Artifact::open(&art).unwrap();
    let m = &a.manifest;
    assert!(m.target.image && m.target.float16 && m.target.nolocals);

    let source = std::str::from_utf8(a.blob(m.programs[0].blob)).unwrap();
    let kernels = pilot_core::gates::kernel_sources(source);
    assert_eq!(kernels.len(), m.programs.len());
    let mut total = 0;
    let mut readers = 0;
    for (name, text) in &kernels {
        let (reads, gated) = pilot_core::gates::read_image_counts(text);
        total += reads;
        readers += usize::from(reads > 0);
        assert_eq!(gated, 0, "{name}: the image border gives every padded read, no read is gated");
        assert!(!name.ends_with("_pad"), "{name}: a padded copy");
        // Every image parameter is read through the texture path.
        let header = text.split('{').next().unwrap();
        for param in header.split(['(', ',', ')']).filter(|p| p.contains("read_only image2d_t")) {
            let b = param.split_whitespace().last().unwrap();
            assert!(text.contains(&format!("read_imagef({b},")), "{name}: image {b} is never read");
        }
        for banned in ["__local", "barrier(", "get_local_id", "get_group_id"] {
            assert!(!text.contains(banned), "{name}: --nolocals kernel uses {banned}");
        }
    }
    assert_eq!((total, 0), (report.read_images, report.gated_read_images), "the compile report counts the same");
    // Producers write the images their convolutions read, padded or not, and a value read by a
    // convolution and a residual add is one image: 10 kernels (tinygrad's image mode: 11).
    assert!(kernels.len() <= 10, "{} kernels: {:?}", kernels.len(), kernels.iter().map(|k| &k.0).collect::<Vec<_>>());
    // vision has 7 convolutions and a Gemm: each reads its input and weight as images.
    assert!(readers >= 8, "{readers} kernels read images");
    assert!(total >= 16, "vision reads {total} images");

    let images: Vec<_> = m.buffers.iter().filter_map(|b| b.image.map(|im| (b, im))).collect();
    assert!(images.len() >= 10, "{} image buffers", images.len());
    use pilot_core::device::{BufferUse, ImageChannel};
    for (b, im) in &images {
        // Activations are half; a weight is float32 where that costs no more than its op's half input.
        let pixel = match im.channel {
            ImageChannel::F16 => 8,
            ImageChannel::F32 => 16,
        };
        assert!(im.channel == ImageChannel::F16 || b.kind == BufferUse::Weight, "{im:?}: a float32 activation");
        assert_eq!(im.pitch % 64, 0, "IMAGE_PITCH_ALIGNMENT");
        assert!(im.pitch as usize >= im.width as usize * pixel && im.width <= 16384);
        assert_eq!(b.size, im.pitch as usize * im.height as usize);
    }
    assert!(images.iter().any(|(b, im)| b.kind == BufferUse::Weight && im.channel == ImageChannel::F16));
    // The first convolution's weight (8 × 12 × 3 × 3, 3.4 KB as float32, beside a 0.8 MB half input): rows
    // are output channels, a row holds the 3×3 taps × 3 pixels of 4 input channels; 27 float32 pixels =
    // 432 bytes, pitched to 448.
    assert!(
        images.iter().any(|(b, im)| b.kind == BufferUse::Weight
            && im.channel == ImageChannel::F32
            && (im.width, im.height, im.pitch) == (27, 8, 448)),
        "first conv weight image missing: {:?}",
        images.iter().map(|(_, im)| (im.channel, im.width, im.height, im.pitch)).collect::<Vec<_>>()
    );
    // Timed local sizes divide the NDRange.
    for op in &m.step {
        if let pilot_core::device::StepOp::Dispatch { global, local, .. } = op {
            assert!((0..3).all(|d| local[d] >= 1 && global[d] % local[d] == 0), "{global:?} / {local:?}");
        }
    }
}

/// Kernel names of `model` compiled in the car's mode (`--image --float16 --nolocals`) for OpenCL.
fn car_mode_kernels(model: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let art = dir.path().join("car.pkl");
    let mut opts = Mode::ClImageHalf.options();
    opts.target.nolocals = true;
    pilot_compiler::compile(&test_models().join(model), &art, &opts, &|_| {}).unwrap();
    let a = Artifact::open(&art).unwrap();
    let source = std::str::from_utf8(a.blob(a.manifest.programs[0].blob)).unwrap();
    pilot_core::gates::kernel_sources(source).into_iter().map(|(name, _)| name.to_string()).collect()
}

/// A GRU step in the car's mode is one kernel: its products read the batch-1 vectors from their buffers
/// (no kernel packs them into images), the update gate is computed where its two reads rejoin, and the
/// gates' products over one vector share a loop. dmonitoring's one-plane input is read where it is.
#[test]
fn car_mode_steps_a_gru_in_one_kernel_and_packs_no_vector() {
    let policy = car_mode_kernels("policy.onnx");
    // Summary mean, the input Gemm's operand and product, four GRU steps, two head products, the output.
    assert!(policy.len() <= 10, "{} kernels: {policy:?}", policy.len());
    assert!(!policy.iter().any(|k| k.contains("MatMul") && k.ends_with("_image")), "a packed vector: {policy:?}");
    assert!(!policy.iter().any(|k| k.contains("sigmoid")), "the update gate realized: {policy:?}");
    let dmonitoring = car_mode_kernels("dmonitoring.onnx");
    assert!(dmonitoring.len() <= 7, "{} kernels: {dmonitoring:?}", dmonitoring.len());
    assert!(!dmonitoring[0].ends_with("Conv_3_image"), "the one-plane input packed: {dmonitoring:?}");
}

#[test]
fn plain_opencl_reads_no_images() {
    let dir = tempfile::tempdir().unwrap();
    let art = dir.path().join("policy-cl.pkl");
    let report =
        pilot_compiler::compile(&test_models().join("policy.onnx"), &art, &Mode::Cl.options(), &|_| {}).unwrap();
    let a = Artifact::open(&art).unwrap();
    assert_eq!((report.read_images, report.gated_read_images), (0, 0));
    assert!(a.manifest.buffers.iter().all(|b| b.image.is_none()));
    assert_eq!(a.manifest.programs[0].format, pilot_core::device::ProgramFormat::OpenClSource);
}

/// Without a comma device: `--target qcom` with the device compiler and `--device qcom` are one-line
/// errors with exit 2, and nothing is written. The default there is Mesa's ir3, whose programs run on the
/// fake KGSL's a6xx emulator.
#[test]
fn qcom_without_hardware_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let pilot = root().join("target").join(if cfg!(debug_assertions) { "debug" } else { "release" }).join("pilot");
    let model = test_models().join("policy.onnx");
    let run = |args: &[&str]| {
        let o = Command::new(&pilot).args(args).output().expect("pilot is built with the workspace");
        (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    if !pilot.exists() {
        let st = Command::new("cargo").args(["build", "-q", "-p", "pilot-tools"]).status().unwrap();
        assert!(st.success());
    }
    let device_blob = dir.path().join("device.pkl");
    let (code, err) = run(&[
        "compile",
        model.to_str().unwrap(),
        "--target",
        "qcom",
        "--qcom-compiler",
        "device",
        "-o",
        device_blob.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("Qualcomm's OpenCL compiler") && err.lines().count() == 1, "{err}");
    assert!(!device_blob.exists(), "nothing is written");

    let ir3 = dir.path().join("ir3.pkl");
    let (code, err) = run(&["compile", model.to_str().unwrap(), "--target", "qcom", "-o", ir3.to_str().unwrap()]);
    assert_eq!(code, Some(0), "the default off-device is ir3: {err}");
    // Off-device, ir3 code runs on the fake KGSL's a6xx emulator; the device compiler's blobs need the device.
    let (code, err) = run(&["run", ir3.to_str().unwrap(), "--device", "fake-kgsl", "--steps", "1"]);
    assert_eq!(code, Some(0), "{err}");

    // Without Mesa's library: one line naming the setup script, nothing written.
    let no_mesa = dir.path().join("no-mesa.pkl");
    let o = Command::new(&pilot)
        .args(["compile", model.to_str().unwrap(), "--target", "qcom", "-o", no_mesa.to_str().unwrap()])
        .env("PILOT_IR3_LIB", dir.path().join("missing.so"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("scripts/setup.sh") && err.trim().lines().count() == 1, "{err}");
    assert!(!no_mesa.exists(), "nothing is written");

    let fake = dir.path().join("fake.pkl");
    let (code, err) = run(&[
        "compile",
        model.to_str().unwrap(),
        "--target",
        "qcom",
        "--qcom-compiler",
        "fake",
        "-o",
        fake.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    let (code, err) = run(&["run", fake.to_str().unwrap(), "--device", "qcom", "--steps", "1"]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.trim(), "pilot: error: device not available: /dev/kgsl-3d0: No such file or directory");
}

/// Zero-copy inputs on QCOM: an input bound to host memory (KGSL user memory, as camera frames arrive)
/// gives the same outputs as copying it, and follows the host memory from step to step.
#[test]
fn qcom_inputs_bound_to_host_memory_match_copies() {
    let dir = tempfile::tempdir().unwrap();
    let art = dir.path().join("policy-qcom.pkl");
    pilot_compiler::compile(&test_models().join("policy.onnx"), &art, &Mode::QcomFake.options(), &|_| {}).unwrap();
    let mut copied = Session::new(Artifact::open(&art).unwrap(), Mode::QcomFake.device()).unwrap();
    let mut bound = Session::new(Artifact::open(&art).unwrap(), Mode::QcomFake.device()).unwrap();
    let specs = copied.inputs().to_vec();
    let (features, _) = specs.iter().enumerate().max_by_key(|(_, s)| s.nbytes()).unwrap();
    let mut frame = seeded_input(specs[features].dtype, &specs[features].shape, 99).data;
    // SAFETY: `frame` outlives both steps below and is only written between them.
    unsafe { bound.bind_input(features, &frame) }.unwrap();
    for seed in [1u64, 2] {
        let arrays: Vec<npy::Array> =
            specs.iter().enumerate().map(|(i, s)| seeded_input(s.dtype, &s.shape, seed * 10 + i as u64)).collect();
        let fresh = seeded_input(specs[features].dtype, &specs[features].shape, seed + 100).data;
        frame.copy_from_slice(&fresh);
        let mut refs: Vec<&[u8]> = arrays.iter().map(|a| a.data.as_slice()).collect();
        refs[features] = &fresh;
        copied.step(&refs).unwrap();
        refs[features] = &[];
        bound.step(&refs).unwrap();
        assert_eq!(copied.outputs(), bound.outputs(), "step with seed {seed}");
    }
}
