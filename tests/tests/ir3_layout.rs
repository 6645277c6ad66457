//! The runtime's ir3 layout, witnessed through the fake KGSL's own decoding: every model test compiled with
//! `--qcom-compiler ir3` (plain, and `--image --float16 --nolocals`) is loaded and linked by `QcomDevice`, its step
//! submitted to the fake KGSL, and each CP_EXEC_CS the fake decoded (registers, the constant file it loaded,
//! descriptors) must say what Mesa's ir3 reported for the program in the artifact's `ir3` record: register
//! footprint, BRANCHSTACK, instruction length, every buffer's address at the kernel parameters' const offset,
//! immediates, the local size at the driver params, textures by `tex_to_image` and the IBO. The expectations are
//! derived here from the record, not from the device's layout code. `scripts/mutate_qcom.py` plants layout bugs
//! that this test catches. Fails, never skips, without Mesa's library (`scripts/setup.sh` builds it).

use std::collections::HashMap;
use std::sync::Arc;

use pilot_compiler::target::qcom::QcomCompiler;
use pilot_core::artifact::{Ir3Arg, Ir3Program};
use pilot_core::device::{Arg, BufferId, Device, ProgramFormat, ProgramId, ProgramSpec, StepOp};
use pilot_core::{Artifact, Backend, Target};
use pilot_qcom::device::QcomDevice;
use pilot_qcom::fake::{Dispatch, FakeKgsl, LaunchPacket};
use pilot_tests::models::test_models;

fn compile(model: &str, shapes: &[(&str, &[usize])], car: bool, out: &std::path::Path) -> Artifact {
    let mut o = pilot_compiler::CompileOptions::new(Target::default_for(Backend::Qcom).unwrap());
    o.target.image = car;
    o.target.float16 = car;
    o.target.nolocals = car;
    o.cl.qcom_compiler = QcomCompiler::Ir3;
    o.shapes = shapes.iter().map(|(n, s)| (n.to_string(), s.to_vec())).collect::<HashMap<_, _>>();
    pilot_compiler::compile(&test_models().join(format!("{model}.onnx")), out, &o, &|_| {})
        .unwrap_or_else(|e| panic!("{model}: {e}"));
    Artifact::open(out).unwrap()
}

/// A step of `a` loaded, linked and submitted on the fake KGSL (which runs no kernel): the dispatches it decoded,
/// and the device with the artifact's buffers and programs.
struct Launched {
    dispatches: Vec<Dispatch>,
    dev: QcomDevice,
    buffers: Vec<BufferId>,
    programs: Vec<ProgramId>,
}

fn launch(a: &Artifact) -> Launched {
    let fake = Arc::new(FakeKgsl::new());
    let mut dev = QcomDevice::with_file(Box::new(fake.clone()), "fake-kgsl").unwrap();
    let m = &a.manifest;
    let buffers: Vec<BufferId> = m
        .buffers
        .iter()
        .map(|b| match b.image {
            Some(desc) => dev.alloc_image(desc, b.kind),
            None => dev.alloc(b.size, b.kind),
        })
        .collect::<Result<_, _>>()
        .unwrap();
    let programs: Vec<ProgramId> = m
        .programs
        .iter()
        .map(|p| {
            assert_eq!(p.format, ProgramFormat::A6xxIr3, "{}", p.name);
            let spec = ProgramSpec {
                name: &p.name,
                format: p.format,
                code: a.blob(p.blob),
                arg_count: p.args,
                amdgpu: None,
                ir3: p.ir3.as_ref(),
            };
            dev.load_program(&spec).unwrap_or_else(|e| panic!("{}: {e}", p.name))
        })
        .collect();
    let resolve = |x: &Arg| Arg { buffer: buffers[x.buffer.0 as usize], offset: x.offset };
    let ops: Vec<StepOp> = m
        .step
        .iter()
        .map(|op| match op {
            StepOp::Dispatch { program, args, global, local } => StepOp::Dispatch {
                program: programs[program.0 as usize],
                args: args.iter().map(resolve).collect(),
                global: *global,
                local: *local,
            },
            StepOp::Copy { .. } => panic!("a copy op in a qcom step"),
        })
        .collect();
    let step = dev.link_step(&ops).unwrap();
    let t = dev.submit(step).unwrap();
    dev.wait(t).unwrap();
    Launched { dispatches: fake.take_dispatches(), dev, buffers, programs }
}

/// The 64-bit value at const-file byte `at`.
fn const_u64(d: &Dispatch, at: u32) -> u64 {
    let w = at as usize / 4;
    u64::from(d.const_file[w]) | u64::from(d.const_file[w + 1]) << 32
}

/// Checks dispatch `d` of op `n` against the program's record `r`; the first disagreement.
fn agrees(l: &Launched, a: &Artifact, n: usize, d: &Dispatch) -> Result<(), String> {
    let StepOp::Dispatch { program, args, local, .. } = &a.manifest.step[n] else { unreachable!() };
    let p = &a.manifest.programs[program.0 as usize];
    let r: &Ir3Program = p.ir3.as_ref().unwrap();
    let code = a.blob(p.blob).len() as u32;
    let what = |field: &str, got: String, want: String| {
        Err(format!("dispatch {n} (`{}`): {field} is {got}, the record says {want}", p.name))
    };
    if d.launch != LaunchPacket::ExecCs {
        return what("the launch", format!("{:?}", d.launch), "CP_EXEC_CS".into());
    }
    if (d.full_regs, d.half_regs, d.branchstack) != (r.full_regs, r.half_regs, r.branchstack) {
        return what(
            "the footprint (full, half, branchstack)",
            format!("{:?}", (d.full_regs, d.half_regs, d.branchstack)),
            format!("{:?}", (r.full_regs, r.half_regs, r.branchstack)),
        );
    }
    if d.instr_units != code.div_ceil(128) || d.instr_units < r.instrlen {
        return what("SP_CS_INSTR_SIZE", d.instr_units.to_string(), format!("{code} bytes, instrlen {}", r.instrlen));
    }
    if Some(d.shader_addr) != l.dev.program_va(l.programs[program.0 as usize]) {
        return what("SP_CS_BASE", format!("{:#x}", d.shader_addr), "the program's upload".into());
    }
    let unused = |id: u32| (id != 0xfc).then_some(id);
    if (d.work_group_id_reg, d.local_id_reg) != (unused(r.work_group_id_reg), unused(r.local_id_reg)) {
        return what(
            "the work-group id / local id registers",
            format!("{:?}", (d.work_group_id_reg, d.local_id_reg)),
            format!("{:?}", (r.work_group_id_reg, r.local_id_reg)),
        );
    }
    for (k, v) in r.immediates.iter().enumerate() {
        let at = r.immediates_offset as usize * 4 + k;
        if d.const_file.get(at) != Some(v) {
            return what(
                &format!("const component {at} (immediate {k})"),
                format!("{:?}", d.const_file.get(at)),
                v.to_string(),
            );
        }
    }
    if let Some((off, size)) = r.driver_params.filter(|&(_, size)| size > 0) {
        let at = off as usize * 4 + 8; // ir3_driver_params_cs.local_group_size_x
        if d.local_size_const != Some(at as u32) || d.const_file[at..at + 3] != local[..] {
            return what(
                "the local size",
                format!("{:?} at {:?}", &d.const_file[at..at + 3], d.local_size_const),
                format!("{local:?} at const component {at} (driver params at vec4 {off}, {size} vec4)"),
            );
        }
    }
    let va = |i: usize| l.dev.buffer_va(l.buffers[args[i].buffer.0 as usize]).unwrap() + args[i].offset;
    for (i, arg) in r.args.iter().enumerate() {
        match *arg {
            Ir3Arg::Param(o) => {
                let at = r.params.expect("parameters").0 * 16 + o;
                if const_u64(d, at) != va(i) {
                    return what(
                        &format!("the pointer at const byte {at} (argument {i})"),
                        format!("{:#x}", const_u64(d, at)),
                        format!("{:#x}", va(i)),
                    );
                }
            }
            Ir3Arg::Texture(image) => {
                if let Some(state) = r.tex_to_image.iter().position(|&t| t == image) {
                    if d.texture_views.get(state).map(|v| v.base) != Some(va(i)) {
                        return what(
                            &format!("texture {state}'s base"),
                            format!("{:?}", d.texture_views.get(state).map(|v| v.base)),
                            format!("{:#x} (argument {i})", va(i)),
                        );
                    }
                }
            }
            Ir3Arg::Ibo(state) => {
                if d.ibo_views.get(state as usize).map(|v| v.base) != Some(va(i)) {
                    return what(
                        &format!("IBO {state}'s base"),
                        format!("{:?}", d.ibo_views.get(state as usize).map(|v| v.base)),
                        format!("{:#x} (argument {i})", va(i)),
                    );
                }
            }
        }
    }
    if (d.texture_views.len(), d.sampler_states.len(), d.ibo_views.len())
        != (r.textures as usize, r.textures as usize, r.ibos as usize)
    {
        return what(
            "(textures, samplers, IBOs)",
            format!("{:?}", (d.texture_views.len(), d.sampler_states.len(), d.ibo_views.len())),
            format!("{:?}", (r.textures, r.textures, r.ibos)),
        );
    }
    Ok(())
}

#[test]
fn every_model_tests_ir3_dispatches_are_laid_out_as_mesa_reported() {
    let dir = tempfile::tempdir().unwrap();
    for car in [false, true] {
        for (model, shapes) in [
            ("vision", &[][..]),
            ("policy", &[][..]),
            ("dmonitoring", &[][..]),
            ("exporter", &[("x", &[2usize, 3, 8, 12][..])][..]),
        ] {
            let a = compile(model, shapes, car, &dir.path().join(format!("{model}-{car}.pkl")));
            let l = launch(&a);
            assert_eq!(l.dispatches.len(), a.manifest.step.len(), "{model}: one dispatch per op");
            let params = a.manifest.programs.iter().filter_map(|p| p.ir3.as_ref()?.params).count();
            for (n, d) in l.dispatches.iter().enumerate() {
                agrees(&l, &a, n, d).unwrap_or_else(|e| panic!("{model} (image/half/nolocals: {car}): {e}"));
            }
            eprintln!(
                "{model} (image/half/nolocals: {car}): {} dispatches agree, {params} programs with parameters",
                l.dispatches.len()
            );
        }
    }
}
