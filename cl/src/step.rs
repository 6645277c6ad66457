//! Linking a step (kernel objects, arguments, sub-buffers) and replaying it.

use std::collections::HashMap;
use std::time::Duration;

use pilot_core::device::{Arg, DeviceError, DeviceResult, ProgramId, StepOp};

use crate::device::{check_range, ClDevice, Storage};
use crate::error::{failed, failed_at};
use crate::handles::{Event, Kernel, Mem, Queue};
use crate::platform::ClLimits;

/// A kernel object with its arguments set, and the memory objects bound to them (kept alive with it).
struct BoundKernel {
    kernel: Kernel,
    _args: Vec<Mem>,
}

/// One op, ready to enqueue.
enum LinkedOp {
    Dispatch {
        /// Index into [`LinkedStep::kernels`]: dispatches of one program with the same arguments share
        /// one kernel object (creating and releasing one per dispatch made steps of many dispatches
        /// take seconds to link and to drop).
        kernel: usize,
        /// The kernel's name, for errors.
        name: String,
        range: NdRange,
    },
    Copy {
        src: Mem,
        dst: Mem,
        src_offset: usize,
        dst_offset: usize,
        len: usize,
        /// A staging buffer of `len` bytes when the two ranges overlap in one buffer (clEnqueueCopyBuffer
        /// refuses overlap with CL_MEM_COPY_OVERLAP): the copy goes src → staging → dst.
        via: Option<Mem>,
    },
    /// A zero-length copy (clEnqueueCopyBuffer refuses size 0).
    Nop,
}

/// A dispatch's NDRange as clEnqueueNDRangeKernel takes it.
#[derive(Debug, PartialEq, Eq)]
struct NdRange {
    /// 1 to 3: trailing dimensions of size 1 dropped.
    dims: u32,
    global: [usize; 3],
    /// `None`: the driver chooses the work-group size.
    local: Option<[usize; 3]>,
}

/// A linked step: its ops, and while profiling the events of the last submission not yet timed.
pub(crate) struct LinkedStep {
    kernels: Vec<BoundKernel>,
    ops: Vec<LinkedOp>,
    /// Per op, up to two events (a staged copy is two commands); allocated at link time.
    pending: Vec<[Option<Event>; 2]>,
    /// Per op, time summed over the submissions whose events were collected.
    times: Vec<Duration>,
}

impl LinkedStep {
    /// Enqueues every op (no heap allocation except on error). With `profiling`, keeps each command's
    /// event, first timing the one a previous submission left in the slot (waiting for it if needed).
    pub(crate) fn enqueue(&mut self, queue: &Queue, profiling: bool) -> DeviceResult<()> {
        for (i, op) in self.ops.iter().enumerate() {
            let slots = &mut self.pending[i];
            if profiling {
                harvest(slots, &mut self.times[i])?;
            }
            let events = match op {
                LinkedOp::Dispatch { kernel, name, range } => {
                    let ev = queue
                        .dispatch(&self.kernels[*kernel].kernel, range.dims, &range.global, range.local.as_ref())
                        .map_err(|c| failed_at("submit", format_args!("op {i} (kernel `{name}`)"), c))?;
                    [Some(ev), None]
                }
                LinkedOp::Copy { src, dst, src_offset, dst_offset, len, via } => {
                    let copy = |s: &Mem, d: &Mem, so: usize, dof: usize| {
                        queue
                            .copy_buffer(s, d, so, dof, *len)
                            .map_err(|c| failed_at("submit", format_args!("op {i} (copy)"), c))
                    };
                    match via {
                        None => [Some(copy(src, dst, *src_offset, *dst_offset)?), None],
                        Some(tmp) => [Some(copy(src, tmp, *src_offset, 0)?), Some(copy(tmp, dst, 0, *dst_offset)?)],
                    }
                }
                LinkedOp::Nop => continue,
            };
            if profiling {
                *slots = events;
            }
        }
        Ok(())
    }

    /// Times and releases every kept event (after a finish they are all complete).
    pub(crate) fn harvest_all(&mut self) -> DeviceResult<()> {
        for (slots, time) in self.pending.iter_mut().zip(&mut self.times) {
            harvest(slots, time)?;
        }
        Ok(())
    }

    /// Per-op times: the collected ones plus those of kept events that already completed.
    pub(crate) fn times(&self) -> Vec<Duration> {
        let pending = |slots: &[Option<Event>; 2]| -> Duration {
            slots.iter().flatten().filter_map(|ev| ev.duration_ns().ok()).map(Duration::from_nanos).sum()
        };
        self.times.iter().zip(&self.pending).map(|(t, slots)| *t + pending(slots)).collect()
    }
}

/// Waits for, times and releases the events in `slots`.
fn harvest(slots: &mut [Option<Event>; 2], time: &mut Duration) -> DeviceResult<()> {
    for slot in slots {
        if let Some(ev) = slot.take() {
            ev.wait().map_err(|c| failed("profile (wait for a command)", c))?;
            *time += Duration::from_nanos(ev.duration_ns().map_err(|c| failed("profile (command times)", c))?);
        }
    }
    Ok(())
}

/// The NDRange of a dispatch: the number of dimensions (trailing 1s dropped), global and local sizes.
/// `local == [0, 0, 0]` leaves the work-group size to the driver; otherwise it must divide `global`
/// (OpenCL 1.2 has no non-uniform work-groups) and fit the device's and the kernel's limits.
fn ndrange(global: [u32; 3], local: [u32; 3], limits: &ClLimits, kernel_max: usize) -> Result<NdRange, String> {
    if global.contains(&0) {
        return Err(format!("global size {global:?} has an empty dimension"));
    }
    let local = if local == [0; 3] {
        None
    } else {
        if local.contains(&0) {
            return Err(format!("local size {local:?} mixes 0 (the driver's choice) with fixed sizes"));
        }
        if (0..3).any(|d| !global[d].is_multiple_of(local[d])) {
            return Err(format!(
                "global size {global:?} is not a multiple of local size {local:?} (OpenCL 1.2 needs uniform work-groups)"
            ));
        }
        if (0..3).any(|d| local[d] as usize > limits.max_work_item_sizes[d]) {
            return Err(format!(
                "local size {local:?} exceeds the device's work-item sizes {:?}",
                limits.max_work_item_sizes
            ));
        }
        let items: usize = local.iter().map(|&l| l as usize).product();
        let max = limits.max_work_group_size.min(kernel_max);
        if items > max {
            return Err(format!(
                "a work-group of {items} work-items exceeds this kernel's limit of {max} on the device"
            ));
        }
        Some(local.map(|l| l as usize))
    };
    let mut dims = 3;
    while dims > 1 && global[dims - 1] == 1 && local.is_none_or(|l| l[dims - 1] == 1) {
        dims -= 1;
    }
    Ok(NdRange { dims: dims as u32, global: global.map(|g| g as usize), local })
}

impl ClDevice {
    /// Links `ops` (see [`pilot_core::device::Device::link_step`]) and pins the buffers they use.
    pub(crate) fn link(&mut self, ops: &[StepOp]) -> DeviceResult<LinkedStep> {
        let mut linked = Vec::with_capacity(ops.len());
        let mut kernels = Vec::new();
        let mut shared: HashMap<(u32, Vec<(u32, u64)>), usize> = HashMap::new();
        for op in ops {
            linked.push(match op {
                StepOp::Dispatch { program, args, global, local } => {
                    let key = (program.0, args.iter().map(|a| (a.buffer.0, a.offset)).collect());
                    let (name, range) = self.check_dispatch(*program, args, *global, *local)?;
                    let kernel = match shared.get(&key) {
                        Some(&k) => k,
                        None => {
                            kernels.push(self.bind_kernel(*program, args)?);
                            shared.insert(key, kernels.len() - 1);
                            kernels.len() - 1
                        }
                    };
                    LinkedOp::Dispatch { kernel, name, range }
                }
                StepOp::Copy { src, dst, len } => self.link_copy(*src, *dst, *len)?,
            });
        }
        // Only now that every op linked: pin the buffers the step uses.
        for buffer in ops.iter().flat_map(StepOp::buffers) {
            if let Some(Some(b)) = self.buffers.get_mut(buffer.0 as usize) {
                b.linked = true;
            }
        }
        let n = linked.len();
        Ok(LinkedStep {
            kernels,
            ops: linked,
            pending: (0..n).map(|_| [None, None]).collect(),
            times: vec![Duration::ZERO; n],
        })
    }

    /// Checks a dispatch of `program` (argument count, NDRange) and returns the kernel's name and range.
    fn check_dispatch(
        &self,
        program: ProgramId,
        args: &[Arg],
        global: [u32; 3],
        local: [u32; 3],
    ) -> DeviceResult<(String, NdRange)> {
        let p = self
            .programs
            .get(program.0 as usize)
            .ok_or(DeviceError::InvalidHandle { kind: "program", id: program.0 })?;
        let bad = |reason: String| DeviceError::Program { name: p.name.clone(), reason };
        if args.len() != p.arg_count {
            return Err(bad(format!("dispatch passes {} arguments, the kernel takes {}", args.len(), p.arg_count)));
        }
        let range = ndrange(global, local, &self.limits, p.max_work_group).map_err(bad)?;
        Ok((p.name.clone(), range))
    }

    /// A new kernel object of `program` (checked by [`ClDevice::check_dispatch`]) with `args` bound.
    fn bind_kernel(&mut self, program: ProgramId, args: &[Arg]) -> DeviceResult<BoundKernel> {
        let p = &self.programs[program.0 as usize];
        let name = p.name.clone();
        let mut kernel = Kernel::new(&self.sources[p.source].program, &p.cname)
            .map_err(|c| failed_at("link_step", format_args!("kernel `{name}`"), c))?;
        let mut bound = Vec::with_capacity(args.len());
        for (i, &arg) in args.iter().enumerate() {
            let mem = self.arg_mem(&name, i, arg)?;
            kernel
                .set_mem_arg(i as u32, &mem)
                .map_err(|c| failed_at("link_step", format_args!("argument {i} of `{name}`"), c))?;
            bound.push(mem);
        }
        Ok(BoundKernel { kernel, _args: bound })
    }

    /// The memory object for argument `i` of kernel `name`: the buffer or image itself at offset 0,
    /// else a (cached) sub-buffer starting at the offset.
    fn arg_mem(&mut self, name: &str, i: usize, arg: Arg) -> DeviceResult<Mem> {
        let retain = |m: &Mem| m.retain().map_err(|c| failed("link_step (retain)", c));
        let key = (arg.buffer.0, arg.offset);
        let entry = self.entry(arg.buffer)?;
        let sub = match &entry.storage {
            Storage::Image(image, _) if arg.offset == 0 => return retain(&image.mem),
            Storage::Image(..) => {
                return Err(DeviceError::Failed {
                    op: "link_step",
                    reason: format!(
                        "argument {i} of `{name}`: image {} is bound whole, offset {} is not 0",
                        arg.buffer.0, arg.offset
                    ),
                });
            }
            Storage::Buffer(mem) if arg.offset == 0 => return retain(mem),
            Storage::Buffer(mem) => {
                check_range("link dispatch argument", arg.offset, 0, entry.size)?;
                let align = self.limits.base_address_align;
                let reason = if arg.offset == entry.size {
                    Some(format!("offset {} is the end of buffer {}", arg.offset, arg.buffer.0))
                } else if !arg.offset.is_multiple_of(align) {
                    Some(format!(
                        "offset {} into buffer {} is not a multiple of the device's base address alignment ({align} bytes)",
                        arg.offset, arg.buffer.0
                    ))
                } else {
                    None
                };
                if let Some(reason) = reason {
                    return Err(DeviceError::Failed {
                        op: "link_step",
                        reason: format!("argument {i} of `{name}`: {reason}"),
                    });
                }
                if let Some(sub) = self.subs.get(&key) {
                    return retain(sub);
                }
                // In bounds of an allocation, so both fit in usize.
                mem.sub_buffer(arg.offset as usize, (entry.size - arg.offset) as usize)
                    .map_err(|c| failed_at("link_step", format_args!("sub-buffer for argument {i} of `{name}`"), c))?
            }
        };
        let bound = retain(&sub);
        self.subs.insert(key, sub);
        bound
    }

    fn link_copy(&mut self, src: Arg, dst: Arg, len: u64) -> DeviceResult<LinkedOp> {
        let buffer = |arg: Arg, op: &'static str| -> DeviceResult<&Mem> {
            let entry = self.entry(arg.buffer)?;
            check_range(op, arg.offset, len, entry.size)?;
            match &entry.storage {
                Storage::Buffer(mem) => Ok(mem),
                Storage::Image(..) => Err(DeviceError::Failed {
                    op: "link_step",
                    reason: format!("copy: buffer {} is an image (copies take buffers)", arg.buffer.0),
                }),
            }
        };
        let src_mem = buffer(src, "link copy source")?;
        let dst_mem = buffer(dst, "link copy destination")?;
        if len == 0 {
            return Ok(LinkedOp::Nop);
        }
        let overlap = src.buffer == dst.buffer && src.offset < dst.offset + len && dst.offset < src.offset + len;
        // In bounds of allocations, so offsets and length fit in usize.
        let len = len as usize;
        let via = if overlap {
            Some(
                Mem::buffer(&self.context, len)
                    .map_err(|c| crate::error::alloc_failed("link_step (copy staging)", len, c))?,
            )
        } else {
            None
        };
        let retain = |m: &Mem| m.retain().map_err(|c| failed("link_step (retain)", c));
        Ok(LinkedOp::Copy {
            src: retain(src_mem)?,
            dst: retain(dst_mem)?,
            src_offset: src.offset as usize,
            dst_offset: dst.offset as usize,
            len,
            via,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> ClLimits {
        ClLimits {
            max_work_group_size: 256,
            max_work_item_sizes: [256, 256, 64],
            image2d_max_width: 0,
            image2d_max_height: 0,
            image_support: false,
            base_address_align: 128,
        }
    }

    #[test]
    fn ndrange_drops_trailing_ones_and_checks_local() {
        let l = limits();
        let range = |dims, global, local| NdRange { dims, global, local };
        assert_eq!(ndrange([64, 1, 1], [0; 3], &l, 256).unwrap(), range(1, [64, 1, 1], None));
        assert_eq!(ndrange([64, 4, 1], [0; 3], &l, 256).unwrap(), range(2, [64, 4, 1], None));
        assert_eq!(ndrange([64, 1, 2], [0; 3], &l, 256).unwrap().dims, 3);
        assert_eq!(ndrange([64, 4, 1], [16, 4, 1], &l, 256).unwrap(), range(2, [64, 4, 1], Some([16, 4, 1])));
        assert_eq!(ndrange([64, 2, 1], [16, 1, 1], &l, 256).unwrap().dims, 2);
        for (g, lo, km, needle) in [
            ([0, 1, 1], [0; 3], 256, "empty dimension"),
            ([64, 1, 1], [16, 0, 1], 256, "mixes 0"),
            ([60, 1, 1], [16, 1, 1], 256, "not a multiple"),
            ([512, 1, 1], [512, 1, 1], 1024, "work-item sizes"),
            ([256, 1, 1], [128, 1, 1], 64, "limit of 64"),
        ] {
            let e = ndrange(g, lo, &l, km).unwrap_err();
            assert!(e.contains(needle), "{g:?} {lo:?}: {e}");
        }
    }
}
