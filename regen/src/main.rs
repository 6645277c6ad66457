//! `cargo run -p pilot-regen`: rewrites every committed generated file whose fresh generation differs
//! (the list and the generators: regen/src/lib.rs). Exit code 1 when a generator fails.

use std::process::ExitCode;

fn main() -> ExitCode {
    let root = pilot_regen::workspace_root();
    let mut failed = false;
    for out in pilot_regen::OUTPUTS {
        let path = root.join(out.path);
        match (out.generate)(&root) {
            Ok(text) if std::fs::read_to_string(&path).ok().as_deref() == Some(text.as_str()) => {
                println!("{}: fresh", out.path)
            }
            Ok(text) => match std::fs::write(&path, text) {
                Ok(()) => println!("{}: regenerated", out.path),
                Err(e) => {
                    eprintln!("{}: {e}", out.path);
                    failed = true;
                }
            },
            Err(e) => {
                eprintln!("{}: {e}", out.path);
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
