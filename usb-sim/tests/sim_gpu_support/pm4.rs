//! PM4 and SDMA packet builders for the simulated GPU tests (layouts: Linux `nvd.h`, `sdma_v6_0_0_pkt_open.h`;
//! tinygrad `ops_amd.py` `AMDComputeQueue`/`AMDCopyQueue`).

pub fn pkt3(op: u32, body: &[u32]) -> Vec<u32> {
    let mut v = vec![3 << 30 | ((body.len() as u32 - 1) << 16) | op << 8];
    v.extend_from_slice(body);
    v
}

/// SET_SH_REG of consecutive registers from absolute index `reg`.
pub fn set_sh(reg: u32, vals: &[u32]) -> Vec<u32> {
    let mut b = vec![reg - 0x2C00];
    b.extend_from_slice(vals);
    pkt3(0x76, &b)
}

/// RELEASE_MEM writing the 32-bit `value` to `addr` at end of pipe.
pub fn release_mem(addr: u64, value: u32) -> Vec<u32> {
    pkt3(0x49, &[20 | 5 << 8, 1 << 29, addr as u32, (addr >> 32) as u32, value, 0, 0])
}

/// WAIT_REG_MEM until the dword at `addr` is >= `value`.
pub fn wait_mem_geq(addr: u64, value: u32) -> Vec<u32> {
    pkt3(0x3C, &[5 | 1 << 4, addr as u32, (addr >> 32) as u32, value, 0xFFFF_FFFF, 4])
}

pub fn acquire_mem() -> Vec<u32> {
    pkt3(0x58, &[0, 0xFFFF_FFFF, 0xFFFF_FFFF, 0, 0, 0, 0])
}

/// ACQUIRE_MEM invalidating GLM, GLK, GLV and GL1 with write-backs (GCR_CNTL 0x3F0, pilot's pre-dispatch barrier).
pub fn acquire_mem_inv() -> Vec<u32> {
    pkt3(0x58, &[0, 0xFFFF_FFFF, 0xFFFF_FFFF, 0, 0, 0, 0x3F0])
}

pub fn cs_partial_flush() -> Vec<u32> {
    pkt3(0x46, &[7 | 4 << 8])
}

pub fn indirect_buffer(addr: u64, ndw: u32) -> Vec<u32> {
    pkt3(0x3F, &[addr as u32, (addr >> 32) as u32, ndw | 1 << 23])
}

/// DISPATCH_DIRECT with compute_shader_en | force_start_at_000 | cs_w32_en.
pub fn dispatch(grid: [u32; 3]) -> Vec<u32> {
    pkt3(0x15, &[grid[0], grid[1], grid[2], 1 | 1 << 2 | 1 << 15])
}

/// gfx11 COMPUTE_* registers (GC segment 0 = 0x1260 + Linux `gc_11_0_0_offset.h`).
pub mod reg {
    pub const PGM_LO: u32 = 0x1260 + 0x1BAC;
    pub const RSRC1: u32 = 0x1260 + 0x1BB2;
    pub const RSRC3: u32 = 0x1260 + 0x1BC8;
    pub const TMPRING_SIZE: u32 = 0x1260 + 0x1BB8;
    pub const USER_DATA_0: u32 = 0x1260 + 0x1BE0;
    pub const NUM_THREAD_X: u32 = 0x1260 + 0x1BA7;
}

pub fn bytes(dws: &[u32]) -> Vec<u8> {
    dws.iter().flat_map(|d| d.to_le_bytes()).collect()
}

pub mod sdma {
    pub fn copy_linear(src: u64, dst: u64, n: u32) -> Vec<u32> {
        vec![1, n - 1, 0, src as u32, (src >> 32) as u32, dst as u32, (dst >> 32) as u32]
    }
    pub fn fence(addr: u64, value: u32) -> Vec<u32> {
        vec![5 | 3 << 16, addr as u32, (addr >> 32) as u32, value]
    }
    pub fn write(addr: u64, data: &[u32]) -> Vec<u32> {
        let mut v = vec![2, addr as u32, (addr >> 32) as u32, data.len() as u32 - 1];
        v.extend_from_slice(data);
        v
    }
    /// POLL_REGMEM until the dword at `addr` == `value`.
    pub fn poll_eq(addr: u64, value: u32) -> Vec<u32> {
        vec![8 | 3 << 28 | 1 << 31, addr as u32, (addr >> 32) as u32, value, 0xFFFF_FFFF, 4 | 0xFFF << 16]
    }
    pub fn timestamp(addr: u64) -> Vec<u32> {
        vec![13 | 2 << 8, addr as u32, (addr >> 32) as u32]
    }
    pub fn trap() -> Vec<u32> {
        vec![6, 0]
    }
}
