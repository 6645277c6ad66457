//! Every committed register module matches a fresh render of its data file: `<crate>/regs/<family>.regs` generates
//! `<crate>/src/<family>.rs`. With `PILOT_BLESS=1` the stale files are rewritten instead.

use std::fs;
use std::path::{Path, PathBuf};

/// Every `<crate>/regs/*.regs` of the workspace, sorted.
fn data_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for krate in fs::read_dir(root).unwrap().map(|e| e.unwrap().path()) {
        let regs = krate.join("regs");
        if !krate.join("Cargo.toml").is_file() || !regs.is_dir() {
            continue;
        }
        for f in fs::read_dir(&regs).unwrap().map(|e| e.unwrap().path()) {
            if f.extension().is_some_and(|x| x == "regs") {
                out.push(f);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn generated_register_modules_are_fresh() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let bless = std::env::var_os("PILOT_BLESS").is_some_and(|v| v == "1");
    let files = data_files(root);
    assert!(!files.is_empty(), "no register data files under {}", root.display());
    let mut stale = Vec::new();
    for data in files {
        let rel = data.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
        let text = fs::read_to_string(&data).unwrap();
        let parsed = pilot_regs_gen::parse(&rel, &text).unwrap_or_else(|e| panic!("{e}"));
        let rendered = pilot_regs_gen::render(&parsed, &rel);
        let krate = data.parent().unwrap().parent().unwrap();
        let out = krate.join("src").join(data.file_stem().unwrap()).with_extension("rs");
        if fs::read_to_string(&out).ok().as_deref() == Some(rendered.as_str()) {
            continue;
        }
        if bless {
            fs::write(&out, rendered).unwrap();
        } else {
            stale.push(out.strip_prefix(root).unwrap().display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "stale generated register modules {stale:?}: run PILOT_BLESS=1 cargo test -p pilot-regs-gen --test generated"
    );
}
