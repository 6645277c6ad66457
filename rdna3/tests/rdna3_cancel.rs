//! #26 item 2: a running dispatch stops once the process-wide cancellation flag is set (what a host's
//! Ctrl-C handler sets). Its own test binary: the flag stops every dispatch in the process.

use pilot_rdna3::{cancel_flag, dispatch, CodeObjectKernel, Dispatch, KernelDescriptor, VecMemory};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[test]
fn setting_the_cancel_flag_interrupts_a_wave_that_never_ends() {
    let mut kd = [0u8; 64];
    kd[48..52].copy_from_slice(&0x60af_0000u32.to_le_bytes());
    kd[56..58].copy_from_slice(&0x0400u16.to_le_bytes()); // wave32
    let code = 0xbfa0_ffffu32.to_le_bytes(); // s_branch -1
    let k = CodeObjectKernel::from_parts("spin", KernelDescriptor::parse(&kd).unwrap(), &code).unwrap();
    let mut d = Dispatch::for_kernel(&k, [1, 1, 1], [32, 1, 1], 0).unwrap();
    d.step_limit = u64::MAX;
    d.budget.instructions = u64::MAX;
    let setter = std::thread::spawn(|| {
        std::thread::sleep(Duration::from_millis(100));
        cancel_flag().store(true, Ordering::Relaxed);
    });
    let start = Instant::now();
    let e = dispatch(&k, &d, &mut VecMemory::new(0, 64)).unwrap_err().to_string();
    setter.join().unwrap();
    cancel_flag().store(false, Ordering::Relaxed);
    assert!(e.starts_with("rdna3 spin: `s_branch") && e.ends_with("interrupted"), "{e}");
    assert!(start.elapsed() < Duration::from_secs(10), "{:?}", start.elapsed());
}
