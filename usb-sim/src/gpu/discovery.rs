//! The IP discovery table the simulated GPU leaves at VRAM end - 64 KB at power-on, in the binary format of
//! Linux `drivers/gpu/drm/amd/include/discovery.h` (binary_header v1, ip_discovery_header v4, one die of
//! `ip_v4` entries with 32-bit base addresses, gc_info v1.0).

use super::board::{Board, Ip};

/// Distance of the table from the end of VRAM (tinygrad `amdev.py` `_run_discovery`).
pub const FROM_END: u64 = 64 << 10;
pub const BINARY_SIGNATURE: u32 = 0x2821_1407;
/// "IPDS".
pub const IP_DISCOVERY_SIGNATURE: u32 = 0x5344_5049;
/// "GC".
pub const GC_TABLE_ID: u32 = 0x4347;
/// Table slots of binary_header.table_list.
pub const TABLE_IP_DISCOVERY: usize = 0;
pub const TABLE_GC: usize = 1;
const TABLES: usize = 6;
const BINARY_HEADER_BYTES: usize = 12 + 8 * TABLES;
const IP_HEADER_BYTES: usize = 80;
const GC_INFO_BYTES: usize = 88;

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// Linux `amdgpu_discovery_calculate_checksum`: the byte sum, truncated to 16 bits.
pub fn checksum(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |s, &b| s.wrapping_add(u16::from(b)))
}

/// The table's bytes for `board`.
pub fn table(board: Board) -> Vec<u8> {
    // IP discovery: header, one die header, the IP entries.
    let mut ips = Vec::new();
    for ip in Ip::ALL {
        let bases = board.bases(ip);
        let (major, minor, rev) = board.version(ip);
        let mut e = vec![0u8; 8];
        put16(&mut e, 0, ip.hw_id());
        e[2] = 0; // instance
        e[3] = bases.len() as u8;
        e[4] = major;
        e[5] = minor;
        e[6] = rev;
        for b in bases {
            e.extend_from_slice(&b.to_le_bytes());
        }
        ips.extend(e);
    }
    let ip_off = BINARY_HEADER_BYTES;
    let die_off = IP_HEADER_BYTES; // relative to the start of the binary: see below
    let mut ipd = vec![0u8; IP_HEADER_BYTES + 4];
    put32(&mut ipd, 0, IP_DISCOVERY_SIGNATURE);
    put16(&mut ipd, 4, 4); // version
    put16(&mut ipd, 6, (IP_HEADER_BYTES + 4 + ips.len()) as u16);
    put32(&mut ipd, 8, 0); // id
    put16(&mut ipd, 12, 1); // num_dies
    put16(&mut ipd, 14, 0); // die_info[0].die_id
    put16(&mut ipd, 16, (ip_off + die_off) as u16); // die_info[0].die_offset, from the binary's start
    ipd[78] = 0; // base_addr_64_bit = 0
                 // die header at die_offset: die_id, num_ips
    put16(&mut ipd, IP_HEADER_BYTES, 0);
    put16(&mut ipd, IP_HEADER_BYTES + 2, Ip::ALL.len() as u16);
    ipd.extend(ips);

    let g = board.gc_info();
    let mut gc = vec![0u8; GC_INFO_BYTES];
    put32(&mut gc, 0, GC_TABLE_ID);
    put16(&mut gc, 4, 1); // version_major
    put16(&mut gc, 6, 0); // version_minor
    put32(&mut gc, 8, GC_INFO_BYTES as u32);
    for (i, v) in [
        g.num_se,
        g.wgp0_per_sa,
        g.wgp1_per_sa,
        g.rb_per_se,
        g.gl2c,
        g.gprs,
        256,  // max_gs_thds
        32,   // gs_table_depth
        1792, // gsprim_buff_depth
        1024, // parameter_cache_depth
        1,    // double_offchip_lds_buffer
        g.wave_size,
        g.max_waves_per_simd,
        g.max_scratch_slots_per_cu,
        g.lds_size,
        1, // num_sc_per_se
        g.sa_per_se,
        4,  // num_packer_per_sc
        16, // num_gl2a
    ]
    .into_iter()
    .enumerate()
    {
        put32(&mut gc, 12 + 4 * i, v);
    }

    let gc_off = ip_off + ipd.len();
    let total = gc_off + gc.len();
    let mut bin = vec![0u8; total];
    bin[ip_off..gc_off].copy_from_slice(&ipd);
    bin[gc_off..].copy_from_slice(&gc);
    put32(&mut bin, 0, BINARY_SIGNATURE);
    put16(&mut bin, 4, 1); // version_major
    put16(&mut bin, 6, 0);
    put16(&mut bin, 10, total as u16);
    for (slot, off, len) in [(TABLE_IP_DISCOVERY, ip_off, ipd.len()), (TABLE_GC, gc_off, gc.len())] {
        let at = 12 + 8 * slot;
        put16(&mut bin, at, off as u16);
        let sum = checksum(&bin[off..off + len]);
        put16(&mut bin, at + 2, sum);
        put16(&mut bin, at + 4, len as u16);
    }
    // binary_checksum covers everything after itself, binary_size included (Linux `amdgpu_discovery_init`).
    let sum = checksum(&bin[10..total]);
    put16(&mut bin, 8, sum);
    bin
}
