//! The stencils prepared for fast patching, each at its first use: each stencil's
//! holes checked, classified and sorted, its symbols resolved, and the holes
//! whose value never changes (absolute references to symbols) patched into a
//! template of its code; and the header every region of the executable
//! arena starts with — a GOT slot per stencil symbol and the stencils'
//! read-only data blobs (those without holes), shared by all compiled code.

use std::sync::OnceLock;

use ember_stencils::{HoleValue, RelocKind, Stencil, STENCILS, SYMBOLS};

use crate::compile::Resolver;
use crate::patch;

pub const NO_PROG: u16 = u16::MAX;

/// Where a hole's value comes from (`HoleValue`, symbols resolved).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Src {
    Oparg,
    Operand0,
    Operand1,
    ThisInstr,
    DispatchInstr,
    NextInstr,
    Site,
    Continue,
    Jump,
    Error,
    Deopt,
    Code,
    Data,
    Cold,
    /// `SYMBOLS[i]` and its address.
    Symbol(u16, u64),
}

/// Indices of the per-stencil values a hole's field is computed from
/// ([`FHole::slot`]): `value = values[slot] + bias`.
pub mod slot {
    pub const OPARG: u8 = 0;
    pub const OPERAND0: u8 = 1;
    pub const OPERAND1: u8 = 2;
    pub const THIS_INSTR: u8 = 3;
    pub const DISPATCH_INSTR: u8 = 4;
    pub const NEXT_INSTR: u8 = 5;
    pub const CONTINUE: u8 = 6;
    pub const JUMP: u8 = 7;
    pub const ERROR: u8 = 8;
    pub const DEOPT: u8 = 9;
    pub const CODE: u8 = 10;
    pub const DATA: u8 = 11;
    /// 0: the bias is the value (a symbol's address, plus the addend).
    pub const ZERO: u8 = 12;
    /// The region's base: the bias is the offset of a symbol's GOT slot
    /// (plus the addend).
    pub const REGION: u8 = 13;
    /// Where the placed stencil's cold part is.
    pub const COLD: u8 = 14;
    /// The instruction's site cache.
    pub const SITE: u8 = 15;
    pub const COUNT: usize = 16;
}

/// A hole left to patch per compilation.
#[derive(Clone, Copy, Debug)]
pub struct FHole {
    pub offset: u32,
    pub kind: RelocKind,
    /// How the field is patched (`kind`, reduced).
    pub op: patch::Op,
    /// What the field refers to: `values[slot] + bias` (for a GOT field, its
    /// slot's address plus the addend).
    pub slot: u8,
    pub bias: u64,
    pub src: Src,
    pub addend: i64,
    /// The field refers to a GOT slot holding the value (`patch::is_got`):
    /// for a symbol, its slot in the region header.
    pub got: bool,
    /// A branch to a symbol: through a trampoline if out of reach.
    pub trampoline: bool,
}

/// What the fast path needs of a hole: `values[slot] + bias` patched as `op`
/// at `offset`.
#[derive(Clone, Copy, Debug)]
pub struct FastHole {
    pub bias: u64,
    pub offset: u32,
    pub slot: u8,
    pub op: patch::Op,
}

/// One way of placing a stencil's code: with or without its trailing jump
/// to the next stencil. Precomputed so that placing a stencil needs no
/// per-hole work beyond the patching itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct Form {
    /// Bytes of code copied.
    pub len: u32,
    /// Holes that lie in them (a prefix of [`Prog::holes`]).
    pub n_holes: u16,
    /// The same holes as the fast path reads them: prefixes of
    /// [`Prog::abs64`], [`Prog::rel32`] and [`Prog::other`].
    pub n_abs64: u16,
    pub n_rel32: u16,
    pub n_other: u16,
    /// The slots (bit `1 << slot`) those holes use.
    pub needs: u16,
}

/// One stencil, ready to copy and patch.
pub struct Prog {
    pub name: &'static str,
    pub stencil: &'static Stencil,
    /// The code, holes with constant values patched in.
    pub template: Box<[u8]>,
    /// The other code holes, by offset.
    pub holes: Box<[FHole]>,
    /// The same, as the fast path reads them, by offset: 64-bit absolute
    /// fields, 32-bit PC-relative ones (x86-64), and the others — split by
    /// kind, so that the commonest are patched without a dispatch on it.
    pub abs64: Box<[FastHole]>,
    pub rel32: Box<[FastHole]>,
    pub other: Box<[FastHole]>,
    /// The code without the trailing jump to the next stencil (the whole
    /// code if it has none), and the whole code.
    pub short: Form,
    pub full: Form,
    /// Bytes of its cold part (0: none).
    pub cold_len: u32,
    /// Why the stencil cannot be used (an unresolved symbol, a field that
    /// is not what its relocation says).
    pub error: Option<String>,
    /// Needs space after the code: trampolines, GOT slots for non-symbol
    /// values, or its own copy of its data.
    pub extra: bool,
    /// Its data has holes: each use gets a copy.
    pub instance_data: bool,
    /// Offset of its shared data in the region header.
    pub shared_data: u32,
    /// Its cold part (`Stencil::cold`), placed after a function's code, as
    /// a program of its own: `Code` is where the common path was placed.
    pub cold: Option<Box<Prog>>,
}

impl Prog {
    /// The fast path's holes of `form` (one of [`Self::short`] and
    /// [`Self::full`]): 64-bit absolute ones, 32-bit PC-relative ones, and
    /// the others.
    #[inline(always)]
    pub fn fast(&self, form: &Form) -> (&[FastHole], &[FastHole], &[FastHole]) {
        (&self.abs64[..form.n_abs64 as usize], &self.rel32[..form.n_rel32 as usize], &self.other[..form.n_other as usize])
    }
}

/// Whether a field's contents depend on where the code is placed.
fn position_dependent(kind: RelocKind) -> bool {
    matches!(
        kind,
        RelocKind::X86_64_PC32
            | RelocKind::X86_64_GOTPCREL
            | RelocKind::Aarch64_BRANCH26
            | RelocKind::Aarch64_ADR_PREL_PG_HI21
            | RelocKind::Aarch64_ADR_GOT_PAGE
            | RelocKind::Aarch64_LD64_GOT_LO12_NC
    )
}

pub struct Programs {
    /// Built at first use: a process compiles with a few dozen of the
    /// stencils, and building all of them made every process's first
    /// compilation cost about half a millisecond.
    progs: Box<[OnceLock<Prog>]>,
    /// Per stencil: where its data is in the header (if it has no holes).
    shared_data: Box<[u32]>,
    header: Vec<u8>,
    symbols: Vec<Option<u64>>,
}

impl Programs {
    pub fn new(resolver: &dyn Resolver) -> Programs {
        let symbols: Vec<Option<u64>> = (0..SYMBOLS.len()).map(|i| resolver.stencil_symbol(i as u16)).collect();
        // The header: GOT slots, then shared data.
        let mut header: Vec<u8> = Vec::with_capacity(8 * symbols.len() + 1024);
        for s in &symbols {
            header.extend_from_slice(&patch::got_slot(s.unwrap_or(0)));
        }
        let shared_data = STENCILS
            .iter()
            .map(|st| {
                if !has_instance_data(st) {
                    let a = (st.data_align as usize).max(1);
                    header.resize(header.len().next_multiple_of(a), 0);
                    let at = header.len() as u32;
                    header.extend_from_slice(st.data);
                    at
                } else {
                    header.len() as u32
                }
            })
            .collect();
        let progs = STENCILS.iter().map(|_| OnceLock::new()).collect();
        Programs { progs, shared_data, header, symbols }
    }

    /// Program `i` (`i < STENCILS.len()`).
    #[inline]
    pub fn get(&self, i: u16) -> &Prog {
        self.progs[i as usize].get_or_init(|| self.build_one(i as usize))
    }

    /// Program `i`, or None for `NO_PROG` (or out of range).
    #[inline]
    pub fn try_get(&self, i: u16) -> Option<&Prog> {
        ((i as usize) < self.progs.len()).then(|| self.get(i))
    }

    #[cold]
    fn build_one(&self, i: usize) -> Prog {
        let st = &STENCILS[i];
        let (instance_data, shared_data) = (has_instance_data(st), self.shared_data[i]);
        let symbols = &self.symbols;
        let mut prog = build(st, st.code, st.code_holes, st.trailing_continue, symbols, instance_data, shared_data);
        if !st.cold.is_empty() {
            let cold = build(st, st.cold, st.cold_holes, None, symbols, false, shared_data);
            // Cold parts are placed without the per-function extras
            // (trampolines, GOT slots, a copy of the data).
            let why = cold.error.clone().or_else(|| {
                let own_data = instance_data && cold.holes.iter().any(|h| h.src == Src::Data);
                (cold.extra || own_data).then(|| format!("{}: its cold part needs a per-function extra", st.name))
            });
            if let Some(e) = why {
                prog.error.get_or_insert(e);
            }
            prog.cold_len = cold.template.len() as u32;
            prog.cold = Some(Box::new(cold));
        }
        prog
    }

    /// Address of `SYMBOLS[i]`, if it resolved.
    pub fn symbol(&self, i: u16) -> Option<u64> {
        self.symbols.get(i as usize).copied().flatten()
    }

    pub fn header(&self) -> &[u8] {
        &self.header
    }

    pub fn by_name(&self, name: &str) -> Option<u16> {
        STENCILS.binary_search_by(|s| s.name.cmp(name)).ok().map(|i| i as u16)
    }

    /// Whether stencil `i`'s code or cold part has a SITE hole (read from
    /// the stencil: no program is built for it).
    pub fn uses_site(&self, i: u16) -> bool {
        STENCILS.get(i as usize).is_some_and(|st| st.uses_site)
    }
}

/// The stencil's data has holes: each use gets a copy of it, rather than
/// sharing the one in the region header.
fn has_instance_data(st: &Stencil) -> bool {
    !st.data.is_empty() && !st.data_holes.is_empty()
}

fn build(
    st: &'static Stencil,
    code: &'static [u8],
    code_holes: &'static [ember_stencils::Hole],
    trailing_continue: Option<u32>,
    symbols: &[Option<u64>],
    instance_data: bool,
    shared_data: u32,
) -> Prog {
    let mut template = code.to_vec().into_boxed_slice();
    let mut holes = Vec::with_capacity(code_holes.len());
    let mut error = None;
    let mut extra = instance_data;
    if instance_data && st.data_align as usize > crate::jitmem::BLOCK_ALIGN {
        // Blocks are only this aligned; shared data (in the region header,
        // page-aligned) may be more.
        error = Some(format!("{}: data with holes aligned to {}", st.name, st.data_align));
    }
    let mut sorted: Vec<_> = code_holes.iter().collect();
    // stencil-build emits them by offset already, as a rule.
    if !sorted.is_sorted_by_key(|h| h.offset) {
        sorted.sort_by_key(|h| h.offset);
    }
    for h in sorted {
        if let Err(e) = patch::check_field(code, h.offset as usize, h.kind) {
            error.get_or_insert_with(|| format!("{}: {e:?}", st.name));
            continue;
        }
        let src = match h.value {
            HoleValue::Oparg => Src::Oparg,
            HoleValue::Operand0 => Src::Operand0,
            HoleValue::Operand1 => Src::Operand1,
            HoleValue::ThisInstr => Src::ThisInstr,
            HoleValue::DispatchInstr => Src::DispatchInstr,
            HoleValue::NextInstr => Src::NextInstr,
            HoleValue::Site => Src::Site,
            HoleValue::Continue => Src::Continue,
            HoleValue::Jump => Src::Jump,
            HoleValue::Error => Src::Error,
            HoleValue::Deopt => Src::Deopt,
            HoleValue::Code => Src::Code,
            HoleValue::Data => Src::Data,
            HoleValue::Cold => Src::Cold,
            HoleValue::Symbol(i) => match symbols.get(i as usize).copied().flatten() {
                Some(addr) => Src::Symbol(i, addr),
                None => {
                    error.get_or_insert_with(|| format!("symbol {} not found", SYMBOLS[i as usize]));
                    continue;
                }
            },
        };
        let got = patch::is_got(h.kind);
        if let (Src::Symbol(_, addr), false, false) = (src, got, position_dependent(h.kind)) {
            // Same value wherever the code goes: patched once.
            if let Err(e) = patch::apply(&mut template, h.offset as usize, h.kind, 0, addr.wrapping_add(h.addend as u64)) {
                error.get_or_insert_with(|| format!("{}: {e:?}", st.name));
            }
            continue;
        }
        let trampoline = !got && patch::is_branch(h.kind) && matches!(src, Src::Symbol(..));
        extra |= trampoline || (got && !matches!(src, Src::Symbol(..)));
        let (slot, bias) = match src {
            Src::Symbol(i, _) if got => (slot::REGION, (8 * i as u64).wrapping_add(h.addend as u64)),
            Src::Symbol(_, addr) => (slot::ZERO, addr.wrapping_add(h.addend as u64)),
            other => (slot_of(other), h.addend as u64),
        };
        holes.push(FHole { offset: h.offset, kind: h.kind, op: patch::Op::of(h.kind), slot, bias, src, addend: h.addend, got, trampoline });
    }
    let short_len = trailing_continue.map_or(code.len(), |o| o as usize);
    let n_short = holes.iter().take_while(|h| (h.offset as usize) < short_len).count();
    if holes[..n_short].iter().any(|h| h.offset as usize + h.op.size() > short_len) {
        error.get_or_insert_with(|| format!("{}: a hole straddles its trailing jump", st.name));
    }
    let needs = |hs: &[FHole]| hs.iter().fold(0u16, |m, h| m | (1 << h.slot));
    // Sized exactly: no growing and shrinking, for the hundreds built at start-up.
    fn of_op(holes: &[FHole], keep: impl Fn(patch::Op) -> bool) -> Box<[FastHole]> {
        let mut v = Vec::with_capacity(holes.iter().filter(|h| keep(h.op)).count());
        v.extend(holes.iter().filter(|h| keep(h.op)).map(|h| FastHole { bias: h.bias, offset: h.offset, slot: h.slot, op: h.op }));
        v.into_boxed_slice()
    }
    let abs64 = of_op(&holes, |op| op == patch::Op::Abs64);
    let rel32 = of_op(&holes, |op| op == patch::Op::Rel32);
    let other = of_op(&holes, |op| op != patch::Op::Abs64 && op != patch::Op::Rel32);
    let n_short_of = |hs: &[FastHole]| hs.iter().filter(|h| (h.offset as usize) < short_len).count() as u16;
    let short = Form {
        len: short_len as u32,
        n_holes: n_short as u16,
        n_abs64: n_short_of(&abs64),
        n_rel32: n_short_of(&rel32),
        n_other: n_short_of(&other),
        needs: needs(&holes[..n_short]),
    };
    let full = Form {
        len: code.len() as u32,
        n_holes: holes.len() as u16,
        n_abs64: abs64.len() as u16,
        n_rel32: rel32.len() as u16,
        n_other: other.len() as u16,
        needs: needs(&holes),
    };
    Prog {
        name: st.name,
        stencil: st,
        template,
        abs64,
        rel32,
        other,
        holes: holes.into_boxed_slice(),
        short,
        full,
        cold_len: 0,
        error,
        extra,
        instance_data,
        shared_data,
        cold: None,
    }
}

fn slot_of(src: Src) -> u8 {
    match src {
        Src::Oparg => slot::OPARG,
        Src::Operand0 => slot::OPERAND0,
        Src::Operand1 => slot::OPERAND1,
        Src::ThisInstr => slot::THIS_INSTR,
        Src::DispatchInstr => slot::DISPATCH_INSTR,
        Src::NextInstr => slot::NEXT_INSTR,
        Src::Site => slot::SITE,
        Src::Continue => slot::CONTINUE,
        Src::Jump => slot::JUMP,
        Src::Error => slot::ERROR,
        Src::Deopt => slot::DEOPT,
        Src::Code => slot::CODE,
        Src::Data => slot::DATA,
        Src::Cold => slot::COLD,
        Src::Symbol(..) => slot::ZERO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every symbol at a made-up address (absolute fields take any value;
    /// PC-relative ones are patched per compilation, not here).
    struct FakeResolver;

    impl Resolver for FakeResolver {
        fn symbol(&self, name: &str) -> Option<u64> {
            SYMBOLS.iter().position(|s| *s == name).map(|i| 0x7f00_0000_0000 + 64 * i as u64)
        }
        fn small_int(&self, _: u32) -> Option<u64> {
            None
        }
        fn binary_op(&self, _: u32) -> Option<u64> {
            None
        }
    }

    /// Programs are built at first use, so a stencil no test happens to
    /// compile with would hide an error: build every one.
    #[test]
    fn every_program_builds_and_site_use_is_read_from_its_stencil() {
        let programs = Programs::new(&FakeResolver);
        let site = |p: &Prog| p.holes.iter().any(|h| h.src == Src::Site);
        for i in 0..STENCILS.len() as u16 {
            let prog = programs.get(i);
            assert_eq!(prog.error, None, "{}", prog.name);
            assert_eq!(prog.name, STENCILS[i as usize].name);
            let built = site(prog) || prog.cold.as_deref().is_some_and(site);
            assert_eq!(programs.uses_site(i), built, "{}", prog.name);
            // The second use gets the same program.
            assert!(std::ptr::eq(prog, programs.get(i)));
        }
        assert!(programs.try_get(NO_PROG).is_none());
        assert!(!programs.uses_site(NO_PROG));
    }
}
