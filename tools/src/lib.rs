//! The `pilot` command's modules; `main.rs` holds only the argument parsing.

#[cfg(feature = "compiler")]
pub mod compile;
pub mod devices;
pub mod gate;
pub mod inspect;
pub mod keys;
pub use pilot_core::npy;
pub mod profile;
pub mod rd_capture;
pub mod run;
#[cfg(feature = "compiler")]
pub mod selftest;
pub mod smi;
pub mod usb;

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
    inspect::printable(&msg.replace(['\n', '\r'], " "))
}
