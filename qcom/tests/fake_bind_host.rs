//! `QcomDevice::bind_host` on the fake KGSL: binding an input to host memory re-points every use of it in a linked
//! step (each dispatch, each byte offset), as the constant files the fake's dispatches read show.
#![cfg(feature = "fake")]

use pilot_core::device::{Arg, BufferUse, Device, ProgramFormat, ProgramSpec, StepOp};
use pilot_qcom::device::QcomDevice;
use pilot_qcom::fake::{Dispatch, Executor, FakeKgsl, GpuMemory};
use pilot_qcom::fake_shader::{write_blob, FakeShader, ShaderArg};
use std::sync::{Arc, Mutex};

/// Records the buffer pointer at constant-file byte 0 of every dispatch, as the GPU reads it.
struct FirstPointer(Arc<Mutex<Vec<u64>>>);

impl Executor for FirstPointer {
    fn dispatch(&mut self, d: &Dispatch, mem: &mut dyn GpuMemory) -> Result<(), String> {
        let mut ptr = [0u8; 8];
        mem.read(d.consts, &mut ptr).map_err(|e| e.to_string())?;
        self.0.lock().unwrap().push(u64::from_le_bytes(ptr));
        Ok(())
    }
}

#[test]
fn bind_host_repoints_every_use_of_an_input() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let fake = FakeKgsl::new().with_executor(Box::new(FirstPointer(seen.clone())));
    let mut dev = QcomDevice::with_file(Box::new(fake), "fake-kgsl").unwrap();
    let shader = FakeShader {
        name: "k_copy".into(),
        args: vec![
            ShaderArg::Buffer { offset_words: 0, bytes: 64, written: false },
            ShaderArg::Buffer { offset_words: 2, bytes: 64, written: true },
        ],
        source: "__kernel void k_copy() {}".into(),
    };
    let code = write_blob(&shader);
    let spec = ProgramSpec {
        name: "k_copy",
        format: ProgramFormat::AdrenoBlob,
        code: &code,
        arg_count: 2,
        amdgpu: None,
        ir3: None,
    };
    let program = dev.load_program(&spec).unwrap();
    let input = dev.alloc(256, BufferUse::Input).unwrap();
    let outs: Vec<_> = (0..3).map(|_| dev.alloc(64, BufferUse::Output).unwrap()).collect();
    let offsets = [0u64, 64, 192];
    let ops: Vec<StepOp> = offsets
        .iter()
        .zip(&outs)
        .map(|(&offset, &out)| StepOp::Dispatch {
            program,
            args: vec![Arg { buffer: input, offset }, Arg { buffer: out, offset: 0 }],
            global: [16, 1, 1],
            local: [16, 1, 1],
        })
        .collect();
    let step = dev.link_step(&ops).unwrap();
    let v = dev.submit(step).unwrap();
    dev.wait(v).unwrap();
    let base = dev.buffer_va(input).unwrap();
    assert_eq!(*seen.lock().unwrap(), offsets.map(|o| base + o));

    let host = vec![0u8; 4096];
    // SAFETY: `host` outlives the device's use of it (the device is dropped first) and is not written meanwhile.
    unsafe { dev.bind_host(step, input, host.as_ptr(), host.len()) }.unwrap();
    seen.lock().unwrap().clear();
    let v = dev.submit(step).unwrap();
    dev.wait(v).unwrap();
    let h = host.as_ptr() as u64;
    assert_eq!(*seen.lock().unwrap(), offsets.map(|o| h + o), "every use follows the host memory");
    drop(dev);
}
