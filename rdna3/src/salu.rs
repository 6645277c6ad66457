//! Scalar ALU and program control: SOP1, SOP2, SOPK, SOPC, SOPP.

use super::decode::{operand as op, Enc, Inst};
use super::isa::Isa;
use super::wave::{semantics, Kind, State, Wave};

semantics!(S {
    MovB32 = "s_mov_b32",
    MovB64 = "s_mov_b64",
    CmovB32 = "s_cmov_b32",
    CmovB64 = "s_cmov_b64",
    NotB32 = "s_not_b32",
    NotB64 = "s_not_b64",
    BrevB32 = "s_brev_b32",
    Bitset0B32 = "s_bitset0_b32",
    Bitset1B32 = "s_bitset1_b32",
    CtzB32 = "s_ctz_i32_b32",
    ClzU32 = "s_clz_i32_u32",
    ClsI32 = "s_cls_i32",
    SextI8 = "s_sext_i32_i8",
    SextI16 = "s_sext_i32_i16",
    AbsI32 = "s_abs_i32",
    Bcnt1B32 = "s_bcnt1_i32_b32",
    Bcnt1B64 = "s_bcnt1_i32_b64",
    AndSaveexec = "s_and_saveexec_b32",
    OrSaveexec = "s_or_saveexec_b32",
    XorSaveexec = "s_xor_saveexec_b32",
    AndNot1Saveexec = "s_and_not1_saveexec_b32",
    OrNot1Saveexec = "s_or_not1_saveexec_b32",
    AndNot0Saveexec = "s_and_not0_saveexec_b32",
    AndNot1Wrexec = "s_and_not1_wrexec_b32",
    GetpcB64 = "s_getpc_b64",
    SetpcB64 = "s_setpc_b64",
    AddU32 = "s_add_u32" | "s_add_co_u32",
    SubU32 = "s_sub_u32" | "s_sub_co_u32",
    AddI32 = "s_add_i32" | "s_add_co_i32",
    SubI32 = "s_sub_i32" | "s_sub_co_i32",
    AddcU32 = "s_addc_u32" | "s_add_co_ci_u32",
    SubbU32 = "s_subb_u32" | "s_sub_co_ci_u32",
    AbsdiffI32 = "s_absdiff_i32",
    AddNcU64 = "s_add_nc_u64",
    SubNcU64 = "s_sub_nc_u64",
    MulU64 = "s_mul_u64",
    LshlB32 = "s_lshl_b32",
    LshlB64 = "s_lshl_b64",
    LshrB32 = "s_lshr_b32",
    LshrB64 = "s_lshr_b64",
    AshrI32 = "s_ashr_i32",
    AshrI64 = "s_ashr_i64",
    Lshl1Add = "s_lshl1_add_u32",
    Lshl2Add = "s_lshl2_add_u32",
    Lshl3Add = "s_lshl3_add_u32",
    Lshl4Add = "s_lshl4_add_u32",
    MinI32 = "s_min_i32",
    MinU32 = "s_min_u32",
    MaxI32 = "s_max_i32",
    MaxU32 = "s_max_u32",
    AndB32 = "s_and_b32",
    AndB64 = "s_and_b64",
    OrB32 = "s_or_b32",
    OrB64 = "s_or_b64",
    XorB32 = "s_xor_b32",
    XorB64 = "s_xor_b64",
    NandB32 = "s_nand_b32",
    NorB32 = "s_nor_b32",
    XnorB32 = "s_xnor_b32",
    AndNot1B32 = "s_and_not1_b32",
    AndNot1B64 = "s_and_not1_b64",
    OrNot1B32 = "s_or_not1_b32",
    OrNot1B64 = "s_or_not1_b64",
    BfeU32 = "s_bfe_u32",
    BfeI32 = "s_bfe_i32",
    BfmB32 = "s_bfm_b32",
    MulI32 = "s_mul_i32",
    MulHiU32 = "s_mul_hi_u32",
    MulHiI32 = "s_mul_hi_i32",
    CselectB32 = "s_cselect_b32",
    CselectB64 = "s_cselect_b64",
    PackLl = "s_pack_ll_b32_b16",
    PackLh = "s_pack_lh_b32_b16",
    PackHh = "s_pack_hh_b32_b16",
    PackHl = "s_pack_hl_b32_b16",
    MovkI32 = "s_movk_i32",
    CmovkI32 = "s_cmovk_i32",
    AddkI32 = "s_addk_i32" | "s_addk_co_i32",
    MulkI32 = "s_mulk_i32",
    CmpkEqI32 = "s_cmpk_eq_i32",
    CmpkLgI32 = "s_cmpk_lg_i32",
    CmpkGtI32 = "s_cmpk_gt_i32",
    CmpkGeI32 = "s_cmpk_ge_i32",
    CmpkLtI32 = "s_cmpk_lt_i32",
    CmpkLeI32 = "s_cmpk_le_i32",
    CmpkEqU32 = "s_cmpk_eq_u32",
    CmpkLgU32 = "s_cmpk_lg_u32",
    CmpkGtU32 = "s_cmpk_gt_u32",
    CmpkGeU32 = "s_cmpk_ge_u32",
    CmpkLtU32 = "s_cmpk_lt_u32",
    CmpkLeU32 = "s_cmpk_le_u32",
    CmpEqI32 = "s_cmp_eq_i32",
    CmpLgI32 = "s_cmp_lg_i32",
    CmpGtI32 = "s_cmp_gt_i32",
    CmpGeI32 = "s_cmp_ge_i32",
    CmpLtI32 = "s_cmp_lt_i32",
    CmpLeI32 = "s_cmp_le_i32",
    CmpEqU32 = "s_cmp_eq_u32",
    CmpLgU32 = "s_cmp_lg_u32",
    CmpGtU32 = "s_cmp_gt_u32",
    CmpGeU32 = "s_cmp_ge_u32",
    CmpLtU32 = "s_cmp_lt_u32",
    CmpLeU32 = "s_cmp_le_u32",
    Bitcmp0B32 = "s_bitcmp0_b32",
    Bitcmp1B32 = "s_bitcmp1_b32",
    CmpEqU64 = "s_cmp_eq_u64",
    CmpLgU64 = "s_cmp_lg_u64",
    Nop = "s_nop",
    Clause = "s_clause",
    DelayAlu = "s_delay_alu",
    WaitcntDepctr = "s_waitcnt_depctr",
    Waitcnt = "s_waitcnt",
    WaitcntVscnt = "s_waitcnt_vscnt",
    WaitcntVmcnt = "s_waitcnt_vmcnt",
    WaitcntLgkmcnt = "s_waitcnt_lgkmcnt",
    WaitIdle = "s_wait_idle",
    Sleep = "s_sleep",
    Setprio = "s_setprio",
    InstPrefetch = "s_set_inst_prefetch_distance",
    DenormMode = "s_denorm_mode",
    RoundMode = "s_round_mode",
    Branch = "s_branch",
    CbranchScc0 = "s_cbranch_scc0",
    CbranchScc1 = "s_cbranch_scc1",
    CbranchVccz = "s_cbranch_vccz",
    CbranchVccnz = "s_cbranch_vccnz",
    CbranchExecz = "s_cbranch_execz",
    CbranchExecnz = "s_cbranch_execnz",
    Endpgm = "s_endpgm",
    Sendmsg = "s_sendmsg",
    Barrier = "s_barrier" | "s_barrier_wait",
    BarrierSignal = "s_barrier_signal",
    // gfx12 splits s_waitcnt into one wait per counter.
    WaitLoadcnt = "s_wait_loadcnt",
    WaitStorecnt = "s_wait_storecnt",
    WaitDscnt = "s_wait_dscnt",
    WaitKmcnt = "s_wait_kmcnt",
    WaitLoadcntDscnt = "s_wait_loadcnt_dscnt",
    WaitStorecntDscnt = "s_wait_storecnt_dscnt",
    WaitAlu = "s_wait_alu",
    IcacheInv = "s_icache_inv",
    Gl0Inv = "buffer_gl0_inv",
    Gl1Inv = "buffer_gl1_inv",
});

/// Scalar float operations ([`super::salu_float`]; gfx12 only) resolve to `FLOAT + their code`.
const FLOAT: u16 = 0x8000;

pub(super) fn resolve(isa: Isa, name: &str) -> u16 {
    match (S::from_name(name), super::salu_float::resolve(name)) {
        (0, f) if f != 0 && isa == Isa::Gfx12 => FLOAT + f,
        (s, _) => s,
    }
}

fn float(w: &mut Wave, inst: &Inst) -> Result<(), String> {
    let info = inst.info;
    let src =
        |w: &Wave, i: usize| -> Result<u32, String> { Ok(w.scalar(inst.src[i], 1, inst.literal, Kind::F32)? as u32) };
    let a = src(w, 0)?;
    let b = if info.w[2] != 0 { src(w, 1)? } else { 0 };
    let c = match info.name {
        "s_fmac_f32" => w.scalar(inst.dst, 1, 0, Kind::F32)? as u32,
        "s_fmaak_f32" | "s_fmamk_f32" => src(w, 2)?,
        _ => 0,
    };
    match super::salu_float::exec(inst.sem - FLOAT, a, b, c, w.flush_f32) {
        Some(super::salu_float::Out::Scc(scc)) => {
            w.scc = scc;
            Ok(())
        }
        Some(super::salu_float::Out::Value(v)) => w.write_scalar(inst.dst, 1, v as u64),
        None => Err("not implemented by the emulator".into()),
    }
}

/// The 32-bit comparison of SOPC/SOPK compares.
fn compare(s: S, a: u32, b: u32) -> bool {
    use S::*;
    let (ai, bi) = (a as i32, b as i32);
    match s {
        CmpEqI32 | CmpEqU32 | CmpkEqI32 | CmpkEqU32 => a == b,
        CmpLgI32 | CmpLgU32 | CmpkLgI32 | CmpkLgU32 => a != b,
        CmpGtI32 | CmpkGtI32 => ai > bi,
        CmpGeI32 | CmpkGeI32 => ai >= bi,
        CmpLtI32 | CmpkLtI32 => ai < bi,
        CmpLeI32 | CmpkLeI32 => ai <= bi,
        CmpGtU32 | CmpkGtU32 => a > b,
        CmpGeU32 | CmpkGeU32 => a >= b,
        CmpLtU32 | CmpkLtU32 => a < b,
        _ => a <= b, // CmpLeU32, CmpkLeU32
    }
}

pub(super) fn exec(w: &mut Wave, inst: &Inst) -> Result<(), String> {
    use S::*;
    let s = S::of(inst.sem);
    let info = inst.info;
    let src = |w: &Wave, i: usize| w.scalar(inst.src[i], info.w[1 + i].max(1), inst.literal, Kind::Int);
    match inst.enc {
        Enc::Sopp => return sopp(w, inst, s),
        Enc::Sopk => return sopk(w, inst, s),
        _ if inst.sem >= FLOAT => return float(w, inst),
        _ => {}
    }
    let a = src(w, 0)?;
    let b = if info.w[2] != 0 { src(w, 1)? } else { 0 };
    let (a32, b32) = (a as u32, b as u32);
    let scc = w.scc;
    // (result, result dwords, new SCC)
    let (r, width, scc): (u64, u8, bool) = match s {
        MovB32 => (a, 1, scc),
        MovB64 => (a, 2, scc),
        CmovB32 | CmovB64 => {
            if !scc {
                return Ok(());
            }
            (a, info.w[0], scc)
        }
        NotB32 => (!a32 as u64, 1, !a32 != 0),
        NotB64 => (!a, 2, !a != 0),
        BrevB32 => (a32.reverse_bits() as u64, 1, scc),
        // The destination with bit S0[4:0] cleared or set.
        Bitset0B32 | Bitset1B32 => {
            let cur = w.scalar(inst.dst, 1, 0, Kind::Int)? as u32;
            let bit = 1u32 << (a32 & 31);
            ((if s == Bitset0B32 { cur & !bit } else { cur | bit }) as u64, 1, scc)
        }
        CtzB32 => (if a32 == 0 { u32::MAX } else { a32.trailing_zeros() } as u64, 1, scc),
        ClzU32 => (if a32 == 0 { u32::MAX } else { a32.leading_zeros() } as u64, 1, scc),
        // The count of leading bits equal to the sign bit, the sign bit included; -1 for 0 and -1.
        ClsI32 => {
            let x = a32 ^ ((a32 as i32) >> 31) as u32;
            (if x == 0 { u32::MAX } else { x.leading_zeros() } as u64, 1, scc)
        }
        SextI8 => (a32 as i8 as i32 as u32 as u64, 1, scc),
        SextI16 => (a32 as i16 as i32 as u32 as u64, 1, scc),
        AbsI32 => {
            let r = (a32 as i32).unsigned_abs();
            (r as u64, 1, r != 0)
        }
        Bcnt1B32 => (a32.count_ones() as u64, 1, a32 != 0),
        Bcnt1B64 => (a.count_ones() as u64, 1, a != 0),
        AndSaveexec | OrSaveexec | XorSaveexec | AndNot1Saveexec | OrNot1Saveexec | AndNot0Saveexec | AndNot1Wrexec => {
            let exec = w.exec();
            let new = match s {
                AndSaveexec => a32 & exec,
                OrSaveexec => a32 | exec,
                XorSaveexec => a32 ^ exec,
                AndNot1Saveexec | AndNot1Wrexec => a32 & !exec,
                OrNot1Saveexec => a32 | !exec,
                _ => !a32 & exec,
            };
            w.s[op::EXEC_LO as usize] = new;
            let saved = if s == AndNot1Wrexec { new } else { exec };
            (saved as u64, 1, new != 0)
        }
        GetpcB64 => (w.pc as u64, 2, scc),
        SetpcB64 => {
            w.pc = a as u32;
            return Ok(());
        }
        AddU32 => {
            let (r, c) = a32.overflowing_add(b32);
            (r as u64, 1, c)
        }
        SubU32 => {
            let (r, c) = a32.overflowing_sub(b32);
            (r as u64, 1, c)
        }
        AddI32 => {
            let (r, o) = (a32 as i32).overflowing_add(b32 as i32);
            (r as u32 as u64, 1, o)
        }
        SubI32 => {
            let (r, o) = (a32 as i32).overflowing_sub(b32 as i32);
            (r as u32 as u64, 1, o)
        }
        AddcU32 => {
            let r = a32 as u64 + b32 as u64 + scc as u64;
            (r as u32 as u64, 1, r >> 32 != 0)
        }
        SubbU32 => {
            let r = (a32 as u64).wrapping_sub(b32 as u64).wrapping_sub(scc as u64);
            (r as u32 as u64, 1, (b32 as u64 + scc as u64) > a32 as u64)
        }
        AddNcU64 => (a.wrapping_add(b), 2, scc),
        SubNcU64 => (a.wrapping_sub(b), 2, scc),
        MulU64 => (a.wrapping_mul(b), 2, scc),
        // gfx12's workgroup barrier is `s_barrier_signal -1` then `s_barrier_wait -1`: the wait does the
        // synchronizing here; named barriers (other operands) are not emulated.
        BarrierSignal if inst.src[0] == 193 => return Ok(()),
        AbsdiffI32 => {
            let r = (a32 as i32).wrapping_sub(b32 as i32).unsigned_abs();
            (r as u64, 1, r != 0)
        }
        LshlB32 => {
            let r = a32 << (b32 & 31);
            (r as u64, 1, r != 0)
        }
        LshlB64 => {
            let r = a << (b & 63);
            (r, 2, r != 0)
        }
        LshrB32 => {
            let r = a32 >> (b32 & 31);
            (r as u64, 1, r != 0)
        }
        LshrB64 => {
            let r = a >> (b & 63);
            (r, 2, r != 0)
        }
        AshrI32 => {
            let r = ((a32 as i32) >> (b32 & 31)) as u32;
            (r as u64, 1, r != 0)
        }
        AshrI64 => {
            let r = ((a as i64) >> (b & 63)) as u64;
            (r, 2, r != 0)
        }
        Lshl1Add | Lshl2Add | Lshl3Add | Lshl4Add => {
            let sh = 1 + (s as u16 - Lshl1Add as u16) as u32;
            let r = ((a32 as u64) << sh) + b32 as u64;
            (r as u32 as u64, 1, r >> 32 != 0)
        }
        MinI32 => ((a32 as i32).min(b32 as i32) as u32 as u64, 1, (a32 as i32) < (b32 as i32)),
        MinU32 => (a32.min(b32) as u64, 1, a32 < b32),
        MaxI32 => ((a32 as i32).max(b32 as i32) as u32 as u64, 1, (a32 as i32) > (b32 as i32)),
        MaxU32 => (a32.max(b32) as u64, 1, a32 > b32),
        AndB32 | OrB32 | XorB32 | NandB32 | NorB32 | XnorB32 | AndNot1B32 | OrNot1B32 => {
            let r = match s {
                AndB32 => a32 & b32,
                OrB32 => a32 | b32,
                XorB32 => a32 ^ b32,
                NandB32 => !(a32 & b32),
                NorB32 => !(a32 | b32),
                XnorB32 => !(a32 ^ b32),
                AndNot1B32 => a32 & !b32,
                _ => a32 | !b32,
            };
            (r as u64, 1, r != 0)
        }
        AndB64 | OrB64 | XorB64 | AndNot1B64 | OrNot1B64 => {
            let r = match s {
                AndB64 => a & b,
                OrB64 => a | b,
                XorB64 => a ^ b,
                AndNot1B64 => a & !b,
                _ => a | !b,
            };
            (r, 2, r != 0)
        }
        BfeU32 | BfeI32 => {
            let (off, width) = (b32 & 31, (b32 >> 16) & 127);
            let r = if width == 0 {
                0
            } else if s == BfeU32 {
                (a32 >> off) & (((1u64 << width.min(32)) - 1) as u32)
            } else {
                // The field is taken from S0 shifted arithmetically (bits past 31 are sign bits).
                let sh = 32 - width.min(32);
                ((((a32 as i32) >> off) << sh) >> sh) as u32
            };
            (r as u64, 1, r != 0)
        }
        BfmB32 => ((((1u64 << (a32 & 31)) - 1) as u32).wrapping_shl(b32 & 31) as u64, 1, scc),
        MulI32 => (a32.wrapping_mul(b32) as u64, 1, scc),
        MulHiU32 => ((a32 as u64 * b32 as u64) >> 32, 1, scc),
        MulHiI32 => ((((a32 as i32 as i64) * (b32 as i32 as i64)) >> 32) as u32 as u64, 1, scc),
        CselectB32 => (if scc { a32 } else { b32 } as u64, 1, scc),
        CselectB64 => (if scc { a } else { b }, 2, scc),
        PackLl => ((a32 & 0xffff | b32 << 16) as u64, 1, scc),
        PackLh => ((a32 & 0xffff | b32 & 0xffff_0000) as u64, 1, scc),
        PackHh => ((a32 >> 16 | b32 & 0xffff_0000) as u64, 1, scc),
        PackHl => ((a32 >> 16 | b32 << 16) as u64, 1, scc),
        CmpEqI32 | CmpLgI32 | CmpGtI32 | CmpGeI32 | CmpLtI32 | CmpLeI32 | CmpEqU32 | CmpLgU32 | CmpGtU32 | CmpGeU32
        | CmpLtU32 | CmpLeU32 => {
            w.scc = compare(s, a32, b32);
            return Ok(());
        }
        Bitcmp0B32 | Bitcmp1B32 => {
            w.scc = (a32 >> (b32 & 31) & 1 == 1) == (s == Bitcmp1B32);
            return Ok(());
        }
        CmpEqU64 | CmpLgU64 => {
            w.scc = (a == b) == (s == CmpEqU64);
            return Ok(());
        }
        _ => return Err("not implemented by the emulator".into()),
    };
    w.scc = scc;
    w.write_scalar(inst.dst, width, r)
}

fn sopk(w: &mut Wave, inst: &Inst, s: S) -> Result<(), String> {
    use S::*;
    let k = inst.imm as u32; // sign-extended simm16
    let d = inst.dst as usize;
    let cur = if inst.dst < 128 { w.s[d] } else { 0 };
    match s {
        MovkI32 => w.write_scalar(inst.dst, 1, k as u64)?,
        CmovkI32 => {
            if w.scc {
                w.write_scalar(inst.dst, 1, k as u64)?
            }
        }
        AddkI32 => {
            let (r, o) = (cur as i32).overflowing_add(k as i32);
            w.scc = o;
            w.write_scalar(inst.dst, 1, r as u32 as u64)?
        }
        MulkI32 => w.write_scalar(inst.dst, 1, cur.wrapping_mul(k) as u64)?,
        CmpkEqU32 | CmpkLgU32 | CmpkGtU32 | CmpkGeU32 | CmpkLtU32 | CmpkLeU32 => {
            w.scc = compare(s, cur, inst.imm as u16 as u32)
        }
        CmpkEqI32 | CmpkLgI32 | CmpkGtI32 | CmpkGeI32 | CmpkLtI32 | CmpkLeI32 => w.scc = compare(s, cur, k),
        // Memory is synchronous: nothing to wait for.
        WaitcntVscnt | WaitcntVmcnt | WaitcntLgkmcnt => {}
        _ => return Err("not implemented by the emulator".into()),
    }
    Ok(())
}

fn sopp(w: &mut Wave, inst: &Inst, s: S) -> Result<(), String> {
    use S::*;
    // Branch targets: PC of the next instruction + simm16 * 4.
    let target = (inst.offset as i64 + 4 + inst.imm as i64 * 4) as u32;
    let taken = match s {
        Branch => true,
        CbranchScc0 => !w.scc,
        CbranchScc1 => w.scc,
        CbranchVccz => w.vcc() == 0,
        CbranchVccnz => w.vcc() != 0,
        CbranchExecz => w.exec() == 0,
        CbranchExecnz => w.exec() != 0,
        Endpgm => {
            w.state = State::Done;
            false
        }
        Barrier => {
            w.state = State::Barrier;
            false
        }
        DenormMode => {
            // Bits 1:0 FP32 mode, 3:2 FP16/FP64 mode; 0 flushes.
            w.flush_f32 = inst.imm & 3 == 0;
            w.flush_f16 = (inst.imm >> 2) & 3 == 0;
            false
        }
        RoundMode if inst.imm & 0xf != 0 => return Err("only round-to-nearest-even is emulated".into()),
        // Memory is synchronous here, so waits, hints and priorities have nothing to do.
        Nop | Clause | DelayAlu | WaitcntDepctr | Waitcnt | WaitcntVscnt | WaitcntVmcnt | WaitcntLgkmcnt | WaitIdle
        | Sleep | Setprio | InstPrefetch | RoundMode | IcacheInv | Gl0Inv | Gl1Inv | WaitLoadcnt | WaitStorecnt
        | WaitDscnt | WaitKmcnt | WaitLoadcntDscnt | WaitStorecntDscnt | WaitAlu => false,
        // The only message compute kernels send is MSG_DEALLOC_VGPRS (3) before s_endpgm.
        Sendmsg if inst.imm == 3 => false,
        _ => return Err("not implemented by the emulator".into()),
    };
    if taken {
        w.pc = target;
    }
    Ok(())
}
