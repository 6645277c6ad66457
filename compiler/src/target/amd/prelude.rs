//! The OpenCL C the AMD back end compiles: the OpenCL renderer's kernels after a prelude that gives them
//! every builtin they call without AMD's device libraries (`-nogpulib`). Work-item and work-group ids
//! come from the hardware registers (`__builtin_amdgcn_workitem_id_*`, `__builtin_amdgcn_workgroup_id_*`);
//! the work-group size is each kernel's `reqd_work_group_size`, repeated as `PL_LOCAL_*` for
//! `get_global_id` (pilot fills no dispatch packet or hidden arguments to read it from); math is the CPU
//! back end's freestanding functions ([`crate::target::cpu::cmath::FUNCTIONS`], same measured bounds)
//! or a clang builtin that is one instruction.

use crate::error::{CompileError, Result};
use crate::target::cl::render::ClKernel;
use crate::target::cpu::cmath;

/// Ahead of the math functions: the extensions and the typedefs they are written over.
const HEAD: &str = r#"#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
typedef char i8; typedef uchar u8; typedef short i16; typedef ushort u16;
typedef int i32; typedef uint u32; typedef long i64; typedef ulong u64;
#define PL_INF __builtin_inf()
"#;

/// After the math functions: the OpenCL builtins the renderer calls, as macros over them.
const BUILTINS: &str = r#"
static inline long pl_local_id(uint d) {
  return d == 0 ? (long)__builtin_amdgcn_workitem_id_x() : d == 1 ? (long)__builtin_amdgcn_workitem_id_y() : (long)__builtin_amdgcn_workitem_id_z();
}
static inline long pl_group_id(uint d) {
  return d == 0 ? (long)__builtin_amdgcn_workgroup_id_x() : d == 1 ? (long)__builtin_amdgcn_workgroup_id_y() : (long)__builtin_amdgcn_workgroup_id_z();
}
#define get_local_id(d) pl_local_id(d)
#define get_global_id(d) (pl_group_id(d) * ((d) == 0 ? PL_LOCAL_X : (d) == 1 ? PL_LOCAL_Y : PL_LOCAL_Z) + pl_local_id(d))
#define barrier(flags) (__builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"), __builtin_amdgcn_s_barrier(), __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup"))
#define pl_fmax(a, b) pl_fmaxf(a, b)
#define pl_fmin(a, b) pl_fminf(a, b)
#define vload_half(i, p) ((float)(p)[i])
#define vstore_half(x, i, p) ((p)[i] = (half)(x))
static inline float pl_bits_half(ushort b) { return (float)as_half(b); }
static inline ushort pl_half_bits(float x) { return as_ushort((half)x); }
static inline float pl_round_half(float x) { return (float)(half)x; }
static inline float pl_bits_bf16(ushort b) { return as_float((uint)b << 16); }
static inline ushort pl_bf16_bits(float x) { uint u = as_uint(x); return (ushort)(((u & 0x7fffffffu) > 0x7f800000u ? u | 0x00400000u : u + 0x7fffu + ((u >> 16) & 1u)) >> 16); }
static inline float pl_round_bf16(float x) { return pl_bits_bf16(pl_bf16_bits(x)); }
#define exp(x) pl_expf(x)
#define tanh(x) pl_tanhf(x)
#define log(x) ((float)pl_log(x))
#define sin(x) ((float)pl_sin(x))
#define cos(x) ((float)pl_cos(x))
#define tan(x) ((float)pl_tan(x))
#define erf(x) ((float)pl_erf(x))
#define atan(x) ((float)pl_atan(x))
#define asin(x) ((float)pl_asin(x))
#define acos(x) ((float)pl_acos(x))
#define fmod(x, y) ((float)pl_fmod(x, y))
#define pow(x, y) ((float)pl_pow(x, y))
#define atan2(y, x) ((float)pl_atan2(y, x))
#define sqrt(x) __builtin_sqrtf(x)
#define floor(x) __builtin_floorf(x)
#define ceil(x) __builtin_ceilf(x)
#define rint(x) __builtin_rintf(x)
#define trunc(x) __builtin_truncf(x)
#define fabs(x) __builtin_fabsf(x)
#define isnan(x) __builtin_isnan(x)
#define isinf(x) __builtin_isinf(x)
#define convert_long_sat_rtz(x) pl_f2i(x)
"#;

/// The prelude every translation unit starts with.
pub fn prelude() -> String {
    format!("{HEAD}{}{BUILTINS}", cmath::FUNCTIONS)
}

/// One rendered kernel pinned to work-group size `local`: `reqd_work_group_size` (which the code
/// object's metadata repeats, and the compiler checks) and `PL_LOCAL_*` for its `get_global_id`.
pub fn kernel_source(k: &ClKernel, local: [u32; 3]) -> Result<String> {
    let body = k.source.strip_prefix("__kernel void ").ok_or_else(|| {
        CompileError::Graph(format!("kernel `{}`: the rendered source does not start with `__kernel void`", k.name))
    })?;
    let [x, y, z] = local;
    Ok(format!(
        "#define PL_LOCAL_X {x}\n#define PL_LOCAL_Y {y}\n#define PL_LOCAL_Z {z}\n\
         __kernel __attribute__((reqd_work_group_size({x}, {y}, {z}))) void {body}\
         #undef PL_LOCAL_X\n#undef PL_LOCAL_Y\n#undef PL_LOCAL_Z\n"
    ))
}
