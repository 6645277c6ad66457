//! The seed's kernel-source gates (compile3, step 6): counts over OpenCL C sources that CI pins with
//! `ALLOWED_READ_IMAGE` and `ALLOWED_GATED_READ_IMAGE`, next to `ALLOWED_KERNEL_COUNT`.

/// `(read_image, gated read_image)` in `source`, counted as compile3 counts them: every
/// `read_image` occurrence; gated ones are `?read_image`, plus every `valN = read_imagef(` whose
/// channel (`valN.x` .. `valN.w`) is used right after a `?` or `:`.
pub fn read_image_counts(source: &str) -> (usize, usize) {
    let reads = source.matches("read_image").count();
    let mut gated = source.matches("?read_image").count();
    for line in source.lines() {
        let Some((lhs, rhs)) = line.split_once(" = ") else { continue };
        if !rhs.trim_start().starts_with("read_imagef(") {
            continue;
        }
        let Some(val) = lhs.split_whitespace().last() else { continue };
        let used_gated = ["x", "y", "z", "w"].iter().any(|c| {
            let v = format!("{val}.{c}");
            ["?", "? ", ":", ": "].iter().any(|p| source.contains(&format!("{p}{v}")))
        });
        if used_gated {
            gated += 1;
        }
    }
    (reads, gated)
}

/// The kernels of an OpenCL C source: `(name, text)` from each `__kernel void NAME(` to the next.
pub fn kernel_sources(source: &str) -> Vec<(&str, &str)> {
    let starts: Vec<usize> = source.match_indices("__kernel void ").map(|(i, _)| i).collect();
    starts
        .iter()
        .enumerate()
        .map(|(k, &s)| {
            let end = starts.get(k + 1).copied().unwrap_or(source.len());
            let text = &source[s..end];
            let name = text["__kernel void ".len()..].split('(').next().unwrap_or("").trim();
            (name, text)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_reads_and_gated_reads() {
        let src = "__kernel void a(read_only image2d_t b) {\n  const float4 px0 = read_imagef(b, smp, c);\n  \
                   const float4 px1 = m ?read_imagef(b, smp, d) : (float4)(0.0f);\n}\n\
                   __kernel void b(read_only image2d_t b) {\n  float4 val2 = read_imagef(b, smp, e);\n  \
                   float t = q ? val2.y : 0.0f;\n}\n";
        assert_eq!(read_image_counts(src), (3, 2));
        let ks = kernel_sources(src);
        assert_eq!(ks.iter().map(|k| k.0).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(read_image_counts(ks[0].1), (2, 1));
        assert_eq!(read_image_counts(ks[1].1), (1, 1));
        assert_eq!(read_image_counts("no images"), (0, 0));
    }
}
