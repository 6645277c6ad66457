//! The C ABI end to end on the hand-built demo artifact (a C kernel, a features queue kept on the device):
//! outputs against the Rust reference and against `Session`, inputs bound by pointer read at each step,
//! errors as codes with the command's text, calls out of order refused.

use std::ffi::{c_void, CStr, CString};
use std::ptr;

use pilot_capi::ffi::*;
use pilot_capi::PilotStatus;
use pilot_tests::demo;

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn desire(step: usize) -> Vec<f32> {
    (0..demo::WIDTH).map(|j| ((step * 5 + j) as f32 * 0.29).sin()).collect()
}

fn last_error() -> String {
    // SAFETY: pilot_last_error returns a NUL-terminated string owned by this thread.
    unsafe { CStr::from_ptr(pilot_last_error()) }.to_str().unwrap().to_string()
}

struct Demo {
    _dir: tempfile::TempDir,
    path: CString,
}

fn demo_artifact() -> Demo {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("demo.pkl");
    demo::write(&path, &pilot_tests::cc_object(demo::KERNEL), "cpu").unwrap();
    Demo { path: CString::new(path.to_str().unwrap()).unwrap(), _dir: dir }
}

fn open(path: &CString, device: Option<&str>) -> *mut PilotModel {
    let device = device.map(|d| CString::new(d).unwrap());
    let opts = PilotOptions { threads: 2, profile: true, priority: -1 };
    let mut m = ptr::null_mut();
    // SAFETY: valid strings, options and out pointer.
    let st =
        unsafe { pilot_model_open(path.as_ptr(), device.as_ref().map_or(ptr::null(), |d| d.as_ptr()), &opts, &mut m) };
    assert_eq!(st, PilotStatus::Ok, "{}", last_error());
    m
}

fn output(m: *mut PilotModel) -> Vec<f32> {
    let (mut data, mut n) = (ptr::null(), 0usize);
    // SAFETY: an open model and valid out pointers.
    assert_eq!(unsafe { pilot_model_output(m, 0, &mut data, &mut n) }, PilotStatus::Ok);
    // SAFETY: pilot_model_output returned pilot's buffer of `n` bytes, valid until close.
    f32s(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), n) })
}

#[test]
fn steps_through_the_c_abi_match_the_reference() {
    let d = demo_artifact();
    let m = open(&d.path, Some("cpu"));
    // SAFETY: `m` is open until closed at the end; every pointer passed is valid.
    unsafe {
        assert_eq!((pilot_model_input_count(m), pilot_model_output_count(m)), (1, 1));
        let mut info = std::mem::zeroed::<PilotTensorInfo>();
        assert_eq!(pilot_model_input_info(m, 0, &mut info), PilotStatus::Ok);
        assert_eq!(CStr::from_ptr(info.name).to_str().unwrap(), "desire");
        assert_eq!((info.dtype, info.nbytes), (PilotDtype::F32, demo::WIDTH * 4));
        assert_eq!(std::slice::from_raw_parts(info.shape, info.ndim), [1, demo::WIDTH]);
        assert_eq!(pilot_model_output_info(m, 0, &mut info), PilotStatus::Ok);
        assert_eq!(CStr::from_ptr(info.name).to_str().unwrap(), "outputs/hidden");
        let mut index = 9;
        let name = CString::new("outputs/hidden").unwrap();
        assert_eq!(pilot_model_output_index(m, name.as_ptr(), &mut index), PilotStatus::Ok);
        assert_eq!(index, 0);

        let (w, b) = demo::weights();
        let mut features = vec![0f32; demo::QUEUE * demo::WIDTH];
        let (mut buf, mut n) = (ptr::null_mut(), 0usize);
        assert_eq!(pilot_model_input_buffer(m, 0, &mut buf, &mut n), PilotStatus::Ok);
        assert_eq!(n, demo::WIDTH * 4);
        for step in 0..5 {
            let x = bytes(&desire(step));
            // Three ways in: pilot's own buffer written in place, a copy, and the two halves of a step.
            match step % 3 {
                0 => std::slice::from_raw_parts_mut(buf.cast::<u8>(), n).copy_from_slice(&x),
                1 => assert_eq!(pilot_model_set_input(m, 0, x.as_ptr().cast(), x.len()), PilotStatus::Ok),
                _ => std::slice::from_raw_parts_mut(buf.cast::<u8>(), n).copy_from_slice(&x),
            }
            if step % 3 == 2 {
                assert_eq!(pilot_model_enqueue(m), PilotStatus::Ok);
                assert_eq!(pilot_model_wait(m), PilotStatus::Ok);
            } else {
                assert_eq!(pilot_model_step(m), PilotStatus::Ok, "{}", last_error());
            }
            let want = demo::reference_step(&desire(step), &mut features, &w, &b);
            let got = output(m);
            for (g, r) in got.iter().zip(&want) {
                assert!((g - r).abs() <= 1e-5 * r.abs().max(1.0), "step {step}: got {got:?}, want {want:?}");
            }
            let mut copy = vec![0u8; n];
            assert_eq!(pilot_model_get_output(m, 0, copy.as_mut_ptr().cast(), copy.len()), PilotStatus::Ok);
            assert_eq!(f32s(&copy), got);
        }
        let mut stats = PilotStats::default();
        assert_eq!(pilot_model_stats(m, &mut stats), PilotStatus::Ok);
        assert_eq!(stats.steps, 5);
        assert!(stats.best_ms > 0.0 && stats.best_ms <= stats.last_ms.max(stats.best_ms) && stats.load_ms > 0.0);
        assert_eq!(pilot_model_check_min_step_time(m, 1e6), PilotStatus::Ok);
        for bad in [f64::NAN, 0.0, -1.0, f64::INFINITY] {
            assert_eq!(pilot_model_check_min_step_time(m, bad), PilotStatus::InvalidArgument, "{bad}");
            assert!(last_error().contains("the limit must be a positive number of milliseconds"), "{}", last_error());
        }
        assert_eq!(pilot_model_check_min_step_time(m, 1e-9), PilotStatus::Gate);
        assert!(last_error().starts_with("ASSERT_MIN_STEP_TIME: fastest step took "), "{}", last_error());
        let (mut name, mut ns) = (ptr::null(), 0u64);
        assert_eq!(pilot_model_profile_entry(m, 0, &mut name, &mut ns), PilotStatus::Ok);
        assert_eq!(CStr::from_ptr(name).to_str().unwrap(), "policy");
        assert!(ns > 0);
        assert_eq!(pilot_model_profile_entry(m, 99, &mut name, &mut ns), PilotStatus::InvalidArgument);
        let (mut start, mut stop) = (0usize, 0usize);
        assert_eq!(pilot_model_output_slice(m, 0, &mut name, &mut start, &mut stop), PilotStatus::Ok);
        assert_eq!((CStr::from_ptr(name).to_str().unwrap(), start, stop), ("hidden_state", 0, demo::WIDTH));
        assert_eq!(pilot_model_output_slice(m, 1, &mut name, &mut start, &mut stop), PilotStatus::InvalidArgument);
        let mut value = 0u64;
        assert_eq!(pilot_model_counter(m, 0, &mut name, &mut value), PilotStatus::InvalidArgument, "cpu keeps none");
        assert_eq!(pilot_model_close(m), PilotStatus::Ok);
    }
}

#[test]
fn an_input_bound_by_pointer_is_read_at_each_step() {
    let d = demo_artifact();
    let (bound_model, copied_model) = (open(&d.path, Some("cpu")), open(&d.path, Some("cpu")));
    let mut camera = bytes(&desire(0));
    // SAFETY: `camera` outlives both models (closed below) and is written only between steps.
    unsafe {
        let mut zero_copy = true;
        let st = pilot_model_bind_input(bound_model, 0, camera.as_ptr().cast(), camera.len(), &mut zero_copy);
        assert_eq!(st, PilotStatus::Ok, "{}", last_error());
        assert!(!zero_copy, "the CPU device copies bound memory at each step");
        for step in 0..3 {
            // Written after binding: the step must see these bytes, not the ones there when bound.
            camera.copy_from_slice(&bytes(&desire(step + 10)));
            assert_eq!(pilot_model_step(bound_model), PilotStatus::Ok);
            assert_eq!(pilot_model_set_input(copied_model, 0, camera.as_ptr().cast(), camera.len()), PilotStatus::Ok);
            assert_eq!(pilot_model_step(copied_model), PilotStatus::Ok);
            assert_eq!(output(bound_model), output(copied_model), "step {step}");
        }
        let st = pilot_model_set_input(bound_model, 0, camera.as_ptr().cast(), camera.len());
        assert_eq!(st, PilotStatus::Order);
        assert!(last_error().contains("bound to caller memory"), "{}", last_error());
        assert_eq!(pilot_model_bind_input(bound_model, 0, ptr::null(), 0, ptr::null_mut()), PilotStatus::Ok);
        assert_eq!(pilot_model_set_input(bound_model, 0, camera.as_ptr().cast(), camera.len()), PilotStatus::Ok);
        assert_eq!(pilot_model_close(bound_model), PilotStatus::Ok);
        assert_eq!(pilot_model_close(copied_model), PilotStatus::Ok);
    }
}

#[test]
fn errors_are_codes_with_the_commands_text() {
    let d = demo_artifact();
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.pkl");
    let missing_c = CString::new(missing.to_str().unwrap()).unwrap();
    let mut m = ptr::null_mut();
    // SAFETY: valid strings and out pointer.
    unsafe {
        assert_eq!(pilot_model_open(missing_c.as_ptr(), ptr::null(), ptr::null(), &mut m), PilotStatus::Load);
        let cli = pilot_core::Artifact::open(&missing).unwrap_err();
        assert_eq!(last_error(), pilot_runtime::one_line(&anyhow::Error::from(cli)));
        assert!(m.is_null());

        let gpu = CString::new("gpu9").unwrap();
        assert_eq!(pilot_model_open(d.path.as_ptr(), gpu.as_ptr(), ptr::null(), &mut m), PilotStatus::Load);
        assert!(last_error().starts_with("unknown device `gpu9` (available: cpu, null"), "{}", last_error());
        assert_eq!(pilot_model_open(ptr::null(), ptr::null(), ptr::null(), &mut m), PilotStatus::InvalidArgument);
        assert_eq!(last_error(), "path is null");
    }
    let m = open(&d.path, None);
    // SAFETY: `m` is open until closed at the end; every pointer passed is valid.
    unsafe {
        let name = CString::new("speed").unwrap();
        let mut index = 0;
        assert_eq!(pilot_model_input_index(m, name.as_ptr(), &mut index), PilotStatus::InvalidArgument);
        assert_eq!(last_error(), "the artifact has no input `speed` (inputs: desire)");
        let short = [0u8; 3];
        assert_eq!(pilot_model_set_input(m, 0, short.as_ptr().cast::<c_void>(), 3), PilotStatus::InvalidArgument);
        assert_eq!(last_error(), "input `desire` needs 32 bytes, got 3");
        assert_eq!(pilot_model_set_input(m, 7, short.as_ptr().cast::<c_void>(), 3), PilotStatus::InvalidArgument);
        assert_eq!(last_error(), "input index 7 out of range (the artifact has 1)");
        assert_eq!(pilot_model_wait(m), PilotStatus::Order);
        assert_eq!(pilot_model_check_min_step_time(m, 10.0), PilotStatus::Gate);
        assert_eq!(pilot_model_enqueue(m), PilotStatus::Ok);
        assert_eq!(pilot_model_enqueue(m), PilotStatus::Order);
        assert_eq!(pilot_model_wait(m), PilotStatus::Ok);
        assert_eq!(pilot_model_step(ptr::null_mut()), PilotStatus::InvalidArgument);
        assert_eq!(last_error(), "model is null");
        // Sizes are checked before pilot makes a slice of the caller's pointer: SIZE_MAX is an error, not an abort.
        let one = [0u8; 1];
        let mut dst = [0u8; 1];
        assert_eq!(pilot_model_set_input(m, 0, one.as_ptr().cast(), usize::MAX), PilotStatus::InvalidArgument);
        assert_eq!(last_error(), format!("input `desire` needs 32 bytes, got {}", usize::MAX));
        assert_eq!(
            pilot_model_bind_input(m, 0, one.as_ptr().cast(), usize::MAX, ptr::null_mut()),
            PilotStatus::InvalidArgument
        );
        assert_eq!(pilot_model_get_output(m, 0, dst.as_mut_ptr().cast(), usize::MAX), PilotStatus::InvalidArgument);
        assert!(last_error().ends_with(&format!("got {}", usize::MAX)), "{}", last_error());
        assert_eq!(pilot_model_close(m), PilotStatus::Ok);
        // A second close, and any use after the close, is refused instead of touching freed memory.
        assert_eq!(pilot_model_close(m), PilotStatus::InvalidArgument);
        assert_eq!(last_error(), "model: not an open model (closed already?)");
        assert_eq!(pilot_model_step(m), PilotStatus::InvalidArgument);
        assert_eq!(pilot_model_input_count(m), 0);
        assert_eq!(pilot_model_close(ptr::null_mut()), PilotStatus::Ok);
    }
}

/// The demo artifact with its device-resident features queue also exposed as an input.
fn demo_with_state_input(dir: &std::path::Path) -> CString {
    let path = dir.join("state.pkl");
    let object = pilot_tests::cc_object(demo::KERNEL);
    let mut manifest = demo::write(&path, &object, "cpu").unwrap();
    manifest.inputs.push(pilot_core::artifact::TensorSpec {
        name: "features".into(),
        shape: vec![1, demo::QUEUE, demo::WIDTH],
        dtype: pilot_core::DType::F32,
        buffer: 1,
        slices: vec![],
    });
    let (w, b) = demo::weights();
    let (w, b) = (bytes(&w), bytes(&b));
    let mut writer = pilot_core::artifact::ArtifactWriter::new();
    for blob in [&w, &b, &object] {
        writer.add_blob(blob);
    }
    writer.write(&path, &mut manifest).unwrap();
    CString::new(path.to_str().unwrap()).unwrap()
}

#[test]
fn a_state_input_keeps_its_device_value_until_set() {
    let dir = tempfile::tempdir().unwrap();
    let m = open(&demo_with_state_input(dir.path()), Some("cpu"));
    let (w, b) = demo::weights();
    let mut features = vec![0f32; demo::QUEUE * demo::WIDTH];
    // SAFETY: `m` is open until closed at the end; every pointer passed is valid.
    unsafe {
        assert_eq!(pilot_model_input_count(m), 2);
        let (mut buf, mut n) = (ptr::null_mut(), 0usize);
        assert_eq!(pilot_model_input_buffer(m, 1, &mut buf, &mut n), PilotStatus::Ok);
        for step in 0..6 {
            if step == 3 {
                // Set by copy: the next step starts from these values, then the device carries them on.
                features = (0..features.len()).map(|k| (k as f32 * 0.11).cos()).collect();
                let x = bytes(&features);
                assert_eq!(pilot_model_set_input(m, 1, x.as_ptr().cast(), x.len()), PilotStatus::Ok);
            } else {
                // Writes to pilot's buffer of a state input are not sent: the device keeps its queue.
                std::slice::from_raw_parts_mut(buf.cast::<u8>(), n).fill(0x7f);
            }
            let x = bytes(&desire(step));
            assert_eq!(pilot_model_set_input(m, 0, x.as_ptr().cast(), x.len()), PilotStatus::Ok);
            assert_eq!(pilot_model_step(m), PilotStatus::Ok, "{}", last_error());
            let want = demo::reference_step(&desire(step), &mut features, &w, &b);
            let got = output(m);
            for (g, r) in got.iter().zip(&want) {
                assert!((g - r).abs() <= 1e-5 * r.abs().max(1.0), "step {step}: got {got:?}, want {want:?}");
            }
        }
        let x = bytes(&features);
        assert_eq!(pilot_model_bind_input(m, 1, x.as_ptr().cast(), x.len(), ptr::null_mut()), PilotStatus::Order);
        assert!(last_error().contains("device state"), "{}", last_error());
        assert_eq!(pilot_model_close(m), PilotStatus::Ok);
    }
}
