//! `pilot run --device amd-emu`: `usb+amd` gfx1100 and gfx1201 artifacts step on the RDNA3/RDNA4 emulator
//! and save their outputs. (The outputs are
//! compared with onnxruntime in tests/tests/amd_emu.rs.) `--max-memory` caps its VRAM.

use std::path::Path;
use std::process::{Command, Output};

fn pilot(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pilot")).args(args).output().expect("pilot runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// #26 item 5: `--max-memory` caps the host memory the emulator hands out as VRAM (it was ignored).
fn refused_past_max_memory(art: &str) {
    for cmd in ["run", "load"] {
        let o = pilot(&[cmd, art, "--device", "amd-emu", "--max-memory", "4K"]);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {}", stderr(&o));
        let e = stderr(&o);
        assert_eq!(e.trim_end().lines().count(), 1, "{e}");
        assert!(e.contains("out of device memory allocating"), "{cmd}: {e}");
        let o = pilot(&[cmd, art, "--device", "amd-emu", "--max-memory", "1G"]);
        assert!(o.status.success(), "{cmd}: {}", stderr(&o));
    }
    let o = pilot(&["run", art, "--device", "amd-emu", "--max-memory", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("bad size \"0\""), "{}", stderr(&o));
}

#[test]
fn amd_artifacts_run_on_the_emulated_gpu() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let models = root.join("target/test-models");
    if !models.join("policy.onnx").exists() {
        let python = pilot_test_support::venv_python_or_fail();
        let st = Command::new(python).arg(root.join("scripts/make_models.py")).arg(&models).output().unwrap();
        assert!(st.status.success(), "make_models.py: {}", String::from_utf8_lossy(&st.stderr));
    }
    let model = models.join("policy.onnx");
    let dir = tempfile::tempdir().unwrap();
    for arch in ["gfx1100", "gfx1201"] {
        let art = dir.path().join(format!("policy-{arch}.pkl"));
        let (model, art) = (model.to_str().unwrap(), art.to_str().unwrap());
        let o = pilot(&["compile", model, "--target", "usb+amd", "--arch", arch, "-o", art]);
        assert!(o.status.success(), "{}", stderr(&o));
        let saved = dir.path().join(format!("out-{arch}"));
        let o = pilot(&["run", art, "--device", "amd-emu", "--steps", "2", "--save-outputs", saved.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        let files = std::fs::read_dir(&saved).unwrap().count();
        assert!(files >= 1, "no outputs saved");
        refused_past_max_memory(art);
    }
}
