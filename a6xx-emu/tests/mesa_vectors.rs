//! Decoder witness 1: Mesa's own disassembler test vectors (`src/freedreno/ir3/tests/disasm.c`,
//! the `INSTR_6XX` entries: encoding and expected text). Every entry the decoder accepts must print
//! exactly Mesa's text; every entry it rejects must be listed in `mesa_vectors_unclaimed.txt`
//! (and nothing listed there may decode now, so the list only shrinks).

mod support;

use std::collections::BTreeSet;

#[test]
fn mesa_a6xx_vectors_print_as_mesa_expects() {
    let src = std::fs::read_to_string(support::mesa_disasm_tests()).unwrap();
    let listed: BTreeSet<String> = include_str!("mesa_vectors_unclaimed.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split(" # ").next().unwrap().trim().to_string())
        .collect();
    let (mut matched, mut failures, mut unclaimed) = (0, Vec::new(), BTreeSet::new());
    for line in src.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix("INSTR_6XX(") else { continue };
        let (hex, rest) = rest.split_once(',').unwrap();
        let expected = rest.trim().strip_prefix('"').unwrap().split('"').next().unwrap();
        let (hi, lo) = hex.split_once('_').unwrap();
        let word = u64::from_str_radix(hi, 16).unwrap() << 32 | u64::from_str_radix(lo, 16).unwrap();
        match pilot_a6xx_emu::decode(word) {
            Ok(i) if i.to_string() == expected => matched += 1,
            Ok(i) => failures.push(format!("{hex}: expected \"{expected}\", got \"{i}\"")),
            Err(_) => {
                unclaimed.insert(format!("{hex} {expected}"));
            }
        }
    }
    assert!(failures.is_empty(), "{} vectors print differently:\n{}", failures.len(), failures.join("\n"));
    let new: Vec<_> = unclaimed.difference(&listed).collect();
    let stale: Vec<_> = listed.difference(&unclaimed).collect();
    assert!(new.is_empty(), "rejected but not listed in mesa_vectors_unclaimed.txt:\n{new:#?}");
    assert!(stale.is_empty(), "listed in mesa_vectors_unclaimed.txt but decoded (or gone): remove them:\n{stale:#?}");
    assert!(matched >= 100, "only {matched} a6xx vectors matched");
    eprintln!("{matched} a6xx vectors match Mesa's text; {} unclaimed (listed)", unclaimed.len());
}
