//! Prints a decoded [`Inst`] in LLVM's gfx11 or gfx12 assembler syntax (what `llvm-objdump --mcpu=gfx1100` or
//! `--mcpu=gfx1201` prints, without the `_e32`/`_e64` encoding suffixes), so the decoder can be checked against LLVM.

use std::fmt::{self, Write};

use super::decode::{operand, Dpp, Enc, Inst, MASK};
use super::isa::Isa;
use super::wave::SRC16;

/// One operand: `code` in the 9-bit source map, `dwords` wide, `f16` picks 16-bit inline floats.
fn operand(out: &mut String, code: u16, dwords: u8, literal: u32) {
    let dwords = if dwords == MASK { 1 } else { dwords.max(1) };
    let reg = |out: &mut String, prefix: &str, n: u16| {
        if dwords == 1 {
            let _ = write!(out, "{prefix}{n}");
        } else {
            let _ = write!(out, "{prefix}[{n}:{}]", n + dwords as u16 - 1);
        }
    };
    match code {
        0..=105 => reg(out, "s", code),
        operand::VCC_LO => out.push_str(if dwords == 2 { "vcc" } else { "vcc_lo" }),
        operand::VCC_HI => out.push_str("vcc_hi"),
        108..=123 => reg(out, "ttmp", code - 108),
        operand::NULL => out.push_str("null"),
        operand::M0 => out.push_str("m0"),
        operand::EXEC_LO => out.push_str(if dwords == 2 { "exec" } else { "exec_lo" }),
        operand::EXEC_HI => out.push_str("exec_hi"),
        128..=192 => {
            let _ = write!(out, "{}", code - 128);
        }
        193..=208 => {
            let _ = write!(out, "-{}", code - 192);
        }
        240..=248 => out.push_str(
            ["0.5", "-0.5", "1.0", "-1.0", "2.0", "-2.0", "4.0", "-4.0", "0.15915494"][(code - 240) as usize],
        ),
        operand::VCCZ => out.push_str("src_vccz"),
        operand::EXECZ => out.push_str("src_execz"),
        operand::SCC => out.push_str("src_scc"),
        operand::LITERAL => {
            let _ = write!(out, "0x{literal:x}");
        }
        256.. => reg(out, "v", code - 256),
        _ => {
            let _ = write!(out, "?{code}");
        }
    }
}

fn sopp_operand(out: &mut String, name: &str, imm: i32) -> bool {
    let u = imm as u16 as u32;
    match name {
        "s_endpgm" | "s_barrier" | "s_code_end" | "s_icache_inv" | "s_ttracedata" | "s_endpgm_saved"
        | "buffer_gl0_inv" | "buffer_gl1_inv" => {}
        "s_waitcnt" => {
            let (vm, lgkm, exp) = ((u >> 10) & 63, (u >> 4) & 63, u & 7);
            let mut parts = Vec::new();
            if vm != 63 {
                parts.push(format!("vmcnt({vm})"));
            }
            if exp != 7 {
                parts.push(format!("expcnt({exp})"));
            }
            if lgkm != 63 {
                parts.push(format!("lgkmcnt({lgkm})"));
            }
            if parts.is_empty() {
                let _ = write!(out, " 0x{u:x}");
            } else {
                let _ = write!(out, " {}", parts.join(" "));
            }
        }
        "s_delay_alu" => {
            const ID: [&str; 12] = [
                "NO_DEP",
                "VALU_DEP_1",
                "VALU_DEP_2",
                "VALU_DEP_3",
                "VALU_DEP_4",
                "TRANS32_DEP_1",
                "TRANS32_DEP_2",
                "TRANS32_DEP_3",
                "FMA_ACCUM_CYCLE_1",
                "SALU_CYCLE_1",
                "SALU_CYCLE_2",
                "SALU_CYCLE_3",
            ];
            const SKIP: [&str; 6] = ["SAME", "NEXT", "SKIP_1", "SKIP_2", "SKIP_3", "SKIP_4"];
            fn name(t: &[&'static str], i: u32) -> &'static str {
                t.get(i as usize).copied().unwrap_or("?")
            }
            let _ = write!(out, " instid0({})", name(&ID, u & 15));
            if (u >> 4) & 7 != 0 {
                let _ = write!(out, " | instskip({})", name(&SKIP, (u >> 4) & 7));
            }
            if (u >> 7) & 15 != 0 {
                let _ = write!(out, " | instid1({})", name(&ID, (u >> 7) & 15));
            }
        }
        "s_sendmsg" if u == 3 => out.push_str(" sendmsg(MSG_DEALLOC_VGPRS)"),
        "s_clause" | "s_waitcnt_depctr" | "s_wait_alu" | "s_barrier_wait" => {
            let _ = write!(out, " 0x{u:x}");
        }
        _ if name.starts_with("s_wait_") && name.ends_with("cnt") => {
            let _ = write!(out, " 0x{u:x}");
        }
        _ => {
            let _ = write!(out, " {u}");
        }
    }
    true
}

/// The source operand with its VOP3 neg/abs modifiers.
fn vop3_src(out: &mut String, inst: &Inst, i: usize, dwords: u8, literal: u32) {
    // Packed ops print NEG as neg_lo instead.
    if (inst.enc != Enc::Vop3p || is_mix(inst)) && inst.neg >> i & 1 != 0 {
        out.push('-');
    }
    // v_fma_mix* use NEG_HI as abs.
    let abs = if is_mix(inst) { inst.neg_hi >> i & 1 != 0 } else { inst.abs >> i & 1 != 0 };
    if abs {
        out.push('|');
    }
    operand(out, inst.src[i], dwords, literal);
    if abs {
        out.push('|');
    }
}

fn valu(out: &mut String, inst: &Inst) {
    let info = inst.info;
    // A literal for 16-bit operands is 16 bits wide (packed operands take all 32).
    let literal = if inst.types & SRC16 != 0 && inst.enc != Enc::Vop3p { inst.literal & 0xffff } else { inst.literal };
    let name = info.name;
    let mut ops: Vec<String> = Vec::new();
    let push = |ops: &mut Vec<String>, code: u16, w: u8| {
        let mut s = String::new();
        operand(&mut s, code, w, literal);
        ops.push(s);
    };
    let carry = matches!(name, "v_add_co_ci_u32" | "v_sub_co_ci_u32" | "v_subrev_co_ci_u32");
    match inst.enc {
        Enc::Vop1 | Enc::Vop2 | Enc::Vopc => {
            if inst.enc == Enc::Vopc {
                if !name.starts_with("v_cmpx") {
                    push(&mut ops, operand::VCC_LO, 1);
                }
            } else if info.w[0] != 0 {
                push(&mut ops, inst.dst, info.w[0]);
            }
            if carry {
                push(&mut ops, operand::VCC_LO, 1);
            }
            let n = if matches!(name, "v_fmamk_f32" | "v_fmaak_f32" | "v_fmamk_f16" | "v_fmaak_f16") { 3 } else { 2 };
            for i in 0..n {
                if info.w[1 + i] != 0 || n == 3 {
                    let mut s = String::new();
                    vop3_src(&mut s, inst, i, info.w[1 + i], literal);
                    ops.push(s);
                }
            }
            if carry || name == "v_cndmask_b32" {
                push(&mut ops, operand::VCC_LO, 1);
            }
        }
        _ => {
            if info.w[0] != 0 && !name.starts_with("v_cmpx") {
                push(&mut ops, inst.dst, info.w[0]);
            }
            if info.sdst != 0 {
                push(&mut ops, inst.sdst, info.sdst);
            }
            for i in 0..3 {
                if info.w[1 + i] != 0 {
                    let mut s = String::new();
                    vop3_src(&mut s, inst, i, info.w[1 + i], literal);
                    ops.push(s);
                }
            }
        }
    }
    let _ = write!(out, "{name}{}", if inst.dpp == Dpp::None { "" } else { "_dpp" });
    if !ops.is_empty() {
        let _ = write!(out, " {}", ops.join(", "));
    }
    if inst.enc == Enc::Vop3 || inst.enc == Enc::Vop3p {
        modifiers(out, inst);
    }
    out.push_str(&super::dpp::describe(inst.dpp));
}

fn is_mix(inst: &Inst) -> bool {
    inst.enc == Enc::Vop3p && inst.info.name.starts_with("v_fma_mix")
}

fn modifiers(out: &mut String, inst: &Inst) {
    let nsrc = inst.info.w[1..].iter().filter(|w| **w != 0).count();
    let list = |bits: u8, n: usize| (0..n).map(|i| (bits >> i & 1).to_string()).collect::<Vec<_>>().join(",");
    if inst.enc == Enc::Vop3p {
        if inst.opsel != 0 {
            let _ = write!(out, " op_sel:[{}]", list(inst.opsel, nsrc));
        }
        // op_sel_hi defaults to all ones, except for v_fma_mix* where it marks the f16 sources.
        let default = if is_mix(inst) { 0 } else { (1u8 << nsrc) - 1 };
        if inst.opsel_hi & ((1u8 << nsrc) - 1) != default {
            let _ = write!(out, " op_sel_hi:[{}]", list(inst.opsel_hi, nsrc));
        }
        if inst.neg != 0 && !is_mix(inst) {
            let _ = write!(out, " neg_lo:[{}]", list(inst.neg, nsrc));
        }
        if inst.neg_hi != 0 && !is_mix(inst) {
            let _ = write!(out, " neg_hi:[{}]", list(inst.neg_hi, nsrc));
        }
    } else if inst.opsel != 0 {
        let mut bits: Vec<String> = (0..nsrc).map(|i| (inst.opsel >> i & 1).to_string()).collect();
        bits.push((inst.opsel >> 3 & 1).to_string());
        let _ = write!(out, " op_sel:[{}]", bits.join(","));
    }
    if inst.clamp {
        out.push_str(" clamp");
    }
    match inst.omod {
        1 => out.push_str(" mul:2"),
        2 => out.push_str(" mul:4"),
        3 => out.push_str(" div:2"),
        _ => {}
    }
}

fn vopd_half(out: &mut String, inst: &Inst) {
    let n = match inst.info.name {
        "v_dual_fmaak_f32" | "v_dual_fmamk_f32" => 3,
        "v_dual_mov_b32" => 1,
        _ => 2,
    };
    let _ = write!(out, "{} ", inst.info.name);
    operand(out, inst.dst, 1, 0);
    for i in 0..n {
        out.push_str(", ");
        operand(out, inst.src[i], 1, inst.literal);
    }
}

fn memory(out: &mut String, inst: &Inst) {
    let info = inst.info;
    let name = info.name;
    let mut ops: Vec<String> = Vec::new();
    let push = |ops: &mut Vec<String>, code: u16, w: u8| {
        let mut s = String::new();
        operand(&mut s, code, w, 0);
        ops.push(s);
    };
    if info.w[0] != 0 && (inst.enc == Enc::Ds || !name.contains("atomic") || inst.cache & 1 != 0) {
        // A FLAT/GLOBAL compare-swap returns the old value only, half its {data, compare} width (gfx12's
        // table gives that width).
        let halve = inst.enc != Enc::Ds && name.contains("cmpswap") && inst.isa == Isa::Gfx11;
        let w = if halve { info.w[0] / 2 } else { info.w[0] };
        push(&mut ops, inst.dst, w);
    }
    let mut tail = String::new();
    if inst.enc == Enc::Ds {
        if info.addr != 0 {
            push(&mut ops, inst.addr, 1);
        }
        if info.data != 0 {
            push(&mut ops, inst.data[0], info.data);
            if ["2addr", "cmpstore", "mskor", "condxchg"].iter().any(|k| name.contains(k)) {
                push(&mut ops, inst.data[1], info.data);
            }
        }
        if name.contains("2addr") {
            if inst.imm != 0 {
                let _ = write!(tail, " offset0:{}", inst.imm);
            }
            if inst.imm1 != 0 {
                let _ = write!(tail, " offset1:{}", inst.imm1);
            }
        } else {
            let off = inst.imm as u32 | (inst.imm1 as u32) << 8;
            if off != 0 {
                let _ = write!(tail, " offset:{off}");
            }
        }
    } else if info.addr == 0 && info.data == 0 && info.w[0] == 0 {
        // gfx12's global_inv/global_wb: cache controls only.
        cache_gfx12(&mut tail, inst);
    } else {
        let has_saddr = inst.saddr != operand::NULL && inst.saddr != 125;
        if inst.addr == operand::NULL {
            ops.push("off".into());
        } else {
            let w = if (inst.enc == Enc::Global && !has_saddr) || inst.enc == Enc::Flat { 2 } else { 1 };
            push(&mut ops, inst.addr, w);
        }
        if info.data != 0 {
            push(&mut ops, inst.data[0], info.data);
        }
        if inst.enc != Enc::Flat {
            if has_saddr {
                push(&mut ops, inst.saddr, if inst.enc == Enc::Global { 2 } else { 1 });
            } else {
                ops.push("off".into());
            }
        }
        if inst.imm != 0 {
            let _ = write!(tail, " offset:{}", inst.imm);
        }
        if inst.isa == Isa::Gfx12 {
            cache_gfx12(&mut tail, inst);
        }
        for (bit, s) in [(1u8, " glc"), (4, " slc"), (2, " dlc")] {
            if inst.cache & bit != 0 && inst.isa == Isa::Gfx11 {
                tail.push_str(s);
            }
        }
    }
    let _ = write!(out, "{name} {}{tail}", ops.join(", "));
}

/// gfx12's TH (temporal hint) and SCOPE cache controls, as LLVM names them (the defaults print nothing).
fn cache_gfx12(out: &mut String, inst: &Inst) {
    let (th, scope) = (inst.cache & 7, (inst.cache >> 3) & 3);
    let name = inst.info.name;
    if th != 0 {
        let hint = if name.contains("atomic") {
            ["RT", "RETURN", "NT", "NT_RETURN", "CASCADE_RT", "CASCADE_RT", "CASCADE_NT", "CASCADE_NT"][th as usize]
        } else if th == 3 {
            if scope == 3 {
                "BYPASS"
            } else if name.contains("store") || name == "global_wb" {
                "WB"
            } else {
                "LU"
            }
        } else {
            ["RT", "NT", "HT", "", "NT_RT", "RT_NT", "NT_HT", "RT_WB"][th as usize]
        };
        let kind = if name.contains("atomic") {
            "ATOMIC"
        } else if name.contains("store") || name == "global_wb" {
            "STORE"
        } else {
            "LOAD"
        };
        let _ = write!(out, " th:TH_{kind}_{hint}");
    }
    if scope != 0 {
        let _ = write!(out, " scope:SCOPE_{}", ["CU", "SE", "DEV", "SYS"][scope as usize]);
    }
}

impl fmt::Display for Inst {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        let info = self.info;
        let name = info.name;
        match self.enc {
            Enc::Sopp => {
                out.push_str(name);
                sopp_operand(&mut out, name, self.imm);
            }
            Enc::Sop1 | Enc::Sop2 | Enc::Sopc => {
                let mut ops = Vec::new();
                if self.enc != Enc::Sopc && info.w[0] != 0 {
                    let mut s = String::new();
                    operand(&mut s, self.dst, info.w[0], 0);
                    ops.push(s);
                }
                let n = if matches!(name, "s_fmamk_f32" | "s_fmaak_f32") { 3 } else { 2 };
                for i in 0..n {
                    if i == 2 || info.w[1 + i] != 0 {
                        let mut s = String::new();
                        operand(&mut s, self.src[i], info.w[1 + i], self.literal);
                        ops.push(s);
                    }
                }
                out.push_str(name);
                if !ops.is_empty() {
                    let _ = write!(out, " {}", ops.join(", "));
                }
            }
            Enc::Sopk => {
                out.push_str(name);
                out.push(' ');
                if info.w[0] != 0 {
                    operand(&mut out, self.dst, info.w[0], 0);
                    out.push_str(", ");
                }
                let _ = write!(out, "0x{:x}", self.imm as u16);
            }
            Enc::Smem => {
                let _ = write!(out, "{name} ");
                operand(&mut out, self.dst, info.w[0], 0);
                out.push_str(", ");
                operand(&mut out, self.saddr, 2, 0);
                out.push_str(", ");
                if self.addr != operand::NULL {
                    operand(&mut out, self.addr, 1, 0);
                    // llvm-objdump prints gfx12's offset field even when zero.
                    if self.imm != 0 || self.isa == Isa::Gfx12 {
                        let _ = write!(out, " offset:0x{:x}", self.imm);
                    }
                } else if self.imm != 0 || self.isa == Isa::Gfx12 {
                    let _ = write!(out, "0x{:x}", self.imm);
                } else {
                    out.push_str("null");
                }
                if self.isa == Isa::Gfx12 {
                    cache_gfx12(&mut out, self);
                } else {
                    for (bit, s) in [(1u8, " glc"), (2, " dlc")] {
                        if self.cache & bit != 0 {
                            out.push_str(s);
                        }
                    }
                }
            }
            Enc::Vopd => {
                vopd_half(&mut out, self);
                out.push_str(" :: ");
                if let Some(y) = &self.y {
                    vopd_half(&mut out, y);
                }
            }
            Enc::Ds | Enc::Flat | Enc::Global | Enc::Scratch => memory(&mut out, self),
            Enc::Vop1 | Enc::Vop2 | Enc::Vopc | Enc::Vop3 | Enc::Vop3p => valu(&mut out, self),
        }
        f.write_str(&out)
    }
}
