//! `pilot usb` end to end against the bridge simulator, and the one-line exit-2 contract without a bridge.

use std::process::{Command, Output};

fn pilot(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pilot")).args(args).output().expect("pilot runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn info_on_the_simulator_shows_the_topology_and_bars() {
    let o = pilot(&["usb", "info", "--device", "sim"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("link L0 (0x78)"), "{out}");
    assert!(out.contains("04:00.0  1002:744c  display"), "{out}");
    assert!(out.contains("BAR0  0x800000000  512 MiB  64-bit prefetchable (resized from 256 MiB)"), "{out}");
    assert!(out.contains("BAR5  0x10000000  2 MiB  32-bit"), "{out}");
}

#[test]
fn copy_speed_on_the_simulator_verifies_the_round_trip() {
    let o = pilot(&["usb", "copy-speed", "--device", "sim", "--size", "1000000", "--iters", "1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("copyin of 1.00 MB:") && out.contains("(modelled)"), "{out}");
    assert!(out.contains("copyout of 1.00 MB:"), "{out}");
    assert!(out.contains("round trip of 1000000 bytes verified"), "{out}");
}

#[test]
fn reset_on_the_simulator() {
    let o = pilot(&["usb", "reset", "--device", "sim"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "sim: PCIe power-cycled, link L0 (0x78)\n");
}

#[test]
fn no_bridge_and_bad_arguments_exit_2_with_one_line() {
    for args in [
        &["usb", "info", "--device", "usb:250-250"][..],
        &["usb", "reset", "--device", "usb:250-250"],
        &["usb", "copy-speed", "--device", "usb:250-250"],
        &["usb", "info", "--device", "nonsense"],
        &["usb", "copy-speed", "--device", "sim", "--size", "0"],
        &["usb", "copy-speed", "--device", "sim", "--size", "2000000000"],
        &["usb", "copy-speed", "--device", "sim", "--iters", "0"],
        // Uncapped, this ran for hours.
        &["usb", "copy-speed", "--device", "sim", "--size", "1000", "--iters", "18446744073709551615"],
    ] {
        let o = pilot(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("pilot: error: "), "{args:?}: {err}");
    }
    let o = pilot(&["usb", "info", "--device", "usb:250-250"]);
    assert!(stderr(&o).contains("no USB GPU bridge found"), "{}", stderr(&o));
}
