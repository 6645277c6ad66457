//! SDMA packets (SDMA 5.x-7.x layouts: Linux `navi10_sdma_pkt_open.h` / `sdma_v6_0_0_pkt_open.h`; the same values
//! as tinygrad's `runtime/autogen/am/sdma_6_0_0.py`, which `tests/amd_run_packets.rs` cross-checks).
//!
//! Every encoder appends whole dwords to a `Vec<u32>`; addresses are GPU addresses, lo then hi.

/// Opcodes (header bits 0-7) and sub-opcodes (bits 8-15).
pub mod op {
    pub const NOP: u32 = 0;
    pub const COPY: u32 = 1;
    pub const WRITE: u32 = 2;
    pub const FENCE: u32 = 5;
    pub const TRAP: u32 = 6;
    pub const POLL_REGMEM: u32 = 8;
    pub const TIMESTAMP: u32 = 13;
    pub const SUB_COPY_LINEAR: u32 = 0;
    pub const SUB_TIMESTAMP_GET_GLOBAL: u32 = 2;
}

/// Largest COPY_LINEAR in bytes (the count field holds `bytes - 1` in 30 bits: 1 GiB).
pub const COPY_MAX: u64 = 1 << 30;
/// Dwords of each packet.
pub const COPY_LINEAR_DWORDS: usize = 7;
pub const FENCE_DWORDS: usize = 4;
pub const POLL_REGMEM_DWORDS: usize = 6;
pub const TIMESTAMP_DWORDS: usize = 3;

/// POLL_REGMEM compare functions (header bits 28-30) and fields.
pub mod poll {
    pub const FUNC_ALWAYS: u32 = 0;
    pub const FUNC_EQ: u32 = 3;
    pub const FUNC_GEQ: u32 = 5;
    pub const FUNC_SHIFT: u32 = 28;
    /// Header bit 31: poll memory, not a register.
    pub const MEM_POLL: u32 = 1 << 31;
    pub const INTERVAL: u32 = 4;
    /// Retry count 0xFFF (bits 16-27 of the last dword): retry forever.
    pub const RETRY_FOREVER: u32 = 0xFFF << 16;
}

/// FENCE's memory type field (header bits 16-18), 3 on gfx10+ (tinygrad `AMDCopyQueue.signal`).
pub const FENCE_MTYPE_UC: u32 = 3 << 16;

fn lo(a: u64) -> u32 {
    a as u32
}

fn hi(a: u64) -> u32 {
    (a >> 32) as u32
}

/// COPY_LINEAR of `bytes` (1..=[`COPY_MAX`]) from `src` to `dst`.
pub fn copy_linear(out: &mut Vec<u32>, src: u64, dst: u64, bytes: u64) {
    debug_assert!(bytes > 0 && bytes <= COPY_MAX);
    out.extend([op::COPY | op::SUB_COPY_LINEAR << 8, (bytes - 1) as u32, 0, lo(src), hi(src), lo(dst), hi(dst)]);
}

/// As many COPY_LINEAR packets as `bytes` needs.
pub fn copy(out: &mut Vec<u32>, src: u64, dst: u64, bytes: u64) {
    let mut done = 0;
    while done < bytes {
        let n = (bytes - done).min(COPY_MAX);
        copy_linear(out, src + done, dst + done, n);
        done += n;
    }
}

/// FENCE: write the 32-bit `value` to `addr` once everything before it has completed.
pub fn fence(out: &mut Vec<u32>, addr: u64, value: u32) {
    out.extend([op::FENCE | FENCE_MTYPE_UC, lo(addr), hi(addr), value]);
}

/// POLL_REGMEM on memory: stall until `func(*addr & mask, reference)` holds.
pub fn poll_mem(out: &mut Vec<u32>, func: u32, addr: u64, reference: u32, mask: u32) {
    let header = op::POLL_REGMEM | func << poll::FUNC_SHIFT | poll::MEM_POLL;
    out.extend([header, lo(addr), hi(addr), reference, mask, poll::INTERVAL | poll::RETRY_FOREVER]);
}

/// WRITE (linear, untiled): `data` (at least one dword) at `addr`.
pub fn write(out: &mut Vec<u32>, addr: u64, data: &[u32]) {
    debug_assert!(!data.is_empty() && data.len() <= 1 << 20);
    out.extend([op::WRITE, lo(addr), hi(addr), data.len() as u32 - 1]);
    out.extend_from_slice(data);
}

/// TIMESTAMP: the 64-bit global GPU clock to `addr`.
pub fn timestamp(out: &mut Vec<u32>, addr: u64) {
    out.extend([op::TIMESTAMP | op::SUB_TIMESTAMP_GET_GLOBAL << 8, lo(addr), hi(addr)]);
}

/// `n` one-dword NOPs.
pub fn nops(out: &mut Vec<u32>, n: usize) {
    out.extend(std::iter::repeat_n(op::NOP, n));
}
