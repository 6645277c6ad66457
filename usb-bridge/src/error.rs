//! The crate's errors: one line each, naming the device and the operation.

use crate::proto::{CplStatus, FwStatus};
use std::path::PathBuf;
use std::time::Duration;

/// How one USB transfer failed, as the transport reports it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TransferError {
    #[error("timed out after {} ms", .0.as_millis())]
    Timeout(Duration),
    #[error("endpoint stalled")]
    Stall,
    #[error("device unplugged")]
    NoDevice,
    #[error("device sent more data than asked for")]
    Overflow,
    #[error("{0}")]
    Other(String),
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no USB GPU bridge found (looked for {ids})")]
    NotFound { ids: String },
    #[error("{device}: busy: another process holds {}", .lock.display())]
    Busy { device: String, lock: PathBuf },
    #[error("{device}: lock {}: {source}", .path.display())]
    Lock { device: String, path: PathBuf, source: std::io::Error },
    #[error("{device}: not the custom bridge firmware (product string {product:?})")]
    WrongFirmware { device: String, product: String },
    #[error("{device}: {op}: {kind}")]
    Transfer { device: String, op: String, kind: TransferError },
    #[error("{device}: {op}: short transfer: {got} of {expected} bytes")]
    Short { device: String, op: String, expected: usize, got: usize },
    #[error("{device}: PCIe link not up: LTSSM 0x{ltssm:02x} after power-on (L0 is 0x78)")]
    LinkDown { device: String, ltssm: u8 },
    #[error("{device}: {op}: {status}")]
    Completion { device: String, op: String, status: CplStatus },
    #[error("{device}: {op}: firmware reported {status} on each of {tries} tries")]
    Firmware { device: String, op: String, status: FwStatus, tries: u32 },
    #[error("{device}: {op}: {msg}")]
    Invalid { device: String, op: String, msg: String },
    #[error("{device}: PCIe bring-up: {msg}")]
    Pcie { device: String, msg: String },
    #[error("{device}: copy-in: the GPU did not drain chunk {seq} within {} ms (fence {fence})", .waited.as_millis())]
    HungCopy { device: String, seq: u64, fence: u64, waited: Duration },
}

impl Error {
    /// The transfer failure behind this error, if it is one.
    pub fn transfer_kind(&self) -> Option<&TransferError> {
        match self {
            Error::Transfer { kind, .. } => Some(kind),
            _ => None,
        }
    }
}

impl Error {
    /// The error with `op` naming its operation (a transfer or short-transfer error only).
    pub fn with_op(mut self, name: String) -> Error {
        if let Error::Transfer { op, .. } | Error::Short { op, .. } = &mut self {
            *op = name;
        }
        self
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
