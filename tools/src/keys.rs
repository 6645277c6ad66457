//! `pilot keygen`, `pilot sign`, and the trusted key with which `run` and `load` accept only artifacts
//! their owner signed (`--trusted-key FILE` or `PILOT_TRUSTED_KEY`).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use pilot_core::artifact::signature::{self, VerifyingKey};
use pilot_core::Artifact;

#[derive(clap::Args)]
pub struct KeygenArgs {
    /// Where to write the secret key (created; never overwritten; mode 0600).
    #[arg(long, value_name = "FILE")]
    pub secret: PathBuf,
    /// Where to write the public key, the one `run` and `load` take as `--trusted-key`.
    #[arg(long, value_name = "FILE")]
    pub public: PathBuf,
}

#[derive(clap::Args)]
pub struct SignArgs {
    pub artifact: PathBuf,
    /// The secret key made by `pilot keygen`.
    #[arg(long, value_name = "FILE")]
    pub key: PathBuf,
    /// Where to write the signed artifact (default: replace the artifact, atomically).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Key files are 65 bytes; anything much longer is not one.
const KEY_FILE_LIMIT: u64 = 4096;

fn read_key_file(path: &Path) -> anyhow::Result<String> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(KEY_FILE_LIMIT).read_to_end(&mut bytes))
        .with_context(|| format!("{}", path.display()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The public key in `path`, if one is given.
pub fn trusted_key(path: Option<&Path>) -> anyhow::Result<Option<VerifyingKey>> {
    let Some(path) = path else { return Ok(None) };
    let key = signature::public_key(&read_key_file(path)?).with_context(|| format!("{}", path.display()))?;
    Ok(Some(key))
}

/// Refuses `artifact` unless `key` is unset or the artifact is signed by its holder.
pub fn check_trusted(artifact: &Artifact, key: Option<&VerifyingKey>) -> anyhow::Result<()> {
    if let Some(key) = key {
        artifact.verify_signature(key)?;
    }
    Ok(())
}

/// `pilot keygen`: a new key pair from the operating system's random source.
pub fn keygen(args: &KeygenArgs) -> anyhow::Result<bool> {
    let mut seed = [0u8; 32];
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut seed)).context("reading /dev/urandom")?;
    let (secret, public) = signature::key_pair(seed);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let write = |path: &Path, options: &std::fs::OpenOptions, text: &str| -> anyhow::Result<()> {
        let mut f = options.open(path).with_context(|| format!("creating {}", path.display()))?;
        f.write_all(text.as_bytes()).with_context(|| format!("writing {}", path.display()))
    };
    write(&args.secret, &options, &secret)?;
    let mut public_options = std::fs::OpenOptions::new();
    public_options.write(true).create(true).truncate(true);
    write(&args.public, &public_options, &public)?;
    println!("secret key {}, public key {}", args.secret.display(), args.public.display());
    Ok(true)
}

/// `pilot sign`: appends the signature to an artifact, written atomically.
pub fn sign(args: &SignArgs) -> anyhow::Result<bool> {
    let key = signature::secret_key(&read_key_file(&args.key)?).with_context(|| format!("{}", args.key.display()))?;
    let bytes = std::fs::read(&args.artifact).with_context(|| format!("{}", args.artifact.display()))?;
    let signed = signature::sign(&bytes, &key).with_context(|| format!("{}", args.artifact.display()))?;
    let out = args.output.as_deref().unwrap_or(&args.artifact);
    if std::fs::symlink_metadata(out).is_ok_and(|m| !m.file_type().is_file()) {
        bail!("{}: not a regular file; pilot sign replaces only regular files", out.display());
    }
    let dir = match out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir).with_context(|| format!("writing {}", out.display()))?;
    // The signed file keeps the artifact's permissions (a temporary file starts private).
    let permissions = std::fs::metadata(&args.artifact).map(|m| m.permissions());
    permissions.and_then(|p| tmp.as_file().set_permissions(p)).with_context(|| format!("writing {}", out.display()))?;
    tmp.write_all(&signed)
        .and_then(|()| tmp.as_file().sync_all())
        .with_context(|| format!("writing {}", out.display()))?;
    tmp.persist(out).map_err(|e| e.error).with_context(|| format!("writing {}", out.display()))?;
    println!("signed {}", out.display());
    Ok(true)
}
