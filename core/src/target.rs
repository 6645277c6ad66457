//! What an artifact is compiled for: a [`Backend`], an [`Arch`] and the OpenCL modes, with every rule
//! about them in one place — which backends exist, which architectures each accepts, each one's
//! default architecture and which flags it takes.
//!
//! Adding a target means adding a [`Backend`] variant (and its [`Arch`] variants) here; the compiler,
//! the artifact schema, `pilot compile` and `pilot run` all read these tables.

use std::fmt;

/// A backend: the kind of code an artifact carries and the device family that runs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// Relocatable ELF objects run by the CPU device.
    Cpu,
    /// Compile everything, run nothing (the NULL device).
    Null,
    /// OpenCL C for any OpenCL device, written for the limits of an Adreno.
    Cl,
    /// Adreno programs, run over KGSL.
    Qcom,
    /// AMD code objects, run over a USB bridge.
    UsbAmd,
}

/// An architecture a backend compiles for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    X86_64,
    Aarch64,
    /// The Adreno 630 (the comma 3/3X GPU).
    A630,
    /// RDNA3 (Radeon RX 7900).
    Gfx1100,
    /// RDNA4 (Radeon RX 9070).
    Gfx1201,
}

impl Backend {
    /// Every backend, in the order error messages list them.
    pub const ALL: [Backend; 5] = [Backend::Cpu, Backend::Null, Backend::Cl, Backend::Qcom, Backend::UsbAmd];

    /// The name in artifacts and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Null => "null",
            Backend::Cl => "cl",
            Backend::Qcom => "qcom",
            Backend::UsbAmd => "usb+amd",
        }
    }

    /// The backend named exactly `name` (as artifacts spell it).
    pub fn from_name(name: &str) -> Option<Backend> {
        Backend::ALL.into_iter().find(|b| b.name() == name)
    }

    /// The backend named `name` or one of its aliases (`amd` for `usb+amd`), as the command line takes it.
    pub fn parse(name: &str) -> Result<Backend, TargetError> {
        match name {
            "amd" => Ok(Backend::UsbAmd),
            _ => Backend::from_name(name).ok_or_else(|| TargetError::UnknownBackend(name.to_string())),
        }
    }

    /// The architectures this backend compiles for.
    pub fn archs(self) -> &'static [Arch] {
        match self {
            Backend::Cpu | Backend::Null => &[Arch::X86_64, Arch::Aarch64],
            Backend::Cl | Backend::Qcom => &[Arch::A630],
            Backend::UsbAmd => &[Arch::Gfx1100, Arch::Gfx1201],
        }
    }

    /// The architecture used when none is given: the host's for `cpu` and `null`, the a630 for the
    /// OpenCL backends. `None` where there is no sensible default (an unknown host, `usb+amd`).
    pub fn default_arch(self) -> Option<Arch> {
        match self {
            Backend::Cpu | Backend::Null => Arch::host(),
            Backend::Cl | Backend::Qcom => Some(Arch::A630),
            Backend::UsbAmd => None,
        }
    }

    /// Whether `--image`, `--float16` and `--nolocals` apply (the OpenCL backends).
    pub fn takes_cl_modes(self) -> bool {
        matches!(self, Backend::Cl | Backend::Qcom)
    }

    /// How error messages name this backend's architectures.
    fn family(self) -> &'static str {
        match self {
            Backend::Cpu | Backend::Null => "CPU",
            Backend::Cl | Backend::Qcom => "OpenCL",
            Backend::UsbAmd => "AMD",
        }
    }
}

impl Arch {
    /// Every architecture, in the order error messages list them.
    pub const ALL: [Arch; 5] = [Arch::X86_64, Arch::Aarch64, Arch::A630, Arch::Gfx1100, Arch::Gfx1201];

    /// The name in artifacts and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
            Arch::A630 => "a630",
            Arch::Gfx1100 => "gfx1100",
            Arch::Gfx1201 => "gfx1201",
        }
    }

    /// The architecture named exactly `name`.
    pub fn from_name(name: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The CPU this program runs on, if pilot compiles for it.
    pub fn host() -> Option<Arch> {
        Arch::from_name(std::env::consts::ARCH).filter(|a| Backend::Cpu.archs().contains(a))
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl PartialEq<&str> for Backend {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}

impl PartialEq<&str> for Arch {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}

/// Why a target was refused. Display is one line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("unknown target `{0}` ({list})", list = names(Backend::ALL.iter().map(|b| b.name())))]
    UnknownBackend(String),
    #[error("unknown {family} architecture `{arch}` ({list})", family = backend.family(), list = names(backend.archs().iter().map(|a| a.name())))]
    UnknownArch { backend: Backend, arch: String },
    #[error("--target {0} needs --arch ({list})", list = names(.0.archs().iter().map(|a| a.name())))]
    NoDefaultArch(Backend),
    #[error("--image, --float16 and --nolocals apply to the OpenCL target")]
    ClModes,
    #[error("--float16 stores images as half: it needs --image")]
    Float16WithoutImage,
}

fn names<'a>(it: impl Iterator<Item = &'a str>) -> String {
    it.collect::<Vec<_>>().join(", ")
}

/// The OpenCL modes of a target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Modes {
    /// Convolutions and matmuls read activations and weights as 2-D RGBA images.
    pub image: bool,
    /// Images store half; all math stays float32.
    pub float16: bool,
    /// No local memory or work-group structure; local sizes tuned when compiling.
    pub nolocals: bool,
}

/// What an artifact was compiled for. Build one with [`Target::new`], which applies the rules; an
/// artifact's target is checked with [`Target::check`] when it is verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub backend: Backend,
    pub arch: Arch,
    pub image: bool,
    pub float16: bool,
    pub nolocals: bool,
}

impl Target {
    /// `backend` (aliases allowed) on `arch`, or its default architecture, with `modes`, checked.
    pub fn parse(backend: &str, arch: Option<&str>, modes: Modes) -> Result<Target, TargetError> {
        let backend = Backend::parse(backend)?;
        let arch = match arch {
            Some(name) => Arch::from_name(name)
                .filter(|a| backend.archs().contains(a))
                .ok_or_else(|| TargetError::UnknownArch { backend, arch: name.to_string() })?,
            None => backend.default_arch().ok_or(match backend {
                Backend::Cpu | Backend::Null => {
                    TargetError::UnknownArch { backend, arch: std::env::consts::ARCH.to_string() }
                }
                _ => TargetError::NoDefaultArch(backend),
            })?,
        };
        Target::new(backend, arch, modes)
    }

    /// `backend` on `arch` with `modes`, checked.
    pub fn new(backend: Backend, arch: Arch, modes: Modes) -> Result<Target, TargetError> {
        let t = Target { backend, arch, image: modes.image, float16: modes.float16, nolocals: modes.nolocals };
        t.check()?;
        Ok(t)
    }

    /// `backend` on its default architecture, no modes.
    pub fn default_for(backend: Backend) -> Result<Target, TargetError> {
        Target::parse(backend.name(), None, Modes::default())
    }

    /// Applies the rules: the backend takes the architecture and the modes.
    pub fn check(&self) -> Result<(), TargetError> {
        if !self.backend.archs().contains(&self.arch) {
            return Err(TargetError::UnknownArch { backend: self.backend, arch: self.arch.name().to_string() });
        }
        let m = self.modes();
        if !self.backend.takes_cl_modes() && m != Modes::default() {
            return Err(TargetError::ClModes);
        }
        if m.float16 && !m.image {
            return Err(TargetError::Float16WithoutImage);
        }
        Ok(())
    }

    pub fn modes(&self) -> Modes {
        Modes { image: self.image, float16: self.float16, nolocals: self.nolocals }
    }
}

/// `backend:arch`, as `pilot inspect` and error messages print a target.
impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.backend, self.arch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for b in Backend::ALL {
            assert_eq!(Backend::from_name(b.name()), Some(b));
            assert_eq!(Backend::parse(&b.to_string()), Ok(b));
        }
        for a in Arch::ALL {
            assert_eq!(Arch::from_name(a.name()), Some(a));
        }
        assert_eq!(Backend::parse("amd"), Ok(Backend::UsbAmd));
        // Aliases are for the command line only: artifacts spell the backend exactly.
        assert_eq!(Backend::from_name("amd"), None);
    }

    #[test]
    fn every_arch_belongs_to_a_backend() {
        for a in Arch::ALL {
            assert!(Backend::ALL.iter().any(|b| b.archs().contains(&a)), "{a}");
        }
    }

    #[test]
    fn defaults_per_backend() {
        let host = Arch::from_name(std::env::consts::ARCH);
        assert_eq!(Target::default_for(Backend::Cpu).ok().map(|t| t.arch), host);
        assert_eq!(Target::default_for(Backend::Cl).unwrap().arch, Arch::A630);
        assert_eq!(Target::default_for(Backend::Qcom).unwrap().arch, Arch::A630);
        assert_eq!(Target::default_for(Backend::UsbAmd), Err(TargetError::NoDefaultArch(Backend::UsbAmd)));
        let amd = Target::parse("amd", Some("gfx1201"), Modes::default()).unwrap();
        assert_eq!(amd.to_string(), "usb+amd:gfx1201");
    }

    #[test]
    fn rules_refuse_what_a_backend_does_not_take() {
        let err = |b: &str, a: Option<&str>, m: Modes| Target::parse(b, a, m).unwrap_err().to_string();
        let none = Modes::default();
        assert_eq!(err("tpu", None, none), "unknown target `tpu` (cpu, null, cl, qcom, usb+amd)");
        assert_eq!(err("cpu", Some("riscv"), none), "unknown CPU architecture `riscv` (x86_64, aarch64)");
        assert_eq!(err("cl", Some("x86_64"), none), "unknown OpenCL architecture `x86_64` (a630)");
        assert_eq!(err("amd", Some("a630"), none), "unknown AMD architecture `a630` (gfx1100, gfx1201)");
        let image = Modes { image: true, ..none };
        assert_eq!(err("cpu", Some("x86_64"), image), "--image, --float16 and --nolocals apply to the OpenCL target");
        let half = Modes { float16: true, ..none };
        assert_eq!(err("cl", None, half), "--float16 stores images as half: it needs --image");
        assert!(Target::parse("qcom", None, Modes { image: true, float16: true, nolocals: true }).is_ok());
    }
}
