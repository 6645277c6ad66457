//! The KGSL kernel ABI as plain data: `#[repr(C)]` structs, ioctl numbers and flag values.
//!
//! Source: Qualcomm's `msm_kgsl.h` as used by tinygrad (`tinygrad/runtime/autogen/kgsl.py`, driven by
//! `tinygrad/runtime/ops_qcom.py`). These are not our structs and we cannot change them. Sizes and offsets are those of
//! aarch64 LP64 (`unsigned long`, `size_t` and pointers are 8 bytes); pointers are carried as `u64`. Padding that the C
//! compiler inserts is spelled out as `_pad*` fields so that every struct is `Pod`; it must stay zero.

use bytemuck::{Pod, Zeroable};
use std::mem::{offset_of, size_of};

const _: () = assert!(size_of::<usize>() == 8, "the KGSL ABI here is the LP64 one");

/// `KGSL_IOC_TYPE`, the ioctl "magic" byte of every KGSL request.
pub const KGSL_IOC_TYPE: u64 = 0x09;

const IOC_WRITE: u64 = 1;
const IOC_READ: u64 = 2;

/// Linux `_IOC(dir, type, nr, size)`: `dir<<30 | size<<16 | type<<8 | nr` (Linux `include/uapi/asm-generic/ioctl.h`).
pub const fn ioc(dir: u64, ty: u64, nr: u64, size: usize) -> u64 {
    (dir << 30) | ((size as u64) << 16) | (ty << 8) | nr
}

const fn iow<T>(nr: u64) -> u64 {
    ioc(IOC_WRITE, KGSL_IOC_TYPE, nr, size_of::<T>())
}

const fn iowr<T>(nr: u64) -> u64 {
    ioc(IOC_READ | IOC_WRITE, KGSL_IOC_TYPE, nr, size_of::<T>())
}

/// The `nr` byte of an ioctl request.
pub const fn ioc_nr(request: u64) -> u8 {
    (request & 0xff) as u8
}

/// The argument size encoded in an ioctl request.
pub const fn ioc_size(request: u64) -> usize {
    ((request >> 16) & 0x3fff) as usize
}

/// `struct kgsl_device_getproperty` (24 B); also the argument of SETPROPERTY.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable, PartialEq, Eq)]
pub struct kgsl_device_getproperty {
    pub type_: u32,
    pub _pad0: u32,
    /// User pointer to the property value.
    pub value: u64,
    pub sizebytes: u64,
}

/// `struct kgsl_devinfo` (40 B), the value of `KGSL_PROP_DEVICE_INFO`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable, PartialEq, Eq)]
pub struct kgsl_devinfo {
    pub device_id: u32,
    /// `coreid:8 majorrev:8 minorrev:8 patch:8`, most significant first.
    pub chip_id: u32,
    pub mmu_enabled: u32,
    pub _pad0: u32,
    pub gmem_gpubaseaddr: u64,
    pub gpu_id: u32,
    pub _pad1: u32,
    pub gmem_sizebytes: u64,
}

/// `struct kgsl_drawctxt_create` (8 B).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable, PartialEq, Eq)]
pub struct kgsl_drawctxt_create {
    pub flags: u32,
    /// Out: the new context id.
    pub drawctxt_id: u32,
}

/// `struct kgsl_drawctxt_destroy` (4 B).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable, PartialEq, Eq)]
pub struct kgsl_drawctxt_destroy {
    pub drawctxt_id: u32,
}

/// `struct kgsl_device_waittimestamp_ctxtid` (12 B); `timeout` is in milliseconds.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable, PartialEq, Eq)]
pub struct kgsl_device_waittimestamp_ctxtid {
    pub context_id: u32,
    pub timestamp: u32,
    pub timeout: u32,
}

/// `struct kgsl_cmdstream_readtimestamp_ctxtid` (12 B). The field order is from `msm_kgsl.h`; the fact sheet gives
/// only the size.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable, PartialEq, Eq)]
pub struct kgsl_cmdstream_readtimestamp_ctxtid {
    pub context_id: u32,
    /// One of `KGSL_TIMESTAMP_*`.
    pub type_: u32,
    /// Out.
    pub timestamp: u32,
}

/// `struct kgsl_gpuobj_alloc` (48 B).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable, PartialEq, Eq)]
pub struct kgsl_gpuobj_alloc {
    pub size: u64,
    pub flags: u64,
    pub va_len: u64,
    /// Out: the length to pass to `mmap`.
    pub mmapsize: u64,
    /// Out: the object id; `mmap` offset is `id * 0x1000`.
    pub id: u32,
    pub metadata_len: u32,
    /// User pointer to metadata (unused: 0).
    pub metadata: u64,
}

/// `struct kgsl_gpuobj_free` (32 B).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable, PartialEq, Eq)]
pub struct kgsl_gpuobj_free {
    pub flags: u64,
    /// User pointer for deferred frees (unused: 0).
    pub priv_: u64,
    pub id: u32,
    pub type_: u32,
    pub len: u32,
    pub _pad0: u32,
}

/// `struct kgsl_gpuobj_info` (48 B).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable, PartialEq, Eq)]
pub struct kgsl_gpuobj_info {
    pub gpuaddr: u64,
    pub flags: u64,
    pub size: u64,
    pub va_len: u64,
    pub va_addr: u64,
    pub id: u32,
    pub _pad0: u32,
}

/// `struct kgsl_map_user_mem` (48 B).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable, PartialEq, Eq)]
pub struct kgsl_map_user_mem {
    pub fd: i32,
    pub _pad0: u32,
    /// Out: GPU address of `hostptr`.
    pub gpuaddr: u64,
    pub len: u64,
    pub offset: u64,
    pub hostptr: u64,
    /// `KGSL_USER_MEM_TYPE_*`.
    pub memtype: u32,
    pub flags: u32,
}

/// `struct kgsl_sharedmem_free` (8 B).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable, PartialEq, Eq)]
pub struct kgsl_sharedmem_free {
    pub gpuaddr: u64,
}

/// `struct kgsl_command_object` (32 B): one indirect buffer of a submission.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable, PartialEq, Eq)]
pub struct kgsl_command_object {
    pub offset: u64,
    pub gpuaddr: u64,
    /// Size in bytes.
    pub size: u64,
    /// `KGSL_CMDLIST_*` / `KGSL_OBJLIST_*`.
    pub flags: u32,
    pub id: u32,
}

/// `struct kgsl_gpu_command` (64 B).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable, PartialEq, Eq)]
pub struct kgsl_gpu_command {
    pub flags: u64,
    /// User pointer to `numcmds` [`kgsl_command_object`]s.
    pub cmdlist: u64,
    /// `size_of::<kgsl_command_object>()` = 32.
    pub cmdsize: u32,
    pub numcmds: u32,
    pub objlist: u64,
    pub objsize: u32,
    pub numobjs: u32,
    pub synclist: u64,
    pub syncsize: u32,
    pub numsyncs: u32,
    pub context_id: u32,
    /// Out: the per-context timestamp of this submission.
    pub timestamp: u32,
}

/// `struct kgsl_device_constraint` (24 B), the value of `KGSL_PROP_PWR_CONSTRAINT`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable, PartialEq, Eq)]
pub struct kgsl_device_constraint {
    pub type_: u32,
    pub context_id: u32,
    /// User pointer to the constraint data, e.g. [`kgsl_device_constraint_pwrlevel`].
    pub data: u64,
    pub size: u64,
}

/// `struct kgsl_device_constraint_pwrlevel` (4 B).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable, PartialEq, Eq)]
pub struct kgsl_device_constraint_pwrlevel {
    pub level: u32,
}

const _: () = {
    assert!(size_of::<kgsl_device_getproperty>() == 24);
    assert!(offset_of!(kgsl_device_getproperty, value) == 8);
    assert!(size_of::<kgsl_devinfo>() == 40);
    assert!(offset_of!(kgsl_devinfo, gmem_gpubaseaddr) == 16);
    assert!(offset_of!(kgsl_devinfo, gpu_id) == 24);
    assert!(offset_of!(kgsl_devinfo, gmem_sizebytes) == 32);
    assert!(size_of::<kgsl_drawctxt_create>() == 8);
    assert!(size_of::<kgsl_drawctxt_destroy>() == 4);
    assert!(size_of::<kgsl_device_waittimestamp_ctxtid>() == 12);
    assert!(size_of::<kgsl_cmdstream_readtimestamp_ctxtid>() == 12);
    assert!(size_of::<kgsl_gpuobj_alloc>() == 48);
    assert!(offset_of!(kgsl_gpuobj_alloc, id) == 32);
    assert!(offset_of!(kgsl_gpuobj_alloc, metadata) == 40);
    assert!(size_of::<kgsl_gpuobj_free>() == 32);
    assert!(offset_of!(kgsl_gpuobj_free, id) == 16);
    assert!(offset_of!(kgsl_gpuobj_free, len) == 24);
    assert!(size_of::<kgsl_gpuobj_info>() == 48);
    assert!(offset_of!(kgsl_gpuobj_info, id) == 40);
    assert!(size_of::<kgsl_map_user_mem>() == 48);
    assert!(offset_of!(kgsl_map_user_mem, gpuaddr) == 8);
    assert!(offset_of!(kgsl_map_user_mem, hostptr) == 32);
    assert!(offset_of!(kgsl_map_user_mem, memtype) == 40);
    assert!(size_of::<kgsl_sharedmem_free>() == 8);
    assert!(size_of::<kgsl_command_object>() == 32);
    assert!(offset_of!(kgsl_command_object, flags) == 24);
    assert!(size_of::<kgsl_gpu_command>() == 64);
    assert!(offset_of!(kgsl_gpu_command, cmdsize) == 16);
    assert!(offset_of!(kgsl_gpu_command, objlist) == 24);
    assert!(offset_of!(kgsl_gpu_command, synclist) == 40);
    assert!(offset_of!(kgsl_gpu_command, context_id) == 56);
    assert!(offset_of!(kgsl_gpu_command, timestamp) == 60);
    assert!(size_of::<kgsl_device_constraint>() == 24);
    assert!(size_of::<kgsl_device_constraint_pwrlevel>() == 4);
};

pub const IOCTL_KGSL_DEVICE_GETPROPERTY: u64 = iowr::<kgsl_device_getproperty>(0x02);
pub const IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID: u64 = iow::<kgsl_device_waittimestamp_ctxtid>(0x07);
pub const IOCTL_KGSL_DRAWCTXT_CREATE: u64 = iowr::<kgsl_drawctxt_create>(0x13);
pub const IOCTL_KGSL_DRAWCTXT_DESTROY: u64 = iow::<kgsl_drawctxt_destroy>(0x14);
pub const IOCTL_KGSL_MAP_USER_MEM: u64 = iowr::<kgsl_map_user_mem>(0x15);
pub const IOCTL_KGSL_CMDSTREAM_READTIMESTAMP_CTXTID: u64 = iowr::<kgsl_cmdstream_readtimestamp_ctxtid>(0x16);
pub const IOCTL_KGSL_SHAREDMEM_FREE: u64 = iow::<kgsl_sharedmem_free>(0x21);
pub const IOCTL_KGSL_SETPROPERTY: u64 = iow::<kgsl_device_getproperty>(0x32);
pub const IOCTL_KGSL_GPUOBJ_ALLOC: u64 = iowr::<kgsl_gpuobj_alloc>(0x45);
pub const IOCTL_KGSL_GPUOBJ_FREE: u64 = iow::<kgsl_gpuobj_free>(0x46);
pub const IOCTL_KGSL_GPUOBJ_INFO: u64 = iowr::<kgsl_gpuobj_info>(0x47);
pub const IOCTL_KGSL_GPU_COMMAND: u64 = iowr::<kgsl_gpu_command>(0x4a);

/// The name of a KGSL ioctl request, for error messages; `None` for requests this crate does not know.
pub fn ioctl_name(request: u64) -> Option<&'static str> {
    Some(match request {
        IOCTL_KGSL_DEVICE_GETPROPERTY => "IOCTL_KGSL_DEVICE_GETPROPERTY",
        IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID => "IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID",
        IOCTL_KGSL_DRAWCTXT_CREATE => "IOCTL_KGSL_DRAWCTXT_CREATE",
        IOCTL_KGSL_DRAWCTXT_DESTROY => "IOCTL_KGSL_DRAWCTXT_DESTROY",
        IOCTL_KGSL_MAP_USER_MEM => "IOCTL_KGSL_MAP_USER_MEM",
        IOCTL_KGSL_CMDSTREAM_READTIMESTAMP_CTXTID => "IOCTL_KGSL_CMDSTREAM_READTIMESTAMP_CTXTID",
        IOCTL_KGSL_SHAREDMEM_FREE => "IOCTL_KGSL_SHAREDMEM_FREE",
        IOCTL_KGSL_SETPROPERTY => "IOCTL_KGSL_SETPROPERTY",
        IOCTL_KGSL_GPUOBJ_ALLOC => "IOCTL_KGSL_GPUOBJ_ALLOC",
        IOCTL_KGSL_GPUOBJ_FREE => "IOCTL_KGSL_GPUOBJ_FREE",
        IOCTL_KGSL_GPUOBJ_INFO => "IOCTL_KGSL_GPUOBJ_INFO",
        IOCTL_KGSL_GPU_COMMAND => "IOCTL_KGSL_GPU_COMMAND",
        _ => return None,
    })
}

/// `KGSL_PROP_DEVICE_INFO`: GETPROPERTY returns a [`kgsl_devinfo`].
pub const KGSL_PROP_DEVICE_INFO: u32 = 0x1;
/// `KGSL_PROP_PWR_CONSTRAINT`: SETPROPERTY takes a [`kgsl_device_constraint`].
pub const KGSL_PROP_PWR_CONSTRAINT: u32 = 0x12;
/// `KGSL_CONSTRAINT_PWRLEVEL`.
pub const KGSL_CONSTRAINT_PWRLEVEL: u32 = 1;
/// `KGSL_CONSTRAINT_PWR_MAX`: the pwrlevel value for "maximum power".
pub const KGSL_CONSTRAINT_PWR_MAX: u32 = 1;

pub const KGSL_CONTEXT_NO_GMEM_ALLOC: u32 = 0x2;
pub const KGSL_CONTEXT_PREAMBLE: u32 = 0x10;
pub const KGSL_CONTEXT_NO_FAULT_TOLERANCE: u32 = 0x200;
pub const KGSL_CONTEXT_PWR_CONSTRAINT: u32 = 0x800;
pub const KGSL_CONTEXT_PRIORITY_MASK: u32 = 0xF000;
pub const KGSL_CONTEXT_PRIORITY_SHIFT: u32 = 12;
pub const KGSL_CONTEXT_PREEMPT_STYLE_MASK: u32 = 0x0E00_0000;
pub const KGSL_CONTEXT_PREEMPT_STYLE_SHIFT: u32 = 25;
pub const KGSL_CONTEXT_PREEMPT_STYLE_FINEGRAIN: u32 = 2;

pub const KGSL_MEMFLAGS_SECURE: u64 = 0x8;
pub const KGSL_MEMFLAGS_GPUREADONLY: u64 = 0x0100_0000;
pub const KGSL_MEMFLAGS_GPUWRITEONLY: u64 = 0x0200_0000;
/// The GPU address is set by `mmap()`: GPU VA equals the CPU mapping address.
pub const KGSL_MEMFLAGS_USE_CPU_MAP: u64 = 0x1000_0000;
pub const KGSL_MEMALIGN_MASK: u64 = 0x00FF_0000;
pub const KGSL_MEMALIGN_SHIFT: u64 = 16;
pub const KGSL_MEMTYPE_MASK: u64 = 0xFF00;
pub const KGSL_MEMTYPE_SHIFT: u64 = 8;
pub const KGSL_CACHEMODE_MASK: u64 = 0x0C00_0000;
pub const KGSL_CACHEMODE_SHIFT: u64 = 26;
pub const KGSL_CACHEMODE_WRITECOMBINE: u64 = 0;
pub const KGSL_CACHEMODE_UNCACHED: u64 = 1;
pub const KGSL_CACHEMODE_WRITETHROUGH: u64 = 2;
pub const KGSL_CACHEMODE_WRITEBACK: u64 = 3;

/// `KGSL_USER_MEM_TYPE_ADDR`: MAP_USER_MEM of an anonymous host address range.
pub const KGSL_USER_MEM_TYPE_ADDR: u32 = 2;

pub const KGSL_CMDLIST_IB: u32 = 1;
pub const KGSL_CMDLIST_CTXTSWITCH_PREAMBLE: u32 = 2;
pub const KGSL_CMDLIST_IB_PREAMBLE: u32 = 4;
pub const KGSL_OBJLIST_MEMOBJ: u32 = 8;
pub const KGSL_OBJLIST_PROFILE: u32 = 0x10;

/// `KGSL_TIMESTAMP_RETIRED` (from `msm_kgsl.h`, not in the fact sheet): READTIMESTAMP of the end of pipe.
pub const KGSL_TIMESTAMP_RETIRED: u32 = 2;

/// The `mmap` offset of GPU object `id`.
pub const fn gpuobj_mmap_offset(id: u32) -> u64 {
    id as u64 * 0x1000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_match_the_fact_sheet() {
        assert_eq!(IOCTL_KGSL_DEVICE_GETPROPERTY, 0xc0180902);
        assert_eq!(IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID, 0x400c0907);
        assert_eq!(IOCTL_KGSL_DRAWCTXT_CREATE, 0xc0080913);
        assert_eq!(IOCTL_KGSL_DRAWCTXT_DESTROY, 0x40040914);
        assert_eq!(IOCTL_KGSL_MAP_USER_MEM, 0xc0300915);
        assert_eq!(IOCTL_KGSL_CMDSTREAM_READTIMESTAMP_CTXTID, 0xc00c0916);
        assert_eq!(IOCTL_KGSL_SHAREDMEM_FREE, 0x40080921);
        assert_eq!(IOCTL_KGSL_SETPROPERTY, 0x40180932);
        assert_eq!(IOCTL_KGSL_GPUOBJ_ALLOC, 0xc0300945);
        assert_eq!(IOCTL_KGSL_GPUOBJ_FREE, 0x40200946);
        assert_eq!(IOCTL_KGSL_GPUOBJ_INFO, 0xc0300947);
        assert_eq!(IOCTL_KGSL_GPU_COMMAND, 0xc040094a);
    }

    #[test]
    fn request_fields_decode() {
        assert_eq!(ioc_nr(IOCTL_KGSL_GPU_COMMAND), 0x4a);
        assert_eq!(ioc_size(IOCTL_KGSL_GPU_COMMAND), 64);
        assert_eq!(ioc_size(IOCTL_KGSL_DEVICE_WAITTIMESTAMP_CTXTID), 12);
        assert_eq!(ioctl_name(IOCTL_KGSL_GPUOBJ_ALLOC), Some("IOCTL_KGSL_GPUOBJ_ALLOC"));
        assert_eq!(ioctl_name(0xdead), None);
    }

    #[test]
    fn default_flags_match_the_fact_sheet() {
        let ctx = KGSL_CONTEXT_PREAMBLE
            | KGSL_CONTEXT_PWR_CONSTRAINT
            | KGSL_CONTEXT_NO_FAULT_TOLERANCE
            | KGSL_CONTEXT_NO_GMEM_ALLOC
            | (8 << KGSL_CONTEXT_PRIORITY_SHIFT)
            | (KGSL_CONTEXT_PREEMPT_STYLE_FINEGRAIN << KGSL_CONTEXT_PREEMPT_STYLE_SHIFT);
        assert_eq!(ctx, 0x04008A12);
        assert_eq!((12 << KGSL_MEMALIGN_SHIFT) | KGSL_MEMFLAGS_USE_CPU_MAP, 0x100C0000);
    }
}
