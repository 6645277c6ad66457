//! Writes the demo policy artifact (see `pilot_tests::demo`) to the path given as the only argument.

fn main() {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: make_demo OUT.pkl");
        std::process::exit(2);
    };
    let object = pilot_tests::cc_object(pilot_tests::demo::KERNEL);
    if let Err(e) = pilot_tests::demo::write(std::path::Path::new(&path), &object, "cpu") {
        eprintln!("make_demo: {e}");
        std::process::exit(2);
    }
}
