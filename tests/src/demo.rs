//! A small recurrent "policy" built by hand, shaped like openpilot's policy model: a features queue
//! kept on the device across steps, a dense layer over the current input and the queue's mean, and
//! the new hidden state pushed into the queue by copy ops at the end of each step.
//!
//! ```text
//! inputs:  desire (1, 8) f32
//! state:   features (1, QUEUE, 8) f32, zero at start
//! kernel:  hidden[i] = relu(b[i] + Σ_j W[i][j] · concat(desire, mean_q features[q])[j])   (parts over i)
//! copies:  features[1..] → shift; shift → features[..QUEUE-1]; hidden → features[QUEUE-1]
//! output:  hidden (1, 8) f32
//! ```

use std::path::Path;

use pilot_core::artifact::{
    ArtifactWriter, BufferSpec, Manifest, Metadata, ParamKind, ParamSpec, Placement, ProgramEntry, Target, TensorSpec,
};
use pilot_core::device::{Arg, BufferId, BufferUse, ProgramFormat, ProgramId, StepOp};
use pilot_core::{ArtifactError, DType};

pub const WIDTH: usize = 8;
pub const QUEUE: usize = 4;

pub const KERNEL: &str = r#"
#define W 8
#define Q 4
void policy(void *const *args, unsigned part, unsigned nparts) {
    const float *desire = args[0], *features = args[1], *weight = args[2], *bias = args[3];
    float *hidden = args[4];
    float x[2 * W];
    for (int j = 0; j < W; j++) {
        float m = 0.0f;
        for (int q = 0; q < Q; q++) m += features[q * W + j];
        x[j] = desire[j];
        x[W + j] = m / Q;
    }
    unsigned lo = W * part / nparts, hi = W * (part + 1) / nparts;
    for (unsigned i = lo; i < hi; i++) {
        float acc = bias[i];
        for (int j = 0; j < 2 * W; j++) acc += weight[i * 2 * W + j] * x[j];
        hidden[i] = acc > 0.0f ? acc : 0.0f;
    }
}
"#;

/// Deterministic weights: W[i][j] = sin(i*16+j)/4, b[i] = 0.1*i - 0.3.
pub fn weights() -> (Vec<f32>, Vec<f32>) {
    let w = (0..WIDTH * 2 * WIDTH).map(|k| (k as f32).sin() / 4.0).collect();
    let b = (0..WIDTH).map(|i| 0.1 * i as f32 - 0.3).collect();
    (w, b)
}

/// The reference: one step of the policy in plain Rust, updating `features` in place.
pub fn reference_step(desire: &[f32], features: &mut [f32], w: &[f32], b: &[f32]) -> Vec<f32> {
    let mut x = desire.to_vec();
    x.extend((0..WIDTH).map(|j| (0..QUEUE).map(|q| features[q * WIDTH + j]).sum::<f32>() / QUEUE as f32));
    let hidden: Vec<f32> = (0..WIDTH)
        .map(|i| (b[i] + (0..2 * WIDTH).map(|j| w[i * 2 * WIDTH + j] * x[j]).sum::<f32>()).max(0.0))
        .collect();
    features.copy_within(WIDTH.., 0);
    features[(QUEUE - 1) * WIDTH..].copy_from_slice(&hidden);
    hidden
}

/// A float32 kernel argument of `bytes` bytes that the kernel reads (or `writes`) in full.
fn param(bytes: usize, writes: bool) -> ParamSpec {
    ParamSpec { dtype: DType::F32, writes, kind: ParamKind::Buffer { bytes: bytes as u64 } }
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Writes the demo artifact for `target` (`cpu` on the host arch, or `null`) with `object` as the
/// kernel's code.
pub fn write(path: &Path, object: &[u8], backend: &str) -> Result<Manifest, ArtifactError> {
    let (w, b) = weights();
    let (w, b) = (f32_bytes(&w), f32_bytes(&b));
    let mut writer = ArtifactWriter::new();
    let w_blob = writer.add_blob(&w);
    let b_blob = writer.add_blob(&b);
    let code_blob = writer.add_blob(&object);
    let f = |size: usize, kind, blob: Option<usize>, checksum: Option<&[u8]>| BufferSpec {
        size: size * 4,
        dtype: DType::F32,
        kind,
        placement: Placement::Device,
        blob,
        checksum: checksum.map(pilot_core::artifact::checksum),
        image: None,
    };
    let buffers = vec![
        f(WIDTH, BufferUse::Input, None, None),                          // 0 desire
        f(QUEUE * WIDTH, BufferUse::State, None, None),                  // 1 features
        f(2 * WIDTH * WIDTH, BufferUse::Weight, Some(w_blob), Some(&w)), // 2 W
        f(WIDTH, BufferUse::Weight, Some(b_blob), Some(&b)),             // 3 b
        f(WIDTH, BufferUse::Output, None, None),                         // 4 hidden
        f((QUEUE - 1) * WIDTH, BufferUse::Scratch, None, None),          // 5 shift
    ];
    let a = |buffer: u32, offset: usize| Arg { buffer: BufferId(buffer), offset: offset as u64 };
    let shifted = ((QUEUE - 1) * WIDTH * 4) as u64;
    let mut manifest = Manifest {
        target: Target::parse(backend, None, Default::default())
            .expect("the demo targets `cpu` or `null` on this host"),
        inputs: vec![TensorSpec {
            name: "desire".into(),
            shape: vec![1, WIDTH],
            dtype: DType::F32,
            buffer: 0,
            slices: vec![],
        }],
        outputs: vec![TensorSpec {
            name: "outputs/hidden".into(),
            shape: vec![1, WIDTH],
            dtype: DType::F32,
            buffer: 4,
            slices: vec![("hidden_state".into(), 0, WIDTH)],
        }],
        programs: vec![ProgramEntry {
            name: "policy".into(),
            format: ProgramFormat::Elf,
            blob: code_blob,
            args: 5,
            params: buffers[..5].iter().enumerate().map(|(i, b)| param(b.size, i == 4)).collect(),
            global: [WIDTH as u32, 1, 1],
            local: [1, 1, 1],
            amdgpu: None,
            ir3: None,
        }],
        buffers,
        step: vec![
            StepOp::Dispatch {
                program: ProgramId(0),
                args: (0..5).map(|i| a(i, 0)).collect(),
                global: [WIDTH as u32, 1, 1],
                local: [1, 1, 1],
            },
            StepOp::Copy { src: a(1, WIDTH * 4), dst: a(5, 0), len: shifted },
            StepOp::Copy { src: a(5, 0), dst: a(1, 0), len: shifted },
            StepOp::Copy { src: a(4, 0), dst: a(1, (QUEUE - 1) * WIDTH * 4), len: (WIDTH * 4) as u64 },
        ],
        metadata: Metadata {
            compiler: format!("pilot-tests demo {}", env!("CARGO_PKG_VERSION")),
            model_hash: "demo".into(),
            props: vec![("output_slices".into(), "hidden_state:0:8".into())],
            pinned: vec![],
        },
        blob_count: 0,
        pads: vec![],
    };
    writer.write(path, &mut manifest)?;
    Ok(manifest)
}
