//! The code-object reader on real clang-19 output for gfx1100 and gfx1201, cross-checked against LLVM's
//! own tools: the metadata against `llvm-readelf-19 --notes`, the descriptor fields against the
//! `.amdhsa_*` directives clang prints for the same kernels (`-S`), the symbols against
//! `llvm-readelf-19 --dyn-syms`, the code offsets against `llvm-objdump-19 -d`. Then code objects pilot
//! cannot dispatch, also from clang, are refused naming the kernel and the field.
//!
//! (llvm-objdump-19 cannot decode these descriptors itself: LLVM 19 writes a nonzero
//! GRANULATED_WAVEFRONT_SGPR_COUNT on GFX10+, which its own disassembler calls reserved.)

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use pilot_amd_codeobj::descriptor::{get, rsrc1};
use pilot_amd_codeobj::{CodeObject, CodeObjectError, Kernel};
use pilot_core::Arch;

const KERNELS: &str = r#"
__kernel void add3(__global float *out, __global const float *a, __global const float *b) {
  uint i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  out[i] = a[i] + __builtin_amdgcn_exp2f(b[i]) * __builtin_amdgcn_rcpf(b[i] + 2.0f);
}
__kernel void reduce(__global float *out, __global const float *a) {
  __local float part[64];
  uint l = __builtin_amdgcn_workitem_id_x(), g = __builtin_amdgcn_workgroup_id_x();
  part[l] = a[g * 64 + l];
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
  if (l == 0) { float s = 0; for (int j = 0; j < 64; j++) s += part[j]; out[g] = __builtin_sqrtf(s); }
}
__kernel void grid3(__global int *out) {
  uint x = __builtin_amdgcn_workitem_id_x(), y = __builtin_amdgcn_workitem_id_y(), z = __builtin_amdgcn_workitem_id_z();
  uint gx = __builtin_amdgcn_workgroup_id_x(), gy = __builtin_amdgcn_workgroup_id_y(), gz = __builtin_amdgcn_workgroup_id_z();
  out[((gz * 4 + gy) * 4 + gx) * 64 + (z * 4 + y) * 4 + x] = (int)(x + y + z);
}
__kernel void spill(__global float *out, __global const int *idx) {
  float t[64];
  uint l = __builtin_amdgcn_workitem_id_x();
  for (int i = 0; i < 64; i++) t[i] = out[i * l];
  out[l] = t[idx[l] & 63];
}
"#;

fn tool(name: &str) -> PathBuf {
    let ok = Command::new(name).arg("--version").output().is_ok_and(|o| o.status.success());
    assert!(ok, "{name} is needed for the code object tests: apt-get install clang-19 lld-19 llvm-19");
    PathBuf::from(name)
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A linked code object of `source` for `mcpu` (with extra clang flags), its path, and clang's assembly.
fn build(dir: &Path, name: &str, source: &str, mcpu: &str, extra: &[&str]) -> (PathBuf, String) {
    let cl = dir.join(format!("{name}.cl"));
    std::fs::write(&cl, source).unwrap();
    let common = ["-x", "cl", "-cl-std=CL1.2", "-target", "amdgcn-amd-amdhsa", "-nogpulib", "-O2"];
    let mcpu = format!("-mcpu={mcpu}");
    let (o, co) = (dir.join(format!("{name}.o")), dir.join(format!("{name}.co")));
    run(Command::new(tool("clang-19")).args(common).arg(&mcpu).args(extra).arg("-c").arg(&cl).arg("-o").arg(&o));
    run(Command::new(tool("ld.lld-19")).arg("-shared").arg(&o).arg("-o").arg(&co));
    let asm =
        run(Command::new(tool("clang-19")).args(common).arg(&mcpu).args(extra).arg("-S").arg(&cl).arg("-o").arg("-"));
    (co, asm)
}

/// `llvm-readelf --notes` YAML: per kernel, its scalar fields and its argument offsets.
fn readelf_kernels(yaml: &str) -> HashMap<String, (HashMap<String, String>, Vec<u32>)> {
    let mut out = HashMap::new();
    let mut cur: Option<(HashMap<String, String>, Vec<u32>)> = None;
    let mut in_kernels = false;
    let mut finish = |k: Option<(HashMap<String, String>, Vec<u32>)>| {
        if let Some((f, a)) = k {
            out.insert(f[".name"].clone(), (f, a));
        }
    };
    for line in yaml.lines() {
        if line.starts_with("amdhsa.") {
            in_kernels = line.starts_with("amdhsa.kernels:");
            continue;
        }
        if !in_kernels {
            continue;
        }
        let line = match line.strip_prefix("  - ") {
            Some(rest) => {
                finish(cur.take());
                cur = Some((HashMap::new(), vec![]));
                format!("    {rest}")
            }
            None => line.to_string(),
        };
        let Some((fields, args)) = cur.as_mut() else { continue };
        let trimmed = line.trim_start().trim_start_matches("- ");
        let indent = line.len() - line.trim_start().len();
        if let Some((k, v)) = trimmed.split_once(':') {
            if indent == 4 {
                fields.insert(k.to_string(), v.trim().to_string());
            } else if indent >= 6 && k == ".offset" {
                args.push(v.trim().parse().unwrap());
            }
        }
    }
    finish(cur);
    out
}

/// Clang's `.amdhsa_kernel NAME` block: directive → value.
fn directives(asm: &str, name: &str) -> HashMap<String, i64> {
    let start = asm.find(&format!(".amdhsa_kernel {name}\n")).unwrap_or_else(|| panic!("no .amdhsa_kernel {name}"));
    let block = &asm[start..start + asm[start..].find(".end_amdhsa_kernel").unwrap()];
    block
        .lines()
        .skip(1)
        .filter_map(|l| l.trim().split_once(' '))
        .filter_map(|(k, v)| Some((k.trim_start_matches(".amdhsa_").to_string(), v.trim().parse().ok()?)))
        .collect()
}

fn check_against_llvm(co: &Path, asm: &str, obj: &CodeObject, arch: Arch) {
    assert_eq!(obj.arch, arch);
    assert_eq!(obj.version, 5, "clang-19 writes code object V5");
    let notes = run(Command::new(tool("llvm-readelf-19")).arg("--notes").arg(co));
    let meta = readelf_kernels(&notes);
    let names: Vec<&str> = obj.kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["add3", "reduce", "grid3", "spill"]);
    assert_eq!(meta.len(), obj.kernels.len());

    let syms = run(Command::new(tool("llvm-readelf-19")).arg("--dyn-syms").arg(co));
    let sym = |name: &str| -> u64 {
        let line = syms.lines().find(|l| l.split_whitespace().last() == Some(name)).unwrap();
        u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
    };
    let dis = run(Command::new(tool("llvm-objdump-19")).arg("-d").arg(co));

    for k in &obj.kernels {
        let (f, args) = &meta[&k.name];
        let field = |key: &str| f[key].parse::<u32>().unwrap();
        assert_eq!(k.kernarg_size, field(".kernarg_segment_size"), "{}", k.name);
        assert_eq!(k.kernarg_align, field(".kernarg_segment_align"), "{}", k.name);
        assert_eq!(k.lds_bytes, field(".group_segment_fixed_size"), "{}", k.name);
        assert_eq!(k.scratch_bytes, field(".private_segment_fixed_size"), "{}", k.name);
        assert_eq!(k.sgprs, field(".sgpr_count"), "{}", k.name);
        assert_eq!(k.vgprs, field(".vgpr_count"), "{}", k.name);
        assert_eq!(k.max_workgroup_size, field(".max_flat_workgroup_size"), "{}", k.name);
        assert_eq!(32, field(".wavefront_size"));
        assert_eq!(&k.arg_offsets, args, "{}", k.name);

        let d = directives(asm, &k.name);
        let dir = |key: &str| d[key] as u32;
        assert_eq!(k.descriptor.kernarg_size, dir("kernarg_size"), "{}", k.name);
        assert_eq!(k.descriptor.group_segment_fixed_size, dir("group_segment_fixed_size"), "{}", k.name);
        assert_eq!(k.descriptor.private_segment_fixed_size, dir("private_segment_fixed_size"), "{}", k.name);
        assert_eq!(k.user_sgprs, dir("user_sgpr_count"), "{}", k.name);
        assert_eq!(k.wave32, dir("wavefront_size32") == 1);
        assert_eq!(
            k.workgroup_ids.map(u32::from),
            ["x", "y", "z"].map(|a| dir(&format!("system_sgpr_workgroup_id_{a}")))
        );
        assert_eq!(k.workitem_id_dims, dir("system_vgpr_workitem_id") + 1, "{}", k.name);
        assert_eq!(k.descriptor.scratch_enabled(), dir("enable_private_segment") == 1, "{}", k.name);
        assert_eq!(dir("user_sgpr_kernarg_segment_ptr"), 1);
        let r1 = k.descriptor.compute_pgm_rsrc1;
        assert_eq!(
            get(r1, rsrc1::GRANULATED_WORKITEM_VGPR_COUNT),
            dir("next_free_vgpr").max(1).div_ceil(8) - 1,
            "{}",
            k.name
        );
        assert_eq!(get(r1, rsrc1::FLOAT_DENORM_MODE_32), dir("float_denorm_mode_32"));
        assert_eq!(get(r1, rsrc1::FLOAT_ROUND_MODE_32), dir("float_round_mode_32"));
        assert_eq!(get(r1, rsrc1::WGP_MODE), dir("workgroup_processor_mode"));
        assert_eq!(get(r1, rsrc1::MEM_ORDERED), dir("memory_ordered"));
        if arch == Arch::Gfx1100 {
            assert_eq!(get(r1, rsrc1::BIT23), dir("ieee_mode"));
            assert_eq!(get(r1, rsrc1::BIT21), dir("dx10_clamp"));
        }

        assert_eq!(k.descriptor_offset, sym(&format!("{}.kd", k.name)), "{}", k.name);
        assert_eq!(k.code_offset, sym(&k.name), "{}", k.name);
        let label = format!("{:016x} <{}>:", k.code_offset, k.name);
        let at = dis.find(&label).unwrap_or_else(|| panic!("objdump has no {label}"));
        let body = &dis[at..];
        let body = &body[..body[1..].find("\n\n").map_or(body.len(), |e| e + 1)];
        assert!(body.contains("s_endpgm"), "{}: {body}", k.name);
    }
    let add3 = obj.kernel("add3").unwrap();
    assert_eq!((add3.arg_offsets.as_slice(), add3.kernarg_size), (&[0, 8, 16][..], 24));
    assert_eq!(obj.kernel("reduce").unwrap().lds_bytes, 256);
    assert_eq!(obj.kernel("grid3").unwrap().workgroup_ids, [true, true, true]);
    assert_eq!(obj.kernel("grid3").unwrap().workitem_id_dims, 3);
    assert!(obj.kernel("spill").unwrap().scratch_bytes > 0);
    // The image holds the code where the descriptor says.
    let code = &obj.image[add3.code_offset as usize..];
    assert_ne!(&code[..8], &[0u8; 8]);
}

#[test]
fn clang_code_objects_read_as_llvm_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    for (mcpu, arch) in [("gfx1100", Arch::Gfx1100), ("gfx1201", Arch::Gfx1201)] {
        let (co, asm) = build(dir.path(), mcpu, KERNELS, mcpu, &[]);
        let obj = CodeObject::parse(&std::fs::read(&co).unwrap()).unwrap_or_else(|e| panic!("{mcpu}: {e}"));
        check_against_llvm(&co, &asm, &obj, arch);
    }
}

fn refusal(dir: &Path, name: &str, source: &str, extra: &[&str]) -> String {
    let (co, _) = build(dir, name, source, "gfx1100", extra);
    CodeObject::parse(&std::fs::read(co).unwrap()).map(|_| ()).unwrap_err().to_string()
}

#[test]
fn what_pilot_cannot_dispatch_is_refused_by_kernel_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let one = |body: &str| format!("__kernel void k(__global uint *out{body}");
    assert_eq!(
        refusal(d, "scalar", &one(", float x) { out[0] = (uint)x; }"), &[]),
        "code object metadata: amdhsa.kernels[0].args[1].value_kind is `by_value`: pilot fills only global_buffer arguments"
    );
    assert_eq!(
        refusal(d, "dptr", &one(") { out[0] = ((__constant uint *)__builtin_amdgcn_dispatch_ptr())[1]; }"), &[]),
        "code object: kernel `k`: kernel_code_properties.enable_sgpr_dispatch_ptr is 1, pilot needs 0: pilot fills only the kernarg pointer"
    );
    assert!(refusal(d, "qptr", &one(") { out[0] = ((__constant uint *)__builtin_amdgcn_queue_ptr())[1]; }"), &[])
        .contains("value_kind is `hidden_block_count_x`"));
    assert_eq!(
        refusal(d, "wave64", &one(") { out[__builtin_amdgcn_workitem_id_x()] = 1; }"), &["-mwavefrontsize64"]),
        "code object: kernel `k`: kernel_code_properties.enable_wavefront_size32 is 0, pilot needs 1: pilot dispatches wave32"
    );
    let reloc = "__constant float table[4] = {1, 2, 3, 4};\n__constant float *__constant ptr = table + 1;\n";
    assert_eq!(
        refusal(
            d,
            "reloc",
            &format!("{reloc}{}", one(") { out[0] = (uint)ptr[__builtin_amdgcn_workitem_id_x()]; }")),
            &[]
        ),
        "code object: the dynamic section lists relocations (DT_RELASZ): the image must need no loader"
    );

    // An unlinked object, and a linked one whose descriptor was edited afterwards.
    let (co, _) = build(d, "ok", KERNELS, "gfx1100", &[]);
    let o = std::fs::read(d.join("ok.o")).unwrap();
    assert_eq!(
        CodeObject::parse(&o).unwrap_err().to_string(),
        "code object: e_type is 1, not ET_DYN: link the object first (ld.lld -shared)"
    );
    let bytes = std::fs::read(&co).unwrap();
    let obj = CodeObject::parse(&bytes).unwrap();
    let reduce: &Kernel = obj.kernel("reduce").unwrap();
    // The image is the file's PT_LOAD segments at their addresses; the first starts at file offset 0.
    let kd = reduce.descriptor_offset as usize;
    assert_eq!(&bytes[kd + 48..kd + 52], &reduce.descriptor.compute_pgm_rsrc1.to_le_bytes());
    let edit = |offset: usize, xor: u8| {
        let mut b = bytes.clone();
        b[kd + offset] ^= xor;
        CodeObject::parse(&b).unwrap_err()
    };
    let field = |e: CodeObjectError| match e {
        CodeObjectError::Kernel { kernel, field, .. } => format!("{kernel}: {field}"),
        other => other.to_string(),
    };
    assert_eq!(field(edit(50, 1 << 6)), "reduce: compute_pgm_rsrc1.debug_mode");
    assert_eq!(field(edit(52, 1 << 6)), "reduce: compute_pgm_rsrc2.enable_trap_handler");
    assert_eq!(field(edit(56, 1 << 3 | 1 << 1)), "reduce: kernel_code_properties.enable_sgpr_dispatch_ptr");
    assert_eq!(field(edit(57, 1 << 3)), "reduce: kernel_code_properties.uses_dynamic_stack");
    assert_eq!(field(edit(0, 1)), "reduce: metadata .group_segment_fixed_size");
    assert_eq!(field(edit(8, 8)), "reduce: metadata .kernarg_segment_size");
    assert_eq!(field(edit(16, 4)), "reduce: descriptor.kernel_code_entry_byte_offset");
    assert_eq!(field(edit(30, 1)), "reduce: descriptor.reserved1");
    // #26 item 10: USER_SGPR_COUNT 17 passes the 16 COMPUTE_USER_DATA registers.
    let mut b = bytes.clone();
    b[kd + 52] = b[kd + 52] & !0x3e | 17 << 1;
    assert_eq!(field(CodeObject::parse(&b).unwrap_err()), "reduce: compute_pgm_rsrc2.user_sgpr_count");
    // ELF header: another GPU, another OS ABI.
    let mut b = bytes.clone();
    b[48] = 0x30; // e_flags mach: gfx1030
    assert_eq!(
        CodeObject::parse(&b).unwrap_err().to_string(),
        "code object: e_flags mach 0x30 is not gfx1100 (0x41) or gfx1201 (0x4e)"
    );
    let mut b = bytes.clone();
    b[7] = 0;
    assert_eq!(
        CodeObject::parse(&b).unwrap_err().to_string(),
        "code object: OS ABI is 0, not ELFOSABI_AMDGPU_HSA (64)"
    );
    // Metadata: a key pilot does not know (same length, so the msgpack stays well formed).
    let at = bytes.windows(11).position(|w| w == b".vgpr_count").unwrap();
    let mut b = bytes.clone();
    b[at..at + 11].copy_from_slice(b".vgpr_cOunt");
    assert_eq!(
        CodeObject::parse(&b).unwrap_err().to_string(),
        "code object metadata: amdhsa.kernels[0].vgpr_cOunt unknown key"
    );
    // Truncations are refused; a bit flipped anywhere is read or refused, never a panic.
    for n in (0..bytes.len()).step_by(97) {
        assert!(CodeObject::parse(&bytes[..n]).is_err(), "{n} bytes");
    }
    for i in 0..bytes.len() {
        let mut b = bytes.clone();
        b[i] ^= 1 << (i % 8);
        let _ = CodeObject::parse(&b);
    }
}
