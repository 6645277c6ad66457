//! `include/pilot.h` is what cbindgen generates from the source now; `PILOT_BLESS=1` rewrites it.

use std::path::Path;

#[test]
fn committed_header_is_fresh() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(root.join("src/error.rs"))
        .with_src(root.join("src/ffi.rs"))
        .generate()
        .expect("cbindgen generates pilot.h");
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let generated = String::from_utf8(generated).expect("utf-8 header");
    let path = root.join("include/pilot.h");
    if std::env::var_os("PILOT_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write pilot.h");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "capi/include/pilot.h is stale: regenerate it with PILOT_BLESS=1 cargo test -p pilot-capi --test header"
    );
}
