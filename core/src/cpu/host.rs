//! The host functions loaded programs may call: a fixed table, reached through in-image stubs.
//!
//! C compilers emit calls to `memcpy`, `memset` and `memmove` even for freestanding code (struct
//! copies, zeroing loops); these are the only undefined symbols an object may have. They are plain
//! Rust `extern "C"` functions over `core::ptr` (which the Rust toolchain lowers to libc's).

/// `memcpy` for loaded code.
///
/// # Safety
/// C `memcpy` contract: `src` and `dst` valid for `n` bytes and not overlapping.
unsafe extern "C" fn host_memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    // SAFETY: forwarded from this function's own contract.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, n) };
    dst
}

/// `memmove` for loaded code.
///
/// # Safety
/// C `memmove` contract: `src` and `dst` valid for `n` bytes (they may overlap).
unsafe extern "C" fn host_memmove(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    // SAFETY: forwarded from this function's own contract.
    unsafe { std::ptr::copy(src, dst, n) };
    dst
}

/// `memset` for loaded code.
///
/// # Safety
/// C `memset` contract: `dst` valid for `n` bytes.
unsafe extern "C" fn host_memset(dst: *mut u8, value: i32, n: usize) -> *mut u8 {
    // SAFETY: forwarded from this function's own contract; C converts `value` to unsigned char.
    unsafe { std::ptr::write_bytes(dst, value as u8, n) };
    dst
}

/// The fixed table of host functions an object may leave undefined.
pub const HOST_SYMBOLS: [&str; 3] = ["memcpy", "memset", "memmove"];

type CopyFn = unsafe extern "C" fn(*mut u8, *const u8, usize) -> *mut u8;
type SetFn = unsafe extern "C" fn(*mut u8, i32, usize) -> *mut u8;

/// The address of host function `name` in this process, if it is in [`HOST_SYMBOLS`].
pub(crate) fn host_address(name: &str) -> Option<u64> {
    let addr = match name {
        "memcpy" => host_memcpy as CopyFn as usize,
        "memmove" => host_memmove as CopyFn as usize,
        "memset" => host_memset as SetFn as usize,
        _ => return None,
    };
    Some(addr as u64)
}
