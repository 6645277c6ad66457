// The kernel tests, included by rdna3_kernels.rs (gfx1100) and rdna4_kernels.rs (gfx1201), each of which defines
// `ISA` and declares `mod rdna3_support`.

use std::sync::OnceLock;

use rdna3_support::{f32_bytes, i32_bytes, lcg, Arg, Device};

fn code_object(stem: &str) -> Option<&'static [u8]> {
    static BUILT: OnceLock<Vec<(String, Option<Vec<u8>>)>> = OnceLock::new();
    let all = BUILT.get_or_init(|| {
        let build =
            |(s, src, flags): &(&str, &str, &[&str])| (s.to_string(), rdna3_support::build_for(ISA, s, src, flags));
        rdna3_support::SOURCES.iter().map(build).collect()
    });
    all.iter().find(|(s, _)| s == stem).and_then(|(_, co)| co.as_deref())
}

fn floats(seed: u32, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    lcg(seed, n).into_iter().map(|x| lo + (hi - lo) * (x >> 8) as f32 / (1u32 << 24) as f32).collect()
}

fn assert_close(got: &[f32], want: &[f32], rel: f32, what: &str) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let tol = rel * w.abs().max(1.0);
        assert!((g - w).abs() <= tol, "{what}[{i}]: got {g}, want {w}");
    }
}

#[test]
fn elementwise_f32_with_a_partial_last_workgroup() {
    let Some(co) = code_object("elementwise") else { return };
    let n = 200; // 4 workgroups of 64; the guard drops the last 56
    let (a, b) = (floats(1, 256, -4.0, 4.0), floats(2, 256, -4.0, 4.0));
    let mut dev = Device::new();
    let (pa, pb) = (dev.alloc(&f32_bytes(&a)), dev.alloc(&f32_bytes(&b)));
    let pc = dev.alloc(&f32_bytes(&[-7.0; 256]));
    let stats =
        dev.run(co, "add_mul_f32", [4, 1, 1], [64, 1, 1], &[Arg::Ptr(pa), Arg::Ptr(pb), Arg::Ptr(pc), Arg::U32(n)]);
    let got = dev.f32s(pc, 256);
    for i in 0..256 {
        // v_fmaak_f32: one rounding, like f32::mul_add.
        let want = if i < n as usize { a[i].mul_add(b[i], 1.5) } else { -7.0 };
        assert_eq!(got[i].to_bits(), want.to_bits(), "c[{i}]");
    }
    assert_eq!((stats.workgroups, stats.waves), (4, 8));
    assert!(stats.instructions > 8 * 10);
}

#[test]
fn fma_is_fused() {
    let Some(co) = code_object("elementwise") else { return };
    // Values where a*b+c differs between fused and unfused evaluation.
    let a: Vec<f32> = (0..64).map(|i| 1.0 + (i as f32) * f32::EPSILON).collect();
    let b: Vec<f32> = (0..64).map(|i| 1.0 - (i as f32) * f32::EPSILON).collect();
    let c = vec![-1.0f32; 64];
    let mut dev = Device::new();
    let (pa, pb, pc) = (dev.alloc(&f32_bytes(&a)), dev.alloc(&f32_bytes(&b)), dev.alloc(&f32_bytes(&c)));
    dev.run(co, "fma_f32", [1, 1, 1], [64, 1, 1], &[Arg::Ptr(pa), Arg::Ptr(pb), Arg::Ptr(pc)]);
    let got = dev.f32s(pc, 64);
    for i in 0..64 {
        assert_eq!(got[i].to_bits(), a[i].mul_add(b[i], c[i]).to_bits(), "c[{i}]");
    }
    assert_ne!(got[5], a[5] * b[5] + c[5], "the unfused result differs, so the check can fail");
}

#[test]
fn transcendentals_within_tolerance() {
    let Some(co) = code_object("elementwise") else { return };
    let a = floats(3, 128, -1.5, 1.5);
    let mut dev = Device::new();
    let pa = dev.alloc(&f32_bytes(&a));
    let pc = dev.zeros(128 * 6 * 4);
    dev.run(co, "transcendental", [2, 1, 1], [64, 1, 1], &[Arg::Ptr(pa), Arg::Ptr(pc)]);
    let got = dev.f32s(pc, 128 * 6);
    let tau = std::f32::consts::TAU;
    let want: Vec<f32> = a
        .iter()
        .flat_map(|&x| {
            [
                x.exp2(),
                (x + 2.0).log2(),
                1.0 / (x + 3.0),
                (x + 4.0).sqrt(),
                1.0 / (x + 5.0).sqrt(),
                (x * tau).sin() + (x * tau).cos(),
            ]
        })
        .collect();
    // The ISA documents these to 1 ULP; sin/cos take revolutions.
    assert_close(&got, &want, 1e-5, "transcendental");
}

#[test]
fn integer_division_and_remainder() {
    let Some(co) = code_object("elementwise") else { return };
    let r = lcg(4, 256);
    let a: Vec<i32> = r[..128].iter().map(|x| *x as i32 >> (x % 24)).collect();
    let b: Vec<i32> =
        r[128..].iter().map(|x| ((*x as i32) >> (x % 28)) | 1).map(|x| if x == -1 { 3 } else { x }).collect();
    let mut dev = Device::new();
    let (pa, pb) = (dev.alloc(&i32_bytes(&a)), dev.alloc(&i32_bytes(&b)));
    let (pc, pd) = (dev.zeros(128 * 8), dev.zeros(128 * 4));
    dev.run(co, "int_div", [2, 1, 1], [64, 1, 1], &[Arg::Ptr(pa), Arg::Ptr(pb), Arg::Ptr(pc), Arg::Ptr(pd)]);
    let c = dev.i32s(pc, 256);
    let d = dev.i32s(pd, 128);
    for i in 0..128 {
        assert_eq!((c[2 * i], c[2 * i + 1]), (a[i] / b[i], a[i] % b[i]), "{} / {}", a[i], b[i]);
        assert_eq!(d[i] as u32, a[i] as u32 / b[i] as u32, "{} /u {}", a[i] as u32, b[i] as u32);
    }
}

#[test]
fn half_precision() {
    let Some(co) = code_object("elementwise") else { return };
    use half::f16;
    let a: Vec<f16> = floats(5, 64, -8.0, 8.0).into_iter().map(f16::from_f32).collect();
    let b: Vec<f16> = floats(6, 64, -2.0, 2.0).into_iter().map(f16::from_f32).collect();
    let bytes = |v: &[f16]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let mut dev = Device::new();
    let (pa, pb, pc) = (dev.alloc(&bytes(&a)), dev.alloc(&bytes(&b)), dev.zeros(128));
    dev.run(co, "half_mad", [1, 1, 1], [64, 1, 1], &[Arg::Ptr(pa), Arg::Ptr(pb), Arg::Ptr(pc)]);
    let got = dev.read(pc, 128).to_vec();
    for i in 0..64 {
        let g = f16::from_le_bytes([got[2 * i], got[2 * i + 1]]);
        // v_fmac_f16: fused, one rounding to f16.
        let want = f16::from_f64(a[i].to_f64() * b[i].to_f64() + a[i].to_f64());
        assert_eq!(g.to_bits(), want.to_bits(), "c[{i}] = {a:?}*{b:?}+a", a = a[i], b = b[i]);
    }
}

#[test]
fn integer_and_64_bit_ops() {
    let Some(co) = code_object("elementwise") else { return };
    let a: Vec<i32> = lcg(7, 64).into_iter().map(|x| x as i32 >> 4).collect();
    let mut dev = Device::new();
    let (pa, po, pq) = (dev.alloc(&i32_bytes(&a)), dev.zeros(256), dev.zeros(512));
    dev.run(co, "int_ops", [1, 1, 1], [64, 1, 1], &[Arg::Ptr(pa), Arg::Ptr(po), Arg::Ptr(pq)]);
    let o = dev.i32s(po, 64);
    let q: Vec<u64> = dev.read(pq, 512).chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
    for (i, &v) in a.iter().enumerate() {
        assert_eq!(o[i], v.max(7) ^ (v << 3) | v.min(-3) & (v >> 2), "o[{i}]");
        assert_eq!(q[i], (v as i64 as u64).wrapping_mul(0x1234_5678).wrapping_add(i as u64), "q[{i}]");
    }
}

#[test]
fn conversions_and_float_min_max() {
    let Some(co) = code_object("elementwise") else { return };
    let a = floats(8, 64, -100.0, 100.0);
    let mut dev = Device::new();
    let (pa, po, pf) = (dev.alloc(&f32_bytes(&a)), dev.zeros(512), dev.zeros(512));
    dev.run(co, "convert", [1, 1, 1], [64, 1, 1], &[Arg::Ptr(pa), Arg::Ptr(po), Arg::Ptr(pf)]);
    let (o, f) = (dev.i32s(po, 128), dev.f32s(pf, 128));
    for (i, &x) in a.iter().enumerate() {
        assert_eq!((o[2 * i], o[2 * i + 1]), (x as i32, x.floor() as i32), "convert {x}");
        let want0 = x.abs() - (x * 0.25).trunc() + x.min(2.0);
        let want1 = x.max(-1.0) * i as f32;
        assert_close(&f[2 * i..2 * i + 2], &[want0, want1], 1e-6, "minmax");
    }
}

#[test]
fn divergent_branches_and_loops() {
    let Some(co) = code_object("control") else { return };
    let a: Vec<i32> = lcg(9, 128).into_iter().map(|x| (x % 1000) as i32 - 300).collect();
    let mut dev = Device::new();
    let (pa, po) = (dev.alloc(&i32_bytes(&a)), dev.zeros(512));
    dev.run(co, "diverge", [2, 1, 1], [64, 1, 1], &[Arg::Ptr(pa), Arg::Ptr(po)]);
    let o = dev.i32s(po, 128);
    for (i, &v) in a.iter().enumerate() {
        let mut r = if v & 1 != 0 {
            v * 3 + 1
        } else if v > 10 {
            v >> 1
        } else {
            -v
        };
        while r > 100 {
            r -= 37;
        }
        assert_eq!(o[i], r, "diverge({v})");
    }
}

#[test]
fn three_d_grid_ids() {
    let Some(co) = code_object("control") else { return };
    let mut dev = Device::new();
    let po = dev.alloc(&i32_bytes(&[-1; 16 * 8 * 4]));
    // Grid 4x4x2 workgroups of 4x2x2 work-items covers x<16, y<8, z<4.
    let stats = dev.run(co, "grid3", [4, 4, 2], [4, 2, 2], &[Arg::Ptr(po)]);
    let o = dev.i32s(po, 16 * 8 * 4);
    for z in 0..4 {
        for y in 0..8 {
            for x in 0..16 {
                assert_eq!(o[(z * 8 + y) * 16 + x], (x + 100 * y + 10000 * z) as i32, "({x},{y},{z})");
            }
        }
    }
    assert_eq!(stats.workgroups, 32);
}

#[test]
fn two_d_grid_with_multi_wave_workgroups() {
    let Some(co) = code_object("control") else { return };
    let mut dev = Device::new();
    let w = 24u32;
    let po = dev.zeros((w * 16 * 4) as usize);
    let stats = dev.run(co, "grid2", [3, 2, 1], [8, 8, 1], &[Arg::Ptr(po), Arg::U32(w)]);
    let o = dev.f32s(po, (w * 16) as usize);
    for y in 0..16 {
        for x in 0..w as usize {
            assert_eq!(o[y * w as usize + x], x as f32 * 0.5 - y as f32, "({x},{y})");
        }
    }
    assert_eq!(stats.waves, 6 * 2);
}

#[test]
fn scratch_private_arrays() {
    let Some(co) = code_object("control") else { return };
    let a: Vec<i32> = (0..64).map(|i| i * 7 - 100).collect();
    let mut dev = Device::new();
    let (pa, po) = (dev.alloc(&i32_bytes(&a)), dev.zeros(256));
    let k = 13;
    dev.run(co, "private_array", [1, 1, 1], [64, 1, 1], &[Arg::Ptr(pa), Arg::Ptr(po), Arg::U32(k)]);
    let o = dev.i32s(po, 64);
    for i in 0..64 {
        assert_eq!(o[i], a[i] * ((k as i32 + i as i32) % 40), "o[{i}]");
    }
}

#[test]
fn lds_tree_reduction_with_barriers() {
    let Some(co) = code_object("lds") else { return };
    let n = 1000u32;
    let a = floats(10, 3 * n as usize, -1.0, 1.0);
    let mut dev = Device::new();
    let (pa, po) = (dev.alloc(&f32_bytes(&a)), dev.zeros(16));
    let stats = dev.run(co, "reduce_sum", [3, 1, 1], [256, 1, 1], &[Arg::Ptr(pa), Arg::Ptr(po), Arg::U32(n)]);
    let got = dev.f32s(po, 3);
    for g in 0..3 {
        let want: f64 = a[g * n as usize..(g + 1) * n as usize].iter().map(|x| *x as f64).sum();
        assert!((got[g] as f64 - want).abs() < 1e-3, "sum[{g}]: got {}, want {want}", got[g]);
    }
    assert_eq!(stats.waves, 3 * 8);
}

#[test]
fn lds_exchange_across_waves() {
    let Some(co) = code_object("lds") else { return };
    let a: Vec<i32> = (0..256).map(|i| i * 3 + 1).collect();
    let mut dev = Device::new();
    let (pa, po) = (dev.alloc(&i32_bytes(&a)), dev.zeros(1024));
    dev.run(co, "reverse_lds", [2, 1, 1], [128, 1, 1], &[Arg::Ptr(pa), Arg::Ptr(po)]);
    let o = dev.i32s(po, 256);
    for g in 0..2 {
        for t in 0..128 {
            assert_eq!(o[g * 128 + t], a[g * 128 + 127 - t] + t as i32, "o[{g}][{t}]");
        }
    }
}

#[test]
fn lds_max_reduction() {
    let Some(co) = code_object("lds") else { return };
    let a: Vec<i32> = lcg(11, 777).into_iter().map(|x| x as i32).collect();
    let mut dev = Device::new();
    let (pa, po) = (dev.alloc(&i32_bytes(&a)), dev.zeros(4));
    dev.run(co, "max_reduce", [1, 1, 1], [64, 1, 1], &[Arg::Ptr(pa), Arg::Ptr(po), Arg::U32(777)]);
    assert_eq!(dev.i32s(po, 1)[0], *a.iter().max().unwrap());
}

#[test]
fn libm_expansions_exp_log_sqrt_div() {
    let Some(co) = code_object("math") else { return };
    let a = floats(12, 128, -2.5, 2.5);
    let mut dev = Device::new();
    let (pa, pc) = (dev.alloc(&f32_bytes(&a)), dev.zeros(128 * 5 * 4));
    dev.run(co, "libm", [2, 1, 1], [64, 1, 1], &[Arg::Ptr(pa), Arg::Ptr(pc)]);
    let got = dev.f32s(pc, 128 * 5);
    let want: Vec<f32> = a
        .iter()
        .flat_map(|&x| [x.exp(), (x + 3.0).ln(), (x + 3.0).sqrt(), x / (x + 3.5), x.exp2() + (x + 3.0).log2()])
        .collect();
    assert_close(&got, &want, 4e-6, "libm");
}

#[test]
fn vector_and_byte_loads() {
    let Some(co) = code_object("math") else { return };
    let a = floats(13, 256, -10.0, 10.0);
    let b: Vec<u8> = lcg(14, 64).into_iter().map(|x| x as u8).collect();
    let mut dev = Device::new();
    let (pa, pb) = (dev.alloc(&f32_bytes(&a)), dev.alloc(&b));
    let (pc, ps) = (dev.zeros(1024), dev.zeros(128));
    dev.run(co, "vec4", [1, 1, 1], [64, 1, 1], &[Arg::Ptr(pa), Arg::Ptr(pc), Arg::Ptr(pb), Arg::Ptr(ps)]);
    let c = dev.f32s(pc, 256);
    let s: Vec<i16> = dev.read(ps, 128).chunks(2).map(|x| i16::from_le_bytes([x[0], x[1]])).collect();
    for i in 0..64 {
        for j in 0..4 {
            let want = a[4 * i + j].mul_add(b[i] as f32, (j + 1) as f32);
            assert!((c[4 * i + j] - want).abs() <= want.abs() * 1e-6, "c[{i}].{j}: {} vs {want}", c[4 * i + j]);
        }
        assert_eq!(s[i], (b[i] as i32 * 3 - 200) as i16, "s[{i}]");
    }
}

/// Uniform byte and half loads (gfx12: s_load_u8/i8/u16/i16 at an SGPR offset; gfx11: dword loads and extracts),
/// signed and unsigned, at odd addresses.
#[test]
fn uniform_narrow_loads() {
    let Some(co) = code_object("math") else { return };
    let b: Vec<u8> = lcg(15, 64).into_iter().map(|x| (x >> 8) as u8).collect();
    let s: Vec<i16> = lcg(16, 64).into_iter().map(|x| (x >> 8) as i16).collect();
    let s_bytes: Vec<u8> = s.iter().flat_map(|v| v.to_le_bytes()).collect();
    for k in [5u32, 6, 41] {
        let mut dev = Device::new();
        let (pb, ps, po) = (dev.alloc(&b), dev.alloc(&s_bytes), dev.zeros(4 * 64));
        dev.run(co, "uniform_narrow", [1, 1, 1], [64, 1, 1], &[Arg::Ptr(pb), Arg::Ptr(ps), Arg::Ptr(po), Arg::U32(k)]);
        let k = k as usize;
        let want = b[k] as i32 + b[k + 1] as i8 as i32 * 7 + s[k] as i32 * 3 + s[k + 2] as u16 as i32 * 5;
        for (i, got) in dev.i32s(po, 64).into_iter().enumerate() {
            assert_eq!(got, want + i as i32, "o[{i}] with k = {k}");
        }
    }
}

#[test]
fn global_and_lds_atomics() {
    let Some(co) = code_object("math") else { return };
    let a: Vec<i32> = lcg(15, 128).into_iter().map(|x| (x % 2001) as i32 - 1000).collect();
    let mut dev = Device::new();
    let (pg, pa) = (dev.alloc(&i32_bytes(&[5, i32::MIN])), dev.alloc(&i32_bytes(&a)));
    dev.run(co, "atomics", [1, 1, 1], [128, 1, 1], &[Arg::Ptr(pg), Arg::Ptr(pa)]);
    let g = dev.i32s(pg, 2);
    assert_eq!(g, vec![5 + a.iter().sum::<i32>(), *a.iter().max().unwrap()]);
}

fn matmul_reference(a: &[f32], b: &[f32], n: usize) -> Vec<f32> {
    let mut c = vec![0.0f32; n * n];
    for r in 0..n {
        for col in 0..n {
            let mut acc = 0.0f32;
            for k in 0..n {
                acc = a[r * n + k].mul_add(b[k * n + col], acc);
            }
            c[r * n + col] = if acc > 0.0 { acc } else { 0.1 * acc };
        }
    }
    c
}

fn matmul(n: usize) -> (rdna3_support::Device, u64, Vec<f32>, pilot_rdna3::Stats, std::time::Duration) {
    let co = code_object("math").expect("built");
    let (a, b) = (floats(16, n * n, -1.0, 1.0), floats(17, n * n, -1.0, 1.0));
    let mut dev = Device::new();
    let (pa, pb, pc) = (dev.alloc(&f32_bytes(&a)), dev.alloc(&f32_bytes(&b)), dev.zeros(n * n * 4));
    let g = (n / 16) as u32;
    let args = [Arg::Ptr(pa), Arg::Ptr(pb), Arg::Ptr(pc), Arg::U32(n as u32)];
    let start = std::time::Instant::now();
    let stats = dev.run(co, "matmul", [g, g, 1], [16, 16, 1], &args);
    let took = start.elapsed();
    (dev, pc, matmul_reference(&a, &b, n), stats, took)
}

#[test]
fn matmul_2d_workgroups_bit_exact() {
    if code_object("math").is_none() {
        return;
    }
    let (dev, pc, want, stats, _) = matmul(32);
    let got = dev.f32s(pc, 32 * 32);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.to_bits(), w.to_bits(), "C[{i}]");
    }
    assert_eq!(stats.waves, 4 * 8);
}

#[test]
fn correctly_rounded_division_and_sqrt() {
    let Some(co) = code_object("exact") else { return };
    let a = floats(18, 128, -1e6, 1e6);
    let mut b = floats(19, 128, 1e-3, 1e3);
    b[0] = 3.0; // 1/3-style quotients round differently from a reciprocal multiply
    let mut dev = Device::new();
    let (pa, pb, pc) = (dev.alloc(&f32_bytes(&a)), dev.alloc(&f32_bytes(&b)), dev.zeros(1024));
    dev.run(co, "div_sqrt", [2, 1, 1], [64, 1, 1], &[Arg::Ptr(pa), Arg::Ptr(pb), Arg::Ptr(pc)]);
    let c = dev.f32s(pc, 256);
    for i in 0..128 {
        assert_eq!(c[2 * i].to_bits(), (a[i] / b[i]).to_bits(), "{} / {}", a[i], b[i]);
        assert_eq!(c[2 * i + 1].to_bits(), b[i].sqrt().to_bits(), "sqrt {}", b[i]);
    }
}

#[test]
fn dpp_cross_lane_reads() {
    let Some(co) = code_object("dpp") else { return };
    let a: Vec<i32> = (0..64).map(|i| i * 10 + 3).collect();
    let mut dev = Device::new();
    let (pa, po, pf) = (dev.alloc(&i32_bytes(&a)), dev.zeros(64 * 8 * 4), dev.zeros(256));
    dev.run(co, "dpp", [1, 1, 1], [64, 1, 1], &[Arg::Ptr(pa), Arg::Ptr(po), Arg::Ptr(pf)]);
    let (o, f) = (dev.i32s(po, 64 * 8), dev.f32s(pf, 64));
    for t in 0..64usize {
        let (row, i) = (t & !15, t & 15);
        let at = |j: usize| a[row + j];
        let dpp8 = [3, 2, 1, 0, 4, 5, 2, 3][t & 7];
        let want = [
            if i >= 1 { at(i - 1) } else { -1 },                  // row_shr:1 keeps the old value
            if i >= 2 { at(i - 2) } else { 0 },                   // row_shr:2 bound_ctrl reads 0
            at((i & !3) + [1, 0, 3, 2][i & 3]),                   // quad_perm:[1,0,3,2]
            at(15 - i),                                           // row_mirror
            at((i & 8) + 7 - (i & 7)),                            // row_half_mirror
            if (i / 4) % 2 == 0 { at((i + 13) % 16) } else { 7 }, // row_ror:3, bank_mask 0x5
            at(i ^ 5),                                            // row_xmask:5
            a[(t & !7) + dpp8],                                   // dpp8
        ];
        assert_eq!(&o[8 * t..8 * t + 8], &want, "lane {t}");
        let next = if i < 15 { at(i + 1) as f32 } else { 0.0 };
        assert_eq!(f[t], a[t] as f32 + next, "v_add_f32_dpp lane {t}");
    }
}

fn halves(seed: u32, n: usize, lo: f32, hi: f32) -> Vec<half::f16> {
    floats(seed, n, lo, hi).into_iter().map(half::f16::from_f32).collect()
}

fn half_bytes(v: &[half::f16]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn read_halves(dev: &Device, addr: u64, n: usize) -> Vec<half::f16> {
    dev.read(addr, 2 * n).chunks(2).map(|c| half::f16::from_le_bytes([c[0], c[1]])).collect()
}

#[test]
fn mixed_precision_fma_and_half_compare() {
    use half::f16;
    let Some(co) = code_object("half") else { return };
    let (a, b, c) = (halves(20, 64, -4.0, 4.0), halves(21, 64, -4.0, 4.0), floats(22, 64, -4.0, 4.0));
    let mut dev = Device::new();
    let (pa, pb, pc) = (dev.alloc(&half_bytes(&a)), dev.alloc(&half_bytes(&b)), dev.alloc(&f32_bytes(&c)));
    let (po, pp) = (dev.zeros(256), dev.zeros(256));
    let args = [Arg::Ptr(pa), Arg::Ptr(pb), Arg::Ptr(pc), Arg::Ptr(po), Arg::Ptr(pp)];
    dev.run(co, "half_mix", [1, 1, 1], [64, 1, 1], &args);
    let (o, p) = (read_halves(&dev, po, 128), dev.f32s(pp, 64));
    for i in 0..64 {
        let (x, y, z) = (a[i].to_f32(), b[i].to_f32(), c[i]);
        // v_fma_mix_f32 (f16 sources widened exactly) and v_fma_mixlo_f16 (f32 fma, then to f16).
        assert_eq!(p[i].to_bits(), x.mul_add(y, z).to_bits(), "p[{i}]");
        assert_eq!(o[2 * i], f16::from_f32(x.mul_add(z, y)), "o[{i}].0");
        let want = if a[i] > b[i] { a[i] - b[i] } else { f16::from_f32(x.max(0.5)) };
        assert_eq!(o[2 * i + 1], want, "o[{i}].1");
    }
}

#[test]
fn packed_half2_fma() {
    use half::f16;
    let Some(co) = code_object("half") else { return };
    let (a, b) = (halves(23, 128, -4.0, 4.0), halves(24, 128, -4.0, 4.0));
    let mut dev = Device::new();
    let (pa, pb, po) = (dev.alloc(&half_bytes(&a)), dev.alloc(&half_bytes(&b)), dev.zeros(256));
    dev.run(co, "half2_ops", [1, 1, 1], [64, 1, 1], &[Arg::Ptr(pa), Arg::Ptr(pb), Arg::Ptr(po)]);
    let o = read_halves(&dev, po, 128);
    for i in 0..128 {
        let k = if i % 2 == 0 { 1.0 } else { -2.0 };
        let want = f16::from_f64(a[i].to_f64() * b[i].to_f64() + k);
        assert_eq!(o[i], want, "o[{}].{}", i / 2, i % 2);
    }
}

#[test]
fn half_accumulation_loop() {
    use half::f16;
    let Some(co) = code_object("half") else { return };
    let n = 9;
    let a = halves(25, 64 * n, -1.0, 1.0);
    let mut dev = Device::new();
    let (pa, po) = (dev.alloc(&half_bytes(&a)), dev.zeros(128));
    dev.run(co, "half_reduce", [1, 1, 1], [64, 1, 1], &[Arg::Ptr(pa), Arg::Ptr(po), Arg::U32(n as u32)]);
    let o = read_halves(&dev, po, 64);
    for i in 0..64 {
        let mut s = f16::ZERO;
        for k in 0..n {
            let x = a[i * n + k].to_f64();
            s = f16::from_f64(x * x + s.to_f64()); // v_fmac_f16: one rounding
        }
        assert_eq!(o[i], s, "o[{i}]");
    }
}

#[test]
fn parallel_workgroups_match_the_sequential_run() {
    let Some(co) = code_object("math") else { return };
    let n = 64;
    let (a, b) = (floats(26, n * n, -1.0, 1.0), floats(27, n * n, -1.0, 1.0));
    let mut dev = Device::new();
    let (pa, pb, pc) = (dev.alloc(&f32_bytes(&a)), dev.alloc(&f32_bytes(&b)), dev.zeros(n * n * 4));
    let args = [Arg::Ptr(pa), Arg::Ptr(pb), Arg::Ptr(pc), Arg::U32(n as u32)];
    let stats = dev.run_parallel(co, "matmul", [4, 4, 1], [16, 16, 1], &args, 3);
    assert_eq!(dev.f32s(pc, n * n), matmul_reference(&a, &b, n));
    assert_eq!((stats.workgroups, stats.waves), (16, 16 * 8));
}

#[test]
fn global_atomics_from_parallel_workgroups() {
    let Some(co) = code_object("math") else { return };
    let a: Vec<i32> = lcg(28, 128).into_iter().map(|x| (x % 2001) as i32 - 1000).collect();
    let mut dev = Device::new();
    let (pg, pa) = (dev.alloc(&i32_bytes(&[5, i32::MIN])), dev.alloc(&i32_bytes(&a)));
    dev.run_parallel(co, "atomics", [16, 1, 1], [128, 1, 1], &[Arg::Ptr(pg), Arg::Ptr(pa)], 4);
    assert_eq!(dev.i32s(pg, 2), vec![5 + 16 * a.iter().sum::<i32>(), *a.iter().max().unwrap()]);
}
