//! GPU housekeeping for CI machines, after tinygrad's `extra/hcq/hcq_smi.py`:
//!
//! ```text
//! pilot smi {amd,nv} rmmod [--expect]
//! pilot smi {amd,nv} kill-pids [--sudoless] [--pci-bus BUS]
//! ```
//!
//! - [`rmmod`]: unloads the vendor's kernel modules ([`Vendor::modules`], in that order) that
//!   `/proc/modules` lists, with `sudo rmmod MOD` (plain `rmmod` when already root), and succeeds only
//!   if none is loaded afterwards. With `--expect` it runs nothing and only checks that none is loaded
//!   (for CI machines where the userspace driver owns the GPU).
//! - [`kill_pids`]: finds the processes holding the GPU, by reading the `/proc/<pid>/fd/*` symlinks (no
//!   lsof): for `amd`, `/dev/kfd`, `/dev/dri/renderD*` and `/dev/dri/card*`; for `nv`, `/dev/nvidia*`;
//!   for both, pilot's lock files ([`LOCK_DIR`]`/`[`LOCK_PREFIX`]`*`[`LOCK_SUFFIX`]). It sends them
//!   SIGKILL, falls back to `sudo kill -9 PID` when denied (never with `--sudoless`, never when root),
//!   waits for them to let go, and succeeds only if none still holds the GPU. The current process and
//!   pid 1 are never killed. Without root, the fds of other users' processes cannot be read: those are
//!   reported as a count, not guessed at.
//! - `--pci-bus BUS` (`0000:03:00.0` or `03:00.0`) restricts the device nodes to that PCI device:
//!   `amd` matches only the `/dev/dri` nodes listed in `/sys/bus/pci/devices/BUS/drm/` (and not
//!   `/dev/kfd`, which is shared by all AMD GPUs; ROCm processes also hold the render node of each GPU
//!   they use); `nv` matches only `/dev/nvidiaN` with N the "Device Minor" of
//!   `/proc/driver/nvidia/gpus/BUS/information` (not the shared control nodes); lock files match only
//!   if their name contains the normalised bus id.
//!
//! Everything touching the system goes through [`SmiEnv`] (root of the file system, euid, running a
//! command, sending SIGKILL, sleeping, reporting), so tests run on a fake `/proc` in a temporary
//! directory and check exactly which pids would be killed and which commands would run.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};

/// Directory of pilot's device lock files.
pub const LOCK_DIR: &str = "/tmp";
/// Prefix of pilot's device lock file names.
pub const LOCK_PREFIX: &str = "pilot-";
/// Suffix of pilot's device lock file names.
pub const LOCK_SUFFIX: &str = ".lock";

/// The lock file a pilot backend holds open while it owns a device: `/tmp/pilot-<tag>.lock`.
///
/// Convention: `tag` is `<backend>-<device id>`, with the normalised PCI bus id for PCI devices (e.g.
/// `amd-0000:03:00.0`, so `--pci-bus` finds it) and any other stable id otherwise (e.g. `usb-2-1`).
/// `kill-pids` of either vendor kills the holders of every such file (see the module docs).
pub fn lock_path(tag: &str) -> PathBuf {
    Path::new(LOCK_DIR).join(format!("{LOCK_PREFIX}{tag}{LOCK_SUFFIX}"))
}

/// GPU vendor, as named on the command line (`amd`, `nv`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Vendor {
    Amd,
    Nv,
}

impl Vendor {
    /// The vendor's kernel modules, in unload order.
    pub fn modules(self) -> &'static [&'static str] {
        match self {
            Vendor::Amd => &["amdgpu"],
            Vendor::Nv => &["nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia"],
        }
    }

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Vendor::Amd => "amd",
            Vendor::Nv => "nv",
        }
    }
}

/// Why SIGKILL could not be sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KillError {
    /// The process no longer exists (ESRCH).
    NoSuchProcess,
    /// Not allowed (EPERM).
    PermissionDenied,
    Other(String),
}

/// Everything `smi` needs from the system; [`SystemEnv`] is the real one.
pub trait SmiEnv {
    /// Root of the file system to read `/proc` and `/sys` under (`/` on a real system).
    fn root(&self) -> &Path;
    /// Effective user id (0: root, no sudo needed).
    fn euid(&self) -> u32;
    /// The current process, never killed.
    fn self_pid(&self) -> u32;
    /// Runs a command (`argv[0]` looked up in `PATH`), waiting for it; `Ok(true)` if it succeeded.
    fn run(&mut self, argv: &[&str]) -> std::io::Result<bool>;
    /// Sends SIGKILL to `pid`.
    fn kill(&mut self, pid: u32) -> Result<(), KillError>;
    /// Waits (while killed processes exit).
    fn sleep(&mut self, duration: Duration);
    /// Reports one line of progress to the user.
    fn say(&mut self, line: &str);
}

/// The real system: `/`, the process's euid, `std::process::Command`, `kill(2)`, stdout.
#[derive(Debug)]
pub struct SystemEnv {
    root: PathBuf,
    euid: u32,
}

impl SystemEnv {
    /// The euid is read from `/proc/self/status` (treated as non-root if that fails).
    pub fn new() -> SystemEnv {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let euid = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1))
            .and_then(|id| id.parse().ok())
            .unwrap_or(u32::MAX);
        SystemEnv { root: PathBuf::from("/"), euid }
    }
}

impl Default for SystemEnv {
    fn default() -> Self {
        SystemEnv::new()
    }
}

impl SmiEnv for SystemEnv {
    fn root(&self) -> &Path {
        &self.root
    }

    fn euid(&self) -> u32 {
        self.euid
    }

    fn self_pid(&self) -> u32 {
        std::process::id()
    }

    fn run(&mut self, argv: &[&str]) -> std::io::Result<bool> {
        let (program, args) = argv.split_first().ok_or(std::io::ErrorKind::InvalidInput)?;
        Ok(std::process::Command::new(program).args(args).status()?.success())
    }

    fn kill(&mut self, pid: u32) -> Result<(), KillError> {
        use nix::errno::Errno;
        // Never 0 or negative (process groups, "everyone"), never init.
        let raw = i32::try_from(pid).ok().filter(|&p| p > 1);
        let raw = raw.ok_or_else(|| KillError::Other(format!("refusing to kill pid {pid}")))?;
        let pid = nix::unistd::Pid::from_raw(raw);
        match nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL) {
            Ok(()) => Ok(()),
            Err(Errno::ESRCH) => Err(KillError::NoSuchProcess),
            Err(Errno::EPERM) => Err(KillError::PermissionDenied),
            Err(e) => Err(KillError::Other(e.desc().to_string())),
        }
    }

    fn sleep(&mut self, duration: Duration) {
        std::thread::sleep(duration);
    }

    fn say(&mut self, line: &str) {
        println!("{line}");
    }
}

/// Names of the loaded kernel modules, from `<root>/proc/modules` (none if the file does not exist,
/// as on kernels without module support).
pub fn loaded_modules(root: &Path) -> Result<Vec<String>> {
    let path = root.join("proc/modules");
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(text.lines().filter_map(|l| l.split_whitespace().next()).map(str::to_string).collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e).with_context(|| path.display().to_string()),
    }
}

fn loaded_of(vendor: Vendor, root: &Path) -> Result<Vec<&'static str>> {
    let loaded = loaded_modules(root)?;
    Ok(vendor.modules().iter().copied().filter(|m| loaded.iter().any(|l| l == m)).collect())
}

/// `pilot smi VENDOR rmmod [--expect]`; `Ok(false)` (exit 1) if any of the vendor's modules is loaded
/// at the end. With `expect`, nothing is run. Errors: `/proc/modules` unreadable.
pub fn rmmod(vendor: Vendor, expect: bool, env: &mut impl SmiEnv) -> Result<bool> {
    let loaded = loaded_of(vendor, env.root())?;
    if loaded.is_empty() {
        env.say(&format!("{} kernel modules are not loaded", vendor.name()));
        return Ok(true);
    }
    if expect {
        env.say(&format!("kernel modules loaded but expected not to be: {}", loaded.join(", ")));
        return Ok(false);
    }
    for module in &loaded {
        let argv: &[&str] = if env.euid() == 0 { &["rmmod", module] } else { &["sudo", "rmmod", module] };
        match env.run(argv) {
            Ok(true) => env.say(&format!("unloaded {module}")),
            Ok(false) => env.say(&format!("`{}` failed (module in use?)", argv.join(" "))),
            Err(e) => env.say(&format!("could not run `{}`: {e}", argv.join(" "))),
        }
    }
    let still = loaded_of(vendor, env.root())?;
    if !still.is_empty() {
        env.say(&format!("still loaded: {}", still.join(", ")));
    }
    Ok(still.is_empty())
}

/// Normalises a PCI address to `dddd:bb:dd.f` (lower case, domain `0000` added when missing).
pub fn normalize_pci_bus(bus: &str) -> Result<String> {
    let b = bus.trim().to_ascii_lowercase();
    let full = if b.matches(':').count() == 1 { format!("0000:{b}") } else { b };
    let hex = |s: &str, lens: std::ops::RangeInclusive<usize>| {
        lens.contains(&s.len()) && s.bytes().all(|c| c.is_ascii_hexdigit())
    };
    let ok = match full.split(':').collect::<Vec<_>>().as_slice() {
        [domain, bus_no, devfn] => match devfn.split_once('.') {
            Some((dev, func)) => hex(domain, 4..=8) && hex(bus_no, 2..=2) && hex(dev, 2..=2) && hex(func, 1..=1),
            None => false,
        },
        _ => false,
    };
    if !ok {
        bail!("bad PCI bus {bus:?}: expected e.g. 0000:03:00.0 or 03:00.0");
    }
    Ok(full)
}

/// Which open files mean "holds the GPU".
#[derive(Debug)]
struct Filter {
    vendor: Vendor,
    /// `None`: any device node of the vendor; `Some`: only these (full paths).
    nodes: Option<Vec<String>>,
    /// Restricts lock files to names containing this normalised bus id.
    bus: Option<String>,
}

impl Filter {
    fn new(vendor: Vendor, pci_bus: Option<&str>, root: &Path) -> Result<Filter> {
        let Some(bus) = pci_bus else {
            return Ok(Filter { vendor, nodes: None, bus: None });
        };
        let bus = normalize_pci_bus(bus)?;
        let dev = root.join("sys/bus/pci/devices").join(&bus);
        if !dev.exists() {
            bail!("no PCI device {bus} (no {})", dev.display());
        }
        let nodes = match vendor {
            Vendor::Amd => std::fs::read_dir(dev.join("drm"))
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("renderD") || n.starts_with("card"))
                .map(|n| format!("/dev/dri/{n}"))
                .collect(),
            Vendor::Nv => {
                let info = root.join("proc/driver/nvidia/gpus").join(&bus).join("information");
                let text = std::fs::read_to_string(info).unwrap_or_default();
                text.lines()
                    .find_map(|l| l.strip_prefix("Device Minor:"))
                    .and_then(|m| m.trim().parse::<u32>().ok())
                    .map(|m| format!("/dev/nvidia{m}"))
                    .into_iter()
                    .collect()
            }
        };
        Ok(Filter { vendor, nodes: Some(nodes), bus: Some(bus) })
    }

    fn matches(&self, target: &Path) -> bool {
        let Some(s) = target.to_str() else {
            return false;
        };
        let s = s.strip_suffix(" (deleted)").unwrap_or(s);
        let lock = Path::new(s)
            .parent()
            .is_some_and(|d| d == Path::new(LOCK_DIR))
            .then(|| s.rsplit('/').next())
            .flatten()
            .filter(|n| n.starts_with(LOCK_PREFIX) && n.ends_with(LOCK_SUFFIX));
        if let Some(name) = lock {
            return self.bus.as_ref().is_none_or(|b| name.contains(b.as_str()));
        }
        match (&self.nodes, self.vendor) {
            (Some(nodes), _) => nodes.iter().any(|n| n == s),
            (None, Vendor::Amd) => {
                s == "/dev/kfd"
                    || s.strip_prefix("/dev/dri/")
                        .is_some_and(|n| (n.starts_with("renderD") || n.starts_with("card")) && !n.contains('/'))
            }
            (None, Vendor::Nv) => s.starts_with("/dev/nvidia"),
        }
    }
}

/// A process holding the GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    /// `/proc/<pid>/comm`, or `?`.
    pub comm: String,
    /// The matching open files, sorted, without duplicates.
    pub paths: Vec<String>,
}

/// Result of a `/proc` scan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scan {
    /// By increasing pid.
    pub holders: Vec<Holder>,
    /// Processes whose fds could not be read (other users' processes when not root).
    pub unreadable: usize,
}

/// Scans `<root>/proc/*/fd/*` for processes (other than `exclude_pid`) holding the vendor's GPU device
/// nodes or pilot's lock files; `pci_bus` restricts as described in the module docs.
/// Errors: a bad or absent `pci_bus`, or `<root>/proc` unreadable.
pub fn find_holders(vendor: Vendor, pci_bus: Option<&str>, root: &Path, exclude_pid: u32) -> Result<Scan> {
    let filter = Filter::new(vendor, pci_bus, root)?;
    scan(&filter, root, exclude_pid)
}

fn scan(filter: &Filter, root: &Path, exclude_pid: u32) -> Result<Scan> {
    let proc_dir = root.join("proc");
    let entries = std::fs::read_dir(&proc_dir).with_context(|| proc_dir.display().to_string())?;
    let mut out = Scan::default();
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if pid == exclude_pid || pid == 0 {
            continue;
        }
        let fds = match std::fs::read_dir(entry.path().join("fd")) {
            Ok(fds) => fds,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue, // exited meanwhile
            Err(_) => {
                out.unreadable += 1;
                continue;
            }
        };
        let paths: BTreeSet<String> = fds
            .flatten()
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .filter(|t| filter.matches(t))
            .map(|t| t.to_string_lossy().into_owned())
            .collect();
        if !paths.is_empty() {
            let comm = std::fs::read_to_string(entry.path().join("comm"));
            let comm = comm.map_or_else(|_| "?".to_string(), |c| c.trim().to_string());
            out.holders.push(Holder { pid, comm, paths: paths.into_iter().collect() });
        }
    }
    out.holders.sort_by_key(|h| h.pid);
    Ok(out)
}

/// How long [`kill_pids`] waits for killed processes to release the GPU: attempts × interval.
pub const WAIT_ATTEMPTS: u32 = 25;
pub const WAIT_INTERVAL: Duration = Duration::from_millis(200);

/// `pilot smi VENDOR kill-pids [--sudoless] [--pci-bus BUS]`; `Ok(false)` (exit 1) if a holder could not
/// be killed or still holds the GPU after [`WAIT_ATTEMPTS`] × [`WAIT_INTERVAL`]. With `sudoless`,
/// `sudo` is never run. Errors: a bad or absent `pci_bus`, `/proc` unreadable.
pub fn kill_pids(vendor: Vendor, sudoless: bool, pci_bus: Option<&str>, env: &mut impl SmiEnv) -> Result<bool> {
    let filter = Filter::new(vendor, pci_bus, env.root())?;
    if let (Some(nodes), Some(bus)) = (&filter.nodes, &filter.bus) {
        if nodes.is_empty() {
            env.say(&format!("no device nodes found for {bus}; matching lock files only"));
        }
    }
    let found = scan(&filter, env.root(), env.self_pid())?;
    if found.unreadable > 0 && env.euid() != 0 {
        env.say(&format!(
            "warning: cannot read the open files of {} processes (not root); they may hold the GPU too",
            found.unreadable
        ));
    }
    if found.holders.is_empty() {
        env.say(&format!("no process holds the {} GPU", vendor.name()));
        return Ok(true);
    }
    let mut failed = Vec::new();
    let mut killed = Vec::new();
    for h in &found.holders {
        let pid = h.pid;
        env.say(&format!("killing pid {pid} ({}), holding {}", h.comm, h.paths.join(", ")));
        if pid <= 1 {
            env.say(&format!("pid {pid}: refusing to kill init"));
            failed.push(pid);
            continue;
        }
        match env.kill(pid) {
            Ok(()) => killed.push(pid),
            Err(KillError::NoSuchProcess) => env.say(&format!("pid {pid} already exited")),
            Err(KillError::PermissionDenied) if sudoless || env.euid() == 0 => {
                let why = if sudoless { "--sudoless" } else { "as root" };
                env.say(&format!("pid {pid}: permission denied ({why}: not using sudo)"));
                failed.push(pid);
            }
            Err(KillError::PermissionDenied) => {
                let pid_text = pid.to_string();
                let argv = ["sudo", "kill", "-9", pid_text.as_str()];
                env.say(&format!("pid {pid}: permission denied; running `{}`", argv.join(" ")));
                match env.run(&argv) {
                    Ok(true) => killed.push(pid),
                    Ok(false) => failed.push(pid),
                    Err(e) => {
                        env.say(&format!("could not run sudo: {e}"));
                        failed.push(pid);
                    }
                }
            }
            Err(KillError::Other(e)) => {
                env.say(&format!("pid {pid}: {e}"));
                failed.push(pid);
            }
        }
    }
    let mut lingering = killed.clone();
    for _ in 0..WAIT_ATTEMPTS {
        if lingering.is_empty() {
            break;
        }
        env.sleep(WAIT_INTERVAL);
        let now = scan(&filter, env.root(), env.self_pid())?;
        lingering.retain(|pid| now.holders.iter().any(|h| h.pid == *pid));
    }
    for pid in &lingering {
        env.say(&format!("pid {pid} still holds the GPU after SIGKILL"));
    }
    if !failed.is_empty() {
        let list: Vec<String> = failed.iter().map(u32::to_string).collect();
        env.say(&format!("could not kill: {}", list.join(" ")));
    }
    Ok(failed.is_empty() && lingering.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::os::unix::fs::symlink;

    /// A fake system on a temporary root. `kill` and a successful `sudo kill -9` remove `/proc/<pid>`;
    /// a successful `[sudo] rmmod M` removes M from `/proc/modules`.
    struct Fake {
        dir: tempfile::TempDir,
        euid: u32,
        self_pid: u32,
        deny: HashSet<u32>,
        immortal: HashSet<u32>,
        run_ok: bool,
        runs: Vec<String>,
        killed: Vec<u32>,
        said: Vec<String>,
    }

    impl Fake {
        fn new() -> Fake {
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(dir.path().join("proc/self")).unwrap();
            Fake {
                dir,
                euid: 1000,
                self_pid: 999,
                deny: HashSet::new(),
                immortal: HashSet::new(),
                run_ok: true,
                runs: Vec::new(),
                killed: Vec::new(),
                said: Vec::new(),
            }
        }

        fn process(&self, pid: u32, targets: &[&str]) {
            let p = self.dir.path().join(format!("proc/{pid}"));
            std::fs::create_dir_all(p.join("fd")).unwrap();
            std::fs::write(p.join("comm"), format!("proc{pid}\n")).unwrap();
            for (fd, t) in targets.iter().enumerate() {
                symlink(t, p.join(format!("fd/{fd}"))).unwrap();
            }
        }

        fn file(&self, rel: &str, text: &str) {
            let path = self.dir.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }

        fn pids(&self, vendor: Vendor, bus: Option<&str>) -> Vec<u32> {
            let scan = find_holders(vendor, bus, self.dir.path(), self.self_pid).unwrap();
            scan.holders.iter().map(|h| h.pid).collect()
        }

        fn end(&mut self, pid: u32) {
            if !self.immortal.contains(&pid) {
                std::fs::remove_dir_all(self.dir.path().join(format!("proc/{pid}"))).unwrap();
            }
        }
    }

    impl SmiEnv for Fake {
        fn root(&self) -> &Path {
            self.dir.path()
        }
        fn euid(&self) -> u32 {
            self.euid
        }
        fn self_pid(&self) -> u32 {
            self.self_pid
        }
        fn run(&mut self, argv: &[&str]) -> std::io::Result<bool> {
            self.runs.push(argv.join(" "));
            if self.run_ok {
                match argv {
                    ["sudo", "kill", "-9", pid] => self.end(pid.parse().unwrap()),
                    [.., "rmmod", m] => {
                        let path = self.dir.path().join("proc/modules");
                        let text = std::fs::read_to_string(&path).unwrap();
                        let keep: Vec<&str> = text.lines().filter(|l| l.split(' ').next() != Some(m)).collect();
                        std::fs::write(path, keep.join("\n")).unwrap();
                    }
                    _ => panic!("unexpected command {argv:?}"),
                }
            }
            Ok(self.run_ok)
        }
        fn kill(&mut self, pid: u32) -> Result<(), KillError> {
            if self.deny.contains(&pid) {
                return Err(KillError::PermissionDenied);
            }
            if !self.dir.path().join(format!("proc/{pid}")).exists() {
                return Err(KillError::NoSuchProcess);
            }
            self.killed.push(pid);
            self.end(pid);
            Ok(())
        }
        fn sleep(&mut self, _: Duration) {}
        fn say(&mut self, line: &str) {
            self.said.push(line.to_string());
        }
    }

    /// pids 100..=104 with various open files; 999 is the current process.
    fn populated() -> Fake {
        let f = Fake::new();
        f.process(100, &["/dev/kfd", "/dev/null"]);
        f.process(101, &["/dev/dri/renderD128", "/home/u/model.pkl", "/dev/dri/renderD128"]);
        f.process(102, &["/tmp/pilot-amd-0000:03:00.0.lock (deleted)"]);
        f.process(103, &["/dev/null", "/tmp/foo.lock", "/tmp/pilot-x.txt", "/dev/dri/by-path/x"]);
        f.process(104, &["/dev/nvidia0", "/dev/nvidiactl", "socket:[1234]"]);
        f.process(999, &["/dev/kfd", "/dev/nvidia0"]);
        f
    }

    #[test]
    fn finds_holders_of_device_nodes_and_lock_files() {
        let f = populated();
        assert_eq!(f.pids(Vendor::Amd, None), [100, 101, 102]);
        assert_eq!(f.pids(Vendor::Nv, None), [102, 104]);
        let scan = find_holders(Vendor::Amd, None, f.dir.path(), 999).unwrap();
        assert_eq!(scan.holders[1].comm, "proc101");
        assert_eq!(scan.holders[1].paths, ["/dev/dri/renderD128"]);
    }

    #[test]
    fn kills_holders_without_sudo_when_allowed() {
        let mut f = populated();
        assert!(kill_pids(Vendor::Amd, false, None, &mut f).unwrap());
        assert_eq!(f.killed, [100, 101, 102]);
        assert!(f.runs.is_empty(), "{:?}", f.runs);
        assert_eq!(f.pids(Vendor::Amd, None), [] as [u32; 0]);
        assert!(kill_pids(Vendor::Amd, true, None, &mut f).unwrap(), "nothing left: success");
        assert!(f.said.last().unwrap().contains("no process holds"));
    }

    #[test]
    fn sudoless_never_runs_sudo() {
        let mut f = populated();
        f.deny.insert(101);
        assert!(!kill_pids(Vendor::Amd, true, None, &mut f).unwrap());
        assert!(f.runs.is_empty(), "{:?}", f.runs);
        assert_eq!(f.killed, [100, 102]);
        assert!(f.said.iter().any(|l| l == "could not kill: 101"), "{:?}", f.said);
    }

    #[test]
    fn falls_back_to_sudo_unless_root() {
        let mut f = populated();
        f.deny.insert(101);
        assert!(kill_pids(Vendor::Amd, false, None, &mut f).unwrap(), "{:?}", f.said);
        assert_eq!(f.runs, ["sudo kill -9 101"]);
        let mut f = populated();
        f.deny.insert(101);
        f.run_ok = false;
        assert!(!kill_pids(Vendor::Amd, false, None, &mut f).unwrap());
        let mut f = populated();
        (f.euid, f.deny) = (0, [101].into());
        assert!(!kill_pids(Vendor::Amd, false, None, &mut f).unwrap());
        assert!(f.runs.is_empty(), "root never needs sudo: {:?}", f.runs);
    }

    #[test]
    fn reports_processes_that_survive_sigkill_and_spares_init() {
        let mut f = populated();
        f.immortal.insert(104);
        f.process(1, &["/dev/nvidia0"]);
        assert!(!kill_pids(Vendor::Nv, true, None, &mut f).unwrap());
        assert_eq!(f.killed, [102, 104]);
        assert!(f.said.iter().any(|l| l.contains("refusing to kill init")));
        assert!(f.said.iter().any(|l| l.contains("pid 104 still holds")), "{:?}", f.said);
    }

    #[test]
    fn pci_bus_restricts_nodes_and_lock_files() {
        let f = Fake::new();
        for (bus, nodes) in [("0000:03:00.0", ["card1", "renderD129"]), ("0000:04:00.0", ["card0", "renderD128"])] {
            for n in nodes {
                f.file(&format!("sys/bus/pci/devices/{bus}/drm/{n}/dev"), "226:0\n");
            }
        }
        f.file("sys/bus/pci/devices/0000:03:00.0/drm/controlD64/dev", "");
        f.file("proc/driver/nvidia/gpus/0000:03:00.0/information", "Model: X\nDevice Minor: \t 1\n");
        f.process(200, &["/dev/dri/renderD129"]);
        f.process(201, &["/dev/dri/renderD128", "/dev/dri/card0"]);
        f.process(202, &["/dev/kfd"]);
        f.process(203, &["/tmp/pilot-amd-0000:03:00.0.lock"]);
        f.process(204, &["/tmp/pilot-amd-0000:04:00.0.lock", "/tmp/pilot-usb-2-1.lock"]);
        f.process(205, &["/dev/nvidia1", "/dev/nvidiactl"]);
        f.process(206, &["/dev/nvidia0", "/dev/nvidia-uvm"]);
        assert_eq!(f.pids(Vendor::Amd, None), [200, 201, 202, 203, 204]);
        assert_eq!(f.pids(Vendor::Amd, Some("03:00.0")), [200, 203]);
        assert_eq!(f.pids(Vendor::Amd, Some("0000:04:00.0")), [201, 204]);
        assert_eq!(f.pids(Vendor::Nv, Some("0000:03:00.0")), [203, 205]);
        assert_eq!(f.pids(Vendor::Nv, None), [203, 204, 205, 206]);
        for bad in ["0000:09:00.0", "../../../etc", "03:00", ""] {
            assert!(find_holders(Vendor::Amd, Some(bad), f.dir.path(), 999).is_err(), "{bad}");
        }
    }

    #[test]
    fn normalizes_pci_bus() {
        assert_eq!(normalize_pci_bus("03:00.0").unwrap(), "0000:03:00.0");
        assert_eq!(normalize_pci_bus(" 0000:C3:00.1 ").unwrap(), "0000:c3:00.1");
        assert_eq!(normalize_pci_bus("10000:e1:00.0").unwrap(), "10000:e1:00.0");
        for bad in ["3:00.0", "0000:03:00", "0000:03:00.0/..", "x0:03:00.0", "00:00:03:00.0"] {
            assert!(normalize_pci_bus(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rmmod_expect_only_checks() {
        let mut f = Fake::new();
        assert!(rmmod(Vendor::Amd, true, &mut f).unwrap(), "no /proc/modules: nothing loaded");
        f.file("proc/modules", "");
        assert!(rmmod(Vendor::Amd, true, &mut f).unwrap());
        f.file("proc/modules", "snd 1 0 - Live 0x0\namdgpu 15000000 3 - Live 0x0\n");
        assert!(!rmmod(Vendor::Amd, true, &mut f).unwrap());
        assert!(f.said.last().unwrap().contains("amdgpu"), "{:?}", f.said);
        assert!(rmmod(Vendor::Nv, true, &mut f).unwrap());
        assert!(f.runs.is_empty());
    }

    #[test]
    fn rmmod_unloads_in_order() {
        let mut f = Fake::new();
        let modules = "nvidia_uvm 1 0 - Live 0x0\nnvidia 2 1 nvidia_uvm, Live 0x0\nsnd 3 0 - Live 0x0\n\
                       nvidia_drm 4 0 - Live 0x0\nnvidia_modeset 5 1 nvidia_drm, Live 0x0\n";
        f.file("proc/modules", modules);
        assert!(rmmod(Vendor::Nv, false, &mut f).unwrap());
        let want = ["nvidia_drm", "nvidia_modeset", "nvidia_uvm", "nvidia"].map(|m| format!("sudo rmmod {m}"));
        assert_eq!(f.runs, want);
        f.file("proc/modules", "amdgpu 1 0 - Live 0x0\n");
        (f.euid, f.runs) = (0, Vec::new());
        assert!(rmmod(Vendor::Amd, false, &mut f).unwrap());
        assert_eq!(f.runs, ["rmmod amdgpu"]);
        f.file("proc/modules", "amdgpu 1 0 - Live 0x0\n");
        f.run_ok = false;
        assert!(!rmmod(Vendor::Amd, false, &mut f).unwrap());
        assert!(f.said.last().unwrap().contains("still loaded: amdgpu"));
    }

    #[test]
    fn system_env_reads_the_real_system() {
        let env = SystemEnv::new();
        assert_eq!(env.self_pid(), std::process::id());
        let scan = find_holders(Vendor::Amd, None, env.root(), env.self_pid()).unwrap();
        assert!(scan.holders.iter().all(|h| h.pid != std::process::id()));
        loaded_modules(env.root()).unwrap();
        assert_eq!(lock_path("amd-0000:03:00.0"), Path::new("/tmp/pilot-amd-0000:03:00.0.lock"));
    }
}
