//! The step path (submit, wait, copy_in, copy_out) makes no Rust heap allocation, with profiling on
//! or off. (The OpenCL driver's own `malloc`s are outside Rust's allocator and not counted.)

use pilot_cl::ClDevice;
use pilot_core::device::{Arg, BufferUse, Device, DeviceError, ProgramFormat, ProgramSpec, StepOp};
use pilot_test_support::thread_allocs;

pilot_test_support::counting_allocator!();

const SOURCE: &str = r#"
__kernel void axpy(__global float* y, __global const float* x) {
    size_t i = get_global_id(0);
    y[i] = 0.5f * y[i] + x[i];
}
"#;

fn check(profiling: bool) {
    let mut dev = match ClDevice::open(None) {
        Ok(dev) => dev.with_profiling(profiling),
        Err(e @ DeviceError::Unavailable(_)) => {
            pilot_test_support::opencl_missing(e);
            return;
        }
        Err(e) => panic!("opening the OpenCL device: {e}"),
    };
    let spec = ProgramSpec {
        name: "axpy",
        format: ProgramFormat::OpenClSource,
        code: SOURCE.as_bytes(),
        arg_count: 2,
        amdgpu: None,
        ir3: None,
    };
    let axpy = dev.load_program(&spec).unwrap();
    let align = dev.limits().base_address_align;
    let y = dev.alloc(1024, BufferUse::State).unwrap();
    let x = dev.alloc(align as usize + 1024, BufferUse::Input).unwrap();
    let at = |buffer, offset| Arg { buffer, offset };
    let step = dev
        .link_step(&[
            StepOp::Dispatch { program: axpy, args: vec![at(y, 0), at(x, align)], global: [256, 1, 1], local: [0; 3] },
            StepOp::Copy { src: at(y, 0), dst: at(y, 512), len: 512 },
            StepOp::Copy { src: at(y, 4), dst: at(y, 0), len: 64 },
        ])
        .unwrap();
    let t = dev.submit(step).unwrap(); // warm-up
    dev.wait(t).unwrap();
    let input = [0u8; 1024];
    let mut out = [0u8; 1024];
    let before = thread_allocs();
    for _ in 0..50 {
        dev.copy_in(x, align, &input).unwrap();
        let t = dev.submit(step).unwrap();
        let u = dev.submit(step).unwrap();
        dev.wait(t).unwrap();
        dev.wait(u).unwrap();
        dev.copy_out(y, 0, &mut out).unwrap();
    }
    dev.synchronize().unwrap();
    assert_eq!(thread_allocs() - before, 0, "allocations on the submitting thread (profiling {profiling})");
    if profiling {
        assert_eq!(dev.profile(step).unwrap().len(), 3);
    }
}

#[test]
fn step_path_does_not_allocate() {
    check(false);
    check(true);
}
