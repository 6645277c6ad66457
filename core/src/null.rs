//! The NULL backend: accepts any artifact and runs nothing (compile-only targets, `null:ARCH`).
//!
//! It still checks what it is given (handles, bounds, argument counts), so a session on it exercises
//! the whole load path; outputs read back as zeros.

use crate::bounds::check_range;
use crate::device::{
    BufferId, BufferUse, Device, DeviceError, DeviceInfo, DeviceResult, ProgramId, ProgramSpec, StepId, StepOp,
};
use crate::target::Target;

/// See the module docs.
#[derive(Debug, Default)]
pub struct NullDevice {
    arch: String,
    /// Buffer sizes; `None` once freed.
    buffers: Vec<Option<u64>>,
    programs: Vec<usize>,
    steps: usize,
    /// Values handed out by `submit`, each complete at once.
    timeline: crate::timeline::Timeline,
}

impl NullDevice {
    pub fn new(arch: &str) -> NullDevice {
        NullDevice { arch: arch.to_string(), ..NullDevice::default() }
    }

    fn size(&self, b: BufferId) -> DeviceResult<u64> {
        self.buffers.get(b.0 as usize).copied().flatten().ok_or(DeviceError::InvalidHandle { kind: "buffer", id: b.0 })
    }

    fn check(&self, op: &'static str, b: BufferId, offset: u64, len: u64) -> DeviceResult<()> {
        Ok(check_range(op, offset, len, self.size(b)?)?)
    }
}

impl Device for NullDevice {
    fn info(&self) -> DeviceInfo {
        DeviceInfo { backend: "null".into(), arch: self.arch.clone() }
    }

    /// Runs nothing, so runs any artifact.
    fn runs(&self, _target: &Target) -> bool {
        true
    }

    fn alloc(&mut self, size: usize, _usage: BufferUse) -> DeviceResult<BufferId> {
        self.buffers.push(Some(size as u64));
        Ok(BufferId(self.buffers.len() as u32 - 1))
    }

    fn free(&mut self, buffer: BufferId) -> DeviceResult<()> {
        self.size(buffer)?;
        self.buffers[buffer.0 as usize] = None;
        Ok(())
    }

    fn copy_in(&mut self, dst: BufferId, offset: u64, src: &[u8]) -> DeviceResult<()> {
        self.check("copy_in", dst, offset, src.len() as u64)
    }

    fn copy_out(&mut self, src: BufferId, offset: u64, dst: &mut [u8]) -> DeviceResult<()> {
        self.check("copy_out", src, offset, dst.len() as u64)?;
        dst.fill(0);
        Ok(())
    }

    fn load_program(&mut self, spec: &ProgramSpec<'_>) -> DeviceResult<ProgramId> {
        self.programs.push(spec.arg_count);
        Ok(ProgramId(self.programs.len() as u32 - 1))
    }

    fn link_step(&mut self, ops: &[StepOp]) -> DeviceResult<StepId> {
        for op in ops {
            match op {
                StepOp::Dispatch { program, args, .. } => {
                    let want = *self
                        .programs
                        .get(program.0 as usize)
                        .ok_or(DeviceError::InvalidHandle { kind: "program", id: program.0 })?;
                    if want != args.len() {
                        return Err(DeviceError::Failed {
                            op: "link_step",
                            reason: format!("dispatch passes {} arguments, program takes {want}", args.len()),
                        });
                    }
                    for a in args {
                        self.check("link_step", a.buffer, a.offset, 0)?;
                    }
                }
                StepOp::Copy { src, dst, len } => {
                    self.check("link_step", src.buffer, src.offset, *len)?;
                    self.check("link_step", dst.buffer, dst.offset, *len)?;
                }
            }
        }
        self.steps += 1;
        Ok(StepId(self.steps as u32 - 1))
    }

    fn submit(&mut self, step: StepId) -> DeviceResult<u64> {
        if step.0 as usize >= self.steps {
            return Err(DeviceError::InvalidHandle { kind: "step", id: step.0 });
        }
        Ok(self.timeline.record_complete())
    }

    fn wait(&mut self, value: u64) -> DeviceResult<()> {
        self.timeline.check(value).map(drop)
    }

    fn synchronize(&mut self) -> DeviceResult<()> {
        Ok(())
    }
}
