//! GPU virtual memory as the emulator sees it.

use std::sync::Mutex;

/// GPU virtual addresses → bytes. Every access is bounds-checked by the implementation; an
/// error names the address. `Sync`, so work-groups may run on several host threads.
pub trait Memory: Sync {
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), String>;
    fn write(&self, addr: u64, data: &[u8]) -> Result<(), String>;
    /// Replaces the 32-bit word at `addr` with `f(old)` atomically and returns `old`.
    fn atomic32(&self, addr: u64, f: &mut dyn FnMut(u32) -> u32) -> Result<u32, String>;
}

/// Separate buffers at fixed GPU addresses (a test's or a fake driver's allocations).
#[derive(Default)]
pub struct Buffers {
    bufs: Mutex<Vec<(u64, Vec<u8>)>>,
}

impl Buffers {
    pub fn new() -> Buffers {
        Buffers::default()
    }

    /// Places `data` at `addr`; buffers must not overlap.
    pub fn insert(&self, addr: u64, data: Vec<u8>) {
        let mut b = self.bufs.lock().unwrap();
        assert!(
            b.iter().all(|(a, d)| addr + data.len() as u64 <= *a || *a + d.len() as u64 <= addr),
            "buffer at {addr:#x} overlaps another"
        );
        b.push((addr, data));
    }

    /// A copy of the buffer placed at `addr`.
    pub fn get(&self, addr: u64) -> Option<Vec<u8>> {
        self.bufs.lock().unwrap().iter().find(|(a, _)| *a == addr).map(|(_, d)| d.clone())
    }

    fn with<R>(&self, addr: u64, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> Result<R, String> {
        let mut b = self.bufs.lock().unwrap();
        for (a, d) in b.iter_mut() {
            if addr >= *a && addr - *a + len as u64 <= d.len() as u64 {
                let o = (addr - *a) as usize;
                return Ok(f(&mut d[o..o + len]));
            }
        }
        Err(format!("{len} bytes at GPU address {addr:#x} are outside every buffer"))
    }
}

impl Memory for Buffers {
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), String> {
        self.with(addr, out.len(), |s| out.copy_from_slice(s))
    }
    fn write(&self, addr: u64, data: &[u8]) -> Result<(), String> {
        self.with(addr, data.len(), |s| s.copy_from_slice(data))
    }
    fn atomic32(&self, addr: u64, f: &mut dyn FnMut(u32) -> u32) -> Result<u32, String> {
        if !addr.is_multiple_of(4) {
            return Err(format!("atomic at unaligned GPU address {addr:#x}"));
        }
        self.with(addr, 4, |s| {
            let old = u32::from_le_bytes(s.try_into().unwrap());
            s.copy_from_slice(&f(old).to_le_bytes());
            old
        })
    }
}
