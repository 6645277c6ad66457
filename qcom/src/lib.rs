//! pilot-qcom: the Adreno 630 backend over KGSL (`/dev/kgsl-3d0`) and the fake KGSL.
//!
//! Not built yet: this crate is a member of the workspace so the dependency rule (never on the
//! compiler, never on protobuf) is enforced from the start. The QCOM issue fills it in.
