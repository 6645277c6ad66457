//! Errors of the embedded API: one-line messages (the text `pilot run` prints after `pilot: error: `
//! for the same failure) and the status codes the C ABI and the Python module report them with.

use pilot_core::SessionError;

/// A status code: what kind of failure, for callers that branch on it. `Ok` is success.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PilotStatus {
    Ok = 0,
    /// A null pointer, an index or name that does not exist, a size that does not match.
    InvalidArgument = 1,
    /// The artifact or the device could not be opened, or the session could not be built.
    Load = 2,
    /// A step (copy in, submit, wait, copy out) or a device call failed.
    Step = 3,
    /// A gate (`ASSERT_MIN_STEP_TIME`) failed.
    Gate = 4,
    /// The artifact's metadata could not be decoded (`output_slices`).
    Metadata = 5,
    /// A call was made in the wrong order (wait without enqueue, enqueue twice).
    Order = 6,
    /// A panic inside pilot was caught at the boundary; the model should only be closed.
    Panic = 7,
}

/// Why an embedded call failed. Display is one line.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Opening the artifact or device or building the session, with the command's text.
    #[error("{0}")]
    Load(String),
    #[error("the artifact has no input `{name}` (inputs: {available})")]
    NoInput { name: String, available: String },
    #[error("the artifact has no output `{name}` (outputs: {available})")]
    NoOutput { name: String, available: String },
    #[error("{kind} index {index} out of range (the artifact has {count})")]
    Index { kind: &'static str, index: usize, count: usize },
    #[error("input `{name}` needs {expected} bytes, got {found}")]
    Size { name: String, expected: usize, found: usize },
    #[error("{0} is null")]
    Null(&'static str),
    #[error("model: not an open model (closed already?)")]
    Closed,
    #[error("{what} is not valid UTF-8")]
    Utf8 { what: &'static str },
    #[error("{0}")]
    Step(#[from] SessionError),
    #[error("{0}")]
    Order(&'static str),
    #[error("ASSERT_MIN_STEP_TIME: fastest step took {best:.3} ms, the limit is {limit} ms")]
    StepGate { best: f64, limit: f64 },
    #[error("ASSERT_MIN_STEP_TIME: no step has finished yet")]
    NoSteps,
    #[error("ASSERT_MIN_STEP_TIME: the limit must be a positive number of milliseconds, got {0}")]
    GateLimit(f64),
    #[error("metadata output_slices: {0}")]
    Slices(String),
    #[error("profile: this device does not profile (open it with profiling on)")]
    NoProfile,
    #[error("panic inside pilot: {0}")]
    Panic(String),
}

impl Error {
    /// The same one-line text `pilot run` prints (after `pilot: error: `) for an error it reports.
    pub fn from_cli(e: &anyhow::Error) -> Error {
        Error::Load(pilot_runtime::one_line(e))
    }

    pub fn status(&self) -> PilotStatus {
        match self {
            Error::Load(_) => PilotStatus::Load,
            Error::NoInput { .. }
            | Error::NoOutput { .. }
            | Error::Index { .. }
            | Error::Size { .. }
            | Error::Null(_)
            | Error::Closed
            | Error::Utf8 { .. }
            | Error::NoProfile
            | Error::GateLimit(_) => PilotStatus::InvalidArgument,
            Error::Step(_) => PilotStatus::Step,
            Error::Order(_) => PilotStatus::Order,
            Error::StepGate { .. } | Error::NoSteps => PilotStatus::Gate,
            Error::Slices(_) => PilotStatus::Metadata,
            Error::Panic(_) => PilotStatus::Panic,
        }
    }
}
