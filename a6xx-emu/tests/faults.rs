//! The emulator stops with a precise fault instead of a silent result: missing (ss)/(sy) (the same
//! program with the flag runs and computes the right value), the declared register footprint,
//! out-of-bounds memory and constants, unknown encodings, unimplemented operations.

mod support;

use pilot_a6xx_emu::{Buffers, Dispatch, Fault, Program, ProgramInfo};
use support::{assemble, assert_disasm_matches, bytes, run, u32s};

const BUF: u64 = 0x2_0000_0000;

fn fault_of(src: &str, consts: &[u32], mem: &Buffers, local_mem: u32) -> String {
    let asm = assemble(src);
    assert_disasm_matches(&asm);
    match run(&asm, consts, mem, [1, 1, 1], [4, 1, 1], local_mem) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("expected a fault from:\n{src}"),
    }
}

fn runs(src: &str, consts: &[u32], mem: &Buffers, local_mem: u32) {
    let asm = assemble(src);
    assert_disasm_matches(&asm);
    run(&asm, consts, mem, [1, 1, 1], [4, 1, 1], local_mem).unwrap_or_else(|e| panic!("{e}\n{src}"));
}

fn buf_consts() -> Vec<u32> {
    vec![BUF as u32, (BUF >> 32) as u32, 2.0f32.to_bits(), 0]
}

fn buffer() -> Buffers {
    let mem = Buffers::new();
    mem.insert(BUF, bytes(&[4.0f32.to_bits(); 16]));
    mem
}

/// An SFU result read without (ss): the fault names the reader and the producer.
#[test]
fn sfu_result_needs_ss() {
    let body = |flag: &str| {
        format!(
            "mov.u32u32 r2.x, c0.x\nmov.u32u32 r2.y, c0.y\nmov.f32f32 r1.x, c0.z\nrcp r1.y, r1.x\n{flag}add.f r1.z, r1.y, r1.x\nstg.f32 g[r2.x], r1.z, 1\nend\n"
        )
    };
    let e = fault_of(&body(""), &buf_consts(), &buffer(), 0);
    assert!(
        e.contains("instruction 4 (byte 0x20)")
            && e.contains("r1.y")
            && e.contains("instruction 3 (byte 0x18")
            && e.contains("(ss) missing"),
        "{e}"
    );
    let mem = buffer();
    runs(&body("(ss)"), &buf_consts(), &mem, 0);
    assert_eq!(u32s(&mem.get(BUF).unwrap())[0], 2.5f32.to_bits(), "1/2 + 2");
}

/// A global load read without (sy).
#[test]
fn global_load_needs_sy() {
    let body = |flag: &str| {
        format!(
            "mov.u32u32 r2.x, c0.x\nmov.u32u32 r2.y, c0.y\nldg.f32 r1.x, g[r2.x+4], 1\n{flag}add.f r1.y, r1.x, c0.z\nstg.f32 g[r2.x], r1.y, 1\nend\n"
        )
    };
    let e = fault_of(&body(""), &buf_consts(), &buffer(), 0);
    assert!(e.contains("instruction 3 (byte 0x18)") && e.contains("r1.x") && e.contains("(sy) missing"), "{e}");
    let mem = buffer();
    runs(&body("(sy)"), &buf_consts(), &mem, 0);
    assert_eq!(u32s(&mem.get(BUF).unwrap())[0], 6.0f32.to_bits());
}

/// A local load read without (ss); also a write over a pending result is a fault.
#[test]
fn local_load_needs_ss() {
    let body = |flag: &str| {
        format!(
            "mov.u32u32 r1.x, 0\nstl.u32 l[r1.x], r1.x, 1\nldl.u32 r1.y, l[r1.x], 1\n{flag}mov.u32u32 r1.y, 5\nend\n"
        )
    };
    let e = fault_of(&body(""), &[], &Buffers::new(), 4);
    assert!(e.contains("writes r1.y") && e.contains("(ss) missing"), "{e}");
    runs(&body("(ss)"), &[], &Buffers::new(), 4);
}

/// Constants written by the preamble's `stc` are visible only after an (ss).
#[test]
fn stc_needs_ss_before_constants_are_read() {
    let body = |flag: &str| {
        format!(
            "shps #4\ngetone #3\nmov.u32u32 r1.x, 7\nstc.u32 c[4], r1.x, 1\n{flag}shpe\nmov.u32u32 r1.y, c1.x\nend\n"
        )
    };
    let e = fault_of(&body(""), &[0; 8], &Buffers::new(), 0);
    assert!(e.contains("stc at instruction 3") && e.contains("(ss) missing"), "{e}");
    runs(&body("(ss)"), &[0; 8], &Buffers::new(), 0);
}

/// A register above the declared footprint faults; Mesa's own footprint runs.
#[test]
fn register_footprint_is_enforced() {
    let asm = assemble("mov.u32u32 r5.x, 1\nmov.u16u16 hr13.x, 1\nend\n");
    assert_eq!(asm.max_reg, 6, "Mesa counts hr13.x as half of r6.z");
    let d = Dispatch {
        consts: &[],
        grid: [1, 1, 1],
        local_size: [1, 1, 1],
        local_id_reg: None,
        wg_id_reg: None,
        local_mem_bytes: 0,
        private_mem_bytes: 0,
        textures: &[],
        samplers: &[],
        ibos: &[],
        fiber_step_limit: 1 << 24,
        threads: 1,
    };
    let mem = Buffers::new();
    for (max_reg, want) in [(4, Some("r5.x")), (5, Some("hr13.x")), (6, None)] {
        let p = Program::decode(&asm.code, ProgramInfo { max_reg, wave_size: 64 }).unwrap();
        match (pilot_a6xx_emu::run(&p, &d, &mem), want) {
            (Err(e), Some(reg)) => {
                let e = e.to_string();
                assert!(e.contains(reg) && e.contains(&format!("max_reg {max_reg}")), "{e}")
            }
            (Ok(_), None) => {}
            (r, w) => panic!("max_reg {max_reg}: got {r:?}, wanted a fault on {w:?}"),
        }
    }
}

#[test]
fn out_of_bounds_memory_and_constants_fault() {
    let e = fault_of(
        "mov.u32u32 r2.x, c0.x\nmov.u32u32 r2.y, c0.y\nstg.u32 g[r2.x+64], r2.x, 1\nend\n",
        &buf_consts(),
        &buffer(),
        0,
    );
    assert!(e.contains("0x200000040") && e.contains("outside every buffer"), "{e}");
    let e = fault_of("mov.u32u32 r1.x, c2.y\nend\n", &buf_consts(), &buffer(), 0);
    assert!(e.contains("c2.y beyond the 4 constants"), "{e}");
    let e = fault_of("mov.u32u32 r1.x, 16\nldl.u32 r1.y, l[r1.x], 1\nend\n", &[], &Buffers::new(), 16);
    assert!(e.contains("local memory access of 4 bytes at 16 outside the 16 bytes"), "{e}");
}

#[test]
fn unimplemented_and_unknown_fault_with_the_offset() {
    let e = fault_of("nop\ncmpv.f.lt r1.x, r1.x, r1.y\nend\n", &[], &Buffers::new(), 0);
    assert!(e.contains("instruction 1 (byte 0x8)") && e.contains("cmpv.f is not implemented"), "{e}");
    let e = fault_of("bany p0.x, #2\nnop\nend\n", &[], &Buffers::new(), 0);
    assert!(e.contains("bany p0.x, #2 needs the whole wave"), "{e}");
    let e = fault_of("jump #100\nend\n", &[], &Buffers::new(), 0);
    assert!(e.contains("outside the program"), "{e}");
    // An encoding the decoder rejects (Mesa prints it as `raw`) faults when reached, not before.
    let mut code = assemble("nop\nnop\nend\n").code;
    code[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    let d = Dispatch {
        consts: &[],
        grid: [1, 1, 1],
        local_size: [1, 1, 1],
        local_id_reg: None,
        wg_id_reg: None,
        local_mem_bytes: 0,
        private_mem_bytes: 0,
        textures: &[],
        samplers: &[],
        ibos: &[],
        fiber_step_limit: 1 << 24,
        threads: 1,
    };
    let p = Program::decode(&code, ProgramInfo { max_reg: 0, wave_size: 64 }).unwrap();
    let e = pilot_a6xx_emu::run(&p, &d, &Buffers::new()).unwrap_err().to_string();
    assert!(e.contains("instruction 1 (byte 0x8)") && e.contains("ffffffff_ffffffff"), "{e}");
    assert!(matches!(Program::decode(&code[..12], ProgramInfo { max_reg: 0, wave_size: 64 }), Err(Fault::Setup(_))));
    assert!(matches!(Program::decode(&code, ProgramInfo { max_reg: 0, wave_size: 32 }), Err(Fault::Setup(_))));
}

/// Work-groups spread over host threads give the same memory as in order; ids arrive in registers.
#[test]
fn threads_and_ids() {
    let src = "mov.u32u32 r2.x, c0.x
mov.u32u32 r2.y, c0.y
mul.u24 r3.x, r1.x, 8
add.u r3.x, r3.x, r0.x
mul.u24 r3.y, r1.y, 64
add.u r3.z, r3.x, r3.y
add.u r3.w, r3.z, 1000
stg.a.u32 g[r2.x+(r3.z)<<2], r3.w, 1
end
";
    let asm = assemble(src);
    assert_disasm_matches(&asm);
    let out = |threads: usize| {
        let mem = Buffers::new();
        mem.insert(BUF, vec![0; 128 * 4]);
        let d = Dispatch {
            consts: &buf_consts(),
            grid: [8, 2, 1],
            local_size: [8, 1, 1],
            local_id_reg: Some(support::LOCAL_ID_REG),
            wg_id_reg: Some(support::WG_ID_REG),
            local_mem_bytes: 0,
            private_mem_bytes: 0,
            textures: &[],
            samplers: &[],
            ibos: &[],
            fiber_step_limit: 1 << 24,
            threads,
        };
        let stats = pilot_a6xx_emu::run(&support::program(&asm), &d, &mem).unwrap();
        assert_eq!(stats.instructions, 8 * 2 * 8 * 9, "9 instructions per fiber");
        u32s(&mem.get(BUF).unwrap())
    };
    let one = out(1);
    assert_eq!(one, out(3));
    for (i, v) in one.iter().enumerate() {
        // Fiber x of group (gx, gy) writes 1000 + x + 8 gx + 64 gy at that index.
        assert_eq!(*v, i as u32 + 1000, "slot {i}");
    }
}

/// A program that never ends stops at the step limit instead of hanging the caller.
#[test]
fn a_hang_stops_at_the_step_limit() {
    let asm = assemble("nop\njump #-1\nend\n");
    assert_disasm_matches(&asm);
    let d = Dispatch {
        consts: &[],
        grid: [1, 1, 1],
        local_size: [2, 1, 1],
        local_id_reg: None,
        wg_id_reg: None,
        local_mem_bytes: 0,
        private_mem_bytes: 0,
        textures: &[],
        samplers: &[],
        ibos: &[],
        fiber_step_limit: 1000,
        threads: 1,
    };
    let e = pilot_a6xx_emu::run(&support::program(&asm), &d, &Buffers::new()).unwrap_err().to_string();
    assert!(e.contains("more than 1000 instructions") && e.contains("fiber 0"), "{e}");
}

/// An ALU write over a source an SFU, store or load may still be reading needs (ss) (or (sy) for
/// the sources of (sy) producers), as ir3_legalize.c's WAR tracking guards it.
#[test]
fn overwriting_a_source_still_being_read_needs_a_flag() {
    let sfu =
        |flag: &str| format!("mov.f32f32 r1.x, c0.z\nrcp r1.y, r1.x\n{flag}mov.f32f32 r1.x, c0.z\n(ss)nop\nend\n");
    let e = fault_of(&sfu(""), &buf_consts(), &buffer(), 0);
    assert!(e.contains("overwrites r1.x which instruction 1 (byte 0x8)") && e.contains("(ss) missing"), "{e}");
    runs(&sfu("(ss)"), &buf_consts(), &buffer(), 0);
    let ldg = |flag: &str| {
        format!("mov.u32u32 r2.x, c0.x\nmov.u32u32 r2.y, c0.y\nldg.f32 r1.x, g[r2.x], 1\n{flag}mov.u32u32 r2.x, 0\n(sy)nop\nend\n")
    };
    let e = fault_of(&ldg(""), &buf_consts(), &buffer(), 0);
    assert!(e.contains("overwrites r2.x") && e.contains("(ss) or (sy) missing"), "{e}");
    runs(&ldg("(sy)"), &buf_consts(), &buffer(), 0);
}
