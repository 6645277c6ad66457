//! The simulated PSP's own reading of the firmware files it checks staged images against, from Linux
//! `amdgpu_ucode.h`: `common_firmware_header` (32 bytes), `psp_firmware_header_v2_0` (sOS components as
//! `psp_fw_bin_desc {fw_type, fw_version, offset_bytes, size_bytes}` after a count at byte 32, offsets from
//! the ucode array), and `gfx_firmware_header_v2_0`'s RS64 start address (bytes 52/56). Deliberately not
//! `pilot_amd::firmware`: the simulator is a second, independent reading.

use std::collections::HashMap;
use std::path::PathBuf;

/// The common header's fields the checks use.
#[derive(Clone, Copy, Debug)]
pub struct Common {
    pub size_bytes: u32,
    pub header_size: u32,
    pub version_major: u16,
    pub ip_major: u16,
    pub ucode_version: u32,
    pub ucode_size: u32,
    pub ucode_offset: u32,
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

/// The common header, checked against the file: its size field is the file's length and the ucode array
/// lies inside it.
pub fn common(name: &str, b: &[u8]) -> Result<Common, String> {
    let short = || format!("{name}: shorter than its header");
    let c = Common {
        size_bytes: u32_at(b, 0).ok_or_else(short)?,
        header_size: u32_at(b, 4).ok_or_else(short)?,
        version_major: u16_at(b, 8).ok_or_else(short)?,
        ip_major: u16_at(b, 12).ok_or_else(short)?,
        ucode_version: u32_at(b, 16).ok_or_else(short)?,
        ucode_size: u32_at(b, 20).ok_or_else(short)?,
        ucode_offset: u32_at(b, 24).ok_or_else(short)?,
    };
    if c.size_bytes as usize != b.len() {
        return Err(format!("{name}: header says {} bytes, the file has {}", c.size_bytes, b.len()));
    }
    if u64::from(c.ucode_offset) + u64::from(c.ucode_size) > b.len() as u64 || (c.header_size as usize) < 32 {
        return Err(format!("{name}: ucode array outside the file"));
    }
    Ok(c)
}

/// The parts of a `psp_*_sos.bin`: psp_fw_type -> bytes range.
pub fn sos_parts(name: &str, b: &[u8]) -> Result<HashMap<u32, std::ops::Range<usize>>, String> {
    let c = common(name, b)?;
    if c.version_major != 2 {
        return Err(format!("{name}: PSP header v{} (the simulator reads v2)", c.version_major));
    }
    let count = u32_at(b, 32).ok_or_else(|| format!("{name}: no component count"))? as usize;
    // v2.0: the descriptors follow the count; v2.1 adds an aux index first.
    let minor = u16_at(b, 10).unwrap_or(0);
    let first = if minor == 0 { 36 } else { 40 };
    let mut parts = HashMap::new();
    for i in 0..count {
        let at = first + 16 * i;
        let bad = || format!("{name}: component {i} descriptor outside the header");
        let fw_type = u32_at(b, at).ok_or_else(bad)?;
        let off = u32_at(b, at + 8).ok_or_else(bad)? as usize + c.ucode_offset as usize;
        let size = u32_at(b, at + 12).ok_or_else(bad)? as usize;
        if off + size > b.len() {
            return Err(format!("{name}: component type {fw_type} outside the file"));
        }
        parts.insert(fw_type, off..off + size);
    }
    Ok(parts)
}

/// `gfx_firmware_header_v2_0` (RS64 engines): the program counter start, in bytes.
pub fn rs64_start(name: &str, b: &[u8]) -> Result<u64, String> {
    let c = common(name, b)?;
    if c.version_major != 2 {
        return Err(format!("{name}: gfx header v{} is not RS64 (v2)", c.version_major));
    }
    let lo = u32_at(b, 52).ok_or_else(|| format!("{name}: no ucode start"))?;
    let hi = u32_at(b, 56).ok_or_else(|| format!("{name}: no ucode start"))?;
    Ok(u64::from(lo) | u64::from(hi) << 32)
}

/// Where `image` occurs in `file` past its header, if it does.
pub fn find(file: &[u8], header_size: usize, image: &[u8]) -> Option<usize> {
    if image.is_empty() || image.len() > file.len() {
        return None;
    }
    let probe = &image[..image.len().min(32)];
    (header_size..=file.len() - image.len())
        .find(|&o| &file[o..o + probe.len()] == probe && &file[o..o + image.len()] == image)
}

/// The largest firmware file read (regular files only): the real files are under 1 MB.
const MAX_FILE_BYTES: u64 = 4 << 20;

/// Firmware files read once from a directory.
#[derive(Debug, Default)]
pub struct Files {
    dir: PathBuf,
    cache: HashMap<String, Vec<u8>>,
}

impl Files {
    pub fn new(dir: PathBuf) -> Files {
        Files { dir, cache: HashMap::new() }
    }

    pub fn get(&mut self, name: &str) -> Result<&[u8], String> {
        if !self.cache.contains_key(name) {
            let path = self.dir.join(name);
            let data = pilot_core::fsio::read_regular(&path, MAX_FILE_BYTES)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            self.cache.insert(name.to_string(), data);
        }
        Ok(&self.cache[name])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// #26 item 6: the simulated PSP read firmware with `std::fs::read` (a FIFO blocked for ever, `/dev/zero` was
    /// read until memory ran out).
    #[test]
    fn only_regular_files_under_the_cap_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let ok = std::process::Command::new("mkfifo").arg(dir.path().join("fifo.bin")).status().unwrap();
        assert!(ok.success(), "mkfifo (coreutils) is needed for this test");
        std::fs::File::create(dir.path().join("big.bin")).unwrap().set_len(MAX_FILE_BYTES + 1).unwrap();
        std::fs::write(dir.path().join("ok.bin"), [1, 2, 3]).unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.bin")).unwrap();
        let mut files = Files::new(dir.path().to_path_buf());
        assert!(files.get("fifo.bin").unwrap_err().ends_with("is a FIFO, not a regular file"));
        let e = files.get("zero.bin").unwrap_err();
        assert!(e.contains("a character device") && e.ends_with("not a regular file"), "{e}");
        assert!(files.get("big.bin").unwrap_err().contains("more than the 4194304"));
        assert_eq!(files.get("ok.bin").unwrap(), [1, 2, 3]);
    }
}
