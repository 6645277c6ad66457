//! Owning types over a [`KgslFile`]: the device, draw contexts, GPU objects and user-memory mappings.
//!
//! Every resource is released by `Drop`. Objects share the file through an `Arc`, so they may outlive the
//! [`KgslDevice`] handle that created them. Bring-up follows tinygrad's `QCOMDevice`
//! (`tinygrad/runtime/ops_qcom.py`: `__init__`, `_gpu_alloc`, `_gpu_map`, `_submit`, the signal wait).

use crate::ioctl::{self, KgslFd, KgslFile};
use crate::sys::*;
use pilot_core::bounds::{check_range, OutOfBounds};
use pilot_core::device::DeviceError;
use std::io;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::Arc;

/// The device node.
pub const KGSL_PATH: &str = "/dev/kgsl-3d0";
/// The only GPU this backend drives.
pub const SUPPORTED_ARCH: &str = "a630";
/// KGSL allocation granularity.
pub const PAGE: u64 = 0x1000;
/// GPUOBJ_ALLOC flags for every buffer: 4 KiB alignment, GPU VA = CPU mapping, write-combined CPU cache mode.
pub const ALLOC_FLAGS: u64 = (12 << KGSL_MEMALIGN_SHIFT) | KGSL_MEMFLAGS_USE_CPU_MAP;
/// The context priority tinygrad uses by default (0 is highest, 15 lowest).
pub const DEFAULT_PRIORITY: u8 = 8;

/// The text of an OS error without Rust's "(os error N)" suffix; other errors as they display.
fn os_msg(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => nix::errno::Errno::from_raw(code).desc().to_string(),
        None => e.to_string(),
    }
}

/// A KGSL failure. Messages are one line and name the operation.
#[derive(Debug, thiserror::Error)]
pub enum KgslError {
    #[error("device not available: {}: {}", path.display(), os_msg(source))]
    Unavailable { path: PathBuf, source: io::Error },
    #[error("{op} failed: {}", os_msg(source))]
    Ioctl { op: &'static str, source: io::Error },
    #[error("mmap of GPU object {id} ({len} bytes) failed: {}", os_msg(source))]
    Mmap { id: u32, len: usize, source: io::Error },
    #[error("unsupported GPU: chip_id={chip_id:#010x} ({arch}); only {SUPPORTED_ARCH} is supported")]
    UnsupportedGpu { chip_id: u32, arch: String },
    #[error("{op}: range {offset}+{len} outside a mapping of {size} bytes")]
    OutOfBounds { op: &'static str, offset: u64, len: u64, size: u64 },
    #[error("{0}")]
    Invalid(String),
}

impl KgslError {
    fn ioctl(op: &'static str) -> impl FnOnce(io::Error) -> KgslError {
        move |source| KgslError::Ioctl { op, source }
    }
}

impl From<KgslError> for DeviceError {
    fn from(e: KgslError) -> Self {
        match e {
            KgslError::Unavailable { path, source } => {
                DeviceError::Unavailable(format!("{}: {}", path.display(), os_msg(&source)))
            }
            KgslError::OutOfBounds { op, offset, len, size } => DeviceError::OutOfBounds { op, offset, len, size },
            KgslError::Ioctl { op, ref source } => DeviceError::Failed { op, reason: os_msg(source) },
            _ => DeviceError::Failed { op: "kgsl", reason: e.to_string() },
        }
    }
}

impl From<OutOfBounds> for KgslError {
    fn from(e: OutOfBounds) -> Self {
        KgslError::OutOfBounds { op: e.op, offset: e.offset, len: e.len, size: e.size }
    }
}

pub type Result<T> = std::result::Result<T, KgslError>;

/// What `KGSL_PROP_DEVICE_INFO` reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevInfo {
    pub device_id: u32,
    pub chip_id: u32,
    pub gpu_id: u32,
    pub mmu_enabled: bool,
    pub gmem_base: u64,
    pub gmem_size: u64,
}

impl DevInfo {
    /// `(core, major, minor)` from the chip id.
    pub const fn version(&self) -> (u8, u8, u8) {
        ((self.chip_id >> 24) as u8, (self.chip_id >> 16) as u8, (self.chip_id >> 8) as u8)
    }

    /// The architecture name, e.g. `a630`.
    pub fn arch(&self) -> String {
        let (c, ma, mi) = self.version();
        format!("a{c}{ma}{mi}")
    }
}

/// Draw-context flags: preamble, power constraint, no fault tolerance, no GMEM, fine-grain preemption, and
/// `priority` (0..=15). `context_flags(8)` is 0x04008A12.
pub fn context_flags(priority: u8) -> Result<u32> {
    if priority > 15 {
        return Err(KgslError::Invalid(format!("context priority {priority} out of 0..=15")));
    }
    Ok(KGSL_CONTEXT_PREAMBLE
        | KGSL_CONTEXT_PWR_CONSTRAINT
        | KGSL_CONTEXT_NO_FAULT_TOLERANCE
        | KGSL_CONTEXT_NO_GMEM_ALLOC
        | ((priority as u32) << KGSL_CONTEXT_PRIORITY_SHIFT)
        | (KGSL_CONTEXT_PREEMPT_STYLE_FINEGRAIN << KGSL_CONTEXT_PREEMPT_STYLE_SHIFT))
}

/// An open KGSL device whose GPU is an a630.
pub struct KgslDevice {
    file: Arc<dyn KgslFile>,
    info: DevInfo,
}

impl std::fmt::Debug for KgslDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KgslDevice").field("info", &self.info).finish_non_exhaustive()
    }
}

impl KgslDevice {
    /// Opens [`KGSL_PATH`].
    pub fn open() -> Result<Self> {
        Self::open_path(Path::new(KGSL_PATH))
    }

    /// Opens the device node at `path`; a missing or inaccessible node gives [`KgslError::Unavailable`].
    pub fn open_path(path: &Path) -> Result<Self> {
        let fd = KgslFd::open(path).map_err(|source| KgslError::Unavailable { path: path.to_owned(), source })?;
        Self::from_file(Arc::new(fd))
    }

    /// Queries the device behind `file` and refuses anything but an a630.
    pub fn from_file(file: Arc<dyn KgslFile>) -> Result<Self> {
        let info = query_info(&*file)?;
        if info.arch() != SUPPORTED_ARCH {
            return Err(KgslError::UnsupportedGpu { chip_id: info.chip_id, arch: info.arch() });
        }
        Ok(KgslDevice { file, info })
    }

    pub fn info(&self) -> &DevInfo {
        &self.info
    }

    pub fn file(&self) -> &Arc<dyn KgslFile> {
        &self.file
    }

    /// Creates a draw context with [`context_flags`]`(priority)`.
    pub fn create_context(&self, priority: u8) -> Result<Context> {
        let mut arg = kgsl_drawctxt_create { flags: context_flags(priority)?, drawctxt_id: 0 };
        ioctl::drawctxt_create(&*self.file, &mut arg).map_err(KgslError::ioctl("IOCTL_KGSL_DRAWCTXT_CREATE"))?;
        Ok(Context { file: self.file.clone(), id: arg.drawctxt_id })
    }

    /// Allocates at least `size` bytes (rounded up to pages) of GPU memory mapped into this process, zero-filled by
    /// the kernel. Its GPU address is its CPU address.
    pub fn alloc(&self, size: u64) -> Result<GpuObject> {
        let size = size.max(1).div_ceil(PAGE) * PAGE;
        let mut arg = kgsl_gpuobj_alloc { size, flags: ALLOC_FLAGS, mmapsize: size, ..Default::default() };
        // SAFETY: no metadata pointer.
        unsafe { ioctl::gpuobj_alloc(&*self.file, &mut arg) }.map_err(KgslError::ioctl("IOCTL_KGSL_GPUOBJ_ALLOC"))?;
        let id = arg.id;
        let len = arg.mmapsize as usize;
        let free = |file: &dyn KgslFile| {
            let mut f = kgsl_gpuobj_free { id, ..Default::default() };
            // SAFETY: immediate free of an object that nothing has used yet.
            let _ = unsafe { ioctl::gpuobj_free(file, &mut f) };
        };
        if arg.mmapsize < size {
            free(&*self.file);
            return Err(KgslError::Invalid(format!("GPU object {id}: mmapsize {} < size {size}", arg.mmapsize)));
        }
        let ptr = match self.file.mmap(len, gpuobj_mmap_offset(id)) {
            Ok(p) => p,
            Err(source) => {
                free(&*self.file);
                return Err(KgslError::Mmap { id, len, source });
            }
        };
        Ok(GpuObject { file: self.file.clone(), id, ptr, len })
    }

    /// Maps host memory `ptr .. ptr + len` into the GPU's address space (`KGSL_USER_MEM_TYPE_ADDR`), whole pages.
    ///
    /// # Safety
    /// The memory must stay allocated until the returned mapping is dropped, and the CPU must not hold references
    /// into it while GPU work that writes it is in flight.
    pub unsafe fn map_user(&self, ptr: *const u8, len: usize) -> Result<UserMapping> {
        let addr = ptr as u64;
        let page_off = addr & (PAGE - 1);
        let mapped_len = (len as u64 + page_off).div_ceil(PAGE) * PAGE;
        dcache_clean(addr, len);
        let mut arg = kgsl_map_user_mem {
            hostptr: addr - page_off,
            len: mapped_len,
            memtype: KGSL_USER_MEM_TYPE_ADDR,
            ..Default::default()
        };
        // SAFETY: the caller guarantees the host range (this function's contract).
        unsafe { ioctl::map_user_mem(&*self.file, &mut arg) }.map_err(KgslError::ioctl("IOCTL_KGSL_MAP_USER_MEM"))?;
        Ok(UserMapping { file: self.file.clone(), gpuaddr: arg.gpuaddr, va: arg.gpuaddr + page_off, len })
    }
}

fn query_info(file: &dyn KgslFile) -> Result<DevInfo> {
    let mut info = kgsl_devinfo::default();
    let mut arg = kgsl_device_getproperty {
        type_: KGSL_PROP_DEVICE_INFO,
        value: &mut info as *mut kgsl_devinfo as u64,
        sizebytes: std::mem::size_of::<kgsl_devinfo>() as u64,
        ..Default::default()
    };
    // SAFETY: `value` points to a live `kgsl_devinfo` of `sizebytes` bytes.
    unsafe { ioctl::get_property(file, &mut arg) }.map_err(KgslError::ioctl("IOCTL_KGSL_DEVICE_GETPROPERTY"))?;
    Ok(DevInfo {
        device_id: info.device_id,
        chip_id: info.chip_id,
        gpu_id: info.gpu_id,
        mmu_enabled: info.mmu_enabled != 0,
        gmem_base: info.gmem_gpubaseaddr,
        gmem_size: info.gmem_sizebytes,
    })
}

/// Cleans the CPU data cache over a host range so the GPU sees CPU writes (imported memory is cached).
#[cfg(target_arch = "aarch64")]
fn dcache_clean(addr: u64, len: usize) {
    const LINE: u64 = 64;
    let mut line = addr & !(LINE - 1);
    while line < addr + len as u64 {
        // SAFETY: `dc cvac` cleans a cache line by address; it does not change memory contents and the range is
        // mapped (the caller of `map_user` guarantees it).
        unsafe { std::arch::asm!("dc cvac, {}", in(reg) line, options(nostack, preserves_flags)) };
        line += LINE;
    }
    // SAFETY: a barrier instruction with no memory operands.
    unsafe { std::arch::asm!("dsb sy", options(nostack, preserves_flags)) };
}

#[cfg(not(target_arch = "aarch64"))]
fn dcache_clean(_addr: u64, _len: usize) {}

/// A KGSL draw context; destroyed on drop.
pub struct Context {
    file: Arc<dyn KgslFile>,
    id: u32,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("id", &self.id).finish_non_exhaustive()
    }
}

impl Context {
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Asks for the maximum power level while this context runs.
    pub fn set_max_power(&self) -> Result<()> {
        let level = kgsl_device_constraint_pwrlevel { level: KGSL_CONSTRAINT_PWR_MAX };
        let constraint = kgsl_device_constraint {
            type_: KGSL_CONSTRAINT_PWRLEVEL,
            context_id: self.id,
            data: &level as *const _ as u64,
            size: std::mem::size_of_val(&level) as u64,
        };
        let mut arg = kgsl_device_getproperty {
            type_: KGSL_PROP_PWR_CONSTRAINT,
            value: &constraint as *const _ as u64,
            sizebytes: std::mem::size_of_val(&constraint) as u64,
            ..Default::default()
        };
        // SAFETY: `value` and `constraint.data` point to live locals of the stated sizes.
        unsafe { ioctl::set_property(&*self.file, &mut arg) }.map_err(KgslError::ioctl("IOCTL_KGSL_SETPROPERTY"))
    }

    /// Submits the `ndwords` PM4 dwords at GPU address `stream_va` as one indirect buffer; returns the submission's
    /// timestamp.
    ///
    /// # Safety
    /// The stream must be in GPU-mapped memory that stays valid until the submission retires, and it must only make
    /// the GPU access memory that is mapped to it and that the CPU does not borrow until then.
    pub unsafe fn submit(&self, stream_va: u64, ndwords: usize) -> Result<u32> {
        let obj = kgsl_command_object {
            gpuaddr: stream_va,
            size: ndwords as u64 * 4,
            flags: KGSL_CMDLIST_IB,
            ..Default::default()
        };
        let mut arg = kgsl_gpu_command {
            cmdlist: &obj as *const _ as u64,
            cmdsize: std::mem::size_of::<kgsl_command_object>() as u32,
            numcmds: 1,
            context_id: self.id,
            ..Default::default()
        };
        // SAFETY: `cmdlist` points to one live command object; the caller vouches for the stream.
        unsafe { ioctl::gpu_command(&*self.file, &mut arg) }.map_err(KgslError::ioctl("IOCTL_KGSL_GPU_COMMAND"))?;
        Ok(arg.timestamp)
    }

    /// Blocks until `timestamp` of this context retires, or `timeout_ms` passes (an error). Retries on EINTR.
    pub fn wait(&self, timestamp: u32, timeout_ms: u32) -> Result<()> {
        let mut arg = kgsl_device_waittimestamp_ctxtid { context_id: self.id, timestamp, timeout: timeout_ms };
        loop {
            match ioctl::wait_timestamp(&*self.file, &mut arg) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return r.map_err(KgslError::ioctl("IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID")),
            }
        }
    }

    /// The last retired timestamp of this context.
    pub fn retired(&self) -> Result<u32> {
        let mut arg =
            kgsl_cmdstream_readtimestamp_ctxtid { context_id: self.id, type_: KGSL_TIMESTAMP_RETIRED, timestamp: 0 };
        ioctl::read_timestamp(&*self.file, &mut arg)
            .map_err(KgslError::ioctl("IOCTL_KGSL_CMDSTREAM_READTIMESTAMP_CTXTID"))?;
        Ok(arg.timestamp)
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        let mut arg = kgsl_drawctxt_destroy { drawctxt_id: self.id };
        if let Err(e) = ioctl::drawctxt_destroy(&*self.file, &mut arg) {
            log::warn!("IOCTL_KGSL_DRAWCTXT_DESTROY of context {} failed: {}", self.id, os_msg(&e));
        }
    }
}

/// Checks a byte range of a mapping of `size` bytes and returns its start.
fn mapped_range(op: &'static str, offset: u64, len: usize, size: usize) -> Result<usize> {
    check_range(op, offset, len as u64, size as u64)?;
    Ok(offset as usize)
}

/// GPU memory mapped into this process; GPU address = CPU address. Freed and unmapped on drop.
///
/// The CPU only copies in and out (no references into the mapping escape), so GPU writes never alias a Rust borrow.
/// Callers must not free an object while GPU work that uses it is in flight.
pub struct GpuObject {
    file: Arc<dyn KgslFile>,
    id: u32,
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the object exclusively owns its mapping; the CPU touches it only through `read` (&self) and `write`
// (&mut self), so Rust's aliasing rules serialize CPU access across threads.
unsafe impl Send for GpuObject {}
// SAFETY: as for Send; shared references only read.
unsafe impl Sync for GpuObject {}

impl std::fmt::Debug for GpuObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuObject").field("id", &self.id).field("va", &format_args!("{:#x}", self.va())).finish()
    }
}

impl GpuObject {
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The GPU (and CPU) address of the first byte.
    pub fn va(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    /// The mapped length in bytes (a whole number of pages).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies `data` to byte `offset`.
    pub fn write(&mut self, offset: u64, data: &[u8]) -> Result<()> {
        let off = mapped_range("write", offset, data.len(), self.len)?;
        // SAFETY: the range is inside our live mapping and `&mut self` excludes other CPU access.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(off), data.len()) };
        Ok(())
    }

    /// Copies dwords to byte `offset` (little-endian, as the GPU reads them).
    pub fn write_u32s(&mut self, offset: u64, words: &[u32]) -> Result<()> {
        self.write(offset, bytemuck::cast_slice(words))
    }

    /// Copies from byte `offset` into `out`.
    pub fn read(&self, offset: u64, out: &mut [u8]) -> Result<()> {
        let off = mapped_range("read", offset, out.len(), self.len)?;
        // SAFETY: the range is inside our live mapping; no CPU writer exists while `&self` is held.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(off), out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// Reads the u32 at byte `offset` (a signal value, say) with a volatile load, so polling sees GPU writes.
    pub fn read_u32(&self, offset: u64) -> Result<u32> {
        let off = mapped_range("read", offset, 4, self.len)?;
        if !off.is_multiple_of(4) {
            return Err(KgslError::Invalid(format!("unaligned u32 read at {offset}")));
        }
        // SAFETY: aligned, inside our live mapping.
        Ok(unsafe { std::ptr::read_volatile(self.ptr.as_ptr().add(off).cast::<u32>()) })
    }
}

impl Drop for GpuObject {
    fn drop(&mut self) {
        let mut arg = kgsl_gpuobj_free { id: self.id, ..Default::default() };
        // SAFETY: immediate free; the owner guarantees no GPU work still uses the object (type contract).
        if let Err(e) = unsafe { ioctl::gpuobj_free(&*self.file, &mut arg) } {
            log::warn!("IOCTL_KGSL_GPUOBJ_FREE of object {} failed: {}", self.id, os_msg(&e));
        }
        // SAFETY: `ptr`/`len` is the mapping `alloc` made; nothing uses it after drop.
        if let Err(e) = unsafe { self.file.munmap(self.ptr, self.len) } {
            log::warn!("munmap of GPU object {} failed: {}", self.id, os_msg(&e));
        }
    }
}

/// Host memory mapped into the GPU; unmapped from the GPU on drop (the host memory is not freed).
pub struct UserMapping {
    file: Arc<dyn KgslFile>,
    gpuaddr: u64,
    va: u64,
    len: usize,
}

impl std::fmt::Debug for UserMapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserMapping").field("va", &format_args!("{:#x}", self.va)).field("len", &self.len).finish()
    }
}

impl UserMapping {
    /// The GPU address of the first byte passed to [`KgslDevice::map_user`].
    pub fn va(&self) -> u64 {
        self.va
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for UserMapping {
    fn drop(&mut self) {
        let mut arg = kgsl_sharedmem_free { gpuaddr: self.gpuaddr };
        if let Err(e) = ioctl::sharedmem_free(&*self.file, &mut arg) {
            log::warn!("IOCTL_KGSL_SHAREDMEM_FREE of {:#x} failed: {}", self.gpuaddr, os_msg(&e));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_device_is_one_line() {
        let err = KgslDevice::open_path(Path::new("/nonexistent/kgsl-3d0")).unwrap_err();
        assert_eq!(err.to_string(), "device not available: /nonexistent/kgsl-3d0: No such file or directory");
        let dev: DeviceError = err.into();
        assert_eq!(dev.to_string(), "device not available: /nonexistent/kgsl-3d0: No such file or directory");
    }

    #[test]
    fn default_context_flags() {
        assert_eq!(context_flags(DEFAULT_PRIORITY).unwrap(), 0x04008A12);
        assert_eq!(context_flags(16).unwrap_err().to_string(), "context priority 16 out of 0..=15");
        assert_eq!(ALLOC_FLAGS, 0x100C0000);
    }

    #[test]
    fn arch_from_chip_id() {
        let info =
            DevInfo { device_id: 1, chip_id: 0x06030001, gpu_id: 630, mmu_enabled: true, gmem_base: 0, gmem_size: 0 };
        assert_eq!(info.arch(), "a630");
        assert_eq!(DevInfo { chip_id: 0x07030001, ..info }.arch(), "a730");
    }
}
