//! pilot's runtime front door, shared by the `pilot` command, the C ABI and the Python module: [`devices::open`]
//! opens a device by name (the opt-in ones behind cargo features), and [`one_line`] turns an error chain into the
//! one line every front end prints; [`cancel`] asks a running step to stop.

pub mod cancel;
pub mod devices;
#[cfg(feature = "fake-kgsl")]
pub mod fake_exec;

/// An error chain on one line. Many library errors print their source inside their own text and
/// also return it from `source()`, so each cause is added only if the text so far lacks it.
pub fn one_line(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !msg.contains(&text) {
            if !msg.is_empty() {
                msg.push_str(": ");
            }
            msg.push_str(&text);
        }
    }
    printable(&msg.replace(['\n', '\r'], " "))
}

/// `text` with control characters (terminal escapes, newlines, NUL, ...) shown as Rust escapes, so
/// that names read from an artifact cannot drive the terminal or fake extra lines.
pub fn printable(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn printable_escapes_control_characters() {
        assert_eq!(super::printable("a\x1b[2Jb\nc\u{0}é"), "a\\u{1b}[2Jb\\nc\\u{0}é");
    }

    #[test]
    fn one_line_joins_causes_once_and_flattens_newlines() {
        let e = anyhow::anyhow!("inner\nline").context("outer: inner\nline").context("top");
        assert_eq!(super::one_line(&e), "top: outer: inner line");
        let e = anyhow::anyhow!("root").context("middle").context("top");
        assert_eq!(super::one_line(&e), "top: middle: root");
    }
}
