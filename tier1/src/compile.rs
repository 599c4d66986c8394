//! The copy-and-patch compiler: one stencil per bytecode instruction, laid
//! out in bytecode order, holes patched with this code object's values.
//!
//! Layout of one compiled code object (a single mapping):
//!
//! ```text
//! [instruction stencils, in bytecode order][ERROR_EXIT][RERAISE_EXIT][DEOPT_EXIT]
//! [stencil data blobs][GOT slots][trampolines][entry table: one u64 per code unit]
//! ```
//!
//! The entry table gives, for every instruction start, the address of its
//! stencil: the hook enters a frame at `frame->instr_ptr`, and exception
//! handlers are reached through it.

use ember_pyabi::opcodes;
use ember_stencils::{Hole, HoleValue, Stencil};

use crate::jitmem::{Executable, Writable};
use crate::operands::{self, JumpTo};
use crate::patch;

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
    /// Source line of every code unit (`None`: no location).
    pub lines: &'a [Option<i32>],
    /// Address of a `u64` that `JUMP_BACKWARD` increments each time it runs
    /// (the back-edge count of `ember.stats()`); it must outlive the code.
    pub back_edge_counter: u64,
}

/// Values that come from the running CPython.
pub trait Resolver {
    /// Address of an exported symbol (CPython's or Ember's own helpers).
    fn symbol(&self, name: &str) -> Option<u64>;
    /// Address of `ember_stencils::SYMBOLS[index]`. Called for every symbol
    /// hole, so a resolver used for many compilations should cache (see
    /// [`SymbolCache`]).
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
#[derive(Clone, Debug)]
pub struct Instr {
    /// Index of its first code unit.
    pub index: usize,
    pub opcode: u8,
    /// The generic opcode (`_PyOpcode_Deopt`).
    pub base: u8,
    /// Full oparg, `EXTENDED_ARG` prefixes folded in.
    pub oparg: u32,
    /// Index of the next instruction (after the inline caches).
    pub next: usize,
}

const FIRST_INSTRUMENTED: u8 = 234;

/// Decode the quickened bytecode. `EXTENDED_ARG` units stay instructions
/// of their own (jumps may target them) and their oparg is folded forward.
pub fn decode(bytecode: &[u16]) -> Result<Vec<Instr>, Refusal> {
    let mut out = Vec::new();
    let mut i = 0;
    let mut ext: u32 = 0;
    while i < bytecode.len() {
        let word = bytecode[i];
        let opcode = (word & 0xff) as u8;
        if opcode >= FIRST_INSTRUMENTED {
            return Err(Refusal::Instrumented);
        }
        let base = opcodes::deopt(opcode);
        let oparg = (ext << 8) | (word >> 8) as u32;
        let next = i + 1 + opcodes::caches(base);
        ext = if opcodes::name(base) == Some("EXTENDED_ARG") { oparg } else { 0 };
        out.push(Instr { index: i, opcode, base, oparg, next });
        i = next;
    }
    Ok(out)
}

/// A digest of the instruction opcodes and their inline caches, adaptive
/// counters (each cache's first entry) left out: it changes when the
/// interpreter specialises, despecialises or re-specialises an instruction
/// (new type versions, dict versions), which is when recompiling gives other
/// stencils or other guard values.
pub fn opcode_signature(bytecode: &[u16]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut mix = |v: u64| h = (h ^ v).wrapping_mul(0x0100_0000_01b3);
    let mut i = 0;
    while i < bytecode.len() {
        let op = (bytecode[i] & 0xff) as u8;
        mix(op as u64);
        let caches = opcodes::caches(opcodes::deopt(op));
        for unit in bytecode.iter().skip(i + 2).take(caches.saturating_sub(1)) {
            mix(*unit as u64);
        }
        i += 1 + caches;
    }
    h
}

/// The instruction the interpreter must dispatch at to run `instrs[k]` with
/// its full oparg: the first of the `EXTENDED_ARG`s right before it.
fn dispatch_start(instrs: &[Instr], k: usize) -> usize {
    let mut start = k;
    while start > 0 && name_of(instrs[start - 1].base) == "EXTENDED_ARG" && instrs[start - 1].next == instrs[start].index {
        start -= 1;
    }
    start
}

pub(crate) fn name_of(op: u8) -> &'static str {
    opcodes::name(op).unwrap_or("<unknown>")
}

/// The stencil for an instruction: its specialised form if there is one,
/// else the generic form, else None.
pub fn select(instr: &Instr) -> Option<&'static Stencil> {
    // Found by name once per opcode, not per instruction.
    static BY_OPCODE: std::sync::OnceLock<Vec<Option<&'static Stencil>>> = std::sync::OnceLock::new();
    BY_OPCODE.get_or_init(|| (0..=255u8).map(select_by_name).collect())[instr.opcode as usize]
}

fn select_by_name(opcode: u8) -> Option<&'static Stencil> {
    let base = name_of(opcodes::deopt(opcode));
    let alias = match base {
        "EXTENDED_ARG" | "NOT_TAKEN" => Some("NOP"),
        _ => None,
    };
    if let Some(a) = alias {
        return ember_stencils::lookup(a);
    }
    ember_stencils::lookup(name_of(opcode)).or_else(|| ember_stencils::lookup(base))
}

/// Instructions where the interpreter would report a new line to a tracer
/// (as CPython's instrumentation marks them: a line other than the last one
/// seen, and jump targets), except the first: a LINE_CHECK goes before each.
/// Tracing switched on by code this frame calls instruments the frame's own
/// code object at once, and the interpreter reports the next line start; so
/// must compiled code, by handing the frame over there.
fn line_starts(instrs: &[Instr], info: &CodeInfo<'_>) -> Vec<bool> {
    let mut starts = vec![false; instrs.len()];
    let mut current = None;
    for (k, i) in instrs.iter().enumerate() {
        let line = info.lines.get(i.index).copied().flatten();
        if line.is_some() && line != current {
            starts[k] = k > 0;
            current = line;
        }
    }
    let mut instr_at = vec![usize::MAX; info.bytecode.len()];
    for (k, i) in instrs.iter().enumerate() {
        instr_at[i.index] = k;
    }
    for i in instrs {
        if let JumpTo::Instr(t) = operands::jump(i, name_of(i.base)) {
            if let Some(&k) = instr_at.get(t).filter(|&&k| k != usize::MAX) {
                starts[k] |= k > 0 && info.lines.get(t).copied().flatten().is_some();
            }
        }
    }
    starts
}

/// A stencil placed in the output, with what its holes resolve to.
struct Placed {
    stencil: &'static Stencil,
    /// Bytes of code copied (the trailing jump may be dropped).
    code_len: usize,
    code_off: usize,
    data_off: usize,
    instr: Option<usize>,
    operand0: Option<u64>,
    operand1: Option<u64>,
    jump: Option<Target>,
    /// A LINE_CHECK: it continues into the next placed stencil, its
    /// instruction's.
    line_check: bool,
}

#[derive(Clone, Copy)]
enum Target {
    Instr(usize),
    ReraiseExit,
}

/// A compiled code object.
pub struct Compiled {
    mem: Executable,
    entry_table_off: usize,
    n_units: usize,
    /// Bytes of machine code (stencils and exits, without data or tables).
    pub code_bytes: usize,
    pub n_instructions: usize,
    /// Where the shared exits (ERROR_EXIT, RERAISE_EXIT, DEOPT_EXIT) start.
    pub exits_offset: usize,
    /// (bytecode index, code offset, stencil name) per instruction, for `ember.dis`.
    pub map: Vec<(usize, usize, &'static str)>,
    /// `opcode_signature` of the bytecode compiled.
    pub opcode_signature: u64,
}

impl Compiled {
    /// The entry for a frame whose `instr_ptr` is at code unit `index`.
    pub fn entry(&self, index: usize) -> Option<u64> {
        if index >= self.n_units {
            return None;
        }
        let off = self.entry_table_off + index * 8;
        let bytes: [u8; 8] = self.mem.bytes()[off..off + 8].try_into().unwrap();
        match u64::from_ne_bytes(bytes) {
            0 => None,
            a => Some(a),
        }
    }
    /// The entry table: `n_units` addresses, 0 where there is no entry.
    pub fn entry_table(&self) -> (*const u64, usize) {
        (unsafe { self.mem.bytes().as_ptr().add(self.entry_table_off) } as *const u64, self.n_units)
    }
    pub fn addr(&self) -> u64 {
        self.mem.addr()
    }
    pub fn total_bytes(&self) -> usize {
        self.mem.len()
    }
    pub fn machine_code(&self) -> &[u8] {
        &self.mem.bytes()[..self.code_bytes]
    }
}

/// GOT slots are keyed by address: a multiply mixes enough, SipHash is
/// needless here.
#[derive(Default)]
struct AddrHasher(u64);

impl std::hash::Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        // The product's high bits are well mixed; fold them into the low
        // bits, which pick the bucket.
        self.0 ^ (self.0 >> 32)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (v ^ self.0).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

fn align(x: usize, a: usize) -> usize {
    (x + a - 1) & !(a - 1)
}

pub fn compile(info: &CodeInfo<'_>, resolver: &dyn Resolver) -> Result<Compiled, Refusal> {
    let instrs = decode(info.bytecode)?;
    let n_units = info.bytecode.len();
    let mut placed: Vec<Placed> = Vec::with_capacity(instrs.len() + 3);
    let mut index_to_slot = vec![usize::MAX; n_units];

    let exit = |name: &'static str| {
        ember_stencils::lookup(name).ok_or_else(|| Refusal::Malformed(format!("no {name} stencil")))
    };
    let (error_exit, reraise_exit, deopt_exit) = (exit("ERROR_EXIT")?, exit("RERAISE_EXIT")?, exit("DEOPT_EXIT")?);
    let line_check = exit("LINE_CHECK")?;
    let starts = line_starts(&instrs, info);

    for (k, instr) in instrs.iter().enumerate() {
        if starts[k] {
            let code_len = line_check.trailing_continue.map_or(line_check.code.len(), |off| off as usize);
            index_to_slot[instr.index] = placed.len();
            placed.push(Placed {
                stencil: line_check,
                code_len,
                code_off: 0,
                data_off: 0,
                instr: Some(k),
                operand0: Some(info.instrumentation_version),
                operand1: None,
                jump: None,
                line_check: true,
            });
        }
        let stencil = select(instr).ok_or(Refusal::Unsupported(name_of(instr.base)))?;
        let base = name_of(instr.base);
        let (operand0, operand1) = operands::operands(instr, base, info, resolver)?;
        let jump = match operands::jump(instr, base) {
            JumpTo::Instr(t) if t < n_units => Some(Target::Instr(t)),
            JumpTo::Instr(t) => return Err(Refusal::Malformed(format!("{base} jumps to {t}"))),
            JumpTo::ReraiseExit => Some(Target::ReraiseExit),
            JumpTo::None => None,
        };
        if !starts[k] {
            index_to_slot[instr.index] = placed.len();
        }
        let is_last = k + 1 == instrs.len();
        let code_len = match stencil.trailing_continue {
            Some(off) if !is_last => off as usize,
            _ => stencil.code.len(),
        };
        placed.push(Placed {
            stencil,
            code_len,
            code_off: 0,
            data_off: 0,
            instr: Some(k),
            operand0,
            operand1,
            jump,
            line_check: false,
        });
    }
    for st in [error_exit, reraise_exit, deopt_exit] {
        placed.push(Placed {
            stencil: st,
            code_len: st.code.len(),
            code_off: 0,
            data_off: 0,
            instr: None,
            operand0: None,
            operand1: None,
            jump: None,
            line_check: false,
        });
    }
    let n_exits = 3;
    let first_exit = placed.len() - n_exits;

    // Layout.
    let mut off = 0;
    for p in placed.iter_mut() {
        p.code_off = off;
        off += p.code_len;
    }
    let code_bytes = off;
    off = align(off, 16);
    for p in placed.iter_mut() {
        off = align(off, (p.stencil.data_align as usize).max(1));
        p.data_off = off;
        off += p.stencil.data.len();
    }
    // GOT slots: one per hole that goes through one. Trampolines: one per
    // branch hole to an external symbol (used only if the symbol is out of
    // reach of a direct branch).
    let mut n_got = 0;
    let mut n_tramp = 0;
    for p in &placed {
        for h in p.stencil.code_holes.iter().filter(|h| (h.offset as usize) < p.code_len) {
            if patch::is_got(h.kind) {
                n_got += 1;
            } else if patch::is_branch(h.kind) && matches!(h.value, HoleValue::Symbol(_)) {
                n_tramp += 1;
            }
        }
    }
    let got_off = align(off, 8);
    let tramp_size = patch::TRAMPOLINE_SIZE;
    let tramp_off = align(got_off + 8 * n_got, 16);
    let table_off = align(tramp_off + tramp_size * n_tramp, 8);
    let total = table_off + 8 * n_units;

    let mut mem = Writable::new(total).map_err(|e| Refusal::Memory(e.to_string()))?;
    let base_addr = mem.addr();
    let entry_table_addr = base_addr + table_off as u64;
    let exit_addr = |i: usize| base_addr + placed[first_exit + i].code_off as u64;
    let slot_addr = |index: usize| -> Result<u64, Refusal> {
        match index_to_slot.get(index) {
            Some(&k) if k != usize::MAX => Ok(base_addr + placed[k].code_off as u64),
            _ => Err(Refusal::Malformed(format!("jump into the middle of an instruction ({index})"))),
        }
    };

    let buf = mem.bytes();
    for p in &placed {
        buf[p.code_off..p.code_off + p.code_len].copy_from_slice(&p.stencil.code[..p.code_len]);
        buf[p.data_off..p.data_off + p.stencil.data.len()].copy_from_slice(p.stencil.data);
    }

    let mut next_got = 0;
    let mut got_slots: std::collections::HashMap<u64, usize, std::hash::BuildHasherDefault<AddrHasher>> =
        Default::default();
    let mut next_tramp = 0;
    for (k, p) in placed.iter().enumerate() {
        let instr = p.instr.map(|i| &instrs[i]);
        let code_addr = base_addr + p.code_off as u64;
        let data_addr = base_addr + p.data_off as u64;
        let value_of = |h: &Hole| -> Result<u64, Refusal> {
            let missing = |what: &str| Refusal::Malformed(format!("{} needs {what}", p.stencil.name));
            Ok(match h.value {
                HoleValue::Oparg => instr.ok_or_else(|| missing("an oparg"))?.oparg as u64,
                HoleValue::Operand0 => match (p.operand0, k >= first_exit) {
                    (Some(v), _) => v,
                    (None, true) => entry_table_addr,
                    (None, false) => return Err(missing("operand 0")),
                },
                HoleValue::Operand1 => match (p.operand1, instr.map(|i| name_of(i.base))) {
                    (Some(v), _) => v,
                    (None, Some("RERAISE")) => entry_table_addr,
                    _ => return Err(missing("operand 1")),
                },
                HoleValue::ThisInstr => info.bytecode_addr + 2 * instr.ok_or_else(|| missing("an instruction"))?.index as u64,
                HoleValue::DispatchInstr => {
                    let i = p.instr.ok_or_else(|| missing("an instruction"))?;
                    info.bytecode_addr + 2 * instrs[dispatch_start(&instrs, i)].index as u64
                }
                HoleValue::NextInstr => info.bytecode_addr + 2 * instr.ok_or_else(|| missing("an instruction"))?.next as u64,
                // A LINE_CHECK goes on with its instruction, placed next.
                HoleValue::Continue if p.line_check => base_addr + placed[k + 1].code_off as u64,
                HoleValue::Continue => {
                    let i = instr.ok_or_else(|| missing("a next instruction"))?;
                    if i.next >= n_units {
                        return Err(missing("an instruction after the last"));
                    }
                    slot_addr(i.next)?
                }
                HoleValue::Jump => match p.jump.ok_or_else(|| missing("a jump target"))? {
                    Target::Instr(t) => slot_addr(t)?,
                    Target::ReraiseExit => exit_addr(1),
                },
                HoleValue::Error => exit_addr(0),
                HoleValue::Deopt => exit_addr(2),
                HoleValue::Code => code_addr,
                HoleValue::Data => data_addr,
                HoleValue::Symbol(i) => resolver.stencil_symbol(i).ok_or_else(|| {
                    Refusal::Malformed(format!("symbol {} not found", ember_stencils::SYMBOLS[i as usize]))
                })?,
            })
        };
        let holes = p.stencil.code_holes.iter().filter(|h| (h.offset as usize) < p.code_len);
        for h in holes {
            let value = value_of(h)?;
            let field_off = p.code_off + h.offset as usize;
            let field_addr = base_addr + field_off as u64;
            if patch::is_got(h.kind) {
                // One slot per value: aarch64 reaches a slot with an adrp/ldr
                // pair, two holes that must name the same slot.
                let index = *got_slots.entry(value).or_insert_with(|| {
                    next_got += 1;
                    next_got - 1
                });
                let slot = got_off + 8 * index;
                buf[slot..slot + 8].copy_from_slice(&value.to_ne_bytes());
                let slot_addr = base_addr + slot as u64;
                patch::apply(buf, field_off, h.kind, field_addr, slot_addr.wrapping_add(h.addend as u64))
                    .map_err(|e| Refusal::Malformed(format!("{}: {e:?}", p.stencil.name)))?;
                continue;
            }
            let target = value.wrapping_add(h.addend as u64);
            match patch::apply(buf, field_off, h.kind, field_addr, target) {
                Ok(()) => {}
                Err(_) if patch::is_branch(h.kind) && matches!(h.value, HoleValue::Symbol(_)) => {
                    let t = tramp_off + tramp_size * next_tramp;
                    next_tramp += 1;
                    buf[t..t + tramp_size].copy_from_slice(&patch::trampoline(value));
                    let t_addr = base_addr + t as u64;
                    patch::apply(buf, field_off, h.kind, field_addr, t_addr.wrapping_add(h.addend as u64))
                        .map_err(|e| Refusal::Malformed(format!("{}: {e:?}", p.stencil.name)))?;
                }
                Err(e) => return Err(Refusal::Malformed(format!("{}: {e:?}", p.stencil.name))),
            }
        }
        for h in p.stencil.data_holes {
            let value = value_of(h)?;
            let field_off = p.data_off + h.offset as usize;
            let field_addr = base_addr + field_off as u64;
            patch::apply(buf, field_off, h.kind, field_addr, value.wrapping_add(h.addend as u64))
                .map_err(|e| Refusal::Malformed(format!("{} data: {e:?}", p.stencil.name)))?;
        }
    }
    for instr in &instrs {
        let addr = base_addr + placed[index_to_slot[instr.index]].code_off as u64;
        let o = table_off + 8 * instr.index;
        buf[o..o + 8].copy_from_slice(&addr.to_ne_bytes());
    }
    let map = instrs
        .iter()
        .map(|i| {
            let slot = index_to_slot[i.index];
            // A line start's code begins with its LINE_CHECK.
            let own = if placed[slot].line_check { slot + 1 } else { slot };
            (i.index, placed[slot].code_off, placed[own].stencil.name)
        })
        .collect();
    let mem = mem.finish().map_err(|e| Refusal::Memory(e.to_string()))?;
    let exits_offset = placed[first_exit].code_off;
    Ok(Compiled {
        mem,
        entry_table_off: table_off,
        n_units,
        code_bytes,
        n_instructions: instrs.len(),
        exits_offset,
        map,
        opcode_signature: opcode_signature(info.bytecode),
    })
}
