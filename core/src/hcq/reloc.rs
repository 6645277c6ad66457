//! Dword buffers with a relocation table.
//!
//! A step (its command stream and its kernel-argument blocks) is encoded once with symbolic addresses and values;
//! linking resolves every symbol and writes the patched dwords. Because a relocation names its dword offset, a bound
//! step already in GPU memory can be re-patched in place (for example the timeline value of each replay) without
//! re-encoding it. Addresses are written little-endian as two dwords, lo then hi ([`addr_words`]), which is how
//! PM4 packets and kernel-argument blocks hold them on both Adreno and AMD.
//!
//! Every type is generic over `B`, the backend's own address symbols (the a6xx stack, dummy page and border
//! colors); a backend without any uses [`NoSym`], and names its instances with type aliases.

use std::fmt;

/// What a backend's own address symbols must be.
pub trait BackendSym: Copy + fmt::Debug + fmt::Display + PartialEq + Eq + std::hash::Hash + Ord {}

impl<T: Copy + fmt::Debug + fmt::Display + PartialEq + Eq + std::hash::Hash + Ord> BackendSym for T {}

/// No backend symbols.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NoSym {}

impl fmt::Display for NoSym {
    fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {}
    }
}

/// A symbolic GPU address base.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Sym<B = NoSym> {
    /// A backend buffer, by the backend's buffer id.
    Buffer(u32),
    /// The shader image of a loaded program.
    Program(u32),
    /// The kernel-argument block of the `n`th dispatch of a step (resolved by [`crate::hcq::link`]).
    Args(u32),
    /// The timeline signal (u32 value at +0, u64 timestamp at +8).
    Timeline,
    /// A symbol of the backend's own.
    Backend(B),
}

impl<B: fmt::Display> fmt::Display for Sym<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Sym::Buffer(i) => write!(f, "buffer {i}"),
            Sym::Program(i) => write!(f, "program {i}"),
            Sym::Args(i) => write!(f, "args {i}"),
            Sym::Timeline => f.write_str("timeline signal"),
            Sym::Backend(b) => b.fmt(f),
        }
    }
}

/// A symbolic GPU address: `sym`'s base plus a byte offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Addr<B = NoSym> {
    pub sym: Sym<B>,
    pub offset: u64,
}

impl<B: Copy> Addr<B> {
    pub const fn new(sym: Sym<B>, offset: u64) -> Self {
        Addr { sym, offset }
    }

    pub const fn base(sym: Sym<B>) -> Self {
        Addr { sym, offset: 0 }
    }

    /// The same base, `bytes` further on.
    pub const fn add(self, bytes: u64) -> Self {
        Addr { sym: self.sym, offset: self.offset + bytes }
    }
}

/// A symbolic 32-bit value that changes between replays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValueSym {
    /// The timeline value this replay signals.
    Timeline,
}

/// What to write at a relocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RelocKind<B = NoSym> {
    /// Two dwords: lo, hi of the resolved address.
    Addr64(Addr<B>),
    /// One dword: the low 32 bits of the resolved value plus `delta` (wrapping).
    Value32 { sym: ValueSym, delta: i64 },
}

/// The two dwords (lo, hi) of a 64-bit GPU address.
pub const fn addr_words(va: u64) -> [u32; 2] {
    [va as u32, (va >> 32) as u32]
}

/// A dword that holds a symbolic value: at `at`, the value plus `delta`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueSlot {
    pub at: usize,
    pub delta: i64,
}

impl ValueSlot {
    /// The dword for `value`: its low 32 bits plus the delta, wrapping.
    pub const fn word(self, value: u64) -> u32 {
        value.wrapping_add_signed(self.delta) as u32
    }
}

/// A relocation at dword offset `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reloc<B = NoSym> {
    pub at: usize,
    pub kind: RelocKind<B>,
}

/// Resolves symbols at link time.
pub trait Resolve<B = NoSym> {
    /// The GPU address of `sym`'s base, or `None` when it is unknown.
    fn addr(&self, sym: Sym<B>) -> Option<u64>;
    /// The current value of `sym`, or `None` when it is unknown.
    fn value(&self, sym: ValueSym) -> Option<u64>;
}

/// A link failure.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    #[error("dword {at}: unresolved {sym}")]
    UnresolvedAddr { at: usize, sym: String },
    #[error("dword {at}: unresolved value {sym:?}")]
    UnresolvedValue { at: usize, sym: ValueSym },
    #[error("dword {at}: relocation outside a buffer of {len} dwords")]
    OutOfRange { at: usize, len: usize },
}

/// One payload item for the builders: an immediate dword, a 2-dword address, or a 1-dword symbolic value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Word<B = NoSym> {
    Imm(u32),
    Addr(Addr<B>),
    Value(ValueSym, i64),
}

impl<B> Word<B> {
    /// The number of dwords this item occupies.
    pub const fn len(&self) -> usize {
        match self {
            Word::Addr(_) => 2,
            _ => 1,
        }
    }

    pub const fn is_empty(&self) -> bool {
        false
    }
}

impl<B> From<u32> for Word<B> {
    fn from(v: u32) -> Self {
        Word::Imm(v)
    }
}

impl<B> From<Addr<B>> for Word<B> {
    fn from(a: Addr<B>) -> Self {
        Word::Addr(a)
    }
}

/// Dwords plus the relocations that patch some of them. Placeholders are 0 until linked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelocBuf<B = NoSym> {
    words: Vec<u32>,
    relocs: Vec<Reloc<B>>,
}

impl<B> Default for RelocBuf<B> {
    fn default() -> Self {
        RelocBuf { words: Vec::new(), relocs: Vec::new() }
    }
}

impl<B: BackendSym> RelocBuf<B> {
    pub fn new() -> Self {
        Self::default()
    }

    /// A buffer of `len` zero dwords.
    pub fn zeroed(len: usize) -> Self {
        RelocBuf { words: vec![0; len], relocs: Vec::new() }
    }

    pub fn words(&self) -> &[u32] {
        &self.words
    }

    pub fn relocs(&self) -> &[Reloc<B>] {
        &self.relocs
    }

    pub fn len(&self) -> usize {
        self.words.len()
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    pub fn push(&mut self, w: impl Into<Word<B>>) {
        match w.into() {
            Word::Imm(v) => self.words.push(v),
            Word::Addr(a) => {
                self.relocs.push(Reloc { at: self.words.len(), kind: RelocKind::Addr64(a) });
                self.words.extend([0, 0]);
            }
            Word::Value(sym, delta) => {
                self.relocs.push(Reloc { at: self.words.len(), kind: RelocKind::Value32 { sym, delta } });
                self.words.push(0);
            }
        }
    }

    pub fn extend(&mut self, ws: &[Word<B>]) {
        for w in ws {
            self.push(*w);
        }
    }

    /// Overwrites dword `at` (and `at + 1` for an address); panics when out of range, which is a builder bug.
    /// An earlier relocation at the same place is replaced.
    pub fn set(&mut self, at: usize, w: impl Into<Word<B>>) {
        let w = w.into();
        assert!(at + w.len() <= self.words.len(), "set at {at} past the end ({})", self.words.len());
        self.relocs.retain(|r| {
            let len = if matches!(r.kind, RelocKind::Addr64(_)) { 2 } else { 1 };
            r.at + len <= at || r.at >= at + w.len()
        });
        match w {
            Word::Imm(v) => self.words[at] = v,
            Word::Addr(a) => {
                self.words[at..at + 2].fill(0);
                self.relocs.push(Reloc { at, kind: RelocKind::Addr64(a) });
            }
            Word::Value(sym, delta) => {
                self.words[at] = 0;
                self.relocs.push(Reloc { at, kind: RelocKind::Value32 { sym, delta } });
            }
        }
    }

    /// Every dword that holds `sym`, in buffer order: what a replay re-patches in place.
    pub fn value_slots(&self, sym: ValueSym) -> Vec<ValueSlot> {
        self.relocs
            .iter()
            .filter_map(|r| match r.kind {
                RelocKind::Value32 { sym: s, delta } if s == sym => Some(ValueSlot { at: r.at, delta }),
                _ => None,
            })
            .collect()
    }

    /// Appends `other`, shifting its relocations.
    pub fn append(&mut self, other: &RelocBuf<B>) {
        let base = self.words.len();
        self.words.extend_from_slice(&other.words);
        self.relocs.extend(other.relocs.iter().map(|r| Reloc { at: r.at + base, kind: r.kind }));
    }

    /// Writes every relocated dword of `out` (which must have this buffer's length) from `resolve`; other dwords are
    /// left alone. Use on an already linked copy to re-patch it in place.
    pub fn patch(&self, out: &mut [u32], resolve: &dyn Resolve<B>) -> Result<(), LinkError> {
        for r in &self.relocs {
            match r.kind {
                RelocKind::Addr64(a) => {
                    let base = resolve
                        .addr(a.sym)
                        .ok_or_else(|| LinkError::UnresolvedAddr { at: r.at, sym: a.sym.to_string() })?;
                    let va = base.wrapping_add(a.offset);
                    let dst = out.get_mut(r.at..r.at + 2).ok_or(LinkError::OutOfRange { at: r.at, len: self.len() })?;
                    dst.copy_from_slice(&addr_words(va));
                }
                RelocKind::Value32 { sym, delta } => {
                    let v = resolve.value(sym).ok_or(LinkError::UnresolvedValue { at: r.at, sym })?;
                    let dst = out.get_mut(r.at).ok_or(LinkError::OutOfRange { at: r.at, len: self.len() })?;
                    *dst = ValueSlot { at: r.at, delta }.word(v);
                }
            }
        }
        Ok(())
    }

    /// A linked copy of the dwords.
    pub fn link(&self, resolve: &dyn Resolve<B>) -> Result<Vec<u32>, LinkError> {
        let mut out = self.words.clone();
        self.patch(&mut out, resolve)?;
        Ok(out)
    }
}

/// A [`Resolve`] from closures, handy in tests and simple backends.
pub struct FnResolve<A, V>(pub A, pub V);

impl<B, A: Fn(Sym<B>) -> Option<u64>, V: Fn(ValueSym) -> Option<u64>> Resolve<B> for FnResolve<A, V> {
    fn addr(&self, sym: Sym<B>) -> Option<u64> {
        (self.0)(sym)
    }

    fn value(&self, sym: ValueSym) -> Option<u64> {
        (self.1)(sym)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolver() -> impl Resolve {
        FnResolve(
            |s| match s {
                Sym::Buffer(1) => Some(0x7f_8000_1000),
                Sym::Timeline => Some(0x7f_8040_0000),
                _ => None,
            },
            |ValueSym::Timeline| Some(6),
        )
    }

    #[test]
    fn links_addresses_and_values() {
        let mut b: RelocBuf = RelocBuf::new();
        b.push(7);
        b.push(Addr::new(Sym::Buffer(1), 0x10));
        b.push(Word::Value(ValueSym::Timeline, -1));
        b.push(Addr::base(Sym::Timeline).add(8));
        assert_eq!(b.len(), 6);
        let linked = b.link(&resolver()).unwrap();
        assert_eq!(linked, [7, 0x8000_1010, 0x7f, 5, 0x8040_0008, 0x7f]);
    }

    #[test]
    fn patch_touches_only_relocations() {
        let mut b: RelocBuf = RelocBuf::zeroed(4);
        b.set(1, Addr::base(Sym::Buffer(1)));
        b.set(3, Word::Value(ValueSym::Timeline, 0));
        let mut out = [0xaaaa_aaaa; 4];
        b.patch(&mut out, &resolver()).unwrap();
        assert_eq!(out, [0xaaaa_aaaa, 0x8000_1000, 0x7f, 6]);
        b.set(1, 9);
        assert_eq!(b.relocs().len(), 1);
        assert_eq!(b.words()[1], 9);
    }

    #[test]
    fn unresolved_symbols_name_the_dword() {
        let mut b: RelocBuf = RelocBuf::new();
        b.push(1);
        b.push(Addr::base(Sym::Program(3)));
        assert_eq!(b.link(&resolver()).unwrap_err().to_string(), "dword 1: unresolved program 3");
    }

    #[test]
    fn value_slots_list_every_use_of_a_value() {
        let mut b: RelocBuf = RelocBuf::new();
        b.push(Word::Value(ValueSym::Timeline, -1));
        b.push(Addr::base(Sym::Timeline));
        b.push(Word::Value(ValueSym::Timeline, 0));
        let slots = b.value_slots(ValueSym::Timeline);
        assert_eq!(slots, [ValueSlot { at: 0, delta: -1 }, ValueSlot { at: 3, delta: 0 }]);
        assert_eq!(slots[0].word(0), u32::MAX);
        assert_eq!(slots[1].word(0x1_0000_0007), 7);
        assert_eq!(addr_words(0x7f_8000_1010), [0x8000_1010, 0x7f]);
    }

    #[test]
    fn append_shifts_relocations() {
        let mut a: RelocBuf = RelocBuf::new();
        a.push(1);
        let mut b: RelocBuf = RelocBuf::new();
        b.push(Addr::base(Sym::Buffer(1)));
        a.append(&b);
        assert_eq!(a.relocs(), &[Reloc { at: 1, kind: RelocKind::Addr64(Addr::base(Sym::Buffer(1))) }]);
    }
}
