//! The CPU the generated C is compiled for: the C compiler's `-march`/`-mcpu` flag and the vector
//! unit the register tiles are sized for.
//!
//! Host builds default to `-march=native` (the artifact is for the machine that compiled it);
//! `--cpu NAME` picks a baseline instead (`x86-64-v3`, `znver4`, `cortex-a75`, ...), and an aarch64
//! cross build defaults to the comma device's Kryo 385 (`cortex-a75`).

use crate::error::{CompileError, Result};

/// The vector unit: f32 lanes per vector register and the number of vector registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VecUnit {
    pub lanes: usize,
    pub regs: usize,
}

impl VecUnit {
    /// Accumulator vectors a register tile may keep live: half the registers, the rest hold loaded
    /// operands and broadcast weights.
    pub fn acc_budget(self) -> usize {
        self.regs / 2
    }
}

/// x86 CPUs (as clang names them) with AVX-512F.
const AVX512: &[&str] = &[
    "x86-64-v4",
    "skylake-avx512",
    "cascadelake",
    "cooperlake",
    "cannonlake",
    "icelake-client",
    "icelake-server",
    "tigerlake",
    "rocketlake",
    "sapphirerapids",
    "emeraldrapids",
    "graniterapids",
    "znver4",
    "znver5",
];

/// x86 CPUs without AVX (SSE only: 4 lanes).
const SSE_ONLY: &[&str] = &["x86-64", "x86-64-v2", "core2", "nehalem", "westmere", "silvermont", "goldmont", "btver1"];

/// A CPU for `arch`: `cpu` names a baseline; `None` is the host (native) or, cross, the default core.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuTarget {
    pub arch: String,
    pub cpu: Option<String>,
}

impl CpuTarget {
    /// Checks the name: letters, digits, `-`, `_`, `.` only (it becomes a compiler flag).
    pub fn new(arch: &str, cpu: Option<&str>) -> Result<CpuTarget> {
        if let Some(c) = cpu {
            if c.is_empty() || !c.chars().all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch)) {
                return Err(CompileError::Tool(format!(
                    "--cpu {c:?}: expected a CPU name such as x86-64-v3 or cortex-a75"
                )));
            }
        }
        Ok(CpuTarget { arch: arch.to_string(), cpu: cpu.map(str::to_string) })
    }

    pub fn native(&self) -> bool {
        self.cpu.is_none() && self.arch == std::env::consts::ARCH
    }

    /// The C compiler flags that select the CPU.
    pub fn flags(&self) -> Vec<String> {
        let aarch64 = self.arch == "aarch64";
        let mut f = Vec::new();
        match (&self.cpu, self.native()) {
            (None, true) => f.push(if aarch64 { "-mcpu=native".into() } else { "-march=native".into() }),
            (None, false) => {
                if aarch64 {
                    f.push("-mcpu=cortex-a75".into());
                }
            }
            (Some(c), _) => f.push(if aarch64 { format!("-mcpu={c}") } else { format!("-march={c}") }),
        }
        // Register tiles are written as 512-bit vectors where the CPU has them; clang's default
        // tuning for some AVX-512 cores splits them into 256-bit halves, doubling register pressure.
        if !aarch64 && self.vec_unit().lanes == 16 {
            f.push("-mprefer-vector-width=512".into());
        }
        f
    }

    /// The vector unit the kernels are tiled for.
    pub fn vec_unit(&self) -> VecUnit {
        if self.arch == "aarch64" {
            return VecUnit { lanes: 4, regs: 32 };
        }
        if self.arch != "x86_64" {
            return VecUnit { lanes: 4, regs: 16 };
        }
        match &self.cpu {
            Some(c) if AVX512.contains(&c.as_str()) => VecUnit { lanes: 16, regs: 32 },
            Some(c) if SSE_ONLY.contains(&c.as_str()) => VecUnit { lanes: 4, regs: 16 },
            Some(_) => VecUnit { lanes: 8, regs: 16 },
            None if self.native() => host_x86(),
            None => VecUnit { lanes: 4, regs: 16 },
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn host_x86() -> VecUnit {
    if std::arch::is_x86_feature_detected!("avx512f") {
        VecUnit { lanes: 16, regs: 32 }
    } else if std::arch::is_x86_feature_detected!("avx2") {
        VecUnit { lanes: 8, regs: 16 }
    } else {
        VecUnit { lanes: 4, regs: 16 }
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn host_x86() -> VecUnit {
    VecUnit { lanes: 4, regs: 16 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_cpus_pick_flags_and_vector_units() {
        let v3 = CpuTarget::new("x86_64", Some("x86-64-v3")).unwrap();
        assert_eq!(v3.flags(), vec!["-march=x86-64-v3"]);
        assert_eq!(v3.vec_unit(), VecUnit { lanes: 8, regs: 16 });
        let z4 = CpuTarget::new("x86_64", Some("znver4")).unwrap();
        assert_eq!(z4.flags(), vec!["-march=znver4", "-mprefer-vector-width=512"]);
        let a75 = CpuTarget::new("aarch64", Some("cortex-a75")).unwrap();
        assert_eq!(a75.flags(), vec!["-mcpu=cortex-a75"]);
        assert_eq!(a75.vec_unit(), VecUnit { lanes: 4, regs: 32 });
    }

    #[test]
    fn cross_aarch64_defaults_to_the_comma_device_core() {
        if std::env::consts::ARCH != "aarch64" {
            assert_eq!(CpuTarget::new("aarch64", None).unwrap().flags(), vec!["-mcpu=cortex-a75"]);
        }
    }

    #[test]
    fn names_that_are_not_cpu_names_are_refused() {
        for bad in ["", "x86-64 -O0", "a;b", "$(x)"] {
            assert!(CpuTarget::new("x86_64", Some(bad)).is_err(), "{bad}");
        }
    }
}
