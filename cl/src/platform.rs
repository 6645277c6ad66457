//! Loading the OpenCL library, enumerating platforms and devices, and what a device reports.

use std::sync::{Mutex, MutexGuard, PoisonError};

use cl3::device::get_device_info;
use cl3::platform::get_platform_info;
use opencl_sys::{
    cl_device_id, cl_device_type, cl_platform_id, CL_DEVICE_IMAGE2D_MAX_HEIGHT, CL_DEVICE_IMAGE2D_MAX_WIDTH,
    CL_DEVICE_IMAGE_SUPPORT, CL_DEVICE_MAX_WORK_GROUP_SIZE, CL_DEVICE_MAX_WORK_ITEM_SIZES,
    CL_DEVICE_MEM_BASE_ADDR_ALIGN, CL_DEVICE_NAME, CL_DEVICE_NOT_FOUND, CL_DEVICE_TYPE, CL_DEVICE_TYPE_ALL,
    CL_DEVICE_TYPE_GPU, CL_PLATFORM_NAME, CL_PLATFORM_NOT_FOUND_KHR,
};
use pilot_core::device::{DeviceError, DeviceResult};

use crate::error::{code_text, failed, unavailable};

/// The environment variable naming the default device (`P:D`) when no selector is given.
pub const DEVICE_ENV: &str = "PILOT_CL_DEVICE";

/// The device properties the backend checks work against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClLimits {
    /// `CL_DEVICE_MAX_WORK_GROUP_SIZE`: work-items in one work-group, at most.
    pub max_work_group_size: usize,
    /// `CL_DEVICE_MAX_WORK_ITEM_SIZES` for dimensions 0, 1, 2.
    pub max_work_item_sizes: [usize; 3],
    /// `CL_DEVICE_IMAGE2D_MAX_WIDTH` in pixels (0 without image support).
    pub image2d_max_width: usize,
    /// `CL_DEVICE_IMAGE2D_MAX_HEIGHT` in pixels (0 without image support).
    pub image2d_max_height: usize,
    /// `CL_DEVICE_IMAGE_SUPPORT`.
    pub image_support: bool,
    /// `CL_DEVICE_MEM_BASE_ADDR_ALIGN` in bytes (the device reports bits): sub-buffer origins, and so
    /// non-zero dispatch argument offsets, must be multiples of it.
    pub base_address_align: u64,
}

/// One device as [`list_devices`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClDeviceEntry {
    /// `P:D`, as [`crate::ClDevice::open`] and `PILOT_CL_DEVICE` take it.
    pub selector: String,
    pub platform: String,
    pub name: String,
    pub gpu: bool,
}

/// Serializes device discovery and context creation across threads: PoCL initializes its devices
/// lazily on the first clGetDeviceIDs, and a concurrent clGetDeviceInfo can see a half-initialized
/// device (a crash in `strlen` on its name).
static DISCOVERY: Mutex<()> = Mutex::new(());

/// Holds [`DISCOVERY`] (a panic while holding it leaves nothing to repair).
pub(crate) fn discovery_lock() -> MutexGuard<'static, ()> {
    DISCOVERY.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A platform and device picked by a selector.
pub(crate) struct Selected {
    pub(crate) platform: cl_platform_id,
    pub(crate) device: cl_device_id,
    pub(crate) selector: String,
}

/// Opens libOpenCL (once per process) and lists its platforms. A missing library or an ICD loader
/// without platforms is [`DeviceError::Unavailable`].
fn platforms() -> DeviceResult<Vec<cl_platform_id>> {
    if let Err(e) = cl3::load_library() {
        return Err(unavailable(format_args!("cannot load the OpenCL library: {e}")));
    }
    match cl3::platform::get_platform_ids() {
        Ok(ids) if !ids.is_empty() => Ok(ids),
        Ok(_) | Err(CL_PLATFORM_NOT_FOUND_KHR) => Err(unavailable("no OpenCL platform is installed")),
        Err(code) => Err(unavailable(format_args!("clGetPlatformIDs: {}", code_text(code)))),
    }
}

/// The devices of `kind` on `platform`; none is an empty list, not an error.
fn devices(platform: cl_platform_id, kind: cl_device_type) -> DeviceResult<Vec<cl_device_id>> {
    match cl3::device::get_device_ids(platform, kind) {
        Ok(ids) => Ok(ids),
        Err(CL_DEVICE_NOT_FOUND) => Ok(Vec::new()),
        Err(code) => Err(failed("list OpenCL devices", code)),
    }
}

/// Picks a device: `Some("P:D")` is platform `P`'s device `D`; `None` reads [`DEVICE_ENV`] and
/// otherwise takes the first GPU of any platform, else the first device of any type.
pub(crate) fn select(selector: Option<&str>) -> DeviceResult<Selected> {
    let platforms = platforms()?;
    let env = std::env::var(DEVICE_ENV).ok().filter(|s| !s.trim().is_empty());
    if let Some(sel) = selector.or(env.as_deref()) {
        let (p, d) = parse_selector(sel)?;
        let platform = *platforms.get(p).ok_or_else(|| {
            unavailable(format_args!("no platform {p} for device `{sel}` ({} platforms)", platforms.len()))
        })?;
        let all = devices(platform, CL_DEVICE_TYPE_ALL)?;
        let device = *all.get(d).ok_or_else(|| {
            unavailable(format_args!("no device {d} on platform {p} for `{sel}` ({} devices)", all.len()))
        })?;
        return Ok(Selected { platform, device, selector: format!("{p}:{d}") });
    }
    for (p, &platform) in platforms.iter().enumerate() {
        let gpus = devices(platform, CL_DEVICE_TYPE_GPU)?;
        if let Some(&gpu) = gpus.first() {
            let all = devices(platform, CL_DEVICE_TYPE_ALL)?;
            let d = all.iter().position(|&id| id == gpu).unwrap_or(0);
            return Ok(Selected { platform, device: gpu, selector: format!("{p}:{d}") });
        }
    }
    for (p, &platform) in platforms.iter().enumerate() {
        if let Some(&device) = devices(platform, CL_DEVICE_TYPE_ALL)?.first() {
            return Ok(Selected { platform, device, selector: format!("{p}:0") });
        }
    }
    Err(unavailable("no OpenCL device on any platform"))
}

/// `"P:D"` → `(P, D)`.
pub(crate) fn parse_selector(sel: &str) -> DeviceResult<(usize, usize)> {
    let bad = || DeviceError::Failed {
        op: "open OpenCL device",
        reason: format!("bad device selector `{sel}`: expected PLATFORM:DEVICE indices such as 0:0"),
    };
    let (p, d) = sel.trim().split_once(':').ok_or_else(bad)?;
    Ok((p.trim().parse().map_err(|_| bad())?, d.trim().parse().map_err(|_| bad())?))
}

/// Every device of every platform, in selector order.
pub fn list_devices() -> DeviceResult<Vec<ClDeviceEntry>> {
    let _discovery = discovery_lock();
    let mut out = Vec::new();
    for (p, &platform) in platforms()?.iter().enumerate() {
        let pname = platform_name(platform);
        for (d, &device) in devices(platform, CL_DEVICE_TYPE_ALL)?.iter().enumerate() {
            let gpu = get_device_info(device, CL_DEVICE_TYPE).map(u64::from).is_ok_and(|t| t & CL_DEVICE_TYPE_GPU != 0);
            out.push(ClDeviceEntry {
                selector: format!("{p}:{d}"),
                platform: pname.clone(),
                name: device_name(device),
                gpu,
            });
        }
    }
    Ok(out)
}

pub(crate) fn platform_name(platform: cl_platform_id) -> String {
    get_platform_info(platform, CL_PLATFORM_NAME).map(String::from).unwrap_or_default()
}

pub(crate) fn device_name(device: cl_device_id) -> String {
    get_device_info(device, CL_DEVICE_NAME).map(String::from).unwrap_or_default()
}

pub(crate) fn limits(device: cl_device_id) -> DeviceResult<ClLimits> {
    let info = |param| get_device_info(device, param).map_err(|code| failed("query OpenCL device", code));
    let sizes = Vec::<usize>::from(info(CL_DEVICE_MAX_WORK_ITEM_SIZES)?);
    let mut max_work_item_sizes = [1usize; 3];
    for (dst, src) in max_work_item_sizes.iter_mut().zip(&sizes) {
        *dst = *src;
    }
    let image_support = u32::from(info(CL_DEVICE_IMAGE_SUPPORT)?) != 0;
    let (image2d_max_width, image2d_max_height) = if image_support {
        (usize::from(info(CL_DEVICE_IMAGE2D_MAX_WIDTH)?), usize::from(info(CL_DEVICE_IMAGE2D_MAX_HEIGHT)?))
    } else {
        (0, 0)
    };
    Ok(ClLimits {
        max_work_group_size: usize::from(info(CL_DEVICE_MAX_WORK_GROUP_SIZE)?),
        max_work_item_sizes,
        image2d_max_width,
        image2d_max_height,
        image_support,
        base_address_align: (u64::from(u32::from(info(CL_DEVICE_MEM_BASE_ADDR_ALIGN)?)) / 8).max(1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_parse() {
        assert_eq!(parse_selector("0:1").unwrap(), (0, 1));
        assert_eq!(parse_selector(" 2 : 3 ").unwrap(), (2, 3));
        for bad in ["", "0", "a:b", "0:-1", "1:2:3"] {
            let e = parse_selector(bad).unwrap_err().to_string();
            assert!(e.contains("bad device selector"), "{bad}: {e}");
        }
    }
}
