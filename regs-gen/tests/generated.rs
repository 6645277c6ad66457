//! Every committed register module matches a fresh render of its data file: `<crate>/regs/<path>/<family>.regs`
//! generates `<crate>/src/<path>/<family>.rs` (the folders under `regs/` mirror those under `src/`). With
//! `PILOT_BLESS=1` the stale files are rewritten instead.

use std::fs;
use std::path::{Path, PathBuf};

/// Every `<crate>/regs/**/*.regs` of the workspace with the crate folder, sorted.
fn data_files(root: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    for krate in fs::read_dir(root).unwrap().map(|e| e.unwrap().path()) {
        let regs = krate.join("regs");
        if krate.join("Cargo.toml").is_file() && regs.is_dir() {
            walk(&regs, &mut |f| out.push((krate.clone(), f)));
        }
    }
    out.sort();
    out
}

fn walk(dir: &Path, found: &mut dyn FnMut(PathBuf)) {
    for f in fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()) {
        if f.is_dir() {
            walk(&f, found);
        } else if f.extension().is_some_and(|x| x == "regs") {
            found(f);
        }
    }
}

#[test]
fn generated_register_modules_are_fresh() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let bless = std::env::var_os("PILOT_BLESS").is_some_and(|v| v == "1");
    let files = data_files(root);
    assert!(!files.is_empty(), "no register data files under {}", root.display());
    let mut stale = Vec::new();
    for (krate, data) in files {
        let rel = data.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
        let text = fs::read_to_string(&data).unwrap();
        let parsed = pilot_regs_gen::parse(&rel, &text).unwrap_or_else(|e| panic!("{e}"));
        let rendered = pilot_regs_gen::render(&parsed, &rel);
        let inside = data.strip_prefix(krate.join("regs")).unwrap();
        let out = krate.join("src").join(inside).with_extension("rs");
        if fs::read_to_string(&out).ok().as_deref() == Some(rendered.as_str()) {
            continue;
        }
        if bless {
            fs::create_dir_all(out.parent().unwrap()).unwrap();
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
