//! How a kernel's outer loops are cut into the dispatch's parts (the kernel ABI in `pilot-core`'s
//! `cpu` module: part `p` of `nparts` runs `[P * p / nparts, P * (p + 1) / nparts)` of `P` units).
//!
//! The unit of work is one iteration of the leading outer loops taken together: the outermost loop
//! with extent > 1 and, while that gives fewer than [`MIN_UNITS`], the outer loops nested under it.
//! Splitting only the outermost loop would leave threads idle where it is short: 3 groups of 8
//! output channels on 2 threads run as 2 + 1, at 1.33× instead of 2×; fused with the 64 rows below
//! them they are 192 units, which any thread count up to [`MIN_UNITS`] divides within one unit.
//! The fused loops become one counter `c{v}` over their product, each variable a quotient and
//! remainder of it, so the loop nest below keeps its shape (one brace per loop).

/// Units of work below which the split takes in the next outer loop too.
pub const MIN_UNITS: u64 = 64;

/// One outer loop of a kernel, outermost first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loop {
    /// The loop variable (rendered `v{var}`).
    pub var: u32,
    /// Values taken: `0, step, 2 step, ..` below `extent`; `extent` is a multiple of `step`.
    pub extent: u64,
    pub step: u64,
}

impl Loop {
    fn groups(&self) -> u64 {
        self.extent / self.step
    }
}

/// The loops a kernel's parts are cut from: `loops[first..first + fused]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    loops: Vec<Loop>,
    first: usize,
    fused: usize,
}

impl Split {
    /// The split of `loops` (a kernel's outer loops, outermost first; loops of extent 1 allowed):
    /// `None` when every loop has extent 1. With `keep_innermost`, the innermost loop of extent > 1
    /// stays a loop of its own unless it is the only one (the generic loop nest vectorizes it).
    pub fn new(loops: Vec<Loop>, keep_innermost: bool) -> Option<Split> {
        let first = loops.iter().position(|l| l.extent > 1)?;
        let last = loops.iter().rposition(|l| l.extent > 1)?;
        let end = if keep_innermost && last > first { last } else { loops.len() };
        let mut units = 1;
        let mut fused = 0;
        for l in &loops[first..end] {
            if units >= MIN_UNITS {
                break;
            }
            units *= l.groups();
            fused += 1;
        }
        Some(Split { loops, first, fused })
    }

    /// Units of work: the dispatch's `global[0]` (saturated: a dispatch never uses that many).
    pub fn parts(&self) -> u32 {
        u32::try_from(self.units()).unwrap_or(u32::MAX)
    }

    fn units(&self) -> u64 {
        self.fused_loops().iter().map(Loop::groups).product()
    }

    fn fused_loops(&self) -> &[Loop] {
        &self.loops[self.first..self.first + self.fused]
    }

    /// The bounds of loop `var` as C expressions when it is split alone with step 1: part `p` runs
    /// `var` over a plain range (which a loop peel may cut further).
    pub fn range(&self, var: u32) -> Option<(String, String)> {
        let fused = self.fused_loops();
        let l = fused.first().filter(|l| fused.len() == 1 && l.var == var && l.step == 1)?;
        let g = l.groups();
        Some((format!("(i64){g}LL * part / nparts"), format!("(i64){g}LL * (part + 1) / nparts")))
    }

    /// The C that opens loop `var` (one `{`, closed by one `}`), if it is a split loop; other loops
    /// are rendered as before.
    pub fn header(&self, var: u32) -> Option<String> {
        let fused = self.fused_loops();
        let at = fused.iter().position(|l| l.var == var)?;
        let head = fused[0].var;
        let l = fused[at];
        if fused.len() == 1 {
            let (g, s) = (l.groups(), l.step);
            return Some(format!(
                "for (i64 v{var} = (i64){g}LL * part / nparts * {s}; v{var} < (i64){g}LL * (part + 1) / nparts * {s}; v{var} += {s}) {{"
            ));
        }
        // Units below this loop in the fused counter.
        let inner: u64 = fused[at + 1..].iter().map(Loop::groups).product();
        let value = format!("c{head} / {inner} % {} * {}", l.groups(), l.step);
        Some(if at == 0 {
            let units = self.units();
            format!(
                "for (i64 c{head} = (i64){units}LL * part / nparts; c{head} < (i64){units}LL * (part + 1) / nparts; c{head}++) {{ const i64 v{var} = {value};"
            )
        } else {
            format!("{{ const i64 v{var} = {value};")
        })
    }
}

/// The split of a kernel whose only loop of extent > 1 is its vectorized inner range of `extent`:
/// `(lo, hi, parts)`, the C bounds of part `part` and the number of units. Units are whole
/// vectors of `lanes` (the last one partial), so no part runs a vector loop narrower than the
/// vector unit: split element by element, 40 rows of a reduction became 8 parts of 5 scalar rows.
pub fn inner_range(extent: u64, lanes: u64) -> (String, String, u32) {
    let units = extent.div_ceil(lanes.max(1));
    let bound = |p: &str| format!("(i64){units}LL * ({p}) / nparts * {lanes}");
    let hi = bound("part + 1");
    (bound("part"), format!("({hi} < {extent} ? {hi} : {extent})"), u32::try_from(units).unwrap_or(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(var: u32, extent: u64, step: u64) -> Loop {
        Loop { var, extent, step }
    }

    /// Runs the parts' ranges as the rendered C would, returning per part the visited tuples.
    fn visit(split: &Split, nparts: u64) -> Vec<Vec<Vec<u64>>> {
        let fused = split.fused_loops();
        let units = u64::from(split.parts());
        (0..nparts)
            .map(|part| {
                (units * part / nparts..units * (part + 1) / nparts)
                    .map(|c| {
                        let mut inner = units;
                        fused
                            .iter()
                            .map(|l| {
                                inner /= l.groups();
                                c / inner % l.groups() * l.step
                            })
                            .collect()
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn a_long_outer_loop_is_split_alone() {
        let s = Split::new(vec![l(1, 1, 1), l(2, 256, 1), l(3, 64, 1)], false).unwrap();
        assert_eq!(s.parts(), 256);
        assert_eq!(s.header(1), None);
        assert_eq!(s.header(3), None);
        assert_eq!(
            s.header(2).unwrap(),
            "for (i64 v2 = (i64)256LL * part / nparts * 1; v2 < (i64)256LL * (part + 1) / nparts * 1; v2 += 1) {"
        );
    }

    #[test]
    fn short_outer_loops_are_fused_until_there_are_enough_units() {
        // 24 channels blocked by 8 (3 groups) over 64 rows over 128 columns.
        let s = Split::new(vec![l(0, 1, 1), l(5, 24, 8), l(6, 64, 1), l(7, 128, 1)], false).unwrap();
        assert_eq!(s.parts(), 3 * 64);
        assert_eq!(
            s.header(5).unwrap(),
            "for (i64 c5 = (i64)192LL * part / nparts; c5 < (i64)192LL * (part + 1) / nparts; c5++) { const i64 v5 = c5 / 64 % 3 * 8;"
        );
        assert_eq!(s.header(6).unwrap(), "{ const i64 v6 = c5 / 1 % 64 * 1;");
        assert_eq!(s.header(7), None);
        // More loops when two are not enough; a loop of extent 1 in between is fused harmlessly.
        let loops = vec![l(1, 2, 1), l(2, 1, 1), l(3, 4, 1), l(4, 4, 2), l(5, 9, 1), l(6, 7, 1)];
        let s = Split::new(loops.clone(), false).unwrap();
        assert_eq!(s.parts(), 2 * 4 * 2 * 9);
        assert!(s.header(5).is_some() && s.header(6).is_none());
        assert_eq!(Split::new(vec![l(1, 1, 1)], false), None);
        // The innermost loop stays a loop where asked, unless it is the only one.
        let s = Split::new(loops[..5].to_vec(), true).unwrap();
        assert_eq!(s.parts(), 2 * 4 * 2);
        assert!(s.header(4).is_some() && s.header(5).is_none());
        let s = Split::new(vec![l(1, 1, 1), l(2, 4096, 1)], true).unwrap();
        assert_eq!(s.parts(), 4096);
    }

    #[test]
    fn an_inner_range_is_split_in_whole_vectors() {
        let (lo, hi, parts) = inner_range(40, 16);
        assert_eq!(parts, 3);
        assert_eq!(lo, "(i64)3LL * (part) / nparts * 16");
        assert_eq!(hi, "((i64)3LL * (part + 1) / nparts * 16 < 40 ? (i64)3LL * (part + 1) / nparts * 16 : 40)");
        // The ranges those bounds give: every element once, each part a multiple of 16 but the last.
        for (extent, lanes) in [(40u64, 16u64), (120, 16), (6625, 8), (3, 4)] {
            let units = extent.div_ceil(lanes);
            for nparts in 1..=units {
                let ranges: Vec<(u64, u64)> = (0..nparts)
                    .map(|p| (units * p / nparts * lanes, (units * (p + 1) / nparts * lanes).min(extent)))
                    .collect();
                assert_eq!(ranges[0].0, 0);
                assert_eq!(ranges[ranges.len() - 1].1, extent);
                assert!(ranges.windows(2).all(|w| w[0].1 == w[1].0), "{extent}/{lanes}: {ranges:?}");
                assert!(ranges.iter().all(|&(a, b)| b == extent || (b - a) % lanes == 0 && b > a));
            }
        }
    }

    #[test]
    fn every_iteration_runs_in_exactly_one_part_and_parts_are_balanced() {
        let s = Split::new(vec![l(5, 24, 8), l(6, 64, 1), l(7, 128, 1)], false).unwrap();
        for nparts in [1, 2, 3, 8, 64, 200] {
            let parts = visit(&s, nparts);
            let mut all: Vec<Vec<u64>> = parts.iter().flatten().cloned().collect();
            all.sort();
            let want: Vec<Vec<u64>> = (0..3).flat_map(|a| (0..64).map(move |b| vec![a * 8, b])).collect();
            assert_eq!(all, want, "nparts {nparts}");
            let sizes: Vec<usize> = parts.iter().map(Vec::len).collect();
            let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            assert!(hi - lo <= 1, "nparts {nparts}: part sizes {sizes:?}");
        }
    }
}
