//! Shared by the rdna3_* tests (and amd/tests/amd_run_device.rs): the OpenCL C test kernels, building them with clang-19 for gfx1100,
//! and a small device (a `VecMemory` with a bump allocator) to run them on.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use pilot_rdna3::{dispatch, dispatch_parallel, CodeObjectKernel, Dispatch, Isa, SharedVecMemory, Stats, VecMemory};

/// The OpenCL C sources the tests build, by file stem.
/// The code objects the tests build: stem, OpenCL C source, extra clang flags.
pub const SOURCES: &[(&str, &str, &[&str])] = &[
    ("elementwise", ELEMENTWISE, &[]),
    ("control", CONTROL, &[]),
    ("lds", LDS, &[]),
    ("math", MATH, &[]),
    ("exact", EXACT, &["-cl-fp32-correctly-rounded-divide-sqrt"]),
    ("ftz", FTZ, &["-cl-denorms-are-zero"]),
    ("dpp", DPP, &[]),
    ("half", HALF, &[]),
];

/// f16 arithmetic as clang lowers it: mixed-precision fma, packed half2 math, f16 accumulation.
pub const HALF: &str = r#"
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
kernel void half_mix(global const half *a, global const half *b, global const float *c, global half *o, global float *p) {
  uint i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  half x = a[i], y = b[i];
  float z = c[i];
  p[i] = (float)x * (float)y + z;
  o[2*i] = (half)((float)x * z + (float)y);
  o[2*i+1] = x > y ? x - y : (half)__builtin_fmaxf((float)x, 0.5f);
}
kernel void half2_ops(global const half2 *a, global const half2 *b, global half2 *o) {
  uint i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  half2 x = a[i], y = b[i];
  o[i] = x * y + (half2)(1.0h, -2.0h);
}
kernel void half_reduce(global const half *a, global half *o, uint n) {
  uint i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  half s = 0.0h;
  for (uint k = 0; k < n; k++) s += a[i * n + k] * a[i * n + k];
  o[i] = s;
}
"#;

/// Cross-lane reads through DPP16 and DPP8 controls.
pub const DPP: &str = r#"
kernel void dpp(global const int *a, global int *o, global float *f) {
  uint t = __builtin_amdgcn_workitem_id_x();
  int v = a[t];
  o[8*t+0] = __builtin_amdgcn_update_dpp(-1, v, 0x111, 0xf, 0xf, false);
  o[8*t+1] = __builtin_amdgcn_update_dpp(0, v, 0x112, 0xf, 0xf, true);
  o[8*t+2] = __builtin_amdgcn_update_dpp(0, v, 0xB1, 0xf, 0xf, false);
  o[8*t+3] = __builtin_amdgcn_update_dpp(0, v, 0x140, 0xf, 0xf, false);
  o[8*t+4] = __builtin_amdgcn_update_dpp(0, v, 0x141, 0xf, 0xf, false);
  o[8*t+5] = __builtin_amdgcn_update_dpp(7, v, 0x123, 0xf, 0x5, false);
  o[8*t+6] = __builtin_amdgcn_update_dpp(0, v, 0x165, 0xf, 0xf, false);
  o[8*t+7] = __builtin_amdgcn_mov_dpp8(v, 0x6AC053);
  float x = (float)v;
  f[t] = x + __builtin_bit_cast(float, __builtin_amdgcn_update_dpp(0, __builtin_bit_cast(int, x), 0x101, 0xf, 0xf, true));
}
"#;

/// Correctly rounded division and square root (v_div_scale/v_div_fmas/v_div_fixup).
pub const EXACT: &str = r#"
kernel void div_sqrt(global const float *a, global const float *b, global float *c) {
  uint i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  c[2*i] = a[i] / b[i];
  c[2*i+1] = __builtin_sqrtf(b[i]);
}
"#;

/// The same multiply with f32 denormals kept (default) or flushed (`-cl-denorms-are-zero`).
pub const MUL_TINY: &str = r#"
kernel void mul_tiny(global const float *a, global float *c) {
  uint i = __builtin_amdgcn_workitem_id_x();
  c[i] = a[i] * a[i];
}
"#;
pub const FTZ: &str = MUL_TINY;

pub const MATH: &str = r#"
kernel void libm(global const float *a, global float *c) {
  uint i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  float x = a[i];
  c[5*i] = __builtin_expf(x);
  c[5*i+1] = __builtin_logf(x + 3.0f);
  c[5*i+2] = __builtin_sqrtf(x + 3.0f);
  c[5*i+3] = x / (x + 3.5f);
  c[5*i+4] = __builtin_exp2f(x) + __builtin_log2f(x + 3.0f);
}
kernel void uniform_narrow(global const uchar *restrict b, global const short *restrict s, global int *o, uint k) {
  uint i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  o[i] = (int)b[k] + (int)(char)b[k + 1] * 7 + (int)s[k] * 3 + (int)(ushort)s[k + 2] * 5 + (int)i;
}
kernel void vec4(global const float4 *a, global float4 *c, global const uchar *b, global short *s) {
  uint i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  float4 v = a[i];
  c[i] = v * (float)b[i] + (float4)(1.0f, 2.0f, 3.0f, 4.0f);
  s[i] = (short)(b[i] * 3 - 200);
}
kernel void atomics(global int *g, global const int *a) {
  local volatile int l;
  uint t = __builtin_amdgcn_workitem_id_x();
  if (t == 0) l = 0;
  __builtin_amdgcn_s_barrier();
  __atomic_fetch_add(&l, a[t], __ATOMIC_RELAXED);
  __atomic_fetch_max(&g[1], a[t], __ATOMIC_RELAXED);
  __builtin_amdgcn_s_barrier();
  if (t == 0) __atomic_fetch_add(&g[0], l, __ATOMIC_RELAXED);
}
kernel void matmul(global const float *A, global const float *B, global float *C, uint n) {
  uint col = __builtin_amdgcn_workgroup_id_x() * 16 + __builtin_amdgcn_workitem_id_x();
  uint row = __builtin_amdgcn_workgroup_id_y() * 16 + __builtin_amdgcn_workitem_id_y();
  float acc = 0.0f;
  for (uint k = 0; k < n; k++) acc = __builtin_fmaf(A[row * n + k], B[k * n + col], acc);
  C[row * n + col] = acc > 0.0f ? acc : 0.1f * acc;
}
"#;

pub const ELEMENTWISE: &str = r#"
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#define GID (__builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x())
kernel void add_mul_f32(global const float *a, global const float *b, global float *c, uint n) {
  uint i = GID;
  if (i < n) c[i] = a[i] * b[i] + 1.5f;
}
kernel void fma_f32(global const float *a, global const float *b, global float *c) {
  uint i = GID;
  c[i] = __builtin_fmaf(a[i], b[i], c[i]);
}
kernel void transcendental(global const float *a, global float *c) {
  uint i = GID;
  float x = a[i];
  c[6*i] = __builtin_amdgcn_exp2f(x);
  c[6*i+1] = __builtin_amdgcn_logf(x + 2.0f);
  c[6*i+2] = __builtin_amdgcn_rcpf(x + 3.0f);
  c[6*i+3] = __builtin_amdgcn_sqrtf(x + 4.0f);
  c[6*i+4] = __builtin_amdgcn_rsqf(x + 5.0f);
  c[6*i+5] = __builtin_amdgcn_sinf(x) + __builtin_amdgcn_cosf(x);
}
kernel void int_div(global const int *a, global const int *b, global int *c, global uint *d) {
  uint i = GID;
  c[2*i] = a[i] / b[i];
  c[2*i+1] = a[i] % b[i];
  d[i] = (uint)a[i] / (uint)b[i];
}
kernel void half_mad(global const half *a, global const half *b, global half *c) {
  uint i = GID;
  c[i] = a[i] * b[i] + a[i];
}
kernel void int_ops(global const int *a, global int *o, global ulong *q) {
  uint i = GID;
  int v = a[i];
  o[i] = (v > 7 ? v : 7) ^ (v << 3) | (v < -3 ? v : -3) & (v >> 2);
  q[i] = (ulong)v * 0x12345678ul + (ulong)i;
}
kernel void convert(global const float *a, global int *o, global float *f) {
  uint i = GID;
  float x = a[i];
  o[2*i] = (int)x;
  o[2*i+1] = (int)__builtin_floorf(x);
  f[2*i] = __builtin_fabsf(x) - __builtin_truncf(x * 0.25f) + __builtin_fminf(x, 2.0f);
  f[2*i+1] = __builtin_fmaxf(x, -1.0f) * (float)(int)i;
}
"#;

pub const CONTROL: &str = r#"
kernel void diverge(global const int *a, global int *o) {
  uint i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  int v = a[i];
  int r;
  if (v & 1) { r = v * 3 + 1; } else if (v > 10) { r = v >> 1; } else { r = -v; }
  while (r > 100) r -= 37;
  o[i] = r;
}
kernel void grid3(global uint *o) {
  uint x = __builtin_amdgcn_workgroup_id_x() * 4 + __builtin_amdgcn_workitem_id_x();
  uint y = __builtin_amdgcn_workgroup_id_y() * 2 + __builtin_amdgcn_workitem_id_y();
  uint z = __builtin_amdgcn_workgroup_id_z() * 2 + __builtin_amdgcn_workitem_id_z();
  o[(z * 8 + y) * 16 + x] = x + 100 * y + 10000 * z;
}
kernel void grid2(global float *o, uint w) {
  uint x = __builtin_amdgcn_workgroup_id_x() * 8 + __builtin_amdgcn_workitem_id_x();
  uint y = __builtin_amdgcn_workgroup_id_y() * 8 + __builtin_amdgcn_workitem_id_y();
  o[y * w + x] = (float)x * 0.5f - (float)y;
}
kernel void private_array(global const int *a, global int *o, int k) {
  int p[40];
  uint i = __builtin_amdgcn_workitem_id_x();
  for (int j = 0; j < 40; j++) p[j] = a[i] * j;
  o[i] = p[(k + i) % 40];
}
"#;

pub const LDS: &str = r#"
kernel void reduce_sum(global const float *a, global float *out, uint n) {
  local float sh[256];
  uint t = __builtin_amdgcn_workitem_id_x();
  uint g = __builtin_amdgcn_workgroup_id_x();
  float s = 0.0f;
  for (uint j = t; j < n; j += 256) s += a[g * n + j];
  sh[t] = s;
  __builtin_amdgcn_s_barrier();
  for (uint st = 128; st > 0; st >>= 1) {
    if (t < st) sh[t] += sh[t + st];
    __builtin_amdgcn_s_barrier();
  }
  if (t == 0) out[g] = sh[0];
}
kernel void reverse_lds(global const int *a, global int *o) {
  local int sh[128];
  uint t = __builtin_amdgcn_workitem_id_x();
  uint g = __builtin_amdgcn_workgroup_id_x();
  sh[t] = a[g * 128 + t];
  __builtin_amdgcn_s_barrier();
  o[g * 128 + t] = sh[127 - t] + (int)t;
}
kernel void max_reduce(global const int *a, global int *out, uint n) {
  local int sh[64];
  uint t = __builtin_amdgcn_workitem_id_x();
  int m = -2147483647 - 1;
  for (uint j = t; j < n; j += 64) { int v = a[j]; m = v > m ? v : m; }
  sh[t] = m;
  __builtin_amdgcn_s_barrier();
  if (t == 0) { for (int j = 1; j < 64; j++) m = sh[j] > m ? sh[j] : m; out[0] = m; }
}
"#;

/// Builds `src` into a gfx1100 code object. `None` (with a message) when clang-19 is absent, a failure
/// under `PILOT_REQUIRE=1`; a failed build always fails the test.
pub fn build(stem: &str, src: &str) -> Option<Vec<u8>> {
    build_with(stem, src, &[])
}

/// [`build`] with extra clang flags.
pub fn build_with(stem: &str, src: &str, flags: &[&str]) -> Option<Vec<u8>> {
    build_for(Isa::Gfx11, stem, src, flags)
}

/// [`build_with`] for `isa`'s processor (gfx1100 or gfx1201).
pub fn build_for(isa: Isa, stem: &str, src: &str, flags: &[&str]) -> Option<Vec<u8>> {
    pilot_test_support::clang_19()?;
    static BUILDS: AtomicUsize = AtomicUsize::new(0);
    let n = BUILDS.fetch_add(1, Ordering::Relaxed);
    let dir: PathBuf = std::env::temp_dir().join(format!("pilot-rdna3-{}-{n}-{stem}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cl, obj, co) = (dir.join("k.cl"), dir.join("k.o"), dir.join("k.co"));
    std::fs::write(&cl, src).unwrap();
    let run = |cmd: &mut Command| {
        let out = cmd.output().expect("run the AMDGPU toolchain");
        assert!(out.status.success(), "{cmd:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    };
    run(Command::new("clang-19")
        .args(["-x", "cl", "-cl-std=CL1.2", "-target", "amdgcn-amd-amdhsa"])
        .arg(format!("-mcpu={}", isa.mcpu()))
        .args(["-nogpulib", "-O2", "-c"])
        .args(flags)
        .arg(&cl)
        .arg("-o")
        .arg(&obj));
    run(Command::new("ld.lld-19").arg("-shared").arg(&obj).arg("-o").arg(&co));
    let bytes = std::fs::read(&co).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    Some(bytes)
}

/// A device: one memory region and a bump allocator.
pub struct Device {
    pub mem: VecMemory,
    next: u64,
}

pub const BASE: u64 = 0x1_0000_0000;

impl Device {
    pub fn new() -> Self {
        Device { mem: VecMemory::new(BASE, 8 << 20), next: BASE }
    }

    pub fn alloc(&mut self, bytes: &[u8]) -> u64 {
        let addr = self.next;
        let off = (addr - BASE) as usize;
        self.mem.bytes[off..off + bytes.len()].copy_from_slice(bytes);
        self.next += (bytes.len() as u64).div_ceil(256) * 256 + 256;
        addr
    }

    pub fn zeros(&mut self, len: usize) -> u64 {
        self.alloc(&vec![0u8; len])
    }

    pub fn read(&self, addr: u64, len: usize) -> &[u8] {
        let off = (addr - BASE) as usize;
        &self.mem.bytes[off..off + len]
    }

    pub fn f32s(&self, addr: u64, n: usize) -> Vec<f32> {
        self.read(addr, 4 * n).chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
    }

    pub fn i32s(&self, addr: u64, n: usize) -> Vec<i32> {
        self.read(addr, 4 * n).chunks(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect()
    }

    /// Runs `name` from code object `co` with kernel arguments `args` (each little-endian, placed at
    /// its natural alignment).
    pub fn run(&mut self, co: &[u8], name: &str, grid: [u32; 3], wg: [u32; 3], args: &[Arg]) -> Stats {
        let kernel = CodeObjectKernel::load(co, name).unwrap();
        let kernarg = self.alloc(&kernargs(args));
        let d = Dispatch::for_kernel(&kernel, grid, wg, kernarg).unwrap();
        dispatch(&kernel, &d, &mut self.mem).unwrap_or_else(|e| panic!("{e}"))
    }
}

impl Device {
    /// [`Device::run`] with the workgroups on `threads` host threads, through a [`SharedVecMemory`].
    pub fn run_parallel(
        &mut self,
        co: &[u8],
        name: &str,
        grid: [u32; 3],
        wg: [u32; 3],
        args: &[Arg],
        threads: usize,
    ) -> Stats {
        let kernel = CodeObjectKernel::load(co, name).unwrap();
        let kernarg = self.alloc(&kernargs(args));
        let d = Dispatch::for_kernel(&kernel, grid, wg, kernarg).unwrap();
        let shared = SharedVecMemory::new(BASE, self.mem.bytes.len(), &self.mem.bytes);
        let stats = dispatch_parallel(&kernel, &d, &shared, threads).unwrap_or_else(|e| panic!("{e}"));
        self.mem.bytes = shared.to_bytes();
        stats
    }
}

impl Default for Device {
    fn default() -> Self {
        Self::new()
    }
}

pub enum Arg {
    Ptr(u64),
    U32(u32),
}

pub fn kernargs(args: &[Arg]) -> Vec<u8> {
    let mut out = Vec::new();
    for a in args {
        match a {
            Arg::Ptr(p) => {
                while out.len() % 8 != 0 {
                    out.push(0);
                }
                out.extend_from_slice(&p.to_le_bytes());
            }
            Arg::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
        }
    }
    out
}

pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn i32_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A deterministic pseudo-random sequence (xorshift), for test inputs.
pub fn lcg(seed: u32, n: usize) -> Vec<u32> {
    let mut x = seed.max(1);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        })
        .collect()
}
