//! The KGSL file-I/O seam and one function per ioctl.
//!
//! [`KgslFile`] is everything the backend asks of `/dev/kgsl-3d0`: ioctls, `mmap` and `munmap`. [`KgslFd`]
//! implements it over the real device node; [`crate::fake::FakeKgsl`] implements it in process. The functions below
//! are the only callers of [`KgslFile::ioctl`]: each takes the typed argument struct of one request. Those whose
//! struct carries user pointers, or that let the GPU touch memory, are `unsafe`.

use crate::sys::*;
use bytemuck::Pod;
use nix::sys::mman::{MapFlags, ProtFlags};
use std::fs::{File, OpenOptions};
use std::io;
use std::num::NonZeroUsize;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

/// Access to a KGSL device file.
pub trait KgslFile: Send + Sync {
    /// Issues `request` with `arg` as its argument struct (in and out).
    ///
    /// # Safety
    /// `arg` must be the argument struct of `request` (its length is the size encoded in `request`). Every user
    /// pointer inside it must be valid for the reads and writes the request performs during the call. Memory the
    /// request hands to the GPU (MAP_USER_MEM) must stay valid until it is released, and command streams
    /// (GPU_COMMAND) must only make the GPU write memory that nothing on the CPU side borrows meanwhile.
    unsafe fn ioctl(&self, request: u64, arg: &mut [u8]) -> io::Result<()>;

    /// Maps `len` bytes at `offset` of the file (a GPU object is at `id * 0x1000`) read/write and shared, at an
    /// address the system picks. Creating a mapping never invalidates existing memory.
    fn mmap(&self, len: usize, offset: u64) -> io::Result<NonNull<u8>>;

    /// Removes a mapping made by [`KgslFile::mmap`].
    ///
    /// # Safety
    /// `addr` and `len` must be exactly a mapping returned by this file's `mmap` and not yet unmapped, and nothing
    /// may use that memory afterwards.
    unsafe fn munmap(&self, addr: NonNull<u8>, len: usize) -> io::Result<()>;
}

/// A shared file is a file: lets a caller keep a handle (on a [`crate::fake::FakeKgsl`], say) while a device owns
/// another.
impl<T: KgslFile + ?Sized> KgslFile for std::sync::Arc<T> {
    unsafe fn ioctl(&self, request: u64, arg: &mut [u8]) -> io::Result<()> {
        // SAFETY: forwarded unchanged; the caller upholds `KgslFile::ioctl`'s contract.
        unsafe { (**self).ioctl(request, arg) }
    }

    fn mmap(&self, len: usize, offset: u64) -> io::Result<NonNull<u8>> {
        (**self).mmap(len, offset)
    }

    unsafe fn munmap(&self, addr: NonNull<u8>, len: usize) -> io::Result<()> {
        // SAFETY: forwarded unchanged; the caller upholds `KgslFile::munmap`'s contract.
        unsafe { (**self).munmap(addr, len) }
    }
}

/// The real device node, opened read/write.
#[derive(Debug)]
pub struct KgslFd {
    file: File,
    path: PathBuf,
}

impl KgslFd {
    /// Opens `path` (normally `/dev/kgsl-3d0`) read/write, close-on-exec.
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        Ok(KgslFd { file, path: path.to_owned() })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl KgslFile for KgslFd {
    unsafe fn ioctl(&self, request: u64, arg: &mut [u8]) -> io::Result<()> {
        if arg.len() != ioc_size(request) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "ioctl argument size mismatch"));
        }
        // SAFETY: the fd is open for the lifetime of `self`; `arg` is a live buffer of the size the request encodes,
        // and the caller guarantees the pointers inside it (this function's contract).
        let ret = unsafe { nix::libc::ioctl(self.file.as_raw_fd(), request as _, arg.as_mut_ptr()) };
        match ret {
            0 => Ok(()),
            r if r < 0 => Err(io::Error::last_os_error()),
            r => Err(io::Error::other(format!("ioctl returned {r}"))),
        }
    }

    fn mmap(&self, len: usize, offset: u64) -> io::Result<NonNull<u8>> {
        let len = NonZeroUsize::new(len).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty mmap"))?;
        let offset = offset.try_into().map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "mmap offset"))?;
        // SAFETY: no fixed address is requested, so the kernel picks unused address space and no existing memory is
        // replaced; the mapping is owned by the caller from here on.
        let ptr = unsafe {
            nix::sys::mman::mmap(
                None,
                len,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                &self.file,
                offset,
            )
        }?;
        Ok(ptr.cast())
    }

    unsafe fn munmap(&self, addr: NonNull<u8>, len: usize) -> io::Result<()> {
        // SAFETY: the caller guarantees this is an unused mapping of ours (this function's contract).
        unsafe { nix::sys::mman::munmap(addr.cast(), len) }?;
        Ok(())
    }
}

/// # Safety
/// As [`KgslFile::ioctl`], for `T` the argument struct of `request`.
unsafe fn call<T: Pod>(f: &dyn KgslFile, request: u64, arg: &mut T) -> io::Result<()> {
    debug_assert_eq!(std::mem::size_of::<T>(), ioc_size(request));
    // SAFETY: `arg` is the argument struct of `request`; the caller vouches for its pointers.
    unsafe { f.ioctl(request, bytemuck::bytes_of_mut(arg)) }
}

/// `IOCTL_KGSL_DEVICE_GETPROPERTY`.
///
/// # Safety
/// `arg.value` must point to `arg.sizebytes` writable bytes.
pub unsafe fn get_property(f: &dyn KgslFile, arg: &mut kgsl_device_getproperty) -> io::Result<()> {
    // SAFETY: forwarded from this function's contract.
    unsafe { call(f, IOCTL_KGSL_DEVICE_GETPROPERTY, arg) }
}

/// `IOCTL_KGSL_SETPROPERTY`.
///
/// # Safety
/// `arg.value` must point to `arg.sizebytes` readable bytes, and any pointer inside them must be valid too.
pub unsafe fn set_property(f: &dyn KgslFile, arg: &mut kgsl_device_getproperty) -> io::Result<()> {
    // SAFETY: forwarded from this function's contract.
    unsafe { call(f, IOCTL_KGSL_SETPROPERTY, arg) }
}

/// `IOCTL_KGSL_DRAWCTXT_CREATE`.
pub fn drawctxt_create(f: &dyn KgslFile, arg: &mut kgsl_drawctxt_create) -> io::Result<()> {
    // SAFETY: the struct holds no pointers.
    unsafe { call(f, IOCTL_KGSL_DRAWCTXT_CREATE, arg) }
}

/// `IOCTL_KGSL_DRAWCTXT_DESTROY`.
pub fn drawctxt_destroy(f: &dyn KgslFile, arg: &mut kgsl_drawctxt_destroy) -> io::Result<()> {
    // SAFETY: the struct holds no pointers.
    unsafe { call(f, IOCTL_KGSL_DRAWCTXT_DESTROY, arg) }
}

/// `IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID`.
pub fn wait_timestamp(f: &dyn KgslFile, arg: &mut kgsl_device_waittimestamp_ctxtid) -> io::Result<()> {
    // SAFETY: the struct holds no pointers.
    unsafe { call(f, IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID, arg) }
}

/// `IOCTL_KGSL_CMDSTREAM_READTIMESTAMP_CTXTID`.
pub fn read_timestamp(f: &dyn KgslFile, arg: &mut kgsl_cmdstream_readtimestamp_ctxtid) -> io::Result<()> {
    // SAFETY: the struct holds no pointers.
    unsafe { call(f, IOCTL_KGSL_CMDSTREAM_READTIMESTAMP_CTXTID, arg) }
}

/// `IOCTL_KGSL_GPUOBJ_ALLOC`.
///
/// # Safety
/// `arg.metadata` must be 0 or point to `arg.metadata_len` readable bytes.
pub unsafe fn gpuobj_alloc(f: &dyn KgslFile, arg: &mut kgsl_gpuobj_alloc) -> io::Result<()> {
    // SAFETY: forwarded from this function's contract.
    unsafe { call(f, IOCTL_KGSL_GPUOBJ_ALLOC, arg) }
}

/// `IOCTL_KGSL_GPUOBJ_FREE`.
///
/// # Safety
/// `arg.priv_` must be 0 (immediate free), and no queued GPU work may still use the object.
pub unsafe fn gpuobj_free(f: &dyn KgslFile, arg: &mut kgsl_gpuobj_free) -> io::Result<()> {
    // SAFETY: forwarded from this function's contract.
    unsafe { call(f, IOCTL_KGSL_GPUOBJ_FREE, arg) }
}

/// `IOCTL_KGSL_GPUOBJ_INFO`.
pub fn gpuobj_info(f: &dyn KgslFile, arg: &mut kgsl_gpuobj_info) -> io::Result<()> {
    // SAFETY: the struct holds no pointers.
    unsafe { call(f, IOCTL_KGSL_GPUOBJ_INFO, arg) }
}

/// `IOCTL_KGSL_MAP_USER_MEM`.
///
/// # Safety
/// `arg.hostptr .. + arg.len` must be valid host memory that stays allocated, and that the CPU does not borrow while
/// the GPU writes it, until the mapping is freed with [`sharedmem_free`].
pub unsafe fn map_user_mem(f: &dyn KgslFile, arg: &mut kgsl_map_user_mem) -> io::Result<()> {
    // SAFETY: forwarded from this function's contract.
    unsafe { call(f, IOCTL_KGSL_MAP_USER_MEM, arg) }
}

/// `IOCTL_KGSL_SHAREDMEM_FREE`.
pub fn sharedmem_free(f: &dyn KgslFile, arg: &mut kgsl_sharedmem_free) -> io::Result<()> {
    // SAFETY: the struct holds no pointers; unmapping from the GPU cannot invalidate CPU memory.
    unsafe { call(f, IOCTL_KGSL_SHAREDMEM_FREE, arg) }
}

/// `IOCTL_KGSL_GPU_COMMAND`.
///
/// # Safety
/// `arg.cmdlist` must point to `arg.numcmds` [`kgsl_command_object`]s (and `objlist`/`synclist` likewise, or be
/// null), and the command streams they name must only make the GPU access memory that is mapped to it and not
/// borrowed by the CPU until the submission retires.
pub unsafe fn gpu_command(f: &dyn KgslFile, arg: &mut kgsl_gpu_command) -> io::Result<()> {
    // SAFETY: forwarded from this function's contract.
    unsafe { call(f, IOCTL_KGSL_GPU_COMMAND, arg) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_node_is_not_found() {
        let err = KgslFd::open(Path::new("/nonexistent/kgsl-3d0")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn real_file_rejects_a_wrong_size() {
        let f = KgslFd::open(Path::new("/dev/null")).unwrap();
        let mut arg = [0u8; 4];
        // SAFETY: the size check fails before any syscall.
        let err = unsafe { f.ioctl(IOCTL_KGSL_GPU_COMMAND, &mut arg) }.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        let mut ctx = kgsl_drawctxt_create::default();
        // /dev/null does not implement KGSL ioctls: the errno comes through.
        assert!(drawctxt_create(&f, &mut ctx).is_err());
    }
}
