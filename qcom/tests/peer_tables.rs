//! A peer as the oracle: every register offset and field, packet opcode and field, enum value and ioctl number pilot's
//! QCOM code uses (the encoder's `qcom/regs/a6xx.regs`, `pm4`, `dispatch`, `sys`, and the fake KGSL's own tables)
//! must have the same value in tinygrad 0.14.0's generated tables (`tinygrad/runtime/autogen/mesa.py`, `kgsl.py`,
//! read by `scripts/peer_tables.py`). Where pilot composes a value (a descriptor, a register of several fields, a
//! PM4 header), the same value is composed from tinygrad's field shifts and compared.
//!
//! The venv is `$PILOT_PYTHON` or `.venv` (scripts/setup.sh installs tinygrad there). Without it the test
//! skips with a note (fails under `PILOT_REQUIRE=1`); with it, a failing script fails the test.
#![cfg(feature = "fake")]

use pilot_qcom::dispatch::{ArgsLayout, Image, ImageFormat, KernelInfo, Launch, ShaderKind, SAMPLER_CLAMP_NEAREST};
use pilot_qcom::fake::regs as fake;
use pilot_qcom::pm4::{self, event, load_state, reg, wait_reg_mem, Opcode};
use pilot_qcom::sys::*;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// One term of a peer value: a named tinygrad constant (or a literal) shifted left by a named shift.
#[derive(Clone)]
enum Term {
    Name(String),
    Lit(u64),
    /// `value << shift`, both tinygrad names (the value may be a literal).
    Shifted(Box<Term>, String),
}

fn n(name: &str) -> Term {
    Term::Name(name.into())
}

/// `value` placed at field `field` (`<field>__SHIFT`).
fn at(value: Term, field: &str) -> Term {
    Term::Shifted(Box::new(value), format!("{field}__SHIFT"))
}

fn lit(v: u64) -> Term {
    Term::Lit(v)
}

/// What to compare: pilot's value against the OR of the peer terms, or a bit field against the peer's.
enum Check {
    Value {
        what: String,
        pilot: u64,
        peer: Vec<Term>,
    },
    /// A field of bits `low..=high`: Mesa names it `<name>__SHIFT`/`__MASK`, or `<name>` when it is one bit.
    Field {
        what: String,
        name: String,
        low: u32,
        high: u32,
    },
    /// An enum value Mesa spells under one of `names`.
    AnyName {
        what: String,
        pilot: u64,
        names: Vec<String>,
    },
}

#[derive(Default)]
struct Checks(Vec<Check>);

impl Checks {
    fn value(&mut self, what: impl Into<String>, pilot: u64, peer: Vec<Term>) {
        self.0.push(Check::Value { what: what.into(), pilot, peer });
    }

    fn name(&mut self, what: impl Into<String>, pilot: u64, name: &str) {
        self.value(what, pilot, vec![n(name)]);
    }

    fn field(&mut self, what: impl Into<String>, name: String, low: u32, high: u32) {
        self.0.push(Check::Field { what: what.into(), name, low, high });
    }

    /// Every tinygrad name the checks read.
    fn names(&self) -> Vec<String> {
        fn term(t: &Term, out: &mut Vec<String>) {
            match t {
                Term::Name(s) => out.push(s.clone()),
                Term::Lit(_) => {}
                Term::Shifted(v, s) => {
                    term(v, out);
                    out.push(s.clone());
                }
            }
        }
        let mut out = Vec::new();
        for c in &self.0 {
            match c {
                Check::Value { peer, .. } => peer.iter().for_each(|t| term(t, &mut out)),
                Check::Field { name, .. } => {
                    out.extend([format!("{name}__SHIFT"), format!("{name}__MASK"), name.clone()]);
                }
                Check::AnyName { names, .. } => out.extend(names.iter().cloned()),
            }
        }
        out.sort();
        out.dedup();
        out
    }
}

fn eval(t: &Term, peer: &BTreeMap<String, Option<u64>>) -> Result<u64, String> {
    let get = |s: &String| peer.get(s).copied().flatten().ok_or_else(|| format!("tinygrad has no `{s}`"));
    match t {
        Term::Name(s) => get(s),
        Term::Lit(v) => Ok(*v),
        Term::Shifted(v, s) => Ok(eval(v, peer)? << get(s)?),
    }
}

/// The mismatches, one line each.
fn run(checks: &Checks, peer: &BTreeMap<String, Option<u64>>) -> Vec<String> {
    let mut bad = Vec::new();
    for c in &checks.0 {
        match c {
            Check::Value { what, pilot, peer: terms } => {
                match terms.iter().map(|t| eval(t, peer)).collect::<Result<Vec<_>, _>>() {
                    Ok(v) => {
                        let want = v.iter().fold(0, |a, b| a | b);
                        if want != *pilot {
                            bad.push(format!("{what}: pilot {pilot:#x}, tinygrad {want:#x}"));
                        }
                    }
                    Err(e) => bad.push(format!("{what}: {e}")),
                }
            }
            Check::AnyName { what, pilot, names } => {
                if !names.iter().any(|s| peer.get(s).copied().flatten() == Some(*pilot)) {
                    let have: Vec<String> =
                        names.iter().map(|s| format!("{s} = {:?}", peer.get(s).copied().flatten())).collect();
                    bad.push(format!("{what}: pilot {pilot:#x}, tinygrad {}", have.join(", ")));
                }
            }
            Check::Field { what, name, low, high } => {
                let mask = ((u32::MAX >> (31 - (high - low))) << low) as u64;
                let get = |s: String| peer.get(&s).copied().flatten();
                let ok = match (get(format!("{name}__SHIFT")), get(format!("{name}__MASK")), get(name.clone())) {
                    (Some(shift), Some(m), _) => shift == *low as u64 && m == mask,
                    (None, None, Some(bit)) => bit == mask,
                    _ => {
                        bad.push(format!("{what}: tinygrad has no field `{name}`"));
                        continue;
                    }
                };
                if !ok {
                    bad.push(format!("{what}: pilot has bits {low}..={high}, tinygrad's `{name}` differs"));
                }
            }
        }
    }
    bad
}

/// The encoder's registers, fields and enums as `qcom/regs/a6xx.regs` declares them (the encoder is generated from
/// it; regs-gen's freshness test keeps the two equal), and the compiled offsets.
fn encoder_registers(c: &mut Checks) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/regs/a6xx.regs");
    let text = std::fs::read_to_string(path).expect("qcom/regs/a6xx.regs");
    let file = pilot_regs_gen::parse(path, &text).expect("a6xx.regs parses");
    for r in &file.regs {
        c.name(format!("a6xx.regs {}", r.name), r.offset as u64, &format!("REG_A6XX_{}", r.name));
        for f in &r.fields {
            c.field(format!("a6xx.regs {}.{}", r.name, f.name), format!("A6XX_{}_{}", r.name, f.name), f.low, f.high);
        }
    }
    for e in &file.enums {
        for v in &e.values {
            // Mesa spells a value either bare (THREAD64) or after its enum's name (ISAMMODE_CL).
            let prefixed = format!("{}_{}", e.name.to_uppercase(), v.name);
            let what = format!("a6xx.regs {}::{}", e.name, v.name);
            c.0.push(Check::AnyName { what, pilot: v.value as u64, names: vec![v.name.clone(), prefixed] });
        }
    }
    macro_rules! offsets {
        ($($r:ident),*) => { $(c.name(concat!("pm4::reg::", stringify!($r)), reg::$r as u64, concat!("REG_A6XX_", stringify!($r)));)* };
    }
    offsets!(
        CP_ALWAYS_ON_COUNTER,
        SP_CS_CNTL_0,
        SP_CS_CNTL_1,
        SP_CS_BOOLEAN_CF_MASK,
        SP_CS_PROGRAM_COUNTER_OFFSET,
        SP_CS_BASE,
        SP_CS_PVT_MEM_PARAM,
        SP_CS_PVT_MEM_BASE,
        SP_CS_PVT_MEM_SIZE,
        SP_CS_TSIZE,
        SP_CS_CONFIG,
        SP_CS_INSTR_SIZE,
        SP_CS_PVT_MEM_STACK_OFFSET,
        SP_CS_SAMPLER_BASE,
        SP_CS_TEXMEMOBJ_BASE,
        SP_CS_UAV_BASE,
        SP_CS_USIZE,
        SP_MODE_CNTL,
        SP_PERFCTR_SHADER_MASK,
        TPL1_CS_BORDER_COLOR_BASE,
        TPL1_MODE_CNTL,
        TPL1_DBG_ECO_CNTL,
        SP_REG_PROG_ID_0,
        SP_CS_CONST_CONFIG,
        SP_CS_NDRANGE_0,
        SP_CS_CONST_CONFIG_0,
        SP_CS_WGE_CNTL,
        SP_CS_KERNEL_GROUP_X,
        SP_UPDATE_CNTL
    );
}

/// PM4 opcodes, events, packet fields and headers (`pm4.rs`).
fn encoder_packets(c: &mut Checks) {
    for op in Opcode::ALL {
        c.name(format!("pm4::Opcode::{op:?}"), op as u64, op.name());
        for cnt in [0u32, 1, 3, 4, 6, 0x3fff] {
            let key = format!("pkt7:{:#x}:{cnt}", op as u8);
            c.name(format!("pm4::pkt7_hdr({op}, {cnt})"), pm4::pkt7_hdr(op as u8, cnt) as u64, &key);
        }
    }
    for (r, cnt) in [(0xb990u32, 12u32), (0xa9b0, 10), (0xb983, 5), (0xaa00, 1), (0xbb08, 1), (0x3ffff, 0x7f), (1, 2)] {
        c.name(format!("pm4::pkt4_hdr({r:#x}, {cnt})"), pm4::pkt4_hdr(r, cnt) as u64, &format!("pkt4:{r:#x}:{cnt}"));
    }
    c.name("event::CACHE_FLUSH_TS", event::CACHE_FLUSH_TS as u64, "CACHE_FLUSH_TS");
    c.name("event::CACHE_INVALIDATE", event::CACHE_INVALIDATE as u64, "CACHE_INVALIDATE");
    c.name("event::EVENT_MASK", event::EVENT_MASK as u64, "CP_EVENT_WRITE_0_EVENT__MASK");
    c.name("event::TIMESTAMP", event::TIMESTAMP as u64, "CP_EVENT_WRITE_0_TIMESTAMP");
    c.name("event::IRQ", event::IRQ as u64, "CP_EVENT_WRITE_0_IRQ");
    c.name("RM6_COMPUTE", pm4::RM6_COMPUTE as u64, "RM6_COMPUTE");
    use load_state::*;
    for (what, v, name) in [
        ("ST_SHADER", ST_SHADER, "ST6_SHADER"),
        ("ST_CONSTANTS", ST_CONSTANTS, "ST6_CONSTANTS"),
        ("ST6_UAV", ST6_UAV, "ST6_UAV"),
        ("SS6_DIRECT", SS6_DIRECT, "SS6_DIRECT"),
        ("SS6_BINDLESS", SS6_BINDLESS, "SS6_BINDLESS"),
        ("SS6_INDIRECT", SS6_INDIRECT, "SS6_INDIRECT"),
        ("SB6_CS_TEX", SB6_CS_TEX, "SB6_CS_TEX"),
        ("SB6_CS_SHADER", SB6_CS_SHADER, "SB6_CS_SHADER"),
    ] {
        c.name(format!("load_state::{what}"), v as u64, name);
    }
    let ls = "CP_LOAD_STATE6_0";
    for (what, v, field) in [
        ("dst", dword0(0x3fff, 0, 0, 0, 0), "DST_OFF"),
        ("state type", dword0(0, 3, 0, 0, 0), "STATE_TYPE"),
        ("source", dword0(0, 0, 3, 0, 0), "STATE_SRC"),
        ("block", dword0(0, 0, 0, 0xf, 0), "STATE_BLOCK"),
        ("units", dword0(0, 0, 0, 0, MAX_UNITS), "NUM_UNIT"),
    ] {
        c.name(format!("load_state::dword0 {what}"), v as u64, &format!("{ls}_{field}__MASK"));
    }
    let wr = "CP_WAIT_REG_MEM_0";
    c.name("wait_reg_mem::WRITE_EQ", wait_reg_mem::WRITE_EQ as u64, "WRITE_EQ");
    c.name("wait_reg_mem::WRITE_GE", wait_reg_mem::WRITE_GE as u64, "WRITE_GE");
    c.name("wait_reg_mem::FUNCTION_MASK", wait_reg_mem::FUNCTION_MASK as u64, &format!("{wr}_FUNCTION__MASK"));
    c.name("wait_reg_mem::SIGNED_COMPARE", wait_reg_mem::SIGNED_COMPARE as u64, &format!("{wr}_SIGNED_COMPARE"));
    c.value(
        "wait_reg_mem::POLL_MEMORY",
        wait_reg_mem::POLL_MEMORY as u64,
        vec![at(n("POLL_MEMORY"), &format!("{wr}_POLL"))],
    );
    c.name("wait_reg_mem::POLL_MASK", wait_reg_mem::POLL_MASK as u64, &format!("{wr}_POLL__MASK"));
    c.name("wait_reg_mem::WRITE_MEMORY", wait_reg_mem::WRITE_MEMORY as u64, &format!("{wr}_WRITE_MEMORY"));
    let rm = "CP_REG_TO_MEM_0";
    c.name("reg_to_mem_dword0 reg", pm4::reg_to_mem_dword0(0x3ffff, 0, false) as u64, &format!("{rm}_REG__MASK"));
    c.name("reg_to_mem_dword0 cnt", pm4::reg_to_mem_dword0(0, 0xfff, false) as u64, &format!("{rm}_CNT__MASK"));
    c.name("reg_to_mem_dword0 64b", pm4::reg_to_mem_dword0(0, 0, true) as u64, &format!("{rm}_64B"));
}

/// Register values and descriptors `dispatch.rs` composes, against the same values composed from tinygrad's fields.
fn encoder_values(c: &mut Checks) {
    let f = |r: &str, field: &str| format!("A6XX_{r}_{field}");
    c.name("ImageFormat::Rgba32F", ImageFormat::Rgba32F.fmt6() as u64, "FMT6_32_32_32_32_FLOAT");
    c.name("ImageFormat::Rgba16F", ImageFormat::Rgba16F.fmt6() as u64, "FMT6_16_16_16_16_FLOAT");
    let mode = |r: &str| f(r, "ISAMMODE");
    c.value(
        "ShaderKind::QcomCl.sp_mode_cntl",
        ShaderKind::QcomCl.sp_mode_cntl() as u64,
        vec![at(n("ISAMMODE_CL"), &mode("SP_MODE_CNTL"))],
    );
    let ir3 = ShaderKind::Ir3 { wgid: 0, wgsz: 0xfc, lid: 1 };
    c.value(
        "ShaderKind::Ir3.sp_mode_cntl",
        ir3.sp_mode_cntl() as u64,
        vec![at(n("ISAMMODE_GL"), &mode("SP_MODE_CNTL")), n(&f("SP_MODE_CNTL", "CONSTANT_DEMOTION_ENABLE"))],
    );
    c.value(
        "ShaderKind::QcomCl.tpl1_mode_cntl",
        ShaderKind::QcomCl.tpl1_mode_cntl() as u64,
        vec![at(n("ISAMMODE_CL"), &mode("TPL1_MODE_CNTL"))],
    );
    c.value(
        "ShaderKind::Ir3.tpl1_mode_cntl",
        ir3.tpl1_mode_cntl() as u64,
        vec![at(n("ISAMMODE_GL"), &mode("TPL1_MODE_CNTL"))],
    );
    let layout = ArgsLayout::new(ShaderKind::QcomCl, 2, 3, 1).unwrap();
    c.value(
        "ArgsLayout::sp_cs_config (2 textures, 3 IBOs, 1 sampler)",
        layout.sp_cs_config() as u64,
        vec![
            n(&f("SP_CS_CONFIG", "ENABLED")),
            at(lit(2), &f("SP_CS_CONFIG", "NTEX")),
            at(lit(1), &f("SP_CS_CONFIG", "NSAMP")),
            at(lit(3), &f("SP_CS_CONFIG", "NUAV")),
        ],
    );
    let k = KernelInfo { image_size: 0x300, fregs: 3, hregs: 1, branchstack: 2, ..Default::default() };
    c.value(
        "KernelInfo::cs_cntl_0",
        k.cs_cntl_0() as u64,
        vec![
            at(lit(1), &f("SP_CS_CNTL_0", "HALFREGFOOTPRINT")),
            at(lit(3), &f("SP_CS_CNTL_0", "FULLREGFOOTPRINT")),
            at(lit(2), &f("SP_CS_CNTL_0", "BRANCHSTACK")),
            at(n("THREAD64"), &f("SP_CS_CNTL_0", "THREADSIZE")),
        ],
    );
    c.value(
        "KernelInfo::cs_cntl_1",
        k.cs_cntl_1() as u64,
        vec![
            at(lit(1), &f("SP_CS_CNTL_1", "SHARED_SIZE")),
            at(n("CONSTLEN_256"), &f("SP_CS_CNTL_1", "CONSTANTRAMMODE")),
        ],
    );
    let launch = Launch::from_groups([2, 3, 4], [32, 2, 3]).unwrap();
    let nd = |x: &str| f("SP_CS_NDRANGE_0", x);
    c.value(
        "Launch::ndrange_0 (local 32x2x3)",
        launch.ndrange_0() as u64,
        vec![
            at(lit(3), &nd("KERNELDIM")),
            at(lit(31), &nd("LOCALSIZEX")),
            at(lit(1), &nd("LOCALSIZEY")),
            at(lit(2), &nd("LOCALSIZEZ")),
        ],
    );
    // tinygrad's QCOMArgsState._tex for a 64x16 half image with a 512-byte pitch.
    let image = Image { format: ImageFormat::Rgba16F, width: 64, height: 16, pitch: 512 };
    let base = 0x7f_8000_1000u64;
    let t = |dw: u32, x: &str| format!("A6XX_TEX_CONST_{dw}_{x}");
    let fmt = at(n("FMT6_16_16_16_16_FLOAT"), &t(0, "FMT"));
    let swiz = ["X", "Y", "Z", "W"].map(|s| at(n(&format!("A6XX_TEX_{s}")), &t(0, &format!("SWIZ_{s}"))));
    // dword 0 bit 3 and dword 7 = 13 are raw values tinygrad copied from Qualcomm's driver; Mesa does not name them.
    let tex0: Vec<Term> = [lit(0x8), fmt.clone()].into_iter().chain(swiz).collect();
    let rest: [(u32, Vec<Term>); 7] = [
        (1, vec![at(lit(64), &t(1, "WIDTH")), at(lit(16), &t(1, "HEIGHT"))]),
        (2, vec![at(lit(3), &t(2, "PITCHALIGN")), at(lit(512), &t(2, "PITCH")), at(n("A6XX_TEX_2D"), &t(2, "TYPE"))]),
        (3, vec![lit(0)]),
        (4, vec![lit(base & 0xffff_ffff)]),
        (5, vec![lit(base >> 32)]),
        (6, vec![at(lit(0x40_0000), &t(6, "PLANE_PITCH"))]),
        (7, vec![lit(13)]),
    ];
    for (ibo, d0) in [(false, tex0), (true, vec![fmt])] {
        let d = image.descriptor(base, ibo).unwrap();
        c.value(format!("Image::descriptor(ibo={ibo}) dword 0"), d[0] as u64, d0);
        for (dw, terms) in rest.iter().cloned() {
            c.value(format!("Image::descriptor(ibo={ibo}) dword {dw}"), d[dw as usize] as u64, terms);
        }
    }
    let s = |dw: u32, x: &str| format!("A6XX_TEX_SAMP_{dw}_{x}");
    let border = ["S", "T", "R"].map(|w| at(n("A6XX_TEX_CLAMP_TO_BORDER"), &s(0, &format!("WRAP_{w}"))));
    c.value("SAMPLER_CLAMP_NEAREST[0]", SAMPLER_CLAMP_NEAREST[0] as u64, border.to_vec());
    c.value(
        "SAMPLER_CLAMP_NEAREST[1]",
        SAMPLER_CLAMP_NEAREST[1] as u64,
        vec![n(&s(1, "UNNORM_COORDS")), n(&s(1, "CUBEMAPSEAMLESSFILTOFF"))],
    );
}

/// KGSL ioctl numbers and flags (`sys.rs`).
fn kgsl(c: &mut Checks) {
    macro_rules! ioctls {
        ($($name:ident),*) => { $(c.name(stringify!($name), $name, concat!("ioctl:", stringify!($name)));)* };
    }
    ioctls!(
        IOCTL_KGSL_DEVICE_GETPROPERTY,
        IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID,
        IOCTL_KGSL_DRAWCTXT_CREATE,
        IOCTL_KGSL_DRAWCTXT_DESTROY,
        IOCTL_KGSL_MAP_USER_MEM,
        IOCTL_KGSL_CMDSTREAM_READTIMESTAMP_CTXTID,
        IOCTL_KGSL_SHAREDMEM_FREE,
        IOCTL_KGSL_SETPROPERTY,
        IOCTL_KGSL_GPUOBJ_ALLOC,
        IOCTL_KGSL_GPUOBJ_FREE,
        IOCTL_KGSL_GPUOBJ_INFO,
        IOCTL_KGSL_GPU_COMMAND
    );
    macro_rules! consts {
        ($($name:ident),*) => { $(c.name(stringify!($name), $name as u64, stringify!($name));)* };
    }
    consts!(
        KGSL_IOC_TYPE,
        KGSL_PROP_DEVICE_INFO,
        KGSL_PROP_PWR_CONSTRAINT,
        KGSL_CONSTRAINT_PWRLEVEL,
        KGSL_CONSTRAINT_PWR_MAX,
        KGSL_CONTEXT_NO_GMEM_ALLOC,
        KGSL_CONTEXT_PREAMBLE,
        KGSL_CONTEXT_NO_FAULT_TOLERANCE,
        KGSL_CONTEXT_PWR_CONSTRAINT,
        KGSL_CONTEXT_PRIORITY_MASK,
        KGSL_CONTEXT_PRIORITY_SHIFT,
        KGSL_CONTEXT_PREEMPT_STYLE_MASK,
        KGSL_CONTEXT_PREEMPT_STYLE_SHIFT,
        KGSL_CONTEXT_PREEMPT_STYLE_FINEGRAIN,
        KGSL_MEMFLAGS_SECURE,
        KGSL_MEMFLAGS_GPUREADONLY,
        KGSL_MEMFLAGS_GPUWRITEONLY,
        KGSL_MEMFLAGS_USE_CPU_MAP,
        KGSL_MEMALIGN_MASK,
        KGSL_MEMALIGN_SHIFT,
        KGSL_MEMTYPE_MASK,
        KGSL_MEMTYPE_SHIFT,
        KGSL_CACHEMODE_MASK,
        KGSL_CACHEMODE_SHIFT,
        KGSL_CACHEMODE_WRITECOMBINE,
        KGSL_CACHEMODE_UNCACHED,
        KGSL_CACHEMODE_WRITETHROUGH,
        KGSL_CACHEMODE_WRITEBACK,
        KGSL_USER_MEM_TYPE_ADDR,
        KGSL_CMDLIST_IB,
        KGSL_CMDLIST_CTXTSWITCH_PREAMBLE,
        KGSL_CMDLIST_IB_PREAMBLE,
        KGSL_OBJLIST_MEMOBJ,
        KGSL_OBJLIST_PROFILE,
        KGSL_TIMESTAMP_RETIRED
    );
}

/// The fake KGSL's own tables (`qcom/src/fake/regs.rs`).
fn fake_tables(c: &mut Checks) {
    for r in fake::WRITABLE.iter().chain([&fake::CP_ALWAYS_ON_COUNTER]) {
        c.name(format!("fake::regs::{}", r.name), r.offset as u64, &format!("REG_A6XX_{}", r.name));
    }
    for f in fake::FIELDS {
        c.field(format!("fake::regs {}", f.mesa_name()), f.mesa_name(), f.low, f.high);
    }
    for (name, v) in fake::VALUES {
        c.name(format!("fake::regs::{name}"), *v as u64, name);
    }
}

fn peer_values(python: &PathBuf, names: &[String]) -> BTreeMap<String, Option<u64>> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/peer_tables.py");
    let mut child = Command::new(python)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running {} {script}: {e}", python.display()));
    child.stdin.take().unwrap().write_all(names.join("\n").as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "scripts/peer_tables.py failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("peer_tables.py prints a JSON object of integers or nulls")
}

#[test]
fn pilots_qcom_tables_match_tinygrads() {
    let Some(python) = pilot_test_support::venv_python() else { return };
    let mut checks = Checks::default();
    encoder_registers(&mut checks);
    encoder_packets(&mut checks);
    encoder_values(&mut checks);
    kgsl(&mut checks);
    fake_tables(&mut checks);
    let peer = peer_values(&python, &checks.names());

    let bad = run(&checks, &peer);
    assert!(checks.0.len() > 300, "only {} checks", checks.0.len());
    assert!(
        bad.is_empty(),
        "{} of {} values differ from tinygrad 0.14.0:\n{}",
        bad.len(),
        checks.0.len(),
        bad.join("\n")
    );
}
