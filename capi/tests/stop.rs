//! `pilot_request_stop` (#26): a C host stops a long step on a device that can stop early (the AMD emulator)
//! from another thread; the step fails in one line within a bound instead of running to its end, and after the
//! request is cleared the same model is stopped again, not refused.

use std::ffi::{CStr, CString};
use std::path::Path;
use std::ptr;
use std::time::{Duration, Instant};

use pilot_capi::ffi::*;
use pilot_capi::PilotStatus;
use pilot_core::Target;

/// A step of this matmul takes the emulator far longer than the bound (about 10^8 wave instructions).
const N: usize = 1024;
/// From the request to the failed step: the emulator checks every few thousand instructions per wave.
const BOUND: Duration = Duration::from_secs(5);

fn matmul_artifact(dir: &Path) -> CString {
    let onnx = dir.join("matmul.onnx");
    let script = format!(
        "import sys, numpy as np\nfrom onnx import TensorProto, helper, numpy_helper\n\
         w = numpy_helper.from_array(np.random.default_rng(0).standard_normal(({N}, {N})).astype(np.float32), 'w')\n\
         g = helper.make_graph([helper.make_node('MatMul', ['x', 'w'], ['y'])], 'long_matmul',\n\
             [helper.make_tensor_value_info('x', TensorProto.FLOAT, [{N}, {N}])],\n\
             [helper.make_tensor_value_info('y', TensorProto.FLOAT, [{N}, {N}])], [w])\n\
         m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)])\n\
         m.ir_version = 8\n\
         open(sys.argv[1], 'wb').write(m.SerializeToString())\n"
    );
    let python = pilot_test_support::venv_python_or_fail();
    let st = std::process::Command::new(python).arg("-c").arg(script).arg(&onnx).status().expect("python runs");
    assert!(st.success(), "writing the matmul model failed");
    let art = dir.join("matmul.pkl");
    let target = Target::parse("usb+amd", Some("gfx1100"), Default::default()).unwrap();
    pilot_compiler::compile(&onnx, &art, &pilot_compiler::CompileOptions::new(target), &|_| {})
        .unwrap_or_else(|e| panic!("compiling the matmul: {e}"));
    CString::new(art.to_str().unwrap()).unwrap()
}

fn last_error() -> String {
    // SAFETY: pilot_last_error returns a NUL-terminated string owned by this thread.
    unsafe { CStr::from_ptr(pilot_last_error()) }.to_str().unwrap().to_string()
}

/// The model pointer, sendable to the stepping thread (one thread uses it at a time).
struct Handle(*mut PilotModel);
// SAFETY: the model is used by one thread at a time (the test joins the stepping thread before reusing it).
unsafe impl Send for Handle {}

/// Steps `m` on another thread, requests a stop `after`, and returns the step's status, its error text and the
/// time from the request to the step's end.
fn stopped_step(m: Handle, after: Duration) -> (Handle, PilotStatus, String, Duration) {
    let stepper = std::thread::spawn(move || {
        // SAFETY: an open model, used by this thread only until it is joined.
        let st = unsafe { pilot_model_step(m.0) };
        (m, st, last_error(), Instant::now())
    });
    std::thread::sleep(after);
    let asked = Instant::now();
    pilot_request_stop(true);
    let (m, st, err, ended) = stepper.join().unwrap();
    pilot_request_stop(false);
    (m, st, err, ended.saturating_duration_since(asked))
}

#[test]
fn a_request_stops_a_long_step_on_the_emulator_and_the_model_stays_usable() {
    let dir = tempfile::tempdir().unwrap();
    let path = matmul_artifact(dir.path());
    let device = CString::new("amd-emu").unwrap();
    let opts = PilotOptions { threads: 1, profile: false, priority: -1 };
    let mut m = ptr::null_mut();
    // SAFETY: valid strings, options and out pointer.
    let st = unsafe { pilot_model_open(path.as_ptr(), device.as_ptr(), &opts, &mut m) };
    assert_eq!(st, PilotStatus::Ok, "{}", last_error());
    // SAFETY: an open model.
    assert!(unsafe { pilot_model_stoppable(m) });
    let mut handle = Handle(m);
    for _ in 0..2 {
        // The second time shows the model is usable after an interrupted step.
        let (h, st, err, waited) = stopped_step(handle, Duration::from_millis(300));
        handle = h;
        assert_eq!(st, PilotStatus::Step, "the step was not stopped: {err}");
        assert!(err.contains("interrupted") && !err.contains('\n'), "{err}");
        assert!(waited < BOUND, "the step ended {waited:?} after the request");
    }
    let mut stats = PilotStats::default();
    // SAFETY: an open model and a valid out pointer.
    assert_eq!(unsafe { pilot_model_stats(handle.0, &mut stats) }, PilotStatus::Ok);
    assert_eq!(stats.steps, 0, "an interrupted step counted as a step");
    // SAFETY: an open model; closed once.
    assert_eq!(unsafe { pilot_model_close(handle.0) }, PilotStatus::Ok);
    // SAFETY: null is a valid argument.
    assert!(!unsafe { pilot_model_stoppable(ptr::null()) });
}
