//! Tensor data stored outside the model file (`data_location = EXTERNAL`).

use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path};

use super::error::ImportError;
use super::proto::StringStringEntryProto;

/// The largest tensor read from external data: the compiler's default memory limit.
pub const MAX_EXTERNAL_BYTES: u64 = crate::lower::budget::DEFAULT_MAX_MEMORY;

/// Reads the `nbytes` bytes of tensor `name` described by its `external_data` entries.
///
/// `location` must be a relative path without `..` components (no absolute paths, no escape from
/// the model's directory `base_dir`, symlinks included: the resolved path must lie inside the
/// resolved directory) naming a regular file (see `pilot_core::fsio::open_regular`); `offset` (default 0) and `length`
/// (default: what the dims need) are decimal byte counts; `length` must equal `nbytes` (at most
/// [`MAX_EXTERNAL_BYTES`]) and the range must lie inside the file. Other keys (`checksum`, ...) are ignored. Nothing is allocated
/// before the range has been checked against the file's size.
pub(crate) fn read(
    name: &str,
    entries: &[StringStringEntryProto],
    nbytes: usize,
    base_dir: Option<&Path>,
) -> Result<Vec<u8>, ImportError> {
    let err = |reason: String| ImportError::external(name, reason);
    let mut location = None;
    let mut offset = 0u64;
    let mut length = None;
    for e in entries {
        let value = e.value.as_deref().unwrap_or_default();
        match e.key.as_deref().unwrap_or_default() {
            "location" => location = Some(value),
            "offset" => offset = parse(value).ok_or_else(|| err(format!("bad offset {value:?}")))?,
            "length" => length = Some(parse(value).ok_or_else(|| err(format!("bad length {value:?}")))?),
            _ => {}
        }
    }
    let location = location.ok_or_else(|| err("no location".to_string()))?;
    check_location(location).map_err(|why| err(format!("location {location:?} {why}")))?;
    let base_dir = base_dir.ok_or_else(|| {
        err(format!(
            "location {location:?} needs the model's directory, but the model was loaded from bytes without one"
        ))
    })?;
    let want = nbytes as u64;
    if want > MAX_EXTERNAL_BYTES {
        return Err(err(format!(
            "{want} bytes, more than the {MAX_EXTERNAL_BYTES} one tensor may take (the default --max-memory)"
        )));
    }
    if let Some(length) = length.filter(|&l| l != want) {
        return Err(err(format!("length {length} but the dims need {want} bytes")));
    }
    let path = base_dir.join(location);
    let io = |e: std::io::Error| err(format!("{}: {e}", path.display()));
    let inside = |dir: &Path| std::fs::canonicalize(&path).map_err(io).map(|p| p.starts_with(dir));
    if !inside(&std::fs::canonicalize(base_dir).map_err(io)?)? {
        return Err(err(format!("location {location:?} leads out of the model's directory through a symlink")));
    }
    let mut file = pilot_core::fsio::open_regular(&path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    if offset.checked_add(want).is_none_or(|end| end > size) {
        return Err(err(format!("bytes {offset}..+{want} lie outside {location:?} ({size} bytes)")));
    }
    file.seek(SeekFrom::Start(offset)).map_err(io)?;
    let mut data = vec![0u8; nbytes];
    file.read_exact(&mut data).map_err(io)?;
    Ok(data)
}

/// Accepts only plain relative paths: no root, no drive prefix, no `..`.
fn check_location(location: &str) -> Result<(), &'static str> {
    if location.is_empty() {
        return Err("is empty");
    }
    for c in Path::new(location).components() {
        match c {
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir => return Err("leaves the model's directory (`..`)"),
            Component::RootDir | Component::Prefix(_) => return Err("is absolute"),
        }
    }
    Ok(())
}

fn parse(value: &str) -> Option<u64> {
    value.trim().parse().ok()
}
