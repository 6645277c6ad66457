//! Every committed generated file equals a fresh generation. A generator that cannot run (no venv, no rustfmt)
//! fails the test: a stale file must not pass because its tool is missing.

#[test]
fn committed_generated_files_are_fresh() {
    let root = pilot_regen::workspace_root();
    let mut problems = Vec::new();
    for out in pilot_regen::OUTPUTS {
        match (out.generate)(&root) {
            Ok(text) => {
                if std::fs::read_to_string(root.join(out.path)).ok().as_deref() != Some(text.as_str()) {
                    problems.push(format!("{} is stale", out.path));
                }
            }
            Err(e) => problems.push(format!("{}: generator failed: {e}", out.path)),
        }
    }
    assert!(problems.is_empty(), "{}; run `cargo run -p pilot-regen`", problems.join("; "));
}
