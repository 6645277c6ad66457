//! Byte patterns in files the tests read (artifacts, code objects).

/// Where `needle` first occurs in `hay`; `None` when it does not (or is empty).
pub fn find_bytes(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// How many times `needle` occurs in `hay`, overlapping occurrences included (0 for an empty needle).
pub fn count_bytes(hay: &[u8], needle: &[u8]) -> usize {
    if needle.is_empty() {
        return 0;
    }
    hay.windows(needle.len()).filter(|w| *w == needle).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_first_and_counts_all() {
        assert_eq!(find_bytes(b"xxabab", b"ab"), Some(2));
        assert_eq!(find_bytes(b"xxabab", b"ba"), Some(3));
        assert_eq!(find_bytes(b"ab", b"abc"), None);
        assert_eq!(find_bytes(b"ab", b""), None);
        assert_eq!(count_bytes(b"aaaa", b"aa"), 3);
        assert_eq!(count_bytes(b"abab", b"c"), 0);
    }
}
