//! The PM4 and SDMA encoders: golden vectors, and every packet compared with the same packet composed from tinygrad
//! 0.14.0's generated tables (`runtime/autogen/am/pm4_nv.py`, `sdma_6_0_0.py`, `soc_11.py`, `regs.py`) the way
//! tinygrad's `ops_amd.py` composes it.
//!
//! The venv is `$PILOT_PYTHON` or `.venv` (scripts/setup.sh installs tinygrad there). Without it the peer test
//! skips with a note (fails under `PILOT_REQUIRE=1`); with it, any difference fails it.

use pilot_amd::pm4::{self, Va};
use pilot_amd::sdma;
use pilot_core::hcq::reloc::{RelocBuf, Word};
use std::collections::BTreeMap;
use std::process::Command;

const ADDR: u64 = 0x0000_8012_3456_7800;
const SRC: u64 = 0x0000_8000_0010_0000;

/// Every packet pilot emits, by name, with fixed parameters (the peer script uses the same ones).
fn ours() -> BTreeMap<&'static str, Vec<u32>> {
    let mut m = BTreeMap::new();
    let pm = |f: &dyn Fn(&mut RelocBuf)| {
        let mut b = RelocBuf::new();
        f(&mut b);
        assert!(b.relocs().is_empty());
        b.words().to_vec()
    };
    let imm = Word::Imm;
    m.insert("set_sh_reg", pm(&|b| pm4::set_sh_reg(b, 0x2E0C, &[imm(0x1234), imm(0x56)]).unwrap()));
    m.insert("acquire_all", pm(&|b| pm4::acquire_mem(b, pm4::acquire::ALL)));
    m.insert("acquire_dispatch", pm(&|b| pm4::acquire_mem(b, pm4::acquire::BEFORE_DISPATCH)));
    m.insert("signal", pm(&|b| pm4::signal(b, Va::At(ADDR), imm(7))));
    m.insert("release_64", pm(&|b| pm4::release_mem(b, 0, pm4::release::DATA_SEL_64, Va::At(0x100), [imm(1), imm(2)])));
    m.insert("wait_geq", pm(&|b| pm4::wait_mem(b, pm4::wait::FUNC_GEQ, Va::At(0x5000), imm(9), 0xFFFF_FFFF)));
    m.insert("hdp_barrier", pm(&|b| pm4::write_wait_reg(b, pm4::wait::FUNC_GEQ, 0x1A5, 0x1A6, !0, !0)));
    m.insert("indirect_buffer", pm(&|b| pm4::indirect_buffer(b, Va::At(0x40_0000), 300)));
    m.insert("dispatch_direct", pm(&|b| pm4::dispatch_direct(b, [4, 2, 1], pm4::initiator::WAVE32)));
    m.insert(
        "cs_partial_flush",
        pm(&|b| pm4::event_write(b, pm4::event::CS_PARTIAL_FLUSH, pm4::event::INDEX_PARTIAL_FLUSH)),
    );
    m.insert("nop4", pm(&|b| pm4::nop(b, 4)));
    let sd = |f: &dyn Fn(&mut Vec<u32>)| {
        let mut v = Vec::new();
        f(&mut v);
        v
    };
    m.insert("sdma_copy", sd(&|v| sdma::copy_linear(v, SRC, ADDR, 0x4_0000 - 4)));
    m.insert("sdma_fence", sd(&|v| sdma::fence(v, ADDR, 0xABCD)));
    m.insert("sdma_poll_geq", sd(&|v| sdma::poll_mem(v, sdma::poll::FUNC_GEQ, ADDR, 5, 0xFFFF_FFFF)));
    m.insert("sdma_poll_eq", sd(&|v| sdma::poll_mem(v, sdma::poll::FUNC_EQ, 0x23_FFFC, 0x5100_0001, 0xFFFF_FFFF)));
    m.insert("sdma_write32", sd(&|v| sdma::write(v, 0x82_200C, &[0])));
    m.insert("sdma_write64", sd(&|v| sdma::write(v, 0x82_0800, &[3, 0])));
    m.insert("sdma_timestamp", sd(&|v| sdma::timestamp(v, ADDR + 8)));
    m
}

#[test]
fn golden_vectors() {
    let p = ours();
    assert_eq!(p["set_sh_reg"], [0xC002_7600, 0x20C, 0x1234, 0x56]);
    assert_eq!(p["acquire_all"], [0xC006_5800, 0, !0, !0, 0, 0, 0, 0xC3F1]);
    assert_eq!(p["acquire_dispatch"], [0xC006_5800, 0, !0, !0, 0, 0, 0, 0x3F0]);
    assert_eq!(p["signal"], [0xC006_4900, 0x0070_F514, 0x2000_0000, 0x3456_7800, 0x8012, 7, 0, 0]);
    assert_eq!(p["wait_geq"], [0xC005_3C00, 0x15, 0x5000, 0, 9, !0, 4]);
    assert_eq!(p["hdp_barrier"], [0xC005_3C00, 0x45, 0x1A5, 0x1A6, !0, !0, 4]);
    assert_eq!(p["release_64"][..3], [0xC006_4900, 0x514, 0x4000_0000]);
    assert_eq!(p["indirect_buffer"], [0xC002_3F00, 0x40_0000, 0, 0x80_012C]);
    assert_eq!(p["dispatch_direct"], [0xC003_1500, 4, 2, 1, 0x8005]);
    assert_eq!(p["cs_partial_flush"], [0xC000_4600, 0x407]);
    assert_eq!(p["nop4"], [0xC002_1000, 0, 0, 0]);
    assert_eq!(p["sdma_copy"], [1, 0x3_FFFB, 0, 0x10_0000, 0x8000, 0x3456_7800, 0x8012]);
    assert_eq!(p["sdma_fence"], [0x3_0005, 0x3456_7800, 0x8012, 0xABCD]);
    assert_eq!(p["sdma_poll_geq"], [0xD000_0008, 0x3456_7800, 0x8012, 5, !0, 0x0FFF_0004]);
    assert_eq!(p["sdma_write64"], [2, 0x82_0800, 0, 1, 3, 0]);
    assert_eq!(p["sdma_timestamp"], [0x20D, 0x3456_7808, 0x8012]);
}

#[test]
fn registers_outside_the_packet_range_are_refused() {
    let mut b = RelocBuf::new();
    let e = pm4::set_sh_reg(&mut b, 0x2FFF, &[Word::Imm(1), Word::Imm(2)]).unwrap_err();
    assert_eq!(e.to_string(), "PM4: register 0x2fff (+2) is outside the SH range");
    assert!(pm4::set_sh_reg(&mut b, 0x1BA0, &[Word::Imm(1)]).is_err());
    assert!(b.is_empty(), "nothing is written for a refused packet");
    assert!(pm4::set_uconfig_reg(&mut b, 0xC000, &[Word::Imm(1)]).is_ok());
}

#[test]
fn headers_decode_back() {
    for (op, n) in [(pm4::op::RELEASE_MEM, 7), (pm4::op::DISPATCH_DIRECT, 4), (pm4::op::EVENT_WRITE, 1)] {
        let h = pm4::header(op, n);
        assert_eq!((pm4::opcode(h), pm4::body_len(h)), (Some(op), n));
    }
    assert_eq!(pm4::opcode(0x8000_0000), None);
}

#[test]
fn big_copies_split_at_one_gib() {
    let mut v = Vec::new();
    sdma::copy(&mut v, 0, 1 << 40, (1 << 30) + 8);
    assert_eq!(v.len(), 2 * sdma::COPY_LINEAR_DWORDS);
    assert_eq!((v[1], v[8], v[10], v[12]), ((1 << 30) - 1, 7, 1 << 30, 1 << 30));
}

const PEER: &str = r#"
import sys
from tinygrad.runtime.autogen.am import pm4_nv as p, sdma_6_0_0 as s, soc_11 as soc, regs
ADDR, SRC = 0x0000801234567800, 0x0000800000100000
def lohi(a): return [a & 0xFFFFFFFF, a >> 32]
def pk(op, *vals): return [p.PACKET3(op, len(vals) - 1), *vals]
def enc(reg, **kw):
  fields = regs.gc_11_0_0[reg][2]
  return sum(v << fields[k][0] for k, v in kw.items())
def acquire(gli=1, glm=1, glk=1, glv=1, gl1=1, gl2=1):
  f = p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLI_INV(gli) | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLM_INV(glm) | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLM_WB(glm) \
    | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLK_INV(glk) | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLK_WB(glk) | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GLV_INV(glv) \
    | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL1_INV(gl1) | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL2_INV(gl2) | p.PACKET3_ACQUIRE_MEM_GCR_CNTL_GL2_WB(gl2)
  return pk(p.PACKET3_ACQUIRE_MEM, 0, *lohi((1 << 64) - 1), *lohi(0), 0, f)
def release(address, value, data_sel, cache_flush):
  f = 0 if not cache_flush else (p.PACKET3_RELEASE_MEM_GCR_GLV_INV | p.PACKET3_RELEASE_MEM_GCR_GL1_INV | p.PACKET3_RELEASE_MEM_GCR_GL2_INV \
    | p.PACKET3_RELEASE_MEM_GCR_GLM_WB | p.PACKET3_RELEASE_MEM_GCR_GLM_INV | p.PACKET3_RELEASE_MEM_GCR_GL2_WB | p.PACKET3_RELEASE_MEM_GCR_SEQ)
  ev = p.PACKET3_RELEASE_MEM_EVENT_TYPE(p.CACHE_FLUSH_AND_INV_TS_EVENT) | p.PACKET3_RELEASE_MEM_EVENT_INDEX(p.event_index__mec_release_mem__end_of_pipe)
  sel = p.PACKET3_RELEASE_MEM_DATA_SEL(data_sel) | p.PACKET3_RELEASE_MEM_INT_SEL(p.int_sel__mec_release_mem__none) | p.PACKET3_RELEASE_MEM_DST_SEL(0)
  return pk(p.PACKET3_RELEASE_MEM, ev | f, sel, *lohi(address), *lohi(value), 0)
def wait(value, mem=None, reg=None, reg_done=0, op=5):
  info = p.WAIT_REG_MEM_MEM_SPACE(int(mem is not None)) | p.WAIT_REG_MEM_OPERATION(int(mem is None and reg_done > 0)) \
    | p.WAIT_REG_MEM_FUNCTION(op) | p.WAIT_REG_MEM_ENGINE(0)
  return pk(p.PACKET3_WAIT_REG_MEM, info, *(lohi(mem) if mem is not None else (reg, reg_done)), value, 0xFFFFFFFF, 4)
out = {
  "set_sh_reg": pk(p.PACKET3_SET_SH_REG, 0x2E0C - p.PACKET3_SET_SH_REG_START, 0x1234, 0x56),
  "acquire_all": acquire(),
  "acquire_dispatch": acquire(gli=0, gl2=0),
  "signal": release(ADDR, 7, p.data_sel__mec_release_mem__send_32_bit_low, True),
  "release_64": release(0x100, 1 | 2 << 32, p.data_sel__mec_release_mem__send_64_bit_data, False),
  "wait_geq": wait(9, mem=0x5000),
  "hdp_barrier": wait(0xFFFFFFFF, reg=0x1A5, reg_done=0x1A6),
  "indirect_buffer": pk(p.PACKET3_INDIRECT_BUFFER, *lohi(0x400000), 300 | p.INDIRECT_BUFFER_VALID),
  "dispatch_direct": pk(p.PACKET3_DISPATCH_DIRECT, 4, 2, 1, enc('regCOMPUTE_DISPATCH_INITIATOR', cs_w32_en=1, force_start_at_000=1, compute_shader_en=1)),
  "cs_partial_flush": pk(p.PACKET3_EVENT_WRITE, p.EVENT_TYPE(soc.CS_PARTIAL_FLUSH) | p.EVENT_INDEX(4)),
  "nop4": pk(p.PACKET3_NOP, 0, 0, 0),
  "sdma_copy": [s.SDMA_OP_COPY | s.SDMA_PKT_COPY_LINEAR_HEADER_SUB_OP(s.SDMA_SUBOP_COPY_LINEAR), s.SDMA_PKT_COPY_LINEAR_COUNT_COUNT(0x40000 - 4 - 1), 0, *lohi(SRC), *lohi(ADDR)],
  "sdma_fence": [s.SDMA_OP_FENCE | s.SDMA_PKT_FENCE_HEADER_MTYPE(3), *lohi(ADDR), 0xABCD],
  "sdma_poll_geq": [s.SDMA_OP_POLL_REGMEM | s.SDMA_PKT_POLL_REGMEM_HEADER_FUNC(5) | s.SDMA_PKT_POLL_REGMEM_HEADER_MEM_POLL(1), *lohi(ADDR), 5, 0xFFFFFFFF,
                    s.SDMA_PKT_POLL_REGMEM_DW5_INTERVAL(4) | s.SDMA_PKT_POLL_REGMEM_DW5_RETRY_COUNT(0xFFF)],
  "sdma_poll_eq": [s.SDMA_OP_POLL_REGMEM | s.SDMA_PKT_POLL_REGMEM_HEADER_FUNC(3) | s.SDMA_PKT_POLL_REGMEM_HEADER_MEM_POLL(1), *lohi(0x23FFFC), 0x51000001, 0xFFFFFFFF,
                   s.SDMA_PKT_POLL_REGMEM_DW5_INTERVAL(4) | s.SDMA_PKT_POLL_REGMEM_DW5_RETRY_COUNT(0xFFF)],
  "sdma_write32": [s.SDMA_OP_WRITE, *lohi(0x82200C), 0, 0],
  "sdma_write64": [s.SDMA_OP_WRITE, *lohi(0x820800), 1, 3, 0],
  "sdma_timestamp": [s.SDMA_OP_TIMESTAMP | s.SDMA_PKT_TIMESTAMP_GET_HEADER_SUB_OP(s.SDMA_SUBOP_TIMESTAMP_GET_GLOBAL), *lohi(ADDR + 8)],
}
for k, v in out.items(): print(k, *(f"{x & 0xFFFFFFFF:x}" for x in v))
"#;

#[test]
fn every_packet_equals_tinygrads() {
    let Some(py) = pilot_test_support::venv_python() else { return };
    let out = Command::new(&py).arg("-c").arg(PEER).output().expect("run the venv's python");
    assert!(out.status.success(), "peer script failed: {}", String::from_utf8_lossy(&out.stderr));
    let peer: BTreeMap<String, Vec<u32>> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let mut it = l.split(' ');
            let name = it.next().unwrap().to_string();
            (name, it.map(|x| u32::from_str_radix(x, 16).unwrap()).collect())
        })
        .collect();
    let ours = ours();
    assert_eq!(peer.len(), ours.len(), "the peer script and this test name the same packets");
    for (name, words) in &ours {
        let theirs = peer.get(*name).unwrap_or_else(|| panic!("{name}: missing from the peer's output"));
        let hex = |w: &[u32]| w.iter().map(|x| format!("{x:08x}")).collect::<Vec<_>>().join(" ");
        assert_eq!(hex(words), hex(theirs), "{name}: pilot's packet differs from tinygrad's");
    }
}
