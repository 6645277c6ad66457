//! Memory instructions: SMEM scalar loads, DS (LDS), and FLAT/GLOBAL/SCRATCH vector memory.
//!
//! Memory is synchronous here: a load's data is in its registers when the instruction ends, so the
//! `s_waitcnt` that guards it on hardware has nothing left to wait for. Lanes access memory in lane
//! order, which is one of the orders the hardware may use for atomics.

use super::decode::{operand as op, Enc, Inst};
use super::wave::{Ctx, Kind, Wave, LANES};

// Executor code layout: bits 0-4 size in bytes, bit 5 sign-extend (loads) / return (atomics),
// bit 6 D16 low half, bit 7 D16 high half, bits 8-11 atomic op or stride64, bits 12-15 kind.
const SIGNED: u16 = 1 << 5;
const RTN: u16 = 1 << 5;
const D16: u16 = 1 << 6;
const D16_HI: u16 = 1 << 7;
const STRIDE64: u16 = 1 << 8;
const LOAD: u16 = 1;
const STORE: u16 = 2;
const LOAD2: u16 = 3;
const STORE2: u16 = 4;
const ATOMIC: u16 = 5;
const SLOAD: u16 = 6;
const NOP: u16 = 7;

const ATOMICS: [&str; 16] = [
    "add", "sub", "min_i", "max_i", "min_u", "max_u", "and", "or", "xor", "swap", "cmpswap", "add_f", "min_f", "max_f",
    "inc", "dec",
];

fn size_of(ty: &str) -> Option<u16> {
    Some(match &ty[1..] {
        "8" => 1,
        "16" => 2,
        "32" => 4,
        "64" => 8,
        "96" => 12,
        "128" => 16,
        _ => return None,
    })
}

/// The executor code for a memory opcode's name (0: not emulated).
pub(super) fn resolve(name: &str) -> u16 {
    let rest = ["s_", "ds_", "global_", "flat_", "scratch_"].iter().find_map(|p| name.strip_prefix(p));
    let Some(rest) = rest else { return 0 };
    // gfx12's fences write back (global_wb) and invalidate (global_inv) caches this memory does not have.
    if matches!(name, "ds_nop" | "s_dcache_inv" | "s_gl1_inv" | "global_inv" | "global_wb") {
        return NOP << 12;
    }
    // DS spells its 16-bit-half forms with a suffix (ds_load_u8_d16_hi), FLAT in the middle
    // (global_load_d16_hi_u8).
    let (rest, half) = match (rest.strip_suffix("_d16_hi"), rest.strip_suffix("_d16")) {
        (Some(r), _) => (r, D16_HI),
        (None, Some(r)) => (r, D16),
        _ => (rest, 0),
    };
    let Some((body, ty)) = rest.rsplit_once('_') else { return 0 };
    let (body, half) = match (body.strip_suffix("_d16_hi"), body.strip_suffix("_d16")) {
        (Some(b), _) => (b, D16_HI),
        (None, Some(b)) => (b, D16),
        _ => (body, half),
    };
    let signed = if ty.starts_with('i') { SIGNED } else { 0 };
    if name.starts_with("s_") {
        // Dword loads take their width from the opcode table (up to 512 bits); gfx12's sub-dword loads
        // (s_load_u8/i8/u16/i16) carry their size and sign here.
        return match (body, ty.as_bytes()[0]) {
            ("load", b'b') => SLOAD << 12,
            ("load", b'i' | b'u') => size_of(ty).filter(|s| *s <= 2).map_or(0, |s| SLOAD << 12 | signed | s),
            _ => 0,
        };
    }
    let Some(size) = size_of(ty) else { return 0 };
    let code = |kind: u16, flags: u16| kind << 12 | flags | size;
    match body {
        "load" => code(LOAD, signed | half),
        "store" if half != D16 => code(STORE, half),
        _ if half != 0 => 0,
        "load_2addr" => code(LOAD2, 0),
        "load_2addr_stride64" => code(LOAD2, STRIDE64),
        "store_2addr" => code(STORE2, 0),
        "store_2addr_stride64" => code(STORE2, STRIDE64),
        _ => {
            // Atomics: global_atomic_OP_TY, ds_OP[_rtn]_TY.
            let body = body.strip_prefix("atomic_").unwrap_or(body);
            let (body, rtn) = match body.strip_suffix("_rtn") {
                Some(b) => (b, RTN),
                None => (body, 0),
            };
            let body = match body {
                "storexchg" => "swap",
                "cmpstore" => "cmpswap",
                b => b,
            };
            let typed = match ty.as_bytes()[0] {
                b'i' => format!("{body}_i"),
                b'u' if body.starts_with("min") || body.starts_with("max") => format!("{body}_u"),
                b'f' => format!("{body}_f"),
                _ => body.to_string(),
            };
            match ATOMICS.iter().position(|a| *a == typed) {
                Some(a) if size == 4 && !(ty == "f32" && a == 10) => code(ATOMIC, rtn | (a as u16) << 8),
                _ => 0,
            }
        }
    }
}

pub(super) fn smem(w: &mut Wave, ctx: &mut Ctx<'_>, inst: &Inst) -> Result<(), String> {
    let sem = inst.sem;
    match sem >> 12 {
        NOP => return Ok(()),
        SLOAD => {}
        _ => return Err("not implemented by the emulator".into()),
    }
    let base = w.scalar(inst.saddr, 2, 0, Kind::Int)?;
    let soff = if inst.addr == op::NULL { 0 } else { w.scalar(inst.addr, 1, 0, Kind::Int)? };
    let addr = base.wrapping_add(inst.imm as i64 as u64).wrapping_add(soff);
    let sub = (sem & 0x1f) as usize;
    if sub != 0 {
        // A sub-dword load zero- or sign-extends its byte or half into one SGPR.
        let mut b = [0u8; 2];
        ctx.mem
            .read(addr, &mut b[..sub])
            .map_err(|_| format!("a {sub}-byte scalar load at {addr:#x} is out of bounds"))?;
        let v = match (sub, sem & SIGNED != 0) {
            (1, false) => b[0] as u32,
            (1, true) => b[0] as i8 as i32 as u32,
            (_, false) => u16::from_le_bytes(b) as u32,
            (_, true) => i16::from_le_bytes(b) as i32 as u32,
        };
        return w.write_scalar(inst.dst, 1, v as u64);
    }
    let mut buf = [0u8; 64];
    let n = inst.info.w[0] as usize * 4;
    ctx.mem.read(addr, &mut buf[..n]).map_err(|_| format!("a {n}-byte scalar load at {addr:#x} is out of bounds"))?;
    for i in 0..n / 4 {
        let v = u32::from_le_bytes(buf[4 * i..4 * i + 4].try_into().unwrap());
        w.write_scalar(inst.dst + i as u16, 1, v as u64)?;
    }
    Ok(())
}

/// Where a lane's access goes.
enum Space {
    Global,
    Lds,
    Scratch(usize),
}

fn access(
    w: &mut Wave,
    ctx: &mut Ctx<'_>,
    space: &Space,
    addr: u64,
    buf: &mut [u8],
    write: bool,
) -> Result<(), String> {
    let n = buf.len();
    let oob =
        |what: &str| format!("a {n}-byte {} at {addr:#x} is outside {what}", if write { "store" } else { "load" });
    let local = |len: usize| -> Result<std::ops::Range<usize>, String> {
        let end = addr.checked_add(n as u64).filter(|e| *e <= len as u64);
        end.map(|e| addr as usize..e as usize)
            .ok_or_else(|| oob(if len == 0 { "the (empty) segment" } else { "the segment" }))
    };
    match space {
        Space::Global if write => ctx.mem.write(addr, buf).map_err(|_| oob("device memory")),
        Space::Global => ctx.mem.read(addr, buf).map_err(|_| oob("device memory")),
        Space::Lds => {
            let r =
                local(ctx.lds.len()).map_err(|_| oob(&format!("the workgroup's {} bytes of LDS", ctx.lds.len())))?;
            if write {
                ctx.lds[r].copy_from_slice(buf);
            } else {
                buf.copy_from_slice(&ctx.lds[r]);
            }
            Ok(())
        }
        Space::Scratch(lane) => {
            let size = w.private_size;
            let r = local(size).map_err(|_| oob(&format!("the lane's {size} bytes of scratch")))?;
            let base = lane * size;
            let region = &mut w.scratch[base + r.start..base + r.end];
            if write {
                region.copy_from_slice(buf);
            } else {
                buf.copy_from_slice(region);
            }
            Ok(())
        }
    }
}

/// The VGPR index of an operand code (fields an encoding lacks read as v0).
fn vgpr(code: u16) -> usize {
    code.saturating_sub(op::VGPR0) as usize
}

pub(super) fn vmem(w: &mut Wave, ctx: &mut Ctx<'_>, inst: &Inst) -> Result<(), String> {
    let sem = inst.sem;
    let kind = sem >> 12;
    if kind == NOP {
        return Ok(());
    }
    if kind == 0 || kind == SLOAD {
        return Err("not implemented by the emulator".into());
    }
    let size = (sem & 31) as usize;
    let dwords = size.div_ceil(4);
    let dst = vgpr(inst.dst);
    let data: [usize; 2] = [vgpr(inst.data[0]), vgpr(inst.data[1])];
    if matches!(kind, LOAD | LOAD2) || (kind == ATOMIC && returns(inst)) {
        w.check_vgpr(dst, (dwords * if kind == LOAD2 { 2 } else { 1 }) as u8)?;
    }
    if matches!(kind, STORE | STORE2 | ATOMIC) {
        w.check_vgpr(data[0], dwords as u8)?;
    }
    let exec = w.exec();
    let addressing = addressing(w, inst)?;
    for lane in 0..LANES {
        if exec >> lane & 1 == 0 {
            continue;
        }
        let (space, addr) = addressing.lane(w, lane);
        let mut one_lane = || -> Result<(), String> {
            match kind {
                LOAD => {
                    let mut buf = [0u8; 16];
                    access(w, ctx, &space, addr, &mut buf[..size], false)?;
                    write_loaded(w, dst, lane, &buf[..size], sem);
                }
                STORE => {
                    let mut buf = [0u8; 16];
                    for d in 0..dwords {
                        let v = w.v[(data[0] + d) * LANES + lane];
                        let v = if sem & D16_HI != 0 { v >> 16 } else { v };
                        buf[4 * d..4 * d + 4].copy_from_slice(&v.to_le_bytes());
                    }
                    access(w, ctx, &space, addr, &mut buf[..size], true)?;
                }
                LOAD2 | STORE2 => {
                    let scale = size as u64 * if sem & STRIDE64 != 0 { 64 } else { 1 };
                    for (k, off) in [inst.imm as u64, inst.imm1 as u64].into_iter().enumerate() {
                        let a = (addr as u32).wrapping_add((off * scale) as u32) as u64;
                        let mut buf = [0u8; 8];
                        if kind == LOAD2 {
                            access(w, ctx, &space, a, &mut buf[..size], false)?;
                            write_loaded(w, dst + k * dwords, lane, &buf[..size], sem);
                        } else {
                            for d in 0..dwords {
                                let v = w.v[(data[k] + d) * LANES + lane];
                                buf[4 * d..4 * d + 4].copy_from_slice(&v.to_le_bytes());
                            }
                            access(w, ctx, &space, a, &mut buf[..size], true)?;
                        }
                    }
                }
                _ => atomic(w, ctx, inst, &space, addr, lane)?,
            }
            Ok(())
        };
        one_lane().map_err(|e| format!("lane {lane}: {e}"))?;
    }
    Ok(())
}

fn returns(inst: &Inst) -> bool {
    if inst.enc == Enc::Ds {
        inst.sem & RTN != 0
    } else {
        inst.cache & 1 != 0 // GLC
    }
}

fn write_loaded(w: &mut Wave, dst: usize, lane: usize, bytes: &[u8], sem: u16) {
    let mut v = [0u8; 16];
    v[..bytes.len()].copy_from_slice(bytes);
    let word = |i: usize| u32::from_le_bytes(v[4 * i..4 * i + 4].try_into().unwrap());
    let ext = |x: u32| match (bytes.len(), sem & SIGNED != 0) {
        (1, true) => x as u8 as i8 as i32 as u32,
        (2, true) => x as u16 as i16 as i32 as u32,
        _ => x,
    };
    let slot = dst * LANES + lane;
    if sem & D16 != 0 {
        w.v[slot] = w.v[slot] & 0xffff_0000 | ext(word(0)) & 0xffff;
    } else if sem & D16_HI != 0 {
        w.v[slot] = w.v[slot] & 0xffff | ext(word(0)) << 16;
    } else {
        for d in 0..bytes.len().div_ceil(4) {
            w.v[(dst + d) * LANES + lane] = if d == 0 { ext(word(0)) } else { word(d) };
        }
    }
}

/// How an instruction forms its lanes' addresses, resolved once per instruction: a per-lane VGPR
/// (one or two dwords) plus a uniform base and offset.
struct Addressing {
    space: Seg,
    vaddr: Option<(usize, bool)>,
    base: u64,
    /// LDS and scratch addresses are 32-bit: their sums wrap.
    wrap32: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Seg {
    Global,
    Lds,
    Scratch,
}

fn addressing(w: &Wave, inst: &Inst) -> Result<Addressing, String> {
    let off = inst.imm as i64 as u64;
    let has_saddr = inst.saddr != op::NULL && inst.saddr < 124;
    let vaddr = |n: u8| -> Result<Option<(usize, bool)>, String> {
        w.check_vgpr(vgpr(inst.addr), n)?;
        Ok(Some((vgpr(inst.addr), n == 2)))
    };
    Ok(match inst.enc {
        Enc::Ds => {
            // Two-address forms add their scaled offsets per access.
            let off = if inst.sem >> 12 == LOAD2 || inst.sem >> 12 == STORE2 {
                0
            } else {
                inst.imm as u64 | (inst.imm1 as u64) << 8
            };
            Addressing { space: Seg::Lds, vaddr: vaddr(1)?, base: off, wrap32: true }
        }
        Enc::Scratch => {
            let v = if inst.addr == op::NULL { None } else { vaddr(1)? };
            let s = if has_saddr { w.scalar(inst.saddr, 1, 0, Kind::Int)? } else { 0 };
            Addressing { space: Seg::Scratch, vaddr: v, base: s.wrapping_add(off), wrap32: true }
        }
        _ if has_saddr && inst.enc == Enc::Global => {
            let base = w.scalar(inst.saddr, 2, 0, Kind::Int)?;
            Addressing { space: Seg::Global, vaddr: vaddr(1)?, base: base.wrapping_add(off), wrap32: false }
        }
        _ => Addressing { space: Seg::Global, vaddr: vaddr(2)?, base: off, wrap32: false },
    })
}

impl Addressing {
    /// The lane's address space and address (LDS and scratch: offsets into the segment).
    #[inline]
    fn lane(&self, w: &Wave, lane: usize) -> (Space, u64) {
        let v = match self.vaddr {
            None => 0,
            Some((r, false)) => w.v[r * LANES + lane] as u64,
            Some((r, true)) => w.v[r * LANES + lane] as u64 | (w.v[(r + 1) * LANES + lane] as u64) << 32,
        };
        let a = v.wrapping_add(self.base);
        let a = if self.wrap32 { a as u32 as u64 } else { a };
        let space = match self.space {
            Seg::Global => Space::Global,
            Seg::Lds => Space::Lds,
            Seg::Scratch => Space::Scratch(lane),
        };
        (space, a)
    }
}

fn atomic(w: &mut Wave, ctx: &mut Ctx<'_>, inst: &Inst, space: &Space, addr: u64, lane: usize) -> Result<(), String> {
    let d0 = w.v[vgpr(inst.data[0]) * LANES + lane];
    // cmpswap: global takes {new, compare} in data[0..2]; gfx11's ds_cmpstore takes the new value in
    // data0 and the compare in data1 (GCN's ds_cmpst had them the other way round; clang-19 emits
    // `ds_cmpstore_rtn_b32 vdst, addr, new, cmp` for a local compare-exchange).
    let (cmp, src) = if inst.enc == Enc::Ds {
        (w.v[vgpr(inst.data[1]) * LANES + lane], d0)
    } else {
        (w.v[(vgpr(inst.data[0]) + 1) * LANES + lane], d0)
    };
    let op = (inst.sem >> 8) & 15;
    let f = f32::from_bits;
    let mut update = |old: u32| -> u32 {
        match op {
            0 => old.wrapping_add(d0),
            1 => old.wrapping_sub(d0),
            2 => (old as i32).min(d0 as i32) as u32,
            3 => (old as i32).max(d0 as i32) as u32,
            4 => old.min(d0),
            5 => old.max(d0),
            6 => old & d0,
            7 => old | d0,
            8 => old ^ d0,
            9 => d0,
            10 => {
                if old == cmp {
                    src
                } else {
                    old
                }
            }
            11 => (f(old) + f(d0)).to_bits(),
            12 => f(old).min(f(d0)).to_bits(),
            13 => f(old).max(f(d0)).to_bits(),
            14 => {
                if old >= d0 {
                    0
                } else {
                    old + 1
                }
            }
            _ => {
                if old == 0 || old > d0 {
                    d0
                } else {
                    old - 1
                }
            }
        }
    };
    let old = match space {
        Space::Global => ctx
            .mem
            .rmw32(addr, &mut update)
            .map_err(|_| format!("an atomic at {addr:#x} is outside device memory or misaligned"))?,
        _ => {
            // LDS and scratch belong to this workgroup, which runs on one thread.
            let mut buf = [0u8; 4];
            access(w, ctx, space, addr, &mut buf, false)?;
            let old = u32::from_le_bytes(buf);
            access(w, ctx, space, addr, &mut update(old).to_le_bytes(), true)?;
            old
        }
    };
    if returns(inst) {
        w.v[vgpr(inst.dst) * LANES + lane] = old;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_opcode_names_resolve_to_size_kind_and_flags() {
        assert_eq!(resolve("global_load_b128"), LOAD << 12 | 16);
        assert_eq!(resolve("global_load_i8"), LOAD << 12 | SIGNED | 1);
        assert_eq!(resolve("scratch_store_d16_hi_b16"), STORE << 12 | D16_HI | 2);
        assert_eq!(resolve("ds_load_2addr_stride64_b64"), LOAD2 << 12 | STRIDE64 | 8);
        assert_eq!(resolve("ds_load_u16_d16_hi"), LOAD << 12 | D16_HI | 2);
        assert_eq!(resolve("ds_load_i8_d16"), LOAD << 12 | D16 | SIGNED | 1);
        assert_eq!(resolve("global_load_d16_hi_i8"), LOAD << 12 | D16_HI | SIGNED | 1);
        assert_eq!(resolve("ds_store_b8_d16_hi"), STORE << 12 | D16_HI | 1);
        assert_eq!(resolve("ds_add_rtn_u32"), ATOMIC << 12 | RTN | 4);
        assert_eq!(resolve("ds_max_rtn_i32"), ATOMIC << 12 | RTN | 3 << 8 | 4);
        assert_eq!(resolve("global_atomic_cmpswap_b32"), ATOMIC << 12 | 10 << 8 | 4);
        assert_eq!(resolve("global_atomic_add_f32"), ATOMIC << 12 | 11 << 8 | 4);
        assert_eq!(resolve("s_load_b512"), SLOAD << 12);
        // Not emulated: 64-bit atomics, buffer loads, the f32 compare-swap.
        assert_eq!(resolve("global_atomic_add_u64"), 0);
        assert_eq!(resolve("s_buffer_load_b32"), 0);
        assert_eq!(resolve("s_load_u8"), SLOAD << 12 | 1);
        assert_eq!(resolve("s_load_i16"), SLOAD << 12 | SIGNED | 2);
        assert_eq!(resolve("s_buffer_load_u8"), 0);
        assert_eq!(resolve("global_atomic_cmpswap_f32"), 0);
    }
}
