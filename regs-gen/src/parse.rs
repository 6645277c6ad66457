//! The data-file parser: the line format documented in the crate root, checked (names, offsets, overlapping
//! fields, enum values that fit their fields) so that the generated code always compiles.

use std::collections::{HashMap, HashSet};

use crate::{Enum, EnumValue, Field, FieldKind, ParseError, Reg, RegFile};

/// The item that member lines belong to.
#[derive(Clone, Copy)]
enum Owner {
    None,
    Enum,
    Reg,
}

/// Parses the text of data file `file` (the name only labels errors).
pub fn parse(file: &str, text: &str) -> Result<RegFile, ParseError> {
    let mut out = RegFile::default();
    let mut owner = Owner::None;
    // The line of every register and enum, for duplicate errors; and of every enum-typed field.
    let (mut reg_lines, mut enum_lines) = (Vec::new(), Vec::new());
    let mut enum_uses: Vec<(usize, usize, usize)> = Vec::new();
    let err = |line: usize, msg: String| ParseError { file: file.to_string(), line, msg };
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if let Some(doc) = raw.strip_prefix("#!") {
            out.doc.push(doc.trim().to_string());
            continue;
        }
        let (code, doc) = split_doc(raw);
        if code.trim().is_empty() {
            continue;
        }
        let words: Vec<&str> = code.split_whitespace().collect();
        if !code.starts_with([' ', '\t']) {
            match words.as_slice() {
                ["enum", name] => {
                    check_name(name).map_err(|m| err(line, m))?;
                    out.enums.push(Enum { name: name.to_string(), doc, values: Vec::new() });
                    enum_lines.push(line);
                    owner = Owner::Enum;
                }
                [kind @ ("reg" | "reg64"), name, offset] => {
                    check_name(name).map_err(|m| err(line, m))?;
                    let offset = number(offset).map_err(|m| err(line, m))?;
                    let words = if *kind == "reg64" { 2 } else { 1 };
                    out.regs.push(Reg { name: name.to_string(), offset, words, doc, fields: Vec::new() });
                    reg_lines.push(line);
                    owner = Owner::Reg;
                }
                _ => {
                    let what = code.trim();
                    return Err(err(
                        line,
                        format!("expected `enum NAME`, `reg NAME OFFSET` or `reg64 NAME OFFSET`, got `{what}`"),
                    ));
                }
            }
            continue;
        }
        match owner {
            Owner::None => return Err(err(line, "member line before any item".into())),
            Owner::Enum => {
                let e = out.enums.last_mut().expect("an enum owns this line");
                let [name, value] = words.as_slice() else {
                    return Err(err(line, format!("expected `NAME VALUE` in enum {}", e.name)));
                };
                check_name(name).map_err(|m| err(line, m))?;
                let value = number(value).map_err(|m| err(line, m))?;
                if e.values.iter().any(|v| v.name == *name) {
                    return Err(err(line, format!("{}::{name} is declared twice", e.name)));
                }
                e.values.push(EnumValue { name: name.to_string(), value, doc });
            }
            Owner::Reg => {
                let ri = out.regs.len() - 1;
                let field = parse_field(&words, doc).map_err(|m| err(line, m))?;
                let reg = &mut out.regs[ri];
                if reg.words != 1 {
                    return Err(err(line, format!("{} is a reg64: it has no fields", reg.name)));
                }
                if let Some(other) = reg.fields.iter().find(|f| f.mask() & field.mask() != 0 || f.name == field.name) {
                    return Err(err(line, format!("field {} of {} overlaps {}", field.name, reg.name, other.name)));
                }
                if let FieldKind::Enum(_) = field.kind {
                    enum_uses.push((line, ri, reg.fields.len()));
                }
                reg.fields.push(field);
            }
        }
    }
    check_unique(&out, &reg_lines, &enum_lines).map_err(|(line, m)| err(line, m))?;
    for (line, ri, fi) in enum_uses {
        let f = &out.regs[ri].fields[fi];
        let FieldKind::Enum(name) = &f.kind else { continue };
        let e = out.enums.iter().find(|e| &e.name == name).ok_or_else(|| err(line, format!("unknown enum {name}")))?;
        if let Some(v) = e.values.iter().find(|v| v.value > f.max()) {
            return Err(err(line, format!("{name}::{} = {} does not fit field {}", v.name, v.value, f.name)));
        }
    }
    Ok(out)
}

/// Splits off a trailing `## doc`, and drops a plain `# comment`.
fn split_doc(raw: &str) -> (&str, Option<String>) {
    match raw.find('#') {
        None => (raw, None),
        Some(at) => {
            let rest = &raw[at..];
            let doc = rest.strip_prefix("##").map(|d| d.trim().to_string()).filter(|d| !d.is_empty());
            (&raw[..at], doc)
        }
    }
}

fn parse_field(words: &[&str], doc: Option<String>) -> Result<Field, String> {
    let (name, attrs) = words.split_first().ok_or("empty field line")?;
    check_name(name)?;
    let mut kv: HashMap<&str, &str> = HashMap::new();
    for a in attrs {
        let (k, v) = a.split_once('=').ok_or_else(|| format!("field {name}: expected KEY=VALUE, got `{a}`"))?;
        if !matches!(k, "pos" | "low" | "high" | "type") || kv.insert(k, v).is_some() {
            return Err(format!("field {name}: unknown or repeated attribute `{k}`"));
        }
    }
    let (low, high) = match (kv.get("pos"), kv.get("low"), kv.get("high")) {
        (Some(p), None, None) => (number(p)?, number(p)?),
        (None, Some(l), Some(h)) => (number(l)?, number(h)?),
        _ => return Err(format!("field {name}: give either pos=BIT or low=LOW high=HIGH")),
    };
    if low > high || high > 31 {
        return Err(format!("field {name}: bits {low}..={high} are not within 0..=31"));
    }
    let kind = match kv.get("type") {
        Some(t) => FieldKind::Enum(t.to_string()),
        None if low == high => FieldKind::Bool,
        None => FieldKind::Uint,
    };
    Ok(Field { name: name.to_string(), low, high, kind, doc })
}

/// Names are unique across registers and enums, and no two registers cover the same dword.
fn check_unique(f: &RegFile, reg_lines: &[usize], enum_lines: &[usize]) -> Result<(), (usize, String)> {
    let mut names = HashSet::new();
    let items = f.enums.iter().zip(enum_lines).map(|(e, l)| (&e.name, *l));
    for (n, line) in items.chain(f.regs.iter().zip(reg_lines).map(|(r, l)| (&r.name, *l))) {
        if !names.insert(n) {
            return Err((line, format!("{n} is declared twice")));
        }
    }
    let mut dwords: HashMap<u32, &str> = HashMap::new();
    for (r, line) in f.regs.iter().zip(reg_lines) {
        for d in r.offset..r.offset.saturating_add(r.words) {
            if let Some(other) = dwords.insert(d, &r.name) {
                return Err((*line, format!("{} and {other} both cover offset {d:#x}", r.name)));
            }
        }
    }
    Ok(())
}

fn check_name(name: &str) -> Result<(), String> {
    let ok = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!("`{name}` is not a name (ASCII letter, then letters, digits, `_`)"))
    }
}

fn number(s: &str) -> Result<u32, String> {
    let parsed = match s.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => s.parse(),
    };
    parsed.map_err(|_| format!("`{s}` is not a 32-bit number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "\
#! Test registers.
# a comment
enum Mode ## the mode
    CL 1
    GL 2 ## graphics
reg CNTL 0xa9b0 ## control
    COUNT low=1 high=6
    MODE low=8 high=9 type=Mode
    ON pos=31
reg64 BASE 0xa9b4
";

    #[test]
    fn parses_items_members_and_docs() {
        let f = parse("t.regs", GOOD).unwrap();
        assert_eq!(f.doc, ["Test registers."]);
        assert_eq!(f.enums.len(), 1);
        assert_eq!(f.enums[0].doc.as_deref(), Some("the mode"));
        assert_eq!(f.enums[0].values[1], EnumValue { name: "GL".into(), value: 2, doc: Some("graphics".into()) });
        let cntl = &f.regs[0];
        assert_eq!((cntl.name.as_str(), cntl.offset, cntl.words), ("CNTL", 0xa9b0, 1));
        assert_eq!(cntl.fields[0].kind, FieldKind::Uint);
        assert_eq!((cntl.fields[0].max(), cntl.fields[0].mask()), (0x3f, 0x7e));
        assert_eq!(cntl.fields[1].kind, FieldKind::Enum("Mode".into()));
        assert_eq!((cntl.fields[2].kind.clone(), cntl.fields[2].mask()), (FieldKind::Bool, 0x8000_0000));
        assert_eq!((f.regs[1].words, f.regs[1].fields.len()), (2, 0));
    }

    #[test]
    fn full_width_field_has_every_bit() {
        let f = parse("t.regs", "reg R 1\n    V low=0 high=31\n").unwrap();
        assert_eq!((f.regs[0].fields[0].max(), f.regs[0].fields[0].mask()), (u32::MAX, u32::MAX));
    }

    fn err(text: &str) -> String {
        parse("t.regs", text).unwrap_err().to_string()
    }

    #[test]
    fn rejects_bad_files_with_the_line() {
        assert_eq!(
            err("reg R\n"),
            "t.regs:1: expected `enum NAME`, `reg NAME OFFSET` or `reg64 NAME OFFSET`, got `reg R`"
        );
        assert_eq!(err("reg R 0xzz\n"), "t.regs:1: `0xzz` is not a 32-bit number");
        assert_eq!(err("    A pos=1\n"), "t.regs:1: member line before any item");
        assert_eq!(err("reg R 1\n    A pos=1\n    B low=0 high=3\n"), "t.regs:3: field B of R overlaps A");
        assert_eq!(err("reg R 1\n    A low=4 high=2\n"), "t.regs:2: field A: bits 4..=2 are not within 0..=31");
        assert_eq!(err("reg R 1\n    A low=4 high=32\n"), "t.regs:2: field A: bits 4..=32 are not within 0..=31");
        assert_eq!(err("reg R 1\n    A pos=1 size=2\n"), "t.regs:2: field A: unknown or repeated attribute `size`");
        assert_eq!(err("reg R 1\n    A pos=1 type=E\n"), "t.regs:2: unknown enum E");
        assert_eq!(
            err("enum E\n    X 4\nreg R 1\n    A low=0 high=1 type=E\n"),
            "t.regs:4: E::X = 4 does not fit field A"
        );
        assert_eq!(err("reg64 R 1\n    A pos=1\n"), "t.regs:2: R is a reg64: it has no fields");
        assert_eq!(err("reg R 1\nreg64 S 0\n"), "t.regs:2: S and R both cover offset 0x1");
        assert_eq!(err("reg R 1\nreg R 2\n"), "t.regs:2: R is declared twice");
        assert_eq!(err("enum E\n    X 1\n    X 2\n"), "t.regs:3: E::X is declared twice");
        assert_eq!(err("reg 1R 1\n"), "t.regs:1: `1R` is not a name (ASCII letter, then letters, digits, `_`)");
    }
}
