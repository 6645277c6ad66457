//! The artifact: an openpilot-style out-of-band pickle (ARCHITECTURE.md, "The artifact").
//!
//! Layers, bottom up: [`container`] (the `<q N> pickle (<q n> bytes)*` framing), [`integrity`] (xxh3 of
//! the pickle and of every record, in the last record), [`pickle`] (the strict plain-data subset),
//! [`schema`] (the typed payload, version 2, decoded with bounds checks) and [`verify`] (meaning).
//! [`Artifact::open`] memory-maps a file and runs them all; there is no way to get an [`Artifact`]
//! that skipped the integrity check or verification. Blob bytes are slices of the map, never copied.

pub mod amdgpu;
pub mod container;
pub mod integrity;
pub mod ir3;
pub mod pickle;
pub mod schema;
pub mod signature;
pub mod verify;
pub mod write;

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use crate::device::HostBytes;
pub use amdgpu::AmdDispatch;
pub use ir3::{Ir3Arg, Ir3Program};
pub use schema::{
    BufferSpec, Manifest, Metadata, ParamKind, ParamSpec, PinnedInput, Placement, ProgramEntry, SchemaError, Target,
    TensorSpec,
};
pub use write::{checksum, ArtifactWriter};

/// Why an artifact could not be read or written. Display is one line.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("container: {0}")]
    Container(#[from] container::ContainerError),
    // Not a `source`: the message already holds the inner one, which a chain would print twice.
    #[error("integrity: {0}")]
    Integrity(integrity::IntegrityError),
    #[error("{0}")]
    Pickle(#[from] pickle::PickleError),
    #[error("payload: {0}")]
    Schema(#[from] SchemaError),
    #[error("buffers[{buffer}]: checksum mismatch (expected {expected:016x}, contents hash to {found:016x})")]
    Checksum { buffer: usize, expected: u64, found: u64 },
    #[error("encoding the payload: {0}")]
    Encode(String),
    #[error("signature: {0}")]
    Signature(signature::SignatureError),
}

impl From<integrity::IntegrityError> for ArtifactError {
    fn from(e: integrity::IntegrityError) -> Self {
        ArtifactError::Integrity(e)
    }
}

impl From<signature::SignatureError> for ArtifactError {
    fn from(e: signature::SignatureError) -> Self {
        ArtifactError::Signature(e)
    }
}

/// A loaded, verified artifact whose blobs are slices of its backing bytes (normally a memory map).
pub struct Artifact {
    bytes: Arc<dyn AsRef<[u8]> + Send + Sync>,
    records: Vec<Range<usize>>,
    pub manifest: Manifest,
}

impl std::fmt::Debug for Artifact {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Artifact").field("records", &self.records.len()).finish_non_exhaustive()
    }
}

struct Mapped(memmap2::Mmap);

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Artifact {
    /// Memory-maps `path` (a regular file: see [`crate::fsio::open_regular`]) read-only and parses and verifies it (structure, then meaning).
    pub fn open(path: &Path) -> Result<Artifact, ArtifactError> {
        let io = |source| ArtifactError::Io { path: path.display().to_string(), source };
        let file = crate::fsio::open_regular(path).map_err(io)?;
        // Every byte is hashed right away: populating the map up front costs less than faulting it
        // in page by page.
        // SAFETY: the map is read-only and private to this process. Artifacts are written atomically
        // (temp file + rename), so the file behind a path is never modified in place by pilot; a file
        // truncated by someone else while mapped would fault on access, which is the documented
        // limitation of every mmap-based loader.
        let map = unsafe { memmap2::MmapOptions::new().populate().map(&file) }.map_err(io)?;
        Artifact::from_bytes(Arc::new(Mapped(map)))
    }

    /// Checks the integrity record of the artifact bytes held by `bytes` (every byte is hashed),
    /// then parses and verifies them.
    pub fn from_bytes(bytes: Arc<dyn AsRef<[u8]> + Send + Sync>) -> Result<Artifact, ArtifactError> {
        let data = (*bytes).as_ref();
        let c = container::parse(data)?;
        // Without an integrity record the payload is still decoded first, so that an older or foreign
        // file is named as such (version, format) rather than as damaged.
        let checked = integrity::present(data, &c.records);
        if checked {
            integrity::check(data, c.pickle.clone(), &c.records)?;
        }
        let p = pickle::read(&data[c.pickle.clone()])?;
        let manifest = Manifest::decode(&p.value, p.buffer_count as usize)?;
        let sizes: Vec<u64> = c.records.iter().map(|r| r.len() as u64).collect();
        verify::verify(&manifest, &sizes)?;
        if !checked {
            integrity::check(data, c.pickle.clone(), &c.records)?;
        }
        Ok(Artifact { records: c.records, manifest, bytes })
    }

    /// The bytes of out-of-band record `index` (a slice of the map).
    pub fn blob(&self, index: usize) -> &[u8] {
        &(*self.bytes).as_ref()[self.records[index].clone()]
    }

    /// Record `index` as shareable host bytes, for zero-copy upload.
    pub fn blob_host_bytes(&self, index: usize) -> HostBytes {
        HostBytes::new(self.bytes.clone(), self.records[index].clone())
            .expect("record ranges were checked against the file when parsing")
    }

    /// Checks that the artifact is signed by the holder of `key` (reads every byte; SHA-512 speed).
    pub fn verify_signature(&self, key: &ed25519_dalek::VerifyingKey) -> Result<(), ArtifactError> {
        Ok(signature::verify((*self.bytes).as_ref(), key)?)
    }

    /// Total size of the artifact in bytes.
    pub fn file_size(&self) -> usize {
        (*self.bytes).as_ref().len()
    }

    /// The deep check (`pilot load --verify`): every buffer's own checksum, which the compiler took
    /// from the data it meant to write, independently of the integrity record that the writer took
    /// from the bytes it streamed. Reads all the weights again. Returns how many buffers were checked.
    pub fn verify_checksums(&self) -> Result<usize, ArtifactError> {
        let summed: Vec<(usize, u64, Range<usize>)> = (self.manifest.buffers.iter().enumerate())
            .filter_map(|(i, b)| Some((i, b.checksum?, self.records[b.blob?].clone())))
            .collect();
        let ranges: Vec<Range<usize>> = summed.iter().map(|(_, _, r)| r.clone()).collect();
        let hashes = integrity::hash_all((*self.bytes).as_ref(), &ranges);
        for ((buffer, expected, _), found) in summed.iter().zip(hashes) {
            if found != *expected {
                return Err(ArtifactError::Checksum { buffer: *buffer, expected: *expected, found });
            }
        }
        Ok(summed.len())
    }
}

#[cfg(test)]
mod tests;
