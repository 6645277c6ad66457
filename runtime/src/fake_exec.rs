//! Which executor runs the fake KGSL's dispatches (`--device fake-kgsl`), chosen by `PILOT_FAKE_EXEC`:
//! - unset (or empty): by program — ir3 programs (a6xx machine code) on the a6xx emulator, `--qcom-compiler fake`
//!   programs (OpenCL C in a fake shader image) on OpenCL, opened at their first dispatch;
//! - `emulator`: everything on the a6xx emulator;
//! - `cl`: everything on OpenCL (opened with the device, so a machine without OpenCL says so at once).
//!
//! A program the chosen executor cannot run fails its dispatch with a one-line error naming the setting.

use pilot_qcom::fake::{Dispatch, Executor, GpuMemory};
use pilot_qcom::fake_emu::EmuExecutor;
use pilot_qcom::fake_exec::ClExecutor;

/// `PILOT_FAKE_EXEC`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FakeExec {
    ByProgram,
    Emulator,
    Cl,
}

impl FakeExec {
    /// Parses the variable's value (`None`: unset).
    pub fn parse(v: Option<&str>) -> anyhow::Result<FakeExec> {
        Ok(match v {
            None | Some("") => FakeExec::ByProgram,
            Some("emulator") => FakeExec::Emulator,
            Some("cl") => FakeExec::Cl,
            Some(other) => anyhow::bail!("PILOT_FAKE_EXEC must be `emulator` or `cl` (or unset), got {other:?}"),
        })
    }

    pub fn from_env() -> anyhow::Result<FakeExec> {
        FakeExec::parse(std::env::var("PILOT_FAKE_EXEC").ok().as_deref())
    }
}

/// The executor `--device fake-kgsl` hands its fake KGSL. See the module docs.
pub struct Selecting {
    mode: FakeExec,
    emulator: EmuExecutor,
    cl: Option<ClExecutor>,
}

impl Selecting {
    /// The executor for `mode`; `cl` opens OpenCL now.
    pub fn new(mode: FakeExec) -> anyhow::Result<Selecting> {
        let cl = match mode {
            FakeExec::Cl => Some(ClExecutor::open(None).map_err(|e| anyhow::anyhow!("PILOT_FAKE_EXEC=cl: {e}"))?),
            _ => None,
        };
        Ok(Selecting { mode, emulator: EmuExecutor::new(), cl })
    }
}

impl Executor for Selecting {
    fn dispatch(&mut self, d: &Dispatch, mem: &mut dyn GpuMemory) -> Result<(), String> {
        // The command processor names a dispatch's kernel exactly when its shader is a fake shader image.
        match (self.mode, &d.kernel) {
            (FakeExec::Emulator, Some(k)) => Err(format!(
                "PILOT_FAKE_EXEC=emulator, but `{k}` is a `--qcom-compiler fake` program (OpenCL C): it runs with \
                 PILOT_FAKE_EXEC=cl or unset"
            )),
            (FakeExec::Cl, None) => Err("PILOT_FAKE_EXEC=cl, but the program is a6xx machine code (ir3): it runs \
                                         with PILOT_FAKE_EXEC=emulator or unset"
                .into()),
            (_, Some(_)) => {
                if self.cl.is_none() {
                    self.cl =
                        Some(ClExecutor::open(None).map_err(|e| format!("a `--qcom-compiler fake` program: {e}"))?);
                }
                self.cl.as_mut().expect("opened above").dispatch(d, mem)
            }
            (_, None) => self.emulator.dispatch(d, mem),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pilot_qcom::fake::{LaunchPacket, MemError};

    #[test]
    fn the_variable_names_an_executor_or_is_refused() {
        assert_eq!(FakeExec::parse(None).unwrap(), FakeExec::ByProgram);
        assert_eq!(FakeExec::parse(Some("")).unwrap(), FakeExec::ByProgram);
        assert_eq!(FakeExec::parse(Some("emulator")).unwrap(), FakeExec::Emulator);
        assert_eq!(FakeExec::parse(Some("cl")).unwrap(), FakeExec::Cl);
        let e = FakeExec::parse(Some("pocl")).unwrap_err().to_string();
        assert_eq!(e, "PILOT_FAKE_EXEC must be `emulator` or `cl` (or unset), got \"pocl\"");
    }

    /// Memory that refuses every access: a mismatch must be reported before anything runs.
    struct NoMemory;
    impl GpuMemory for NoMemory {
        fn check(&self, va: u64, len: u64) -> Result<(), MemError> {
            Err(MemError { va, len })
        }
        fn read(&self, va: u64, out: &mut [u8]) -> Result<(), MemError> {
            Err(MemError { va, len: out.len() as u64 })
        }
        fn write(&mut self, va: u64, data: &[u8]) -> Result<(), MemError> {
            Err(MemError { va, len: data.len() as u64 })
        }
    }

    fn dispatch(kernel: Option<&str>) -> Dispatch {
        Dispatch {
            context: 1,
            submission: 1,
            offset: 0,
            launch: if kernel.is_some() { LaunchPacket::RunOpenCl } else { LaunchPacket::ExecCs },
            kernel: kernel.map(str::to_string),
            shader_addr: 0x1000,
            instr_units: 1,
            prg_offset: 0,
            sp_mode_cntl: 0,
            cs_cntl_0: 0,
            cs_cntl_1: 0,
            full_regs: 1,
            half_regs: 0,
            branchstack: 0,
            wave_size: 64,
            private_mem_bytes: 0,
            shared_mem_bytes: 0,
            const_config_0: 0,
            work_group_id_reg: None,
            local_size_const: None,
            local_id_reg: None,
            groups: [1; 3],
            local: [1; 3],
            global: [1; 3],
            consts: 0x2000,
            const_units: 1,
            const_file: vec![0; 4],
            stack: 0,
            pvt_mem_param: 0,
            hw_stack_offset: 0,
            border_color: 0,
            cs_config: 0,
            texture_table: 0,
            ibo_table: 0,
            sampler_table: 0,
            textures: vec![],
            ibos: vec![],
            samplers: vec![],
            texture_views: vec![],
            ibo_views: vec![],
            sampler_states: vec![],
        }
    }

    #[test]
    fn a_program_the_setting_cannot_run_is_a_one_line_error() {
        let mut emu = Selecting { mode: FakeExec::Emulator, emulator: EmuExecutor::new(), cl: None };
        let e = emu.dispatch(&dispatch(Some("k0_add")), &mut NoMemory).unwrap_err();
        assert!(e.starts_with("PILOT_FAKE_EXEC=emulator, but `k0_add` is a `--qcom-compiler fake` program"), "{e}");
        let mut cl = Selecting { mode: FakeExec::Cl, emulator: EmuExecutor::new(), cl: None };
        let e = cl.dispatch(&dispatch(None), &mut NoMemory).unwrap_err();
        assert!(e.starts_with("PILOT_FAKE_EXEC=cl, but the program is a6xx machine code"), "{e}");
        // By program, ir3 code goes to the emulator, which reads the shader from GPU memory.
        let mut auto = Selecting { mode: FakeExec::ByProgram, emulator: EmuExecutor::new(), cl: None };
        let e = auto.dispatch(&dispatch(None), &mut NoMemory).unwrap_err();
        assert!(e.starts_with("shader: GPU access 0x1000+0x80 is outside any GPU allocation"), "{e}");
        assert!(!e.contains('\n'));
    }
}
