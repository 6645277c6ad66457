//! `pilot`: compile, run, load, inspect, gate, smi, usb (README.md, "The `pilot` command").
//!
//! Exit codes: 0 success, 1 a gate or check failed, 2 bad usage or bad input (one line on stderr).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
#[cfg(feature = "smi")]
use pilot_tools::smi;
use pilot_tools::{gate, inspect, run};

#[derive(Parser)]
#[command(name = "pilot", version, about = "Compile ONNX models and run them on comma-style hardware")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Compile an ONNX model into an artifact.
    #[cfg(feature = "compiler")]
    Compile(pilot_tools::compile::CompileArgs),
    /// Compile an ONNX model (this build has no compiler).
    #[cfg(not(feature = "compiler"))]
    Compile {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        rest: Vec<String>,
    },
    /// Step an artifact and print per-step times.
    Run(run::RunArgs),
    /// Load an artifact repeatedly and print load times.
    Load(run::LoadArgs),
    /// Make an Ed25519 key pair for signing artifacts.
    Keygen(pilot_tools::keys::KeygenArgs),
    /// Sign an artifact with a secret key from `pilot keygen`.
    Sign(pilot_tools::keys::SignArgs),
    /// Describe an artifact.
    Inspect {
        artifact: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Compare two benchmark logs; exit 1 on a real regression.
    Gate {
        #[arg(long)]
        baseline: PathBuf,
        #[arg(long)]
        current: PathBuf,
        /// Largest tolerated slowdown of the median step time ("5%", "0.05" or "5").
        #[arg(long, default_value = "5%")]
        max_regression: String,
    },
    /// GPU housekeeping for device CI: unload kernel modules, kill processes holding the GPU.
    #[cfg(feature = "smi")]
    Smi {
        vendor: smi::Vendor,
        #[command(subcommand)]
        action: SmiAction,
    },
    /// GPU housekeeping for device CI (this build has no smi).
    #[cfg(not(feature = "smi"))]
    #[command(hide = true)]
    Smi {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        rest: Vec<String>,
    },
    /// The USB GPU bridge (ASM2464, tinygrad's custom firmware): list, info, copy-speed, reset.
    #[command(subcommand)]
    Usb(pilot_tools::usb::UsbCommand),
}

#[cfg(feature = "smi")]
#[derive(Subcommand)]
enum SmiAction {
    /// Unload the vendor's kernel modules (with --expect: only check that they are unloaded).
    Rmmod {
        #[arg(long)]
        expect: bool,
    },
    /// Kill the processes holding the GPU's device nodes or pilot's lock files.
    KillPids {
        /// Never call sudo.
        #[arg(long)]
        sudoless: bool,
        /// Only the GPU at this PCI address (e.g. 0000:03:00.0).
        #[arg(long)]
        pci_bus: Option<String>,
    },
}

fn dispatch(cli: Cli) -> anyhow::Result<bool> {
    match cli.command {
        #[cfg(feature = "compiler")]
        Command::Compile(args) => pilot_tools::compile::compile(&args),
        #[cfg(not(feature = "compiler"))]
        Command::Compile { .. } => {
            anyhow::bail!("this pilot was built without the compiler (cargo feature `compiler`)")
        }
        Command::Usb(cmd) => pilot_tools::usb::run(&cmd),
        Command::Run(args) => run::run(&args),
        Command::Load(args) => run::load(&args),
        Command::Keygen(args) => pilot_tools::keys::keygen(&args),
        Command::Sign(args) => pilot_tools::keys::sign(&args),
        Command::Inspect { artifact, json } => inspect::inspect(&artifact, json).map(|()| true),
        Command::Gate { baseline, current, max_regression } => {
            let max = gate::parse_percent(&max_regression)?;
            let report = gate::compare(&gate::read_log(&baseline)?, &gate::read_log(&current)?, max);
            println!("{report}");
            Ok(!report.is_regression())
        }
        #[cfg(not(feature = "smi"))]
        Command::Smi { .. } => anyhow::bail!("this pilot was built without smi (cargo feature `smi`)"),
        #[cfg(feature = "smi")]
        Command::Smi { vendor, action } => {
            let mut env = smi::SystemEnv::default();
            match action {
                SmiAction::Rmmod { expect } => smi::rmmod(vendor, expect, &mut env),
                SmiAction::KillPids { sudoless, pci_bus } => {
                    smi::kill_pids(vendor, sudoless, pci_bus.as_deref(), &mut env)
                }
            }
        }
    }
}

/// clap's error as one line: its first line without the `error: ` prefix, and where to look for more.
fn usage_error(e: &clap::Error) -> String {
    use clap::error::ErrorKind;
    let first = match e.kind() {
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand => {
            "arguments or a subcommand are missing".to_string()
        }
        _ => {
            // The first paragraph: the message and any list under it; tips and usage follow a blank line.
            let text = e.render().to_string();
            let lines: Vec<&str> =
                text.lines().map(str::trim).skip_while(|l| l.is_empty()).take_while(|l| !l.is_empty()).collect();
            let joined = lines.join(" ");
            joined.strip_prefix("error: ").unwrap_or(&joined).to_string()
        }
    };
    format!("{first} (see pilot --help)")
}

fn main() -> ExitCode {
    // Output piped into `head` ends the process quietly, as for any Unix tool, instead of a panic
    // on the failed write.
    // SAFETY: setting a signal's disposition to the default installs no handler code.
    let _ =
        unsafe { nix::sys::signal::signal(nix::sys::signal::Signal::SIGPIPE, nix::sys::signal::SigHandler::SigDfl) };
    // First, before any thread starts: SIGINT/SIGTERM/SIGHUP remove temporary files and scratch.
    if let Err(e) = pilot_core::fsio::install_signal_cleanup() {
        eprintln!("pilot: error: installing the signal handler: {e}");
        return ExitCode::from(2);
    }
    env_logger::Builder::from_env(env_logger::Env::default().filter_or("PILOT_LOG", "warn")).init();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version: clap's full text on stdout, exit 0.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("pilot: error: {}", usage_error(&e));
            return ExitCode::from(2);
        }
    };
    match dispatch(cli) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("pilot: error: {}", pilot_tools::one_line(&e));
            ExitCode::from(2)
        }
    }
}
