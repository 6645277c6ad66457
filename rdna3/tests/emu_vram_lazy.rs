//! #26 item 5: `--device amd-emu` committed host memory for every declared buffer (a 24 GiB artifact asked for
//! 24 GiB of RAM). VRAM is now an anonymous mapping the host commits page by page as it is written: declaring a
//! buffer costs address space, and a cap on address space (`ulimit -v`) makes a big one a clean
//! out-of-memory error, never an abort.

use pilot_core::device::{BufferUse, Device, DeviceError};
use pilot_rdna3::device::{EmuDevice, MAX_VRAM};
use std::process::Command;

/// This process's resident memory in bytes (`/proc/self/statm`, in pages).
fn resident() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// What a 24 GiB artifact declares, on a device allowed all of it: the buffer costs no memory until written,
/// and then only the pages written.
#[test]
fn declared_vram_costs_memory_only_where_written() {
    let mut dev = EmuDevice::with_max_vram(1, MAX_VRAM);
    let before = resident();
    let size = (MAX_VRAM - (1 << 20)) as usize;
    let big = dev.alloc(size, BufferUse::Scratch).unwrap();
    assert!(resident() - before < 64 << 20, "allocating committed {} MB", (resident() - before) >> 20);
    let data: Vec<u8> = (0..8 << 20).map(|i| i as u8).collect();
    dev.copy_in(big, (size - data.len()) as u64, &data).unwrap();
    let mut back = vec![0u8; data.len()];
    dev.copy_out(big, (size - data.len()) as u64, &mut back).unwrap();
    assert!(back == data, "what was written reads back");
    let mut untouched = vec![1u8; 4096];
    dev.copy_out(big, 1 << 30, &mut untouched).unwrap();
    assert!(untouched.iter().all(|&b| b == 0), "unwritten VRAM reads as zeros");
    let grown = resident() - before;
    assert!(grown < 64 << 20, "8 MB written committed {} MB", grown >> 20);
    assert!(matches!(dev.alloc(2 << 20, BufferUse::Scratch), Err(DeviceError::OutOfMemory { .. })), "past the cap");
}

/// Under `ulimit -v` (this test re-run as a child with 1 GiB of address space): a 24 GiB buffer is an
/// out-of-memory error, while small ones still work.
#[test]
fn an_address_space_limit_makes_big_vram_an_error() {
    if std::env::var_os("PILOT_VRAM_CHILD").is_some() {
        let mut dev = EmuDevice::with_max_vram(1, MAX_VRAM);
        let e = dev.alloc((MAX_VRAM - (1 << 20)) as usize, BufferUse::Scratch).unwrap_err();
        assert!(matches!(e, DeviceError::OutOfMemory { .. }), "{e}");
        let small = dev.alloc(16 << 20, BufferUse::Weight).unwrap();
        dev.copy_in(small, 0, &[7; 4096]).unwrap();
        println!("child: refused and recovered");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 1048576 && exec \"$0\" \"$@\"")
        .arg(exe)
        .args(["--exact", "an_address_space_limit_makes_big_vram_an_error", "--nocapture", "--test-threads", "1"])
        .env("PILOT_VRAM_CHILD", "1")
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the child failed ({:?}): {text}", out.status);
    assert!(text.contains("child: refused and recovered"), "{text}");
}
