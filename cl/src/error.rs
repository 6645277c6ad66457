//! OpenCL status codes as one-line [`DeviceError`]s.

use opencl_sys::{cl_int, CL_MEM_OBJECT_ALLOCATION_FAILURE, CL_OUT_OF_HOST_MEMORY, CL_OUT_OF_RESOURCES};
use pilot_core::device::DeviceError;

/// `CL_INVALID_KERNEL_ARGS (-52)`: the code's name (as the OpenCL headers spell it) and its value.
pub(crate) fn code_text(code: cl_int) -> String {
    format!("{} ({code})", cl3::error_codes::error_text(code))
}

/// `op failed: CL_... (code)`.
pub(crate) fn failed(op: &'static str, code: cl_int) -> DeviceError {
    DeviceError::Failed { op, reason: code_text(code) }
}

/// `op failed: what: CL_... (code)`, for failures that need the object named.
pub(crate) fn failed_at(op: &'static str, what: impl std::fmt::Display, code: cl_int) -> DeviceError {
    DeviceError::Failed { op, reason: format!("{what}: {}", code_text(code)) }
}

/// Like [`failed`], but the codes that mean "no memory" become [`DeviceError::OutOfMemory`].
pub(crate) fn alloc_failed(op: &'static str, size: usize, code: cl_int) -> DeviceError {
    match code {
        CL_MEM_OBJECT_ALLOCATION_FAILURE | CL_OUT_OF_RESOURCES | CL_OUT_OF_HOST_MEMORY => {
            DeviceError::OutOfMemory { size }
        }
        _ => failed_at(op, format!("{size} bytes"), code),
    }
}

/// `device not available: OpenCL: reason`.
pub(crate) fn unavailable(reason: impl std::fmt::Display) -> DeviceError {
    DeviceError::Unavailable(format!("OpenCL: {reason}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_render_by_name() {
        let e = failed("submit", opencl_sys::CL_INVALID_KERNEL_ARGS);
        assert_eq!(e.to_string(), "submit failed: CL_INVALID_KERNEL_ARGS (-52)");
        assert!(matches!(
            alloc_failed("alloc", 8, CL_MEM_OBJECT_ALLOCATION_FAILURE),
            DeviceError::OutOfMemory { size: 8 }
        ));
        assert_eq!(unavailable("no platform").to_string(), "device not available: OpenCL: no platform");
    }
}
