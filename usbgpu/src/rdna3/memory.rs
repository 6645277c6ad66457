//! The device memory a kernel reads and writes: the simulated GPU's VRAM, or a `Vec` in tests.

/// An access outside the memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfBounds;

/// Byte-addressed device memory (GPU virtual addresses). Every access is bounds-checked by the
/// implementation; the emulator turns a refusal into an error naming the kernel and instruction.
pub trait Memory {
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), OutOfBounds>;
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), OutOfBounds>;
}

/// One contiguous region of memory at `base`.
#[derive(Clone, Debug, Default)]
pub struct VecMemory {
    pub base: u64,
    pub bytes: Vec<u8>,
}

impl VecMemory {
    pub fn new(base: u64, len: usize) -> Self {
        VecMemory { base, bytes: vec![0; len] }
    }

    fn range(&self, addr: u64, len: usize) -> Result<std::ops::Range<usize>, OutOfBounds> {
        let start = addr.checked_sub(self.base).ok_or(OutOfBounds)?;
        let end = start.checked_add(len as u64).ok_or(OutOfBounds)?;
        if end > self.bytes.len() as u64 {
            return Err(OutOfBounds);
        }
        Ok(start as usize..end as usize)
    }
}

impl Memory for VecMemory {
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), OutOfBounds> {
        let r = self.range(addr, out.len())?;
        out.copy_from_slice(&self.bytes[r]);
        Ok(())
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), OutOfBounds> {
        let r = self.range(addr, data.len())?;
        self.bytes[r].copy_from_slice(data);
        Ok(())
    }
}
