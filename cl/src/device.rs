//! [`ClDevice`]: memory, programs and the [`Device`] trait on one OpenCL device.

use std::collections::HashMap;
use std::ffi::{CStr, CString};

use opencl_sys::{CL_FLOAT, CL_HALF_FLOAT, CL_INVALID_KERNEL_NAME, CL_QUEUE_PROFILING_ENABLE};
use pilot_core::device::{
    BufferId, BufferUse, Device, DeviceError, DeviceInfo, DeviceResult, ImageChannel, ImageDesc, ProgramFormat,
    ProgramId, ProgramSpec, StepId, StepOp,
};
use pilot_core::timeline::Timeline;

use crate::error::{alloc_failed, code_text, failed, failed_at, unavailable};
use crate::handles::{Context, DeviceId, Image, Kernel, Mem, Program, Queue};
use crate::platform::{self, ClLimits};
use crate::step::LinkedStep;
/// Shared with the step encoder.
pub(crate) use pilot_core::bounds::check_range;

/// Options every program is built with: OpenCL C 1.2, strict IEEE math (no `-cl-fast-relaxed-math`),
/// so results can be compared against the reference executor.
const BUILD_OPTIONS: &CStr = c"-cl-std=CL1.2";

/// Lines of a failed build's log kept in the error.
const LOG_LINES: usize = 20;

/// What a [`BufferId`] names.
pub(crate) enum Storage {
    Buffer(Mem),
    Image(Image, ImageDesc),
}

pub(crate) struct Entry {
    pub(crate) storage: Storage,
    /// Bytes as the host sees them (for an image, its pitched layout).
    pub(crate) size: u64,
    /// Referenced by a linked step: cannot be freed.
    pub(crate) linked: bool,
}

/// A loaded program: one kernel of a built source.
pub(crate) struct ProgramEntry {
    pub(crate) name: String,
    pub(crate) cname: CString,
    /// Index into [`ClDevice::sources`].
    pub(crate) source: usize,
    pub(crate) arg_count: usize,
    /// `CL_KERNEL_WORK_GROUP_SIZE` on this device.
    pub(crate) max_work_group: usize,
}

/// One distinct source text, built once.
pub(crate) struct Source {
    code: Box<[u8]>,
    pub(crate) program: Program,
}

/// An OpenCL device.
///
/// Submission uses one in-order queue, so every command (kernels, step copies, host transfers) runs
/// after the ones enqueued before it: `copy_in`/`copy_out` are blocking transfers ordered after all
/// submitted work. The queue is always created with `CL_QUEUE_PROFILING_ENABLE` (cl3 requests an
/// event for every command anyway), so [`ClDevice::with_profiling`] cannot fail; it only decides
/// whether submitted commands' events are kept and timed.
///
/// Kernel ABI: a program is one `__kernel` of an OpenCL C source (many programs may share a source,
/// which is built once); its arguments are exactly the dispatch's arguments, in order, each a
/// `__global T*` (a buffer, or a sub-buffer for a non-zero offset) or an `image2d_t` (an image, offset 0).
pub struct ClDevice {
    // Fields drop in this order, users before what they use (OpenCL reference counts would keep the
    // parents alive anyway).
    pub(crate) steps: Vec<LinkedStep>,
    /// Sub-buffers for non-zero argument offsets, by (buffer, offset), made at link time.
    pub(crate) subs: HashMap<(u32, u64), Mem>,
    /// Slab indexed by `BufferId`; ids are never reused, freed slots stay `None`.
    pub(crate) buffers: Vec<Option<Entry>>,
    pub(crate) programs: Vec<ProgramEntry>,
    pub(crate) sources: Vec<Source>,
    /// Indices into `sources` by xxh3 of the source bytes.
    by_hash: HashMap<u64, Vec<usize>>,
    pub(crate) queue: Queue,
    pub(crate) context: Context,
    pub(crate) device: DeviceId,
    name: String,
    platform: String,
    selector: String,
    pub(crate) limits: ClLimits,
    /// Values handed out by `submit`; complete after a finish.
    timeline: Timeline,
    pub(crate) profiling: bool,
}

impl ClDevice {
    /// Opens a device: `selector` is `"P:D"` (platform index, device index within it, as
    /// [`crate::list_devices`] numbers them); `None` reads `PILOT_CL_DEVICE`, and without it takes
    /// the first GPU, else the first device of any type.
    ///
    /// A machine without libOpenCL, without a platform or without the device gets
    /// [`DeviceError::Unavailable`] (`device not available: OpenCL: ...`).
    pub fn open(selector: Option<&str>) -> DeviceResult<ClDevice> {
        let _discovery = platform::discovery_lock();
        let selected = platform::select(selector)?;
        let device = DeviceId(selected.device);
        let limits = platform::limits(selected.device)?;
        let context =
            Context::new(device).map_err(|c| unavailable(format_args!("clCreateContext: {}", code_text(c))))?;
        let queue = Queue::new(&context, device, CL_QUEUE_PROFILING_ENABLE)
            .map_err(|c| unavailable(format_args!("clCreateCommandQueue: {}", code_text(c))))?;
        Ok(ClDevice {
            steps: Vec::new(),
            subs: HashMap::new(),
            buffers: Vec::new(),
            programs: Vec::new(),
            sources: Vec::new(),
            by_hash: HashMap::new(),
            queue,
            context,
            device,
            name: platform::device_name(selected.device),
            platform: platform::platform_name(selected.platform),
            selector: selected.selector,
            limits,
            timeline: Default::default(),
            profiling: false,
        })
    }

    /// Times every op of every submitted step (see [`Device::profile`]); off by default. Keeping the
    /// events means a step resubmitted before a `wait` first waits for its previous submission.
    pub fn with_profiling(mut self, on: bool) -> ClDevice {
        self.profiling = on;
        self
    }

    /// What the device reports about work-group sizes, images and alignment.
    pub fn limits(&self) -> &ClLimits {
        &self.limits
    }

    /// `CL_DEVICE_NAME` as the driver reports it (also [`DeviceInfo::arch`]).
    pub fn device_name(&self) -> &str {
        &self.name
    }

    /// `CL_PLATFORM_NAME` of the device's platform.
    pub fn platform_name(&self) -> &str {
        &self.platform
    }

    /// The device's `P:D` selector.
    pub fn selector(&self) -> &str {
        &self.selector
    }

    /// How many distinct sources have been built (programs sharing a source share one build).
    pub fn built_sources(&self) -> usize {
        self.sources.len()
    }

    pub(crate) fn entry(&self, id: BufferId) -> DeviceResult<&Entry> {
        self.buffers
            .get(id.0 as usize)
            .and_then(Option::as_ref)
            .ok_or(DeviceError::InvalidHandle { kind: "buffer", id: id.0 })
    }

    fn push_entry(&mut self, storage: Storage, size: u64) -> DeviceResult<BufferId> {
        let id = u32::try_from(self.buffers.len())
            .map_err(|_| DeviceError::Failed { op: "alloc", reason: "too many buffers".to_string() })?;
        self.buffers.push(Some(Entry { storage, size, linked: false }));
        Ok(BufferId(id))
    }

    /// The index of the built program for `code`, building it on first sight.
    fn build_source(&mut self, code: &[u8]) -> Result<usize, String> {
        let hash = xxhash_rust::xxh3::xxh3_64(code);
        if let Some(&i) =
            self.by_hash.get(&hash).and_then(|list| list.iter().find(|&&i| *self.sources[i].code == *code))
        {
            return Ok(i);
        }
        let text = std::str::from_utf8(code).map_err(|e| format!("OpenCL C source is not UTF-8: {e}"))?;
        let program = Program::with_source(&self.context, text)
            .map_err(|c| format!("clCreateProgramWithSource: {}", code_text(c)))?;
        // The implementation's compiler may print to stderr besides filling the build log: captured.
        let (built, chatter) = crate::quiet::capture_stderr(|| program.build(self.device, BUILD_OPTIONS));
        if let Err(c) = built {
            let log = program.build_log(self.device);
            let log = summarize_log(if log.trim().is_empty() { &chatter } else { &log });
            return Err(format!("build failed: {}: {log}", code_text(c)));
        }
        self.sources.push(Source { code: code.into(), program });
        let i = self.sources.len() - 1;
        self.by_hash.entry(hash).or_default().push(i);
        Ok(i)
    }

    /// Builds `source` and returns the driver's binary for this device (`CL_PROGRAM_BINARIES`): on a
    /// comma device, Qualcomm's compiler gives the Adreno blob the QCOM backend loads.
    pub fn program_binary(&mut self, source: &str) -> DeviceResult<Vec<u8>> {
        let i = self
            .build_source(source.as_bytes())
            .map_err(|reason| DeviceError::Program { name: "binary".into(), reason })?;
        self.sources[i].program.binary().map_err(|c| DeviceError::Program {
            name: "binary".into(),
            reason: format!("clGetProgramInfo: {}", code_text(c)),
        })
    }

    /// `synchronize` and, when profiling, collect the now complete events' times.
    fn finish(&mut self) -> DeviceResult<()> {
        self.queue.finish().map_err(|c| failed("wait", c))?;
        self.timeline.complete_all();
        if self.profiling {
            for step in &mut self.steps {
                step.harvest_all()?;
            }
        }
        Ok(())
    }
}

impl Drop for ClDevice {
    fn drop(&mut self) {
        // Let enqueued work finish before its objects are released.
        let _ = self.queue.finish();
    }
}

/// The first [`LOG_LINES`] non-empty lines of a build log, on one line.
fn summarize_log(log: &str) -> String {
    let lines: Vec<&str> = log.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    if lines.is_empty() {
        return "(the build log is empty)".to_string();
    }
    let mut out = lines[..lines.len().min(LOG_LINES)].join(" | ");
    if lines.len() > LOG_LINES {
        out.push_str(&format!(" | ... ({} more lines)", lines.len() - LOG_LINES));
    }
    out
}

/// Image transfers move the whole pitched contents: offset 0, `desc.bytes()` bytes.
fn check_whole_image(op: &'static str, id: BufferId, desc: &ImageDesc, offset: u64, len: u64) -> DeviceResult<()> {
    let size = desc.bytes() as u64;
    check_range(op, offset, len, size)?;
    if offset != 0 || len != size {
        return Err(DeviceError::Failed {
            op,
            reason: format!(
                "image {} ({}x{} pixels, pitch {}) moves whole: offset 0 and {size} bytes, not offset {offset} and {len} bytes",
                id.0, desc.width, desc.height, desc.pitch
            ),
        });
    }
    Ok(())
}

impl Device for ClDevice {
    fn info(&self) -> DeviceInfo {
        DeviceInfo { backend: "cl".to_string(), arch: self.name.clone() }
    }

    /// OpenCL C is portable: a `cl` artifact (written for the a630's limits) runs on any OpenCL device.
    fn runs(&self, target: &pilot_core::Target) -> bool {
        target.backend == pilot_core::Backend::Cl
    }

    fn alloc(&mut self, size: usize, _usage: BufferUse) -> DeviceResult<BufferId> {
        // OpenCL has no empty buffers; an empty one is one byte that no range can reach.
        let bytes = size.max(1);
        let mem = Mem::buffer(&self.context, bytes).map_err(|c| alloc_failed("alloc", size, c))?;
        self.queue.zero_buffer(&mem, bytes).map_err(|c| alloc_failed("alloc (zero fill)", size, c))?;
        self.push_entry(Storage::Buffer(mem), size as u64)
    }

    /// A zero-filled `CL_RGBA` image of `CL_FLOAT` or `CL_HALF_FLOAT`; fails on a device without images,
    /// a pitch shorter than a row, or a size beyond the device's 2-D image limits.
    fn alloc_image(&mut self, desc: ImageDesc, _usage: BufferUse) -> DeviceResult<BufferId> {
        if !self.limits.image_support {
            return Err(DeviceError::Unsupported("images"));
        }
        let bad = |reason: String| DeviceError::Failed { op: "alloc_image", reason };
        let (w, h) = (desc.width as usize, desc.height as usize);
        if w == 0 || h == 0 {
            return Err(bad(format!("empty image {w}x{h}")));
        }
        if (desc.pitch as usize) < desc.row_bytes() {
            return Err(bad(format!("pitch {} is shorter than a row of {} bytes", desc.pitch, desc.row_bytes())));
        }
        if w > self.limits.image2d_max_width || h > self.limits.image2d_max_height {
            return Err(bad(format!(
                "image {w}x{h} exceeds the device's 2-D image limit {}x{}",
                self.limits.image2d_max_width, self.limits.image2d_max_height
            )));
        }
        let channel = match desc.channel {
            ImageChannel::F32 => CL_FLOAT,
            ImageChannel::F16 => CL_HALF_FLOAT,
        };
        let image = Image::new(&self.context, w, h, channel, desc.channel.size())
            .map_err(|c| alloc_failed("alloc_image", desc.bytes(), c))?;
        self.queue.zero_image(&image).map_err(|c| failed("alloc_image (zero fill)", c))?;
        self.push_entry(Storage::Image(image, desc), desc.bytes() as u64)
    }

    /// Frees `buffer`. Fails if a linked step references it.
    fn free(&mut self, buffer: BufferId) -> DeviceResult<()> {
        if self.entry(buffer)?.linked {
            return Err(DeviceError::Failed {
                op: "free",
                reason: format!("buffer {} is referenced by a linked step", buffer.0),
            });
        }
        self.subs.retain(|&(id, _), _| id != buffer.0);
        self.buffers[buffer.0 as usize] = None;
        Ok(())
    }

    fn copy_in(&mut self, dst: BufferId, offset: u64, src: &[u8]) -> DeviceResult<()> {
        let entry = self.entry(dst)?;
        let len = src.len() as u64;
        match &entry.storage {
            Storage::Buffer(mem) => {
                check_range("copy_in", offset, len, entry.size)?;
                if src.is_empty() {
                    return Ok(());
                }
                // In bounds of an allocation, so `offset` fits in usize.
                self.queue
                    .write_buffer(mem, offset as usize, src)
                    .map_err(|c| failed_at("copy_in", format_args!("buffer {}", dst.0), c))
            }
            Storage::Image(image, desc) => {
                check_whole_image("copy_in", dst, desc, offset, len)?;
                self.queue
                    .write_image(image, desc.pitch as usize, src)
                    .map_err(|c| failed_at("copy_in", format_args!("image {}", dst.0), c))
            }
        }
    }

    fn copy_out(&mut self, src: BufferId, offset: u64, dst: &mut [u8]) -> DeviceResult<()> {
        let entry = self.entry(src)?;
        let len = dst.len() as u64;
        match &entry.storage {
            Storage::Buffer(mem) => {
                check_range("copy_out", offset, len, entry.size)?;
                if dst.is_empty() {
                    return Ok(());
                }
                self.queue
                    .read_buffer(mem, offset as usize, dst)
                    .map_err(|c| failed_at("copy_out", format_args!("buffer {}", src.0), c))
            }
            Storage::Image(image, desc) => {
                check_whole_image("copy_out", src, desc, offset, len)?;
                self.queue
                    .read_image(image, desc.pitch as usize, dst)
                    .map_err(|c| failed_at("copy_out", format_args!("image {}", src.0), c))
            }
        }
    }

    /// Loads kernel `spec.name` of the OpenCL C source `spec.code` (built once per distinct source).
    /// Fails with the build log if the source does not build, or if the kernel is missing or takes
    /// other than `spec.arg_count` arguments.
    fn load_program(&mut self, spec: &ProgramSpec<'_>) -> DeviceResult<ProgramId> {
        let bad = |reason: String| DeviceError::Program { name: spec.name.to_string(), reason };
        if spec.format != ProgramFormat::OpenClSource {
            return Err(bad(format!("format {:?} cannot run on OpenCL (it takes OpenClSource)", spec.format)));
        }
        let id = u32::try_from(self.programs.len()).map_err(|_| bad("too many programs".to_string()))?;
        let cname = CString::new(spec.name).map_err(|_| bad("the kernel name contains a NUL byte".to_string()))?;
        let source = self.build_source(spec.code).map_err(bad)?;
        let kernel = Kernel::new(&self.sources[source].program, &cname).map_err(|c| match c {
            CL_INVALID_KERNEL_NAME => bad("the source defines no kernel of that name".to_string()),
            c => bad(format!("clCreateKernel: {}", code_text(c))),
        })?;
        let args = kernel.num_args().map_err(|c| bad(format!("CL_KERNEL_NUM_ARGS: {}", code_text(c))))? as usize;
        if args != spec.arg_count {
            return Err(bad(format!("the kernel takes {args} arguments, the program says {}", spec.arg_count)));
        }
        let max_work_group = kernel
            .max_work_group(self.device)
            .map_err(|c| bad(format!("CL_KERNEL_WORK_GROUP_SIZE: {}", code_text(c))))?;
        self.programs.push(ProgramEntry {
            name: spec.name.to_string(),
            cname,
            source,
            arg_count: spec.arg_count,
            max_work_group,
        });
        Ok(ProgramId(id))
    }

    /// Makes one kernel object per program and argument list with its arguments set, sub-buffers for non-zero
    /// offsets (which must be multiples of [`ClLimits::base_address_align`]), and a staging buffer
    /// for a copy whose source and destination overlap. Referenced buffers can no longer be freed.
    fn link_step(&mut self, ops: &[StepOp]) -> DeviceResult<StepId> {
        let id = u32::try_from(self.steps.len())
            .map_err(|_| DeviceError::Failed { op: "link_step", reason: "too many steps".to_string() })?;
        let step = self.link(ops)?;
        self.steps.push(step);
        Ok(StepId(id))
    }

    /// Enqueues every op of the step and flushes; no heap allocation.
    fn submit(&mut self, step: StepId) -> DeviceResult<u64> {
        let linked =
            self.steps.get_mut(step.0 as usize).ok_or(DeviceError::InvalidHandle { kind: "step", id: step.0 })?;
        linked.enqueue(&self.queue, self.profiling)?;
        self.queue.flush().map_err(|c| failed("submit (flush)", c))?;
        Ok(self.timeline.record(()))
    }

    fn wait(&mut self, value: u64) -> DeviceResult<()> {
        if self.timeline.check(value)? {
            return Ok(());
        }
        // One in-order queue: finishing it completes `value` (and everything before and after it).
        self.finish()
    }

    fn synchronize(&mut self) -> DeviceResult<()> {
        self.finish()
    }

    fn profile(&self, step: StepId) -> Option<Vec<std::time::Duration>> {
        let linked = self.steps.get(step.0 as usize)?;
        self.profiling.then(|| linked.times())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_logs_fold_to_one_line() {
        assert_eq!(summarize_log("\n  a\n\nb  \n"), "a | b");
        assert_eq!(summarize_log(" \n"), "(the build log is empty)");
        let long: String = (0..25).map(|i| format!("line {i}\n")).collect();
        let s = summarize_log(&long);
        assert!(s.starts_with("line 0 | line 1") && s.ends_with("line 19 | ... (5 more lines)"), "{s}");
        assert!(!s.contains('\n'));
    }
}
