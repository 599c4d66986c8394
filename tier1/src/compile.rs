//! The copy-and-patch compiler: one stencil per bytecode instruction, laid
//! out in bytecode order, holes patched with this code object's values.
//!
//! Layout of one compiled code object: a block of the executable arena
//! ([`crate::jitmem`]),
//!
//! ```text
//! [instruction stencils, in bytecode order][ERROR_EXIT][RERAISE_EXIT][DEOPT_EXIT]
//! [trampolines][GOT slots for non-symbol values][data of stencils whose data has holes]
//! ```
//!
//! (the trampolines, GOT slots and data are usually absent), and, on the
//! heap, an entry table (one u64 per code unit) and the stencil of each
//! instruction (one u16 each). The entry table gives, for every instruction
//! start, the address of its code (0 elsewhere): the hook enters a frame at
//! `frame->instr_ptr`, and exception handlers are reached through it. It is
//! not in the block because it is only read: in executable memory it cost
//! a part of every publication and, being on another page than the code
//! entered first, often a page fault more. The stencil numbers are for
//! [`Compiled::map`]. Symbol GOT slots and the stencils' read-only data are
//! shared: every region of the arena starts with them ([`crate::program`]).
//!
//! A [`Compiler`] holds what does not change between compilations: each
//! stencil as a patch program (symbols resolved, constant holes patched
//! into a template, fields checked), and each opcode's stencil, class,
//! generic form and cache size. A compilation decodes the bytecode, lays
//! the stencils out (sizes only), takes a block, then copies and patches
//! every stencil into a reused staging buffer and writes that to the block
//! with one call.

use std::cell::RefCell;
use std::sync::Arc;

use ember_pyabi::opcodes;

use crate::jitmem::{Arena, Block};
use crate::operands::{self, Class, JumpRule, JumpTo, Known};
use crate::patch;
use crate::program::{slot, Form, Prog, Programs, Src, NO_PROG};
use ember_stencils::HoleValue;

/// What the compiler needs of a code object, gathered by the runtime under
/// the GIL. Addresses are of objects the code object keeps alive.
pub struct CodeInfo<'a> {
    pub code_object: u64,
    /// The quickened bytecode (`co_code_adaptive`), one u16 per code unit.
    pub bytecode: &'a [u16],
    pub bytecode_addr: u64,
    pub consts: &'a [u64],
    pub names: &'a [u64],
    pub localsplusnames: &'a [u64],
    /// The interpreter's instrumentation version the code is compiled for
    /// (its bytecode is uninstrumented at that version).
    pub instrumentation_version: u64,
    /// The location table (`co_linetable`) and `co_firstlineno`: the source
    /// line of every code unit.
    pub linetable: &'a [u8],
    pub first_line: i32,
    /// Address of a `u64` that `JUMP_BACKWARD` increments each time it runs
    /// (the back-edge count of `ember.stats()`); it must outlive the code.
    pub back_edge_counter: u64,
    /// Its attribute stores mostly add attributes rather than replace them
    /// (an `__init__`): they use the `__NEW` variant where there is one.
    pub adds_attributes: bool,
}

/// Values that come from the running CPython.
pub trait Resolver {
    /// Address of an exported symbol (CPython's or Ember's own helpers).
    fn symbol(&self, name: &str) -> Option<u64>;
    /// Address of `ember_stencils::SYMBOLS[index]`. Called once per symbol
    /// by [`Compiler::new`].
    fn stencil_symbol(&self, index: u16) -> Option<u64> {
        self.symbol(ember_stencils::SYMBOLS[index as usize])
    }
    /// The cached small int object for `value`.
    fn small_int(&self, value: u32) -> Option<u64>;
    /// `_PyEval_BinaryOps[oparg]`.
    fn binary_op(&self, oparg: u32) -> Option<u64>;
}

/// Every stencil symbol resolved once: looking one up by name (dlsym) per
/// hole would dominate compile time.
pub struct SymbolCache {
    addrs: Vec<Option<u64>>,
}

impl SymbolCache {
    pub fn new(resolve: impl Fn(&str) -> Option<u64>) -> SymbolCache {
        SymbolCache { addrs: ember_stencils::SYMBOLS.iter().map(|n| resolve(n)).collect() }
    }
    #[inline]
    pub fn get(&self, index: u16) -> Option<u64> {
        self.addrs.get(index as usize).copied().flatten()
    }
}

/// Why a code object stays in the interpreter.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// Monitoring, tracing or an executor has rewritten its bytecode.
    Instrumented,
    /// An instruction tier 1 has no stencil for (the generic opcode's name).
    Unsupported(&'static str),
    /// A stencil needs a value this instruction cannot give it.
    Malformed(String),
    /// Executable memory could not be had.
    Memory(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Instrumented => write!(f, "instrumented"),
            Refusal::Unsupported(op) => write!(f, "unsupported opcode {op}"),
            Refusal::Malformed(why) => write!(f, "malformed: {why}"),
            Refusal::Memory(why) => write!(f, "memory: {why}"),
        }
    }
}

/// One decoded instruction.
#[derive(Clone, Copy, Debug)]
pub struct Instr {
    /// Index of its first code unit.
    pub index: u32,
    /// Index of the next instruction (after the inline caches).
    pub next: u32,
    /// Full oparg, `EXTENDED_ARG` prefixes folded in.
    pub oparg: u32,
    /// Its source line (`i32::MIN`: none).
    pub line: i32,
    /// Where the interpreter must dispatch to run it with its full oparg:
    /// the first of the `EXTENDED_ARG`s right before it, else itself.
    pub dispatch: u32,
    pub opcode: u8,
    /// The generic opcode (`_PyOpcode_Deopt`).
    pub base: u8,
    /// A LINE_CHECK goes before it (set by the layout).
    line_start: bool,
    /// Its stencil is the `__NULL` variant of its opcode's: a load that
    /// pushes a NULL (oparg & 1), which that variant does without testing.
    with_null: bool,
    /// Its stencil is the `__STORES` variant of its unpacking's: the stores
    /// that follow are done there (set by the layout; see
    /// [`Compiler::fused_stores`]).
    fused_stores: bool,
    /// A store that the unpacking before it does (`fused_stores`): its own
    /// code, run only after a sequence the unpacking's fast path did not
    /// take, is placed with the rare paths (set by the layout).
    skipped: bool,
    /// Its stencil is the `__LOAD_STORES` variant of its unpacking's (with
    /// `fused_stores`): the LOAD_FAST_BORROW right before it is done there
    /// too (set by the layout; see [`Compiler::folded_load`]).
    fused_load: bool,
    /// That LOAD_FAST_BORROW: no code of its own (the NOP stencil).
    folded_load: bool,
    /// Its stencil is the `__NEW` variant of its opcode's (set by the
    /// layout; see [`CodeInfo::adds_attributes`]).
    adds_attribute: bool,
    /// Placed with its trailing jump ([`full_form`]; set by the layout).
    full: bool,
}

const FIRST_INSTRUMENTED: u8 = 234;

/// Decode the quickened bytecode. `EXTENDED_ARG` units stay instructions
/// of their own (jumps may target them) and their oparg is folded forward.
pub fn decode(bytecode: &[u16]) -> Result<Vec<Instr>, Refusal> {
    let mut out = Vec::new();
    decode_into(bytecode, &[], 0, &op_infos(), &mut out, &mut Vec::new())?;
    Ok(out)
}

/// What decoding and compiling need of one opcode.
#[derive(Clone, Copy)]
struct OpInfo {
    /// `_PyOpcode_Deopt`.
    base: u8,
    /// Inline cache entries (of the generic form).
    caches: u8,
    class: Class,
    jump: JumpRule,
    /// Its stencil's program, or `NO_PROG`.
    prog: u16,
    /// It is `EXTENDED_ARG`.
    extended_arg: bool,
    /// It is RERAISE (its OPERAND1 defaults to the entry table).
    reraise: bool,
    /// Cache units after the counter that [`opcode_signature`] covers.
    signed_caches: u8,
    /// Words of site cache its stencils use (through their SITE hole; see
    /// [`site_cache_words`]).
    site_words: u8,
    /// Its stencil has a `__NULL` variant, for an odd oparg.
    null_variant: bool,
}

fn op_infos() -> [OpInfo; 256] {
    core::array::from_fn(|op| {
        let op = op as u8;
        let base = opcodes::deopt(op);
        OpInfo {
            base,
            caches: opcodes::caches(base).min(255) as u8,
            signed_caches: signed_caches()[op as usize],
            class: Class::of(op),
            jump: JumpRule::of(op),
            prog: NO_PROG,
            extended_arg: Some(base) == opcodes::extended_arg(),
            reraise: false,
            site_words: 0,
            null_variant: false,
        }
    })
}

/// [`decode`] into `out` (cleared first), each instruction with its line
/// (from `linetable`); marks in `targets` (one byte per code unit) the
/// units jumps go to. Returns [`opcode_signature`] and the words of site
/// cache its instructions need.
fn decode_into(
    bytecode: &[u16],
    linetable: &[u8],
    first_line: i32,
    ops: &[OpInfo; 256],
    out: &mut Vec<Instr>,
    targets: &mut Vec<u8>,
) -> Result<(u64, usize), Refusal> {
    let n = bytecode.len();
    let mut site_words = 0;
    out.clear();
    out.reserve(n);
    targets.clear();
    targets.resize(n, 0);
    let mut lines = LineCursor::new(linetable, first_line);
    let mut h = FNV_OFFSET;
    let mut i = 0;
    let mut ext: u32 = 0;
    // The first unit of the run of EXTENDED_ARGs just decoded (`NO_EXT`: none).
    const NO_EXT: u32 = u32::MAX;
    let mut ext_start = NO_EXT;
    while i < n {
        let word = bytecode[i];
        let opcode = (word & 0xff) as u8;
        if opcode >= FIRST_INSTRUMENTED {
            return Err(Refusal::Instrumented);
        }
        let op = &ops[opcode as usize];
        let caches = op.caches as usize;
        site_words += op.site_words as usize;
        h = fnv(h, opcode as u64);
        // The cache entries after the counter (those signed).
        let mut c = i + 2;
        let end = (c + op.signed_caches as usize).min(n);
        while c < end {
            h = fnv(h, bytecode[c] as u64);
            c += 1;
        }
        let oparg = (ext << 8) | (word >> 8) as u32;
        if oparg > i32::MAX as u32 {
            // Stencils take the oparg as a non-negative int (ember_stencil.h).
            return Err(Refusal::Malformed(format!("oparg {oparg} over 2**31")));
        }
        let next = i + 1 + caches;
        ext = if op.extended_arg { oparg } else { 0 };
        let dispatch = if ext_start == NO_EXT { i as u32 } else { ext_start };
        ext_start = if op.extended_arg { dispatch } else { NO_EXT };
        let instr = Instr {
            index: i as u32,
            next: next as u32,
            oparg,
            line: lines.line_at(i),
            dispatch,
            opcode,
            base: op.base,
            line_start: false,
            with_null: op.null_variant && oparg & 1 == 1,
            fused_stores: false,
            skipped: false,
            fused_load: false,
            folded_load: false,
            adds_attribute: false,
            full: false,
        };
        if op.jump != JumpRule::None {
            if let JumpTo::Instr(t) = operands::jump(&instr, op.jump) {
                if let Some(m) = targets.get_mut(t) {
                    *m = 1;
                }
            }
        }
        out.push(instr);
        i = next;
    }
    Ok((h, site_words))
}

/// The source line of code units in increasing order, read from a
/// location table (CPython 3.14's `co_linetable`, as
/// `ember_pyabi::locations`): entries covering 1 to 8 code units each, a
/// first byte `1cccclll` (code `cccc`, length `lll + 1`) then code-specific data.
struct LineCursor<'a> {
    table: &'a [u8],
    pos: usize,
    line: i32,
    /// The current entry: its line, and the unit after it.
    this: i32,
    end: usize,
}

impl<'a> LineCursor<'a> {
    fn new(table: &'a [u8], first_line: i32) -> Self {
        LineCursor { table, pos: 0, line: first_line, this: NO_LINE, end: 0 }
    }

    #[inline]
    fn line_at(&mut self, unit: usize) -> i32 {
        while unit >= self.end {
            if self.pos >= self.table.len() {
                return NO_LINE;
            }
            self.next_entry();
        }
        self.this
    }

    fn next_entry(&mut self) {
        let table = self.table;
        let head = table[self.pos];
        self.pos += 1;
        let code = (head >> 3) & 15;
        self.end += (head & 7) as usize + 1;
        self.this = match code {
            15 => NO_LINE,
            14 => {
                self.line = self.line.wrapping_add(read_svarint(table, &mut self.pos));
                for _ in 0..3 {
                    read_varint(table, &mut self.pos); // end line, column, end column
                }
                self.line
            }
            13 => {
                self.line = self.line.wrapping_add(read_svarint(table, &mut self.pos));
                self.line
            }
            10..=12 => {
                self.line = self.line.wrapping_add((code - 10) as i32);
                self.pos += 2; // column, end column
                self.line
            }
            _ => {
                self.pos += 1; // short form: columns only
                self.line
            }
        };
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

#[inline(always)]
fn fnv(h: u64, v: u64) -> u64 {
    (h ^ v).wrapping_mul(0x0100_0000_01b3)
}

/// A digest of the instruction opcodes and their inline caches, adaptive
/// counters (each cache's first entry) left out: it changes when the
/// interpreter specialises, despecialises or re-specialises an instruction
/// (new type versions, dict versions), which is when recompiling gives other
/// stencils or other guard values. Not the caches of instructions whose
/// stencils follow a re-specialisation for another type by themselves
/// ([`follows_respecialisation`]).
pub fn opcode_signature(bytecode: &[u16]) -> u64 {
    let signed = signed_caches();
    let mut h = FNV_OFFSET;
    let mut i = 0;
    while i < bytecode.len() {
        let op = (bytecode[i] & 0xff) as u8;
        h = fnv(h, op as u64);
        for unit in bytecode.iter().skip(i + 2).take(signed[op as usize] as usize) {
            h = fnv(h, *unit as u64);
        }
        i += 1 + opcodes::caches(opcodes::deopt(op));
    }
    h
}

/// Instructions whose stencils keep a polymorphic site cache, filled from
/// the interpreter's re-specialisations for other types (stencils/c/fast.c,
/// ember_attr_pic, ember_method_pic, which assert these sizes in words):
/// new cache values there need no recompilation, which would empty the
/// site caches.
const POLYMORPHIC_SITES: [(&str, u8); 3] =
    [("LOAD_ATTR_INSTANCE_VALUE", 4), ("STORE_ATTR_INSTANCE_VALUE", 4), ("LOAD_ATTR_METHOD_WITH_VALUES", 8)];

fn follows_respecialisation(name: &str) -> bool {
    POLYMORPHIC_SITES.iter().any(|&(n, _)| n == name)
}

/// Per opcode, the cache units after the counter that the signature covers.
fn signed_caches() -> &'static [u8; 256] {
    static TABLE: std::sync::OnceLock<[u8; 256]> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        core::array::from_fn(|op| {
            let op = op as u8;
            if follows_respecialisation(name_of(op)) {
                0
            } else {
                opcodes::caches(opcodes::deopt(op)).saturating_sub(1).min(255) as u8
            }
        })
    })
}

pub(crate) fn name_of(op: u8) -> &'static str {
    opcodes::name(op).unwrap_or("<unknown>")
}

/// The stencil for an opcode, by index into `STENCILS`: its specialised
/// form if there is one, else the generic form, else None.
fn select_stencil(programs: &Programs, opcode: u8) -> Option<u16> {
    let base = name_of(opcodes::deopt(opcode));
    if matches!(base, "EXTENDED_ARG" | "NOT_TAKEN") {
        return programs.by_name("NOP");
    }
    programs.by_name(name_of(opcode)).or_else(|| programs.by_name(base))
}

/// The variants of a stencil `NAME` (stencils named `NAME__NULL`,
/// `NAME__STORES`, `NAME__LOAD_STORES`, `NAME__NEW`), per stencil index, in
/// that order (`NO_PROG`: none): found in one pass over the stencils rather
/// than by a lookup per opcode and suffix.
fn stencil_variants(programs: &Programs) -> Vec<[u16; 4]> {
    use ember_stencils::STENCILS;
    let mut variants = vec![[NO_PROG; 4]; STENCILS.len()];
    for (i, st) in STENCILS.iter().enumerate() {
        let Some((base, suffix)) = st.name.rsplit_once("__") else { continue };
        let k = match suffix {
            "NULL" => 0,
            "STORES" => 1,
            "LOAD_STORES" => 2,
            "NEW" => 3,
            _ => continue,
        };
        if let Some(b) = programs.by_name(base) {
            variants[b as usize][k] = i as u16;
        }
    }
    variants
}

const NO_LINE: i32 = i32::MIN;

fn read_varint(table: &[u8], i: &mut usize) -> u32 {
    let mut value = 0u32;
    let mut shift = 0u32;
    while let Some(&b) = table.get(*i) {
        *i += 1;
        if shift < 32 {
            value |= ((b & 63) as u32) << shift;
        }
        shift += 6;
        if b & 64 == 0 {
            break;
        }
    }
    value
}

fn read_svarint(table: &[u8], i: &mut usize) -> i32 {
    let u = read_varint(table, i);
    if u & 1 != 0 {
        -((u >> 1) as i32)
    } else {
        (u >> 1) as i32
    }
}

/// Words of the site cache of an instruction's stencils (their SITE hole):
/// what the site learnt at run time. A generic CALL's `ember_call_cache`
/// (the last Python function it called directly) and a SEND's
/// `ember_send_cache` (the code object it last resumed), written by their
/// glue (csrc/glue.h, which asserts the size), and a FOR_ITER's, the same as
/// a SEND's (the generator it last resumed); the polymorphic caches of
/// [`POLYMORPHIC_SITES`], written by their stencils. Zeroed, a site cache
/// matches nothing.
fn site_cache_words(name: &str) -> u8 {
    match name {
        "CALL" | "SEND" | "FOR_ITER" => 2,
        _ => POLYMORPHIC_SITES.iter().find(|&&(n, _)| n == name).map_or(0, |&(_, words)| words),
    }
}

/// A compiled code object.
pub struct Compiled {
    block: Block,
    /// The entry table (its address is in the code: never reallocated).
    entries: Box<[u64]>,
    /// The site caches, back to back (see [`site_cache_words`]): the
    /// compiled code holds their addresses, and it and its glue write them.
    #[allow(dead_code)]
    site_caches: Box<[core::cell::UnsafeCell<u64>]>,
    /// Bytes of machine code (stencils, exits and cold parts, without
    /// trampolines or data).
    pub code_bytes: usize,
    pub n_instructions: usize,
    /// Where the shared exits (ERROR_EXIT, RERAISE_EXIT, DEOPT_EXIT) start.
    pub exits_offset: usize,
    /// Where the stencils' cold parts start (`code_bytes` when none).
    pub cold_offset: usize,
    /// (bytecode index, code offset, stencil name) per instruction, for
    /// `ember.dis` (made when first iterated).
    pub map: InstrMap,
    /// `opcode_signature` of the bytecode compiled.
    pub opcode_signature: u64,
    /// Time spent making the code executable (the `pwrite` into the
    /// arena, or the `mprotect`s), a part of the compilation's.
    pub publish_ns: u64,
}

/// The (bytecode index, code offset, stencil name) of every instruction of
/// a [`Compiled`], in bytecode order: `for &(index, offset, name) in &c.map`.
pub struct InstrMap {
    cell: std::sync::OnceLock<Vec<(usize, usize, &'static str)>>,
    /// (bytecode index, code offset, stencil) per instruction, read from the
    /// block when first needed.
    source: MapSource,
}

struct MapSource {
    base: u64,
    entries: *const u64,
    n_units: usize,
    /// The stencil of each instruction (the low 16 bits), and how it was
    /// placed (MAP_* bits), from which [`Compiler::cold_parts`] finds its
    /// cold part again.
    ids: Box<[u32]>,
    n_instructions: usize,
}

/// Bits of [`MapSource::ids`] above the stencil: a LINE_CHECK goes before
/// the instruction; its code is placed with the cold parts (fused stores);
/// its code keeps the trailing jump.
const MAP_LINE_START: u32 = 16;
const MAP_SKIPPED: u32 = 17;
const MAP_FULL: u32 = 18;

/// The stencil (program) index of an entry of [`MapSource::ids`].
fn stencil_of(id: u32) -> usize {
    (id & 0xffff) as usize
}

// SAFETY: `entries` is the entry table of the `Compiled` that owns the
// map, immutable while it lives.
unsafe impl Send for InstrMap {}
unsafe impl Sync for InstrMap {}

impl InstrMap {
    fn get(&self) -> &Vec<(usize, usize, &'static str)> {
        self.cell.get_or_init(|| {
            let stencils = ember_stencils::STENCILS;
            self.source
                .placements()
                .map(|(index, offset, id)| (index, offset, stencils[stencil_of(id)].name))
                .collect()
        })
    }

    pub fn len(&self) -> usize {
        self.source.n_instructions
    }

    pub fn is_empty(&self) -> bool {
        self.source.n_instructions == 0
    }

    pub fn iter(&self) -> std::slice::Iter<'_, (usize, usize, &'static str)> {
        self.get().iter()
    }
}

impl MapSource {
    /// (bytecode index, code offset, stencil and MAP_* bits) per
    /// instruction, in bytecode order.
    fn placements(&self) -> impl Iterator<Item = (usize, usize, u32)> + '_ {
        // SAFETY: `entries` is the entry table of the `Compiled` that owns
        // the map, immutable while it lives.
        let entries = unsafe { core::slice::from_raw_parts(self.entries, self.n_units) };
        entries
            .iter()
            .enumerate()
            .filter(|(_, &a)| a != 0)
            .zip(&self.ids[..])
            .map(|((index, &a), &id)| (index, (a - self.base) as usize, id))
    }
}

impl<'a> IntoIterator for &'a InstrMap {
    type Item = &'a (usize, usize, &'static str);
    type IntoIter = std::slice::Iter<'a, (usize, usize, &'static str)>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl Compiled {
    fn entries(&self) -> &[u64] {
        &self.entries
    }
    /// The entry for a frame whose `instr_ptr` is at code unit `index`.
    pub fn entry(&self, index: usize) -> Option<u64> {
        match self.entries().get(index) {
            Some(&a) if a != 0 => Some(a),
            _ => None,
        }
    }
    /// The entry table: `n_units` addresses, 0 where there is no entry.
    pub fn entry_table(&self) -> (*const u64, usize) {
        (self.entries.as_ptr(), self.entries.len())
    }
    pub fn addr(&self) -> u64 {
        self.block.addr()
    }
    /// Executable memory the compiled code holds: code, and its trampolines,
    /// GOT slots and data if any.
    pub fn total_bytes(&self) -> usize {
        self.block.len()
    }
    pub fn machine_code(&self) -> &[u8] {
        &self.block.bytes()[..self.code_bytes]
    }
}

/// Where a JUMP hole of a placed stencil goes.
#[derive(Clone, Copy)]
enum Target {
    None,
    /// A code unit (an instruction start).
    Unit(u32),
    ReraiseExit,
}

/// A stencil placed in the output.
#[derive(Clone, Copy)]
struct Item {
    prog: u16,
    /// Index into the decoded instructions (`NO_INSTR` for the exits).
    instr: u32,
    code_off: u32,
    /// Holes patched: those that lie in the bytes copied.
    n_holes: u16,
    /// Where the stencil's common path is (`code_off`, except for a cold
    /// part), where its cold part is, and where it continues.
    hot_off: u32,
    cold_off: u32,
    cont_off: u32,
    /// A LINE_CHECK: it continues into the next placed stencil, its
    /// instruction's.
    line_check: bool,
    operand0: Option<u64>,
    operand1: Option<u64>,
    /// Its site cache's address.
    site: Option<u64>,
    jump: Target,
}

const NO_INSTR: u32 = u32::MAX;
const NO_OFFSET: u32 = u32::MAX;

/// Buffers reused from one compilation to the next.
#[derive(Default)]
struct Scratch {
    instrs: Vec<Instr>,
    /// Per code unit: 1 where a jump goes.
    targets: Vec<u8>,
    /// Per code unit: offset of the code entered there, or `NO_OFFSET`.
    unit_off: Vec<u32>,
    staging: Vec<u8>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// The tier-1 compiler of one process: stencil programs with their symbols
/// resolved, the executable arena.
pub struct Compiler {
    resolver: &'static (dyn Resolver + Sync),
    programs: Programs,
    arena: Arc<Arena>,
    ops: [OpInfo; 256],
    /// The same for the `__NULL` variants (where `null_variant` is set).
    null_ops: Box<[OpInfo; 256]>,
    /// The same for the `__STORES` variants (UNPACK_SEQUENCE, generic or
    /// specialised for a tuple or a list, with the stores after it).
    stores_ops: Box<[OpInfo; 256]>,
    /// The same for the `__LOAD_STORES` variants (those of UNPACK_SEQUENCE
    /// specialised for a tuple or a list), and the NOP stencil's, for the
    /// load they do.
    load_stores_ops: Box<[OpInfo; 256]>,
    nop_op: OpInfo,
    /// The same for the `__NEW` variants (STORE_ATTR_INSTANCE_VALUE's).
    new_attr_ops: Box<[OpInfo; 256]>,
    /// STORE_FAST_STORE_FAST, LOAD_FAST_BORROW.
    store_fast_store_fast: Option<u8>,
    load_fast_borrow: Option<u8>,
    known: Known,
    /// The exits, LINE_CHECK: programs, or why there is none.
    exits: Result<[u16; 3], String>,
    line_check: Result<u16, String>,
}

/// Rarely used parts of a block, after the code.
struct Extra {
    tramp_off: usize,
    got_off: usize,
    end: usize,
}

/// What patching a stencil needs to know of the compilation.
struct PatchCx<'a, 'b> {
    info: &'a CodeInfo<'b>,
    instrs: &'a [Instr],
    unit_off: &'a [u32],
    n_units: usize,
    base: u64,
    region: u64,
    exit_offs: [u64; 3],
    extra: &'a Extra,
}

impl Compiler {
    /// Where the cold parts of `c` (compiled by this compiler) lie: (bytecode
    /// index, code offset, what) in address order, `what` naming the
    /// stencil whose rarely taken paths they are ("LINE_CHECK" for an
    /// instruction's line check, the exit for the shared exits'). The
    /// compilation places them in this order (`compile_with`), so they
    /// are found again from each instruction's stencil and placement
    /// rather than kept for every compiled function.
    pub fn cold_parts(&self, c: &Compiled) -> Vec<(usize, usize, &'static str)> {
        let progs = &self.programs;
        let mut out = Vec::new();
        let mut cold = c.cold_offset;
        let (Ok(line_check), Ok(exits)) = (&self.line_check, &self.exits) else {
            return out;
        };
        let lc = progs.get(*line_check);
        for (index, offset, id) in c.map.source.placements() {
            let prog = progs.get(stencil_of(id) as u16);
            if id >> MAP_LINE_START & 1 != 0 && lc.cold_len != 0 {
                out.push((index, cold, "LINE_CHECK"));
                cold += lc.cold_len as usize;
            }
            if id >> MAP_SKIPPED & 1 != 0 {
                // Its own code (listed with the instructions), then its cold part.
                if offset != cold {
                    return vec![(usize::MAX, c.cold_offset, "?")];
                }
                let form = if id >> MAP_FULL & 1 != 0 { &prog.full } else { &prog.short };
                cold += form.len as usize;
            }
            if prog.cold_len != 0 {
                out.push((index, cold, prog.name));
                cold += prog.cold_len as usize;
            }
        }
        for &p in exits {
            let prog = progs.get(p);
            if prog.cold_len != 0 {
                out.push((usize::MAX, cold, prog.name));
                cold += prog.cold_len as usize;
            }
        }
        if cold != c.code_bytes {
            // Not the placement compile_with made: one block, unlabelled,
            // rather than labels that would be wrong.
            return vec![(usize::MAX, c.cold_offset, "?")];
        }
        out
    }

    /// Resolves every stencil symbol (once) and lays out the region header;
    /// each stencil's program is prepared at its first use.
    pub fn new(resolver: &'static (dyn Resolver + Sync)) -> Compiler {
        let programs = Programs::new(resolver);
        let arena = Arena::new(programs.header().to_vec());
        let prog = |name: &str| programs.by_name(name).ok_or_else(|| format!("no {name} stencil"));
        let exits = (|| Ok([prog("ERROR_EXIT")?, prog("RERAISE_EXIT")?, prog("DEOPT_EXIT")?]))();
        let line_check = prog("LINE_CHECK");
        let mut ops = op_infos();
        let mut null_ops = Box::new(ops);
        let mut stores_ops = Box::new(ops);
        let mut load_stores_ops = Box::new(ops);
        let mut new_attr_ops = Box::new(ops);
        // This runs at the first compilation of every process: one lookup
        // per opcode, and one pass for the variants.
        let variants = stencil_variants(&programs);
        let reraise = opcodes::by_name("RERAISE");
        for (op, info) in ops.iter_mut().enumerate() {
            info.reraise = Some(info.base) == reraise;
            if let Some(prog) = select_stencil(&programs, op as u8) {
                info.site_words = site_cache_words(ember_stencils::STENCILS[prog as usize].name);
                info.prog = prog;
                let [null, stores, load_stores, new_attr] = variants[prog as usize];
                if null != NO_PROG {
                    info.null_variant = true;
                    null_ops[op] = *info;
                    null_ops[op].prog = null;
                }
                for (table, variant) in
                    [(&mut stores_ops, stores), (&mut load_stores_ops, load_stores), (&mut new_attr_ops, new_attr)]
                {
                    if variant != NO_PROG {
                        table[op] = *info;
                        table[op].prog = variant;
                    }
                }
                // A stencil that would use a site cache it does not get
                // is not used (its instruction is refused as unsupported).
                for info in [
                    &mut *info,
                    &mut null_ops[op],
                    &mut stores_ops[op],
                    &mut load_stores_ops[op],
                    &mut new_attr_ops[op],
                ] {
                    if info.site_words == 0 && programs.uses_site(info.prog) {
                        info.prog = NO_PROG;
                    }
                }
            }
        }
        let nop_op = match opcodes::by_name("NOP") {
            Some(nop) => ops[nop as usize],
            None => OpInfo { prog: NO_PROG, ..ops[0] },
        };
        Compiler {
            resolver,
            programs,
            arena,
            ops,
            null_ops,
            stores_ops,
            load_stores_ops,
            nop_op,
            new_attr_ops,
            store_fast_store_fast: opcodes::by_name("STORE_FAST_STORE_FAST"),
            load_fast_borrow: opcodes::by_name("LOAD_FAST_BORROW"),
            known: Known { store_fast: opcodes::by_name("STORE_FAST"), pop_top: opcodes::by_name("POP_TOP") },
            exits,
            line_check,
        }
    }

    /// What compiling `instr` needs of its opcode, or of its variant.
    #[inline]
    fn op(&self, instr: &Instr) -> &OpInfo {
        if instr.with_null {
            &self.null_ops[instr.opcode as usize]
        } else if instr.folded_load {
            &self.nop_op
        } else if instr.adds_attribute {
            &self.new_attr_ops[instr.opcode as usize]
        } else if instr.fused_stores && instr.fused_load {
            &self.load_stores_ops[instr.opcode as usize]
        } else if instr.fused_stores {
            &self.stores_ops[instr.opcode as usize]
        } else {
            &self.ops[instr.opcode as usize]
        }
    }

    /// The arena's memory backing, once it has made a region.
    pub fn memory_backing(&self) -> Option<crate::jitmem::Backing> {
        self.arena.backing()
    }

    pub fn compile(&self, info: &CodeInfo<'_>) -> Result<Compiled, Refusal> {
        let once = || {
            SCRATCH.with(|s| match s.try_borrow_mut() {
                Ok(mut s) => self.compile_with(info, &mut s),
                // Re-entered (cannot happen under the GIL): fresh buffers.
                Err(_) => self.compile_with(info, &mut Scratch::default()),
            })
        };
        match once() {
            // The code was patched for a block the arena could not write;
            // it now hands out blocks it can.
            Err(Refusal::Memory(why)) if why == crate::jitmem::RETRY_ANON => once(),
            r => r,
        }
    }

    fn compile_with(&self, info: &CodeInfo<'_>, s: &mut Scratch) -> Result<Compiled, Refusal> {
        let n_units = info.bytecode.len();
        // The code object's bytecode and line table are rarely in cache:
        // their cache misses overlap rather than follow one another.
        prefetch(info.bytecode.as_ptr() as *const u8, 2 * n_units);
        prefetch(info.linetable.as_ptr(), info.linetable.len());
        let (signature, n_site_words) = decode_into(
            info.bytecode,
            info.linetable,
            info.first_line,
            &self.ops,
            &mut s.instrs,
            &mut s.targets,
        )?;
        let [error_exit, reraise_exit, deopt_exit] = self.exits.clone().map_err(Refusal::Malformed)?;
        let line_check = self.line_check.clone().map_err(Refusal::Malformed)?;
        let progs = &self.programs;
        let n = s.instrs.len();

        // Layout: where each instruction's code goes. Line starts are the
        // instructions where the interpreter would report a new line to a
        // tracer (as CPython's instrumentation marks them: a line other
        // than the last one seen, and jump targets), except the first: a
        // LINE_CHECK goes before each. Tracing switched on by code this
        // frame calls instruments the frame's own code object at once, and
        // the interpreter reports the next line start; so must compiled
        // code, by handing the frame over there.
        s.unit_off.clear();
        s.unit_off.resize(n_units, NO_OFFSET);
        let lc = progs.get(line_check);
        let lc_len = lc.short.len as usize;
        let mut current = NO_LINE;
        let mut off: usize = 0;
        let mut cold_bytes: usize = 0;
        let mut n_starts: usize = 0;
        // Every instruction has a usable program; one needs extras.
        let mut ok = true;
        let mut extra = false;
        let mut any_skipped = false;
        {
            let (targets, unit_off) = (&s.targets[..], &mut s.unit_off[..]);
            for k in 0..s.instrs.len() {
                if let Some(after) = self.folded_load(&s.instrs, k, targets) {
                    s.instrs[k].folded_load = true;
                    s.instrs[k + 1].fused_load = true;
                    fuse_stores(&mut s.instrs, k + 1, after);
                }
                if info.adds_attributes && self.new_attr_ops[s.instrs[k].opcode as usize].prog != NO_PROG {
                    s.instrs[k].adds_attribute = true;
                }
                // (An unpacking after a folded load has its stores fused already.)
                if !s.instrs[k].fused_stores && self.stores_ops[s.instrs[k].opcode as usize].prog != NO_PROG {
                    if let Some(after) = self.fused_stores(&s.instrs, k, targets) {
                        fuse_stores(&mut s.instrs, k, after);
                    }
                }
                let full = full_form(&s.instrs, k);
                let instr = &mut s.instrs[k];
                instr.full = full;
                let line = instr.line;
                let has_line = line != NO_LINE;
                let start = has_line && (line != current || targets[instr.index as usize] != 0) && k > 0;
                if has_line {
                    current = line;
                }
                instr.line_start = start;
                n_starts += start as usize;
                let (len, op_cold_len) = match progs.try_get(self.op(instr).prog) {
                    Some(prog) => {
                        ok &= prog.error.is_none();
                        extra |= prog.extra;
                        (if full { prog.full.len } else { prog.short.len } as usize, prog.cold_len as usize)
                    }
                    None => {
                        ok = false;
                        (0, 0)
                    }
                };
                if instr.skipped {
                    // With the cold parts, in order: its offset from their
                    // start until that is known (below). Never a line start
                    // (fused_stores: on the unpacking's line, not a target).
                    debug_assert!(!start);
                    any_skipped = true;
                    unit_off[instr.index as usize] = cold_bytes as u32;
                    cold_bytes += len;
                } else {
                    unit_off[instr.index as usize] = off as u32;
                    if start {
                        off += lc_len;
                        // Cold parts go in the order of their stencils.
                        cold_bytes += lc.cold_len as usize;
                    }
                    off += len;
                }
                cold_bytes += op_cold_len;
            }
        }
        if !ok || (n_starts > 0 && lc.error.is_some()) {
            return Err(self.layout_refusal(&s.instrs, lc));
        }
        if n_starts > 0 {
            extra |= lc.extra;
        }
        let instrs = &s.instrs[..];
        let mut exit_offs = [0u64; 3];
        for (i, p) in [error_exit, reraise_exit, deopt_exit].into_iter().enumerate() {
            let prog = progs.get(p);
            if let Some(e) = &prog.error {
                return Err(Refusal::Malformed(e.clone()));
            }
            extra |= prog.extra;
            exit_offs[i] = off as u64;
            off += prog.full.len as usize;
            cold_bytes += prog.cold_len as usize;
        }
        // The cold parts, after all the code of the common paths.
        let cold_start = off;
        let code_bytes = off + cold_bytes;
        if any_skipped {
            for instr in s.instrs.iter().filter(|i| i.skipped) {
                s.unit_off[instr.index as usize] += cold_start as u32;
            }
        }
        let mut layout = Extra { tramp_off: code_bytes, got_off: code_bytes, end: code_bytes };
        if extra {
            layout = self.extra_layout(instrs, lc, code_bytes);
        }
        let total = layout.end;
        if total >= NO_OFFSET as usize {
            return Err(Refusal::Memory(format!("{total} bytes of code")));
        }

        let mut block = self.arena.alloc(total).map_err(|e| Refusal::Memory(e.to_string()))?;
        let base = block.addr();
        let region = block.region_base();
        // Where each instruction's code is entered; 0 for the cache units.
        let entries: Box<[u64]> =
            s.unit_off.iter().map(|&o| if o == NO_OFFSET { 0 } else { base + o as u64 }).collect();
        let mut ids = vec![0u32; n].into_boxed_slice();
        let entries_addr = entries.as_ptr() as u64;
        let site_caches: Box<[_]> = (0..n_site_words).map(|_| core::cell::UnsafeCell::new(0u64)).collect();
        let mut next_site_cache = site_caches.as_ptr() as u64;

        // Copy and patch, into a staging buffer of the block's size: each
        // stencil's common path at its offset, its cold part at the next
        // cold offset, in one pass. The code is placed back to back and
        // covers its bytes (asserted below), so only what follows it needs
        // clearing: the gaps of the extras.
        let buf = &mut s.staging;
        if buf.len() < total {
            // Its length only grows: zeroing what earlier code left is not needed.
            buf.resize(total, 0);
        }
        let buf = &mut buf[..total];
        buf[code_bytes..].fill(0);
        let cx = PatchCx {
            info,
            instrs,
            unit_off: &s.unit_off,
            n_units,
            base,
            region,
            exit_offs,
            extra: &layout,
        };
        let mut cold_off = cold_start as u32;
        // A cold part that could not be patched: reported after the common
        // paths, as when cold parts were placed in a pass of their own.
        let mut cold_error = None;
        let mut values = [0u64; 16];
        values[slot::ERROR as usize] = base + exit_offs[0];
        values[slot::DEOPT as usize] = base + exit_offs[2];
        values[slot::REGION as usize] = region;
        const ALWAYS: u16 = 1 << slot::ERROR
            | 1 << slot::DEOPT
            | 1 << slot::CODE
            | 1 << slot::DATA
            | 1 << slot::ZERO
            | 1 << slot::REGION
            | 1 << slot::COLD;
        const INSTR: u16 =
            ALWAYS | 1 << slot::OPARG | 1 << slot::THIS_INSTR | 1 << slot::NEXT_INSTR | 1 << slot::DISPATCH_INSTR;
        let bytecode = info.bytecode_addr;
        // LINE_CHECK compares the eval breaker's bits 8 and up with this
        // (ember_line_version_changed): CPython's versions leave bits 0-7
        // to the pending events.
        if info.instrumentation_version & 0xff != 0 {
            return Err(Refusal::Malformed("instrumentation version with event bits".into()));
        }
        let line_version = info.instrumentation_version >> 8;
        let mut code_off = 0u32;
        for (k, instr) in instrs.iter().enumerate() {
            let op = self.op(instr);
            let prog = progs.get(op.prog);
            ids[k] = op.prog as u32
                | (instr.line_start as u32) << MAP_LINE_START
                | (instr.skipped as u32) << MAP_SKIPPED
                | (instr.full as u32) << MAP_FULL;
            values[slot::OPARG as usize] = instr.oparg as u64;
            values[slot::THIS_INSTR as usize] = bytecode + 2 * instr.index as u64;
            values[slot::NEXT_INSTR as usize] = bytecode + 2 * instr.next as u64;
            values[slot::DISPATCH_INSTR as usize] = bytecode + 2 * instr.dispatch as u64;
            if instr.line_start {
                let cont_off = code_off + lc.short.len;
                let item = || Item {
                    prog: line_check,
                    instr: k as u32,
                    code_off,
                    n_holes: lc.short.n_holes,
                    hot_off: code_off,
                    cold_off,
                    cont_off,
                    line_check: true,
                    operand0: Some(line_version),
                    operand1: None,
                    site: None,
                    jump: Target::None,
                };
                // It continues into its instruction's code.
                values[slot::CONTINUE as usize] = base + cont_off as u64;
                values[slot::OPERAND0 as usize] = line_version;
                let avail = INSTR | 1 << slot::CONTINUE | 1 << slot::OPERAND0;
                self.emit(&cx, (code_off, cold_off), item, lc, &lc.short, avail, &mut values, buf, &mut cold_error)?;
                code_off = cont_off;
                cold_off += lc.cold_len;
            }
            let (operand0, mut operand1) = if op.class == Class::Plain {
                (None, None)
            } else {
                operands::operands(instr, op.class, &self.known, info, self.resolver)?
            };
            if operand1.is_none() && op.reraise {
                operand1 = Some(entries_addr);
            }
            let mut avail = INSTR;
            let site = (op.site_words > 0).then(|| {
                let at = next_site_cache;
                next_site_cache += 8 * op.site_words as u64;
                values[slot::SITE as usize] = at;
                avail |= 1 << slot::SITE;
                at
            });
            let jump = match op.jump {
                _ if instr.fused_stores => {
                    // The stores (placed apart), after a generic unpacking.
                    let first = instr.next as usize;
                    let o = s.unit_off[first];
                    values[slot::JUMP as usize] = base + o as u64;
                    avail |= 1 << slot::JUMP;
                    Target::Unit(first as u32)
                }
                JumpRule::None => Target::None,
                rule => match operands::jump(instr, rule) {
                    JumpTo::Instr(t) if t < n_units => {
                        let o = s.unit_off[t];
                        if o != NO_OFFSET {
                            values[slot::JUMP as usize] = base + o as u64;
                            avail |= 1 << slot::JUMP;
                        }
                        Target::Unit(t as u32)
                    }
                    JumpTo::Instr(t) => {
                        return Err(Refusal::Malformed(format!("{} jumps to {t}", name_of(instr.base))))
                    }
                    JumpTo::ReraiseExit => {
                        values[slot::JUMP as usize] = base + exit_offs[1];
                        avail |= 1 << slot::JUMP;
                        Target::ReraiseExit
                    }
                    JumpTo::None => Target::None,
                },
            };
            let full = instr.full;
            let form = if full { &prog.full } else { &prog.short };
            // A store done by the unpacking goes with the cold parts, its
            // own cold part after it.
            let (place, cold_place) = if instr.skipped { (cold_off, cold_off + form.len) } else { (code_off, cold_off) };
            // What follows the code: the next instruction's, which is not
            // placed right after it when it keeps its trailing jump (but
            // for the last).
            let cont_off = if full && k + 1 < n { s.unit_off[instr.next as usize] } else { place + form.len };
            let item = || Item {
                prog: op.prog,
                instr: k as u32,
                code_off: place,
                n_holes: form.n_holes,
                hot_off: place,
                cold_off: cold_place,
                cont_off,
                line_check: false,
                operand0,
                operand1,
                site,
                jump,
            };
            // Stencils are laid out back to back: what follows is the next
            // instruction's code.
            if (instr.next as usize) < n_units {
                values[slot::CONTINUE as usize] = base + cont_off as u64;
                avail |= 1 << slot::CONTINUE;
            }
            if let Some(v) = operand0 {
                values[slot::OPERAND0 as usize] = v;
                avail |= 1 << slot::OPERAND0;
            }
            if let Some(v) = operand1 {
                values[slot::OPERAND1 as usize] = v;
                avail |= 1 << slot::OPERAND1;
            }
            self.emit(&cx, (place, cold_place), item, prog, form, avail, &mut values, buf, &mut cold_error)?;
            if instr.skipped {
                cold_off += form.len + prog.cold_len;
            } else {
                code_off = place + form.len;
                cold_off += prog.cold_len;
            }
        }
        values[slot::OPERAND0 as usize] = entries_addr;
        for p in [error_exit, reraise_exit, deopt_exit] {
            let prog = progs.get(p);
            let cont_off = code_off + prog.full.len;
            let item = || Item {
                prog: p,
                instr: NO_INSTR,
                code_off,
                n_holes: prog.full.n_holes,
                hot_off: code_off,
                cold_off,
                cont_off,
                line_check: false,
                operand0: Some(entries_addr),
                operand1: None,
                site: None,
                jump: Target::None,
            };
            let avail = ALWAYS | 1 << slot::OPERAND0;
            self.emit(&cx, (code_off, cold_off), item, prog, &prog.full, avail, &mut values, buf, &mut cold_error)?;
            code_off = cont_off;
            cold_off += prog.cold_len;
        }
        assert!(code_off as usize == cold_start && cold_off as usize == code_bytes, "code not back to back");
        if let Some(e) = cold_error {
            return Err(e);
        }
        if extra {
            self.write_extra(&cx, buf)?;
        }
        let publish = std::time::Instant::now();
        block.write(buf).map_err(|e| Refusal::Memory(e.to_string()))?;
        let publish_ns = publish.elapsed().as_nanos() as u64;
        Ok(Compiled {
            map: InstrMap {
                cell: std::sync::OnceLock::new(),
                source: MapSource {
                    base,
                    entries: entries.as_ptr(),
                    n_units,
                    ids,
                    n_instructions: n,
                },
            },
            block,
            entries,
            site_caches,
            code_bytes,
            n_instructions: n,
            exits_offset: exit_offs[0] as usize,
            cold_offset: cold_start,
            opcode_signature: signature,
            publish_ns,
        })
    }

    /// Copies one placed stencil (and its cold part, if any) into `buf`
    /// and patches it. `values` holds what the slots in `avail` stand for
    /// (the placed stencil's own code, cold and data addresses are set here).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn emit(
        &self,
        cx: &PatchCx<'_, '_>,
        (code_off, cold_off): (u32, u32),
        item: impl Fn() -> Item,
        prog: &Prog,
        form: &Form,
        avail: u16,
        values: &mut [u64; 16],
        buf: &mut [u8],
        cold_error: &mut Option<Refusal>,
    ) -> Result<(), Refusal> {
        // `item` describes the placed stencil to the general path; the fast
        // one needs only where it goes.
        let (code_off, cold_off) = (code_off as usize, cold_off as usize);
        let len = form.len as usize;
        buf[code_off..code_off + len].copy_from_slice(&prog.template[..len]);
        let cold = prog.cold.as_deref();
        if form.needs == 0 && !prog.extra && cold.is_none() {
            return Ok(());
        }
        values[slot::CODE as usize] = cx.base + code_off as u64;
        values[slot::COLD as usize] = cx.base + cold_off as u64;
        values[slot::DATA as usize] = cx.region + prog.shared_data as u64;
        if prog.extra || form.needs & !avail != 0 {
            // The general path: trampolines, GOT slots of this code, data of
            // its own; and the reason for a value that is missing.
            self.emit_general(cx, &item(), prog, buf)?;
        } else {
            patch_fast(prog, form, values, code_off, cx.base, buf)?;
        }
        if let Some(cold) = cold {
            // Its cold part: the same values (`Code` is where the common path
            // went), but its own place.
            let form = &cold.full;
            let len = form.len as usize;
            buf[cold_off..cold_off + len].copy_from_slice(&cold.template[..len]);
            let r = if form.needs & !avail != 0 {
                let item = Item { code_off: cold_off as u32, n_holes: form.n_holes, ..item() };
                patch_general(cx, &item, cold, None, buf, &mut Vec::new(), &mut Vec::new())
            } else {
                values[slot::DATA as usize] = cx.region + cold.shared_data as u64;
                patch_fast(cold, form, values, cold_off, cx.base, buf)
            };
            if let Err(e) = r {
                cold_error.get_or_insert(e);
            }
        }
        Ok(())
    }

    /// For the unpacking `instrs[k]` (an UNPACK_SEQUENCE of oparg items), when
    /// its `__STORES` variant can do the stores that follow: the code unit
    /// of the instruction after them. They must be STORE_FAST_STORE_FASTs
    /// (then a STORE_FAST of a local below 16 for an odd count), one code
    /// unit each right after the unpacking (the variant reads the locals
    /// from their opargs), on its line and none a jump target: no
    /// LINE_CHECK goes between them, and the variant, going on past them,
    /// skips nothing but their code.
    fn fused_stores(&self, instrs: &[Instr], k: usize, targets: &[u8]) -> Option<usize> {
        let unpack = &instrs[k];
        let n = unpack.oparg as usize;
        if !(3..=16).contains(&n) || self.stores_ops[unpack.opcode as usize].prog == NO_PROG {
            return None;
        }
        let (mut stored, mut i) = (0usize, k + 1);
        while stored < n {
            let store = instrs.get(i)?;
            if store.index as usize != unpack.next as usize + (i - k - 1)
                || targets[store.index as usize] != 0
                || store.line != unpack.line
            {
                return None;
            }
            if Some(store.opcode) == self.store_fast_store_fast && stored + 2 <= n {
                stored += 2;
            } else if Some(store.opcode) == self.known.store_fast && stored + 1 == n && store.oparg < 16 {
                stored += 1;
            } else {
                return None;
            }
            i += 1;
        }
        Some(instrs.get(i)?.index as usize)
    }

    /// Whether `instrs[k]` is a LOAD_FAST_BORROW that the unpacking right
    /// after it does ([`Instr::folded_load`]): one whose stores it does
    /// (`fused_stores`), with a `__LOAD_STORES` variant, on the load's line
    /// and not a jump target, so that no LINE_CHECK goes between them and
    /// no code enters the unpacking without the load. The variant reads
    /// the local from the load's oparg: the load is one code unit. Returns
    /// the unpacking's `fused_stores`.
    fn folded_load(&self, instrs: &[Instr], k: usize, targets: &[u8]) -> Option<usize> {
        let (load, unpack) = (instrs.get(k)?, instrs.get(k + 1)?);
        let foldable = Some(load.opcode) == self.load_fast_borrow
            && load.dispatch == load.index
            && load.next == unpack.index
            && unpack.line == load.line
            && targets[unpack.index as usize] == 0
            && self.nop_op.prog != NO_PROG
            && self.load_stores_ops[unpack.opcode as usize].prog != NO_PROG;
        if foldable {
            self.fused_stores(instrs, k + 1, targets)
        } else {
            None
        }
    }

    /// The first reason, in the layout's order, an instruction cannot be
    /// laid out: a LINE_CHECK that cannot be used before a line start, an
    /// opcode without a stencil, a stencil that cannot be used.
    #[cold]
    fn layout_refusal(&self, instrs: &[Instr], lc: &Prog) -> Refusal {
        for instr in instrs {
            if instr.line_start {
                if let Some(e) = &lc.error {
                    return Refusal::Malformed(e.clone());
                }
            }
            let p = self.op(instr).prog;
            if p == NO_PROG {
                return Refusal::Unsupported(name_of(instr.base));
            }
            if let Some(e) = &self.programs.get(p).error {
                return Refusal::Malformed(e.clone());
            }
        }
        unreachable!("no instruction to refuse")
    }

    #[cold]
    fn emit_general(&self, cx: &PatchCx<'_, '_>, item: &Item, prog: &Prog, buf: &mut [u8]) -> Result<(), Refusal> {
        SCRATCH_EXTRA.with(|x| {
            let mut x = x.borrow_mut();
            let x = &mut *x;
            // Its own copy of its data, placed as `extra_layout` counted.
            let data_off = prog.instance_data.then(|| {
                let off = align(x.data_end, (prog.stencil.data_align as usize).max(1));
                x.own_data.push((*item, off));
                x.data_end = off + prog.stencil.data.len();
                off
            });
            patch_general(cx, item, prog, data_off, buf, &mut x.got, &mut x.tramps)
        })
    }

    /// Where the rare parts go, after the code: trampolines, GOT slots for
    /// values other than symbols, and data of stencils whose data has holes.
    fn extra_layout(&self, instrs: &[Instr], lc: &Prog, code_bytes: usize) -> Extra {
        let progs = &self.programs;
        let (mut n_tramp, mut n_got, mut data) = (0, 0, Vec::new());
        let count = |prog: &Prog, n_holes: u16, n_tramp: &mut usize, n_got: &mut usize, data: &mut Vec<&'static ember_stencils::Stencil>| {
            if !prog.extra {
                return;
            }
            for h in &prog.holes[..n_holes as usize] {
                *n_tramp += h.trampoline as usize;
                *n_got += (h.got && !matches!(h.src, Src::Symbol(..))) as usize;
            }
            if prog.instance_data {
                data.push(prog.stencil);
            }
        };
        for instr in instrs {
            if instr.line_start {
                count(lc, lc.short.n_holes, &mut n_tramp, &mut n_got, &mut data);
            }
            let prog = progs.get(self.op(instr).prog);
            let n_holes = if instr.full { prog.full.n_holes } else { prog.short.n_holes };
            count(prog, n_holes, &mut n_tramp, &mut n_got, &mut data);
        }
        if let Ok(exits) = &self.exits {
            for &p in exits {
                let prog = progs.get(p);
                count(prog, prog.full.n_holes, &mut n_tramp, &mut n_got, &mut data);
            }
        }
        let tramp_off = align(code_bytes, 16);
        let got_off = align(tramp_off + patch::TRAMPOLINE_SIZE * n_tramp, 8);
        let mut end = got_off + 8 * n_got;
        for st in data {
            end = align(end, (st.data_align as usize).max(1)) + st.data.len();
        }
        SCRATCH_EXTRA.with(|x| {
            let mut x = x.borrow_mut();
            x.got.clear();
            x.tramps.clear();
            x.own_data.clear();
            x.data_end = got_off + 8 * n_got;
        });
        Extra { tramp_off, got_off, end }
    }

    /// Fills in what [`Self::extra_layout`] placed: trampolines, GOT slots,
    /// and the data blobs that have holes.
    fn write_extra(&self, cx: &PatchCx<'_, '_>, buf: &mut [u8]) -> Result<(), Refusal> {
        SCRATCH_EXTRA.with(|x| {
            let x = x.borrow();
            for (i, &target) in x.tramps.iter().enumerate() {
                write_at(buf, cx.extra.tramp_off + patch::TRAMPOLINE_SIZE * i, &patch::trampoline(target));
            }
            for &(value, off) in &x.got {
                write_at(buf, off, &patch::got_slot(value));
            }
            for (item, data_off) in &x.own_data {
                let prog = self.programs.get(item.prog);
                self.write_own_data(cx, item, prog, *data_off, buf)?;
            }
            Ok(())
        })
    }

    fn write_own_data(&self, cx: &PatchCx<'_, '_>, item: &Item, prog: &Prog, data_off: usize, buf: &mut [u8]) -> Result<(), Refusal> {
        let base = cx.base;
        let st = prog.stencil;
        write_at(buf, data_off, st.data);
        let instr = (item.instr != NO_INSTR).then(|| &cx.instrs[item.instr as usize]);
        let bytecode_addr = cx.info.bytecode_addr;
        let missing = |what: &str| Refusal::Malformed(format!("{} data needs {what}", prog.name));
        for h in st.data_holes {
            let value = match h.value {
                HoleValue::Oparg => instr.ok_or_else(|| missing("an oparg"))?.oparg as u64,
                HoleValue::Operand0 => item.operand0.ok_or_else(|| missing("operand 0"))?,
                HoleValue::Operand1 => item.operand1.ok_or_else(|| missing("operand 1"))?,
                HoleValue::ThisInstr => bytecode_addr + 2 * instr.ok_or_else(|| missing("an instruction"))?.index as u64,
                HoleValue::DispatchInstr => {
                    bytecode_addr + 2 * instr.ok_or_else(|| missing("an instruction"))?.dispatch as u64
                }
                HoleValue::NextInstr => bytecode_addr + 2 * instr.ok_or_else(|| missing("an instruction"))?.next as u64,
                HoleValue::Site => item.site.ok_or_else(|| missing("a site cache"))?,
                HoleValue::Continue => base + item.cont_off as u64,
                HoleValue::Jump => match item.jump {
                    Target::Unit(t) => match cx.unit_off.get(t as usize) {
                        Some(&o) if o != NO_OFFSET => base + o as u64,
                        _ => return Err(missing("an instruction")),
                    },
                    Target::ReraiseExit => base + cx.exit_offs[1],
                    Target::None => return Err(missing("a jump target")),
                },
                HoleValue::Error => base + cx.exit_offs[0],
                HoleValue::Deopt => base + cx.exit_offs[2],
                HoleValue::Code => base + item.hot_off as u64,
                HoleValue::Cold => base + item.cold_off as u64,
                HoleValue::Data => base + data_off as u64,
                HoleValue::Symbol(i) => self.programs.symbol(i).ok_or_else(|| missing("a symbol it could not resolve"))?,
            };
            let field_off = data_off + h.offset as usize;
            patch::apply(buf, field_off, h.kind, base + field_off as u64, value.wrapping_add(h.addend as u64))
                .map_err(|e| Refusal::Malformed(format!("{} data: {e:?}", prog.name)))?;
        }
        Ok(())
    }
}

/// State of the rare parts of a compilation (see [`Compiler::extra_layout`]).
#[derive(Default)]
struct ExtraScratch {
    got: Vec<(u64, usize)>,
    tramps: Vec<u64>,
    own_data: Vec<(Item, usize)>,
    data_end: usize,
}

thread_local! {
    static SCRATCH_EXTRA: RefCell<ExtraScratch> = RefCell::new(ExtraScratch::default());
}

/// Patches the holes of one placed stencil, each as its `HoleValue` says:
/// the general path, for what the fast one leaves (trampolines, GOT slots
/// for values other than symbols, data of its own) and for the reason a
/// value is missing.
fn patch_general(
    cx: &PatchCx<'_, '_>,
    item: &Item,
    prog: &Prog,
    data_off: Option<usize>,
    buf: &mut [u8],
    got: &mut Vec<(u64, usize)>,
    tramps: &mut Vec<u64>,
) -> Result<(), Refusal> {
    let (info, instrs, base, region) = (cx.info, cx.instrs, cx.base, cx.region);
    let code_off = item.code_off as usize;
    let instr = (item.instr != NO_INSTR).then(|| &instrs[item.instr as usize]);
    let missing = |what: &str| Refusal::Malformed(format!("{} needs {what}", prog.name));
    for h in &prog.holes[..item.n_holes as usize] {
        let value: u64 = match h.src {
            Src::Symbol(_, addr) => addr,
            Src::Oparg => instr.ok_or_else(|| missing("an oparg"))?.oparg as u64,
            Src::Operand0 => item.operand0.ok_or_else(|| missing("operand 0"))?,
            Src::Operand1 => item.operand1.ok_or_else(|| missing("operand 1"))?,
            Src::ThisInstr => info.bytecode_addr + 2 * instr.ok_or_else(|| missing("an instruction"))?.index as u64,
            Src::DispatchInstr => {
                info.bytecode_addr + 2 * instr.ok_or_else(|| missing("an instruction"))?.dispatch as u64
            }
            Src::NextInstr => info.bytecode_addr + 2 * instr.ok_or_else(|| missing("an instruction"))?.next as u64,
            Src::Site => item.site.ok_or_else(|| missing("a site cache"))?,
            Src::Continue => {
                if !item.line_check {
                    let i = instr.ok_or_else(|| missing("a next instruction"))?;
                    if i.next as usize >= cx.n_units {
                        return Err(missing("an instruction after the last"));
                    }
                }
                base + item.cont_off as u64
            }
            Src::Jump => match item.jump {
                Target::Unit(t) => match cx.unit_off[t as usize] {
                    NO_OFFSET => {
                        return Err(Refusal::Malformed(format!("jump into the middle of an instruction ({t})")))
                    }
                    o => base + o as u64,
                },
                Target::ReraiseExit => base + cx.exit_offs[1],
                Target::None => return Err(missing("a jump target")),
            },
            Src::Error => base + cx.exit_offs[0],
            Src::Deopt => base + cx.exit_offs[2],
            Src::Code => base + item.hot_off as u64,
            Src::Cold => base + item.cold_off as u64,
            Src::Data => match data_off {
                Some(o) => base + o as u64,
                None => region + prog.shared_data as u64,
            },
        };
        let field_off = code_off + h.offset as usize;
        let field_addr = base + field_off as u64;
        let target = if h.got {
            let slot = match h.src {
                Src::Symbol(i, _) => region + 8 * i as u64,
                _ => base + got_slot(got, cx.extra.got_off, value) as u64,
            };
            slot.wrapping_add(h.addend as u64)
        } else {
            value.wrapping_add(h.addend as u64)
        };
        match patch::apply_checked_field(buf, field_off, h.kind, field_addr, target) {
            Ok(()) => {}
            Err(patch::PatchError::OutOfRange { .. }) if h.trampoline => {
                let t = cx.extra.tramp_off + patch::TRAMPOLINE_SIZE * tramps.len();
                tramps.push(value);
                let t_addr = base + t as u64;
                patch::apply_checked_field(buf, field_off, h.kind, field_addr, t_addr.wrapping_add(h.addend as u64))
                    .map_err(|e| Refusal::Malformed(format!("{}: {e:?}", prog.name)))?;
            }
            Err(e) => return Err(Refusal::Malformed(format!("{}: {e:?}", prog.name))),
        }
    }
    Ok(())
}

/// The reason the fast path could not patch `form` of `prog` at
/// `code_off`: the first hole by offset whose value its field cannot hold,
/// as `patch::apply` gives it.
#[cold]
fn patch_error(prog: &Prog, form: &Form, values: &[u64; 16], code_off: usize, base: u64, buf: &mut [u8]) -> Refusal {
    for h in &prog.holes[..form.n_holes as usize] {
        let field_off = code_off + h.offset as usize;
        let target = values[(h.slot & 15) as usize].wrapping_add(h.bias);
        if let Err(e) = patch::apply_checked_field(buf, field_off, h.kind, base + field_off as u64, target) {
            return Refusal::Malformed(format!("{}: {e:?}", prog.name));
        }
    }
    Refusal::Malformed(format!("{}: cannot patch", prog.name))
}

/// The offset of this function's GOT slot for `value` (one per value:
/// aarch64 reaches a slot with an adrp/ldr pair, two holes that must name
/// the same slot).
fn got_slot(got: &mut Vec<(u64, usize)>, got_off: usize, value: u64) -> usize {
    if let Some(&(_, o)) = got.iter().find(|(v, _)| *v == value) {
        return o;
    }
    let o = got_off + 8 * got.len();
    got.push((value, o));
    o
}

/// Writes `bytes` at `off` in `buf` (sized for the whole block).
#[inline(always)]
fn write_at(buf: &mut [u8], off: usize, bytes: &[u8]) {
    buf[off..off + bytes.len()].copy_from_slice(bytes);
}

/// Patches the holes of `form` of `prog`, copied to `buf` at `code_off`,
/// with `values` (the fast path: every slot the holes use has its value).
#[inline(always)]
fn patch_fast(prog: &Prog, form: &Form, values: &[u64; 16], code_off: usize, base: u64, buf: &mut [u8]) -> Result<(), Refusal> {
    let code = &mut buf[code_off..code_off + form.len as usize];
    let at = code.as_mut_ptr();
    let code_addr = base + code_off as u64;
    let (abs64, rel32, other) = prog.fast(form);
    for h in abs64 {
        let value = values[(h.slot & 15) as usize].wrapping_add(h.bias);
        // SAFETY: the holes of a form lie within its bytes (checked when the
        // program was built), which `code` holds.
        unsafe { core::ptr::write_unaligned(at.add(h.offset as usize) as *mut u64, value.to_le()) };
    }
    for h in rel32 {
        let target = values[(h.slot & 15) as usize].wrapping_add(h.bias);
        let field_addr = code_addr + h.offset as u64;
        // SAFETY: as above.
        if !unsafe { patch::apply_op(at.add(h.offset as usize), patch::Op::Rel32, field_addr, target) } {
            return Err(patch_error(prog, form, values, code_off, base, buf));
        }
    }
    for h in other {
        let target = values[(h.slot & 15) as usize].wrapping_add(h.bias);
        let field_addr = code_addr + h.offset as u64;
        // SAFETY: as above.
        if !unsafe { patch::apply_op(at.add(h.offset as usize), h.op, field_addr, target) } {
            return Err(patch_error(prog, form, values, code_off, base, buf));
        }
    }
    Ok(())
}

#[inline(always)]
fn prefetch(p: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let mut o = 0;
        while o < len {
            // SAFETY: a prefetch is a hint; it never faults.
            unsafe { core::arch::x86_64::_mm_prefetch(p.wrapping_add(o) as *const i8, core::arch::x86_64::_MM_HINT_T0) };
            o += 64;
        }
    }
    let _ = (p, len);
}

/// Mark the unpacking `instrs[k]` as doing the stores that follow it, up to
/// code unit `after` ([`Compiler::fused_stores`]).
fn fuse_stores(instrs: &mut [Instr], k: usize, after: usize) {
    instrs[k].fused_stores = true;
    for store in instrs[k + 1..].iter_mut().take_while(|i| (i.index as usize) < after) {
        store.skipped = true;
    }
}

/// Whether instruction `k` is placed with its trailing jump to what follows
/// it: the last one, and a store done by the unpacking before it, placed
/// apart (`Instr::skipped`). That unpacking goes on with what follows the
/// stores, placed next.
fn full_form(instrs: &[Instr], k: usize) -> bool {
    k + 1 == instrs.len() || instrs[k].skipped || (instrs[k + 1].skipped && !instrs[k].fused_stores)
}

fn align(x: usize, a: usize) -> usize {
    (x + a - 1) & !(a - 1)
}
