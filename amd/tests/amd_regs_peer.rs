//! A peer as the oracle: every AMD register and field pilot declares in `amd/regs/<module>.regs`
//! has the same offset, base segment and bits in tinygrad 0.14.0's `runtime/autogen/am/regs.py` `<module>`
//! (generated from Linux's `asic_reg` headers), and every register lists all the fields the peer knows.
//!
//! The venv is `$PILOT_PYTHON` or `.venv` (scripts/setup.sh installs tinygrad there). Without it the test
//! skips with a note (fails under `PILOT_REQUIRE=1`); with it, a failing script fails the test.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Reads `module name` lines; prints `module name offset segment field:low:high ...` for each register tinygrad
/// has (as `reg<name>` or `mm<name>`), or `module name -` when it has none.
const PEER: &str = r#"
import sys
from tinygrad.runtime.autogen.am import regs
for line in sys.stdin.read().split("\n"):
    if not line: continue
    mod, name = line.split()
    table = getattr(regs, mod, None)
    if table is None: sys.exit(f"regs.py has no module {mod}")
    entry = table.get("reg" + name) or table.get("mm" + name)
    if entry is None:
        print(mod, name, "-"); continue
    off, seg, fields = entry
    print(mod, name, off, seg, *[f"{f.upper()}:{lo}:{hi}" for f, (lo, hi) in sorted(fields.items())])
"#;

/// (module, register) → (offset, base, sorted fields `NAME:low:high`).
type Table = BTreeMap<(String, String), Reg>;
/// Offset, base and sorted fields `NAME:low:high`.
type Reg = (u32, u32, Vec<String>);
/// The peer's answer per register: `None` when it has no such register.
type PeerTable = BTreeMap<(String, String), Option<Reg>>;

fn ours() -> Table {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("regs");
    let mut table = Table::new();
    for entry in std::fs::read_dir(&dir).expect("amd/regs") {
        let path = entry.unwrap().path();
        let module = path.file_stem().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        let file = pilot_regs_gen::parse(&path.to_string_lossy(), &text).unwrap_or_else(|e| panic!("{e}"));
        for r in file.regs {
            let mut fields: Vec<String> = r.fields.iter().map(|f| format!("{}:{}:{}", f.name, f.low, f.high)).collect();
            fields.sort();
            let base = r.base.unwrap_or_else(|| panic!("{module} {}: every AMD register names its base", r.name));
            table.insert((module.clone(), r.name), (r.offset, base, fields));
        }
    }
    table
}

fn peer(python: &Path, keys: &[(String, String)]) -> PeerTable {
    let mut child = Command::new(python)
        .args(["-c", PEER])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running {}: {e}", python.display()));
    let input: String = keys.iter().map(|(m, n)| format!("{m} {n}\n")).collect();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the peer script failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr));
    let mut table = BTreeMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let key = (w[0].to_string(), w[1].to_string());
        if w[2] == "-" {
            table.insert(key, None);
            continue;
        }
        let mut fields: Vec<String> = w[4..].iter().map(|s| s.to_string()).collect();
        fields.sort();
        table.insert(key, Some((w[2].parse().unwrap(), w[3].parse().unwrap(), fields)));
    }
    table
}

/// The differences between two tables: a line per register that is missing or differs.
fn differences(ours: &Table, peer: &PeerTable) -> Vec<String> {
    let mut bad = Vec::new();
    for (key, want) in ours {
        match peer.get(key) {
            None | Some(None) => bad.push(format!("{} {}: not in tinygrad's regs.py", key.0, key.1)),
            Some(Some(got)) if got != want => {
                bad.push(format!("{} {}: pilot {want:?}, tinygrad {got:?}", key.0, key.1));
            }
            Some(Some(_)) => {}
        }
    }
    bad
}

#[test]
fn amd_register_tables_match_tinygrads() {
    let Some(python) = pilot_test_support::venv_python() else { return };
    let ours = ours();
    assert!(ours.len() > 700, "only {} registers", ours.len());
    let keys: Vec<_> = ours.keys().cloned().collect();
    let peer = peer(&python, &keys);
    let bad = differences(&ours, &peer);
    assert!(
        bad.is_empty(),
        "{} of {} registers differ from tinygrad 0.14.0:\n{}",
        bad.len(),
        ours.len(),
        bad.join("\n")
    );

    // The comparison catches a moved field, a wrong offset and an unknown register.
    let mut planted = ours.clone();
    let key = ("gc_11_0_0".to_string(), "GRBM_CNTL".to_string());
    planted.get_mut(&key).unwrap().2[0] = "READ_TIMEOUT:1:8".into();
    let key2 = ("mp_13_0_0".to_string(), "MP0_SMN_C2PMSG_81".to_string());
    planted.get_mut(&key2).unwrap().0 += 1;
    let key3 = ("gc_11_0_0".to_string(), "NOT_A_REGISTER".to_string());
    planted.insert(key3.clone(), (1, 0, vec![]));
    let mut peer = peer;
    peer.insert(key3, None);
    assert_eq!(differences(&planted, &peer).len(), 3);
}
