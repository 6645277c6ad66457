//! The step-time regression gate: `pilot gate --baseline A.jsonl --current B.jsonl [--max-regression 5%]`.
//!
//! Inputs are benchmark logs (`BENCHMARK_LOG`): JSON lines, one object per step, with at least a numeric
//! `wall_ms` (usually also `step`, `enqueue_ms`, maybe `device_ms`, which the gate ignores). Only
//! `wall_ms` is required; see [`read_log`].
//!
//! # Method
//!
//! Step times are skewed and carry outliers (a page fault, a context switch), so the gate compares
//! **medians**, and decides on a **95% confidence interval of the ratio** `current_median /
//! baseline_median`, not on the point estimate:
//!
//! - The interval is a percentile bootstrap: [`RESAMPLES`] times, each log is resampled with
//!   replacement (independently, same size), the two medians are taken and their ratio recorded; the
//!   2.5th and 97.5th percentiles of those ratios bound the interval. The random numbers come from a
//!   SplitMix64 generator with the fixed seed [`SEED`], so the same logs always give the same report.
//!   The bootstrap makes no assumption about the shape of the distribution, and a single outlier moves a
//!   median by at most half a rank, so it cannot fake a regression. With very few steps the interval is
//!   too narrow to be trusted (with one step per side it collapses to the point estimate): record
//!   at least ~10 steps per side.
//! - Verdict: [`Verdict::Regression`] only if the interval's *lower* bound exceeds
//!   `1 + max_regression`; [`Verdict::Improvement`] if its *upper* bound is below `1 - max_regression`;
//!   otherwise [`Verdict::Ok`] (no change, or noise too large to tell). A regression is therefore flagged
//!   only when we are 95% sure the slowdown exceeds the allowance.
//! - Warm-up: the first step of a log (in file order) is dropped when the log has more than 2 steps;
//!   the first step pays for lazy initialisation and would bias the statistics. Logs of 1 or 2 steps
//!   are used whole.
//!
//! Cost: `O(RESAMPLES × (n_baseline + n_current))`, a fraction of a second for thousands of steps.

use std::fmt;
use std::path::Path;

use anyhow::{bail, Context, Result};

/// Bootstrap resamples used for the confidence interval.
pub const RESAMPLES: usize = 2000;
/// Seed of the bootstrap's SplitMix64 generator (fixed: reports are reproducible).
pub const SEED: u64 = 0x9E37_79B9_7F4A_7C15;
/// Coverage of the confidence interval.
pub const CONFIDENCE: f64 = 0.95;

/// The largest benchmark log read (a million steps of `{"step":…,"wall_ms":…,"enqueue_ms":…}`).
pub const MAX_LOG_BYTES: u64 = 64 << 20;

/// Reads the `wall_ms` of every step of a JSON-lines benchmark log, in file order.
///
/// Blank lines are skipped. Errors (one line, naming the file and line number): unreadable file (or
/// not a regular file, or over [`MAX_LOG_BYTES`]), a line
/// that is not a JSON object, a missing or non-numeric `wall_ms`, a negative or non-finite `wall_ms`,
/// and a log without any step.
pub fn read_log(path: impl AsRef<Path>) -> Result<Vec<f64>> {
    let path = path.as_ref();
    let text =
        pilot_core::fsio::read_regular_string(path, MAX_LOG_BYTES).with_context(|| format!("{}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let at = || format!("{}:{}", path.display(), i + 1);
        let value: serde_json::Value = serde_json::from_str(line).with_context(|| format!("{}: bad JSON", at()))?;
        let Some(obj) = value.as_object() else {
            bail!("{}: expected a JSON object per line", at());
        };
        let Some(wall) = obj.get("wall_ms") else {
            bail!("{}: missing \"wall_ms\"", at());
        };
        match wall.as_f64() {
            Some(ms) if ms.is_finite() && ms >= 0.0 => out.push(ms),
            _ => bail!("{}: \"wall_ms\" is not a non-negative number: {wall}", at()),
        }
    }
    if out.is_empty() {
        bail!("{}: the log has no steps", path.display());
    }
    Ok(out)
}

/// Parses a time limit (`--assert-min-step-time`, `--assert-min-load-time`): a finite number above
/// zero. NaN would make every comparison false and pass any gate.
pub fn parse_time_limit(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("expected a positive number, got {s:?}")),
    }
}

/// Parses a regression allowance into a fraction.
///
/// `"5%"` → 0.05 (a trailing `%` divides by 100); a bare number below 1 is a fraction (`"0.05"` → 0.05);
/// a bare number of 1 or more is a percentage (`"5"` → 0.05, `"1"` → 0.01). Negative, non-finite and
/// unparsable values are errors.
pub fn parse_percent(s: &str) -> Result<f64> {
    let t = s.trim();
    let (num, percent) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (t, false),
    };
    let v: f64 = match num.parse() {
        Ok(v) if f64::is_finite(v) && v >= 0.0 => v,
        _ => bail!("bad percentage {s:?}: expected e.g. 5%, 0.05 or 5"),
    };
    Ok(if percent || v >= 1.0 { v / 100.0 } else { v })
}

/// Robust statistics of one log, in milliseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// Steps used (after dropping the warm-up step).
    pub n: usize,
    /// Whether the first step was dropped as warm-up.
    pub warmup_dropped: bool,
    pub min: f64,
    pub median: f64,
    /// 90th percentile (linear interpolation between order statistics).
    pub p90: f64,
    /// Median absolute deviation from the median (unscaled).
    pub mad: f64,
}

/// Outcome of the gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No significant change beyond the allowance (or too noisy to tell).
    Ok,
    /// Slower: the whole confidence interval lies above `1 + max_regression`.
    Regression,
    /// Faster: the whole confidence interval lies below `1 - max_regression`.
    Improvement,
    /// A side had no usable (finite) sample.
    NoData,
}

impl Verdict {
    /// Whether the gate fails (exit status 1): a regression, or nothing to compare.
    pub fn is_failure(self) -> bool {
        matches!(self, Verdict::Regression | Verdict::NoData)
    }
}

/// The comparison of two logs; `Display` renders a one-screen table.
#[derive(Clone, Debug, PartialEq)]
pub struct GateReport {
    pub baseline: Summary,
    pub current: Summary,
    /// `current.median / baseline.median`.
    pub ratio: f64,
    /// The [`CONFIDENCE`] bootstrap interval of `ratio`, `(low, high)`.
    pub ci: (f64, f64),
    /// The allowance, as a fraction (0.05 = 5%).
    pub max_regression: f64,
    pub verdict: Verdict,
}

impl GateReport {
    /// `true` unless the verdict is a failure.
    pub fn passed(&self) -> bool {
        !self.verdict.is_failure()
    }

    /// Whether the gate fails (exit status 1): `!self.passed()`. Besides a regression, this is also
    /// true for [`Verdict::NoData`], which only arises when [`compare`] is given no finite sample
    /// ([`read_log`] never returns such a log).
    pub fn is_regression(&self) -> bool {
        self.verdict.is_failure()
    }
}

/// Compares two sets of step times (ms); see the module docs for the method.
///
/// Non-finite samples are ignored; the first sample of a side is dropped as warm-up when that side has
/// more than 2; `max_regression` is a fraction (0.05 = 5%), clamped to be at least 0 (NaN counts as 0).
pub fn compare(baseline: &[f64], current: &[f64], max_regression: f64) -> GateReport {
    let max_regression = if max_regression > 0.0 { max_regression } else { 0.0 };
    let (b, b_dropped) = usable(baseline);
    let (c, c_dropped) = usable(current);
    let baseline = summarize(&b, b_dropped);
    let current = summarize(&c, c_dropped);
    if b.is_empty() || c.is_empty() {
        let verdict = Verdict::NoData;
        let (ratio, ci) = (f64::NAN, (f64::NAN, f64::NAN));
        return GateReport { baseline, current, ratio, ci, max_regression, verdict };
    }
    let ratio = ratio_of(current.median, baseline.median);
    let ci = bootstrap_ci(&b, &c);
    let verdict = if ci.0 > 1.0 + max_regression {
        Verdict::Regression
    } else if ci.1 < 1.0 - max_regression {
        Verdict::Improvement
    } else {
        Verdict::Ok
    };
    GateReport { baseline, current, ratio, ci, max_regression, verdict }
}

/// Finite samples, without the warm-up step when there are more than 2.
fn usable(samples: &[f64]) -> (Vec<f64>, bool) {
    let finite: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
    if finite.len() > 2 {
        (finite[1..].to_vec(), true)
    } else {
        (finite, false)
    }
}

/// `num / den`, with `0/0 = 1` (both sides instantaneous) and `x/0 = inf`.
fn ratio_of(num: f64, den: f64) -> f64 {
    if den == 0.0 {
        if num == 0.0 {
            1.0
        } else {
            f64::INFINITY
        }
    } else {
        num / den
    }
}

/// Percentile `q` in [0, 1] of sorted data, interpolating linearly (numpy's default); NaN when empty.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    let (a, b) = (sorted[lo], sorted[hi.min(sorted.len() - 1)]);
    if lo == hi || a == b {
        a
    } else {
        a + (b - a) * (pos - lo as f64)
    }
}

/// Median of data in any order (reorders it); NaN when empty.
fn median_in_place(v: &mut [f64]) -> f64 {
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    let (_, &mut hi, _) = v.select_nth_unstable_by(n / 2, f64::total_cmp);
    if n % 2 == 1 {
        return hi;
    }
    // The lower middle is the largest element left of n/2.
    let lo = v[..n / 2].iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (lo + hi) / 2.0
}

fn summarize(samples: &[f64], warmup_dropped: bool) -> Summary {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = quantile(&sorted, 0.5);
    let mut dev: Vec<f64> = sorted.iter().map(|v| (v - median).abs()).collect();
    Summary {
        n: sorted.len(),
        warmup_dropped,
        min: sorted.first().copied().unwrap_or(f64::NAN),
        median,
        p90: quantile(&sorted, 0.9),
        mad: median_in_place(&mut dev),
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, good enough for resampling indices.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (multiply-shift; the bias is below 2^-32 for any realistic `n`).
    fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }
}

/// The percentile-bootstrap [`CONFIDENCE`] interval of `median(current) / median(baseline)`.
fn bootstrap_ci(baseline: &[f64], current: &[f64]) -> (f64, f64) {
    let mut rng = SplitMix64(SEED);
    let (mut rb, mut rc) = (vec![0.0; baseline.len()], vec![0.0; current.len()]);
    let mut ratios = Vec::with_capacity(RESAMPLES);
    for _ in 0..RESAMPLES {
        rb.iter_mut().for_each(|x| *x = baseline[rng.below(baseline.len())]);
        rc.iter_mut().for_each(|x| *x = current[rng.below(current.len())]);
        ratios.push(ratio_of(median_in_place(&mut rc), median_in_place(&mut rb)));
    }
    ratios.sort_by(f64::total_cmp);
    let tail = (1.0 - CONFIDENCE) / 2.0;
    (quantile(&ratios, tail), quantile(&ratios, 1.0 - tail))
}

impl fmt::Display for GateReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "step wall time (ms)        n        min     median        p90        MAD")?;
        for (name, s) in [("baseline", &self.baseline), ("current", &self.current)] {
            let note = if s.warmup_dropped { "  (first step dropped: warm-up)" } else { "" };
            writeln!(
                f,
                "{name:<20} {:>7} {:>10.3} {:>10.3} {:>10.3} {:>10.3}{note}",
                s.n, s.min, s.median, s.p90, s.mad
            )?;
        }
        let pct = |r: f64| (r - 1.0) * 100.0;
        writeln!(
            f,
            "ratio of medians current/baseline: {:.4} ({:+.1}%), {:.0}% CI [{:.4}, {:.4}] (bootstrap, {RESAMPLES} resamples)",
            self.ratio,
            pct(self.ratio),
            CONFIDENCE * 100.0,
            self.ci.0,
            self.ci.1
        )?;
        let allowed = self.max_regression * 100.0;
        match self.verdict {
            Verdict::Regression => write!(
                f,
                "verdict: REGRESSION (CI lower bound {:+.1}% exceeds the allowed +{allowed:.1}%)",
                pct(self.ci.0)
            ),
            Verdict::Improvement => {
                write!(f, "verdict: IMPROVEMENT (CI upper bound {:+.1}% is below -{allowed:.1}%)", pct(self.ci.1))
            }
            Verdict::Ok => {
                write!(f, "verdict: OK (no change beyond ±{allowed:.1}% at {:.0}% confidence)", CONFIDENCE * 100.0)
            }
            Verdict::NoData => write!(f, "verdict: NO DATA (a log has no usable steps)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` samples around `center` with uniform relative noise of ±`noise`.
    fn samples(n: usize, center: f64, noise: f64, seed: u64) -> Vec<f64> {
        let mut rng = SplitMix64(seed);
        let unit = |r: &mut SplitMix64| (r.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        (0..n).map(|_| center * (1.0 + noise * (2.0 * unit(&mut rng) - 1.0))).collect()
    }

    #[test]
    fn identical_distributions_are_ok() {
        let b = samples(30, 10.0, 0.02, 1);
        let r = compare(&b, &b, 0.05);
        assert_eq!((r.verdict, r.ratio), (Verdict::Ok, 1.0));
        assert!(r.ci.0 <= 1.0 && r.ci.1 >= 1.0, "{r}");
        let r = compare(&b, &samples(30, 10.0, 0.02, 2), 0.05);
        assert_eq!(r.verdict, Verdict::Ok, "{r}");
        assert!(r.passed());
    }

    #[test]
    fn twenty_percent_slower_is_a_regression() {
        let r = compare(&samples(20, 10.0, 0.02, 3), &samples(20, 12.0, 0.02, 4), 0.05);
        assert_eq!(r.verdict, Verdict::Regression, "{r}");
        assert!(r.ci.0 > 1.15 && r.ci.1 < 1.25, "{r}");
        assert!(!r.passed() && r.is_regression());
        assert!(r.to_string().contains("REGRESSION"), "{r}");
    }

    #[test]
    fn twenty_percent_faster_is_an_improvement() {
        let r = compare(&samples(20, 10.0, 0.02, 5), &samples(20, 8.0, 0.02, 6), 0.05);
        assert_eq!(r.verdict, Verdict::Improvement, "{r}");
        assert!(r.passed() && !r.is_regression());
    }

    #[test]
    fn one_huge_outlier_is_not_a_regression() {
        let b = samples(20, 10.0, 0.02, 7);
        let mut c = samples(20, 10.0, 0.02, 8);
        c[10] = 1000.0;
        let r = compare(&b, &c, 0.05);
        assert_eq!(r.verdict, Verdict::Ok, "{r}");
        assert!(r.current.p90 < 20.0 || r.current.median < 10.5, "{r}");
    }

    #[test]
    fn noisy_six_percent_shift_is_not_a_regression() {
        let (b, c) = (samples(15, 10.0, 0.3, 9), samples(15, 10.6, 0.3, 10));
        let r = compare(&b, &c, 0.05);
        assert_eq!(r.verdict, Verdict::Ok, "{r}");
        assert!(r.ci.0 < 1.05 && r.ci.1 > 1.05, "the CI is wide: {r}");
        // The same shift with little noise and many steps is detected.
        let r = compare(&samples(200, 10.0, 0.01, 11), &samples(200, 10.6, 0.01, 12), 0.05);
        assert_eq!(r.verdict, Verdict::Regression, "{r}");
    }

    #[test]
    fn report_is_deterministic_and_readable() {
        let (b, c) = (samples(25, 10.0, 0.1, 13), samples(25, 10.3, 0.1, 14));
        let (r1, r2) = (compare(&b, &c, 0.05), compare(&b, &c, 0.05));
        assert_eq!(r1, r2);
        let text = r1.to_string();
        assert!(text.lines().count() <= 6, "{text}");
        for word in ["baseline", "current", "median", "p90", "MAD", "CI", "verdict"] {
            assert!(text.contains(word), "{word} missing in:\n{text}");
        }
    }

    #[test]
    fn warmup_step_is_dropped_only_beyond_two_steps() {
        let r = compare(&[100.0, 10.0, 10.0], &[100.0, 10.0], 0.05);
        assert_eq!((r.baseline.n, r.baseline.warmup_dropped, r.baseline.median), (2, true, 10.0));
        assert_eq!((r.current.n, r.current.warmup_dropped, r.current.median), (2, false, 55.0));
        let r = compare(&[], &[1.0, f64::NAN], 0.05);
        assert_eq!(r.verdict, Verdict::NoData);
        assert!(!r.passed() && r.to_string().contains("NO DATA"));
    }

    #[test]
    fn summary_statistics() {
        let s = summarize(&[5.0, 1.0, 3.0, 2.0, 4.0], false);
        assert_eq!((s.n, s.min, s.median, s.mad), (5, 1.0, 3.0, 1.0));
        assert!((s.p90 - 4.6).abs() < 1e-12);
        let mut even = [4.0, 1.0, 3.0, 2.0];
        assert_eq!(median_in_place(&mut even), 2.5);
        assert_eq!(ratio_of(0.0, 0.0), 1.0);
        assert_eq!(ratio_of(1.0, 0.0), f64::INFINITY);
    }

    #[test]
    fn percentages() {
        for (s, want) in [("5%", 0.05), ("0.05", 0.05), ("5", 0.05), (" 12.5 % ", 0.125), ("0", 0.0)] {
            assert!((parse_percent(s).unwrap() - want).abs() < 1e-12, "{s}");
        }
        assert!((parse_percent("1").unwrap() - 0.01).abs() < 1e-12);
        for bad in ["", "%", "-5%", "five", "nan", "inf", "5%%"] {
            let e = parse_percent(bad).unwrap_err().to_string();
            assert!(e.contains("bad percentage"), "{bad}: {e}");
        }
    }

    fn log(text: &str) -> Result<Vec<f64>> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bench.jsonl");
        std::fs::write(&path, text).unwrap();
        read_log(&path)
    }

    #[test]
    fn reads_benchmark_logs() {
        let text = "{\"step\": 0, \"wall_ms\": 12.5, \"enqueue_ms\": 1.0}\n\n\
                    {\"step\": 1, \"wall_ms\": 10, \"enqueue_ms\": 0.9, \"device_ms\": 9.1}\n";
        assert_eq!(log(text).unwrap(), [12.5, 10.0]);
    }

    #[test]
    fn malformed_logs_are_errors() {
        let ok = "{\"step\": 0, \"wall_ms\": 1.0, \"enqueue_ms\": 0.1}\n";
        for (text, want) in [
            (String::new(), "no steps"),
            ("\n \n".to_string(), "no steps"),
            (format!("{ok}{{\"step\": 1, \"wall_ms\": 1.0"), ":2: bad JSON"),
            (format!("{ok}{ok}{{\"step\": 2}}"), ":3: missing \"wall_ms\""),
            (format!("{{\"wall_ms\": \"fast\"}}\n{ok}"), ":1: \"wall_ms\" is not"),
            ("{\"wall_ms\": -1}".to_string(), ":1: \"wall_ms\" is not"),
            ("[1, 2]".to_string(), ":1: expected a JSON object"),
            ("wall_ms=3".to_string(), ":1: bad JSON"),
        ] {
            let e = format!("{:#}", log(&text).unwrap_err());
            assert!(e.contains(want) && !e.contains('\n'), "{text:?}: {e:?} lacks {want:?}");
        }
        let e = read_log("/nonexistent/bench.jsonl").unwrap_err();
        assert!(format!("{e:#}").contains("/nonexistent/bench.jsonl"));
    }

    #[test]
    fn logs_must_be_small_regular_files() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.jsonl");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        let e = format!("{:#}", read_log(&fifo).unwrap_err());
        assert!(e.ends_with("is a FIFO, not a regular file"), "{e}");
        let big = dir.path().join("big.jsonl");
        std::fs::File::create(&big).unwrap().set_len(MAX_LOG_BYTES + 1).unwrap();
        let e = format!("{:#}", read_log(&big).unwrap_err());
        assert!(e.contains("more than the"), "{e}");
    }

    #[test]
    fn time_limits_are_positive_and_finite() {
        assert_eq!(parse_time_limit(" 12.5"), Ok(12.5));
        for bad in ["nan", "NaN", "inf", "-1", "0", "", "fast"] {
            assert!(parse_time_limit(bad).is_err(), "{bad}");
        }
    }
}
