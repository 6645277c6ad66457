//! Steps of many dispatches link and drop in reasonable time: dispatches of one program with the same
//! arguments share a kernel object; dispatches with other arguments still get their own.

use std::time::{Duration, Instant};

use pilot_cl::ClDevice;
use pilot_core::device::{Arg, BufferId, BufferUse, Device, DeviceError, ProgramFormat, ProgramSpec, StepOp};

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

const SCALE: &str = r#"
__kernel void scale(__global float* out, __global const float* x) {
    size_t i = get_global_id(0);
    out[i] = 2.0f * x[i] + 1.0f;
}
"#;

fn arg(buffer: BufferId) -> Arg {
    Arg { buffer, offset: 0 }
}

#[test]
fn a_hundred_thousand_dispatches_link_in_reasonable_time() {
    let Some(mut dev) = open() else { return };
    let spec = ProgramSpec {
        name: "scale",
        format: ProgramFormat::OpenClSource,
        code: SCALE.as_bytes(),
        arg_count: 2,
        amdgpu: None,
        ir3: None,
    };
    let p = dev.load_program(&spec).unwrap();
    let a = dev.alloc(64, BufferUse::Scratch).unwrap();
    let b = dev.alloc(64, BufferUse::Scratch).unwrap();
    let c = dev.alloc(64, BufferUse::Scratch).unwrap();
    let dispatch =
        |out, x| StepOp::Dispatch { program: p, args: vec![arg(out), arg(x)], global: [16, 1, 1], local: [0; 3] };

    let ops: Vec<StepOp> = (0..100_000).map(|i| if i % 2 == 0 { dispatch(a, b) } else { dispatch(c, b) }).collect();
    let start = Instant::now();
    dev.link_step(&ops).unwrap();
    drop(dev);
    // One kernel object per dispatch took over 20 s on PoCL; shared ones take milliseconds.
    assert!(start.elapsed() < Duration::from_secs(5), "linking and dropping took {:?}", start.elapsed());

    // Shared kernels keep each dispatch's own arguments: b -> a, a -> c, b -> a again.
    let Some(mut dev) = open() else { return };
    let p = dev.load_program(&spec).unwrap();
    let [a, b, c] = [0; 3].map(|_| dev.alloc(64, BufferUse::Scratch).unwrap());
    let x: Vec<u8> = (0..16).flat_map(|i| (i as f32).to_le_bytes()).collect();
    dev.copy_in(b, 0, &x).unwrap();
    let d = |out, x| StepOp::Dispatch { program: p, args: vec![arg(out), arg(x)], global: [16, 1, 1], local: [0; 3] };
    let step = dev.link_step(&[d(a, b), d(c, a), d(a, b)]).unwrap();
    let v = dev.submit(step).unwrap();
    dev.wait(v).unwrap();
    let mut out = vec![0u8; 64];
    dev.copy_out(c, 0, &mut out).unwrap();
    let got: Vec<f32> = out.chunks_exact(4).map(|q| f32::from_le_bytes(q.try_into().unwrap())).collect();
    let want: Vec<f32> = (0..16).map(|i| 2.0 * (2.0 * i as f32 + 1.0) + 1.0).collect();
    assert_eq!(got, want);
}
