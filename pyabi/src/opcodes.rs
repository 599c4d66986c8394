//! Opcode metadata of CPython 3.14, read from `pycore_opcode_metadata.h`
//! (compiled in `opcodes.c`): names, inline-cache sizes, and the generic
//! ("deoptimised") form of every specialised opcode.

use core::ffi::{c_char, c_int, CStr};
use std::sync::OnceLock;

extern "C" {
    static ember_opcode_caches: [u8; 256];
    static ember_opcode_deopt: [u8; 256];
    static ember_opcode_name: [*const c_char; 267];
    fn ember_opcode_num_popped(opcode: c_int, oparg: c_int) -> c_int;
    fn ember_opcode_num_pushed(opcode: c_int, oparg: c_int) -> c_int;
}

/// Number of inline-cache code units after `op`.
pub fn caches(op: u8) -> usize {
    unsafe { ember_opcode_caches[op as usize] as usize }
}

/// The generic opcode a specialised one belongs to (itself if generic).
pub fn deopt(op: u8) -> u8 {
    unsafe { ember_opcode_deopt[op as usize] }
}

/// What a walk over code units needs of each opcode (specialised or not),
/// one byte per opcode: the units its instruction takes (itself and its
/// inline caches) under [`scan::UNITS`], and flags for backward jumps.
/// Walks over every code object Ember sees read it once per instruction.
pub fn scan_table() -> &'static [u8; 256] {
    static TABLE: OnceLock<[u8; 256]> = OnceLock::new();
    TABLE.get_or_init(|| {
        let backward = by_name("JUMP_BACKWARD");
        let no_interrupt = by_name("JUMP_BACKWARD_NO_INTERRUPT");
        core::array::from_fn(|op| {
            let generic = deopt(op as u8);
            let units = 1 + caches(generic);
            assert!(units <= scan::UNITS as usize, "an instruction with {units} code units");
            let mut entry = units as u8;
            if Some(generic) == backward {
                entry |= scan::JUMP_BACKWARD;
            }
            if Some(generic) == no_interrupt {
                entry |= scan::JUMP_BACKWARD_NO_INTERRUPT;
            }
            entry
        })
    })
}

/// The parts of a [`scan_table`] entry.
pub mod scan {
    /// Code units of the instruction: the opcode's and its inline caches'.
    pub const UNITS: u8 = 0x3f;
    /// JUMP_BACKWARD or one of its specialisations (a loop's back-edge,
    /// with one inline cache).
    pub const JUMP_BACKWARD: u8 = 0x80;
    /// JUMP_BACKWARD_NO_INTERRUPT (the loop of `yield from` and `await`).
    pub const JUMP_BACKWARD_NO_INTERRUPT: u8 = 0x40;
}

/// What [`scan_loops`] found in a code object's bytecode.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoopScan {
    /// A backward jump of either kind ([`scan::JUMP_BACKWARD`],
    /// [`scan::JUMP_BACKWARD_NO_INTERRUPT`]): the code has a loop.
    pub has_loops: bool,
    /// Each `JUMP_BACKWARD` (specialised or not): its code unit and its
    /// oparg (`EXTENDED_ARG` prefixes folded in), in order.
    pub back_edges: Vec<(u32, u32)>,
}

/// Finds the loops of `units` (a code object's code units) in one walk.
///
/// Most code objects have no loop, and the walk from instruction to
/// instruction is a chain of dependent loads (the length of one instruction
/// says where the next is), several cycles each: a first pass looks at the
/// low byte of every unit independently, and if none could be a backward
/// jump's opcode, no instruction is one (every instruction's opcode is the
/// low byte of some unit), and the walk is skipped. A cache unit may hold
/// such a byte by chance; then the walk decides.
pub fn scan_loops(units: &[u16]) -> LoopScan {
    let table = scan_table();
    let flags = scan::JUMP_BACKWARD | scan::JUMP_BACKWARD_NO_INTERRUPT;
    if !units.iter().any(|&u| table[(u & 0xff) as usize] & flags != 0) {
        return LoopScan::default();
    }
    let extended_arg = extended_arg();
    let mut found = LoopScan::default();
    let mut ext: u32 = 0;
    let mut i = 0;
    while i < units.len() {
        let op = (units[i] & 0xff) as u8;
        let oparg = ext | (units[i] >> 8) as u32;
        ext = if Some(op) == extended_arg { oparg << 8 } else { 0 };
        let entry = table[op as usize];
        if entry & flags != 0 {
            found.has_loops = true;
            if entry & scan::JUMP_BACKWARD != 0 {
                // The on-stack-replacement entries jump past its one cache unit.
                debug_assert_eq!(entry & scan::UNITS, 2);
                found.back_edges.push((i as u32, oparg));
            }
        }
        i += (entry & scan::UNITS) as usize;
    }
    found
}

/// The opcode's name, or None for an unassigned number. The compiler asks
/// for names per instruction: they are converted from C once.
#[inline]
pub fn name(op: u8) -> Option<&'static str> {
    static NAMES: OnceLock<Vec<Option<&'static str>>> = OnceLock::new();
    NAMES.get_or_init(|| {
        (0..256)
            .map(|i| {
                let p = unsafe { ember_opcode_name[i] };
                (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_str().expect("opcode names are ASCII"))
            })
            .collect()
    })[op as usize]
}

/// EXTENDED_ARG's opcode, looked up by name once (a lookup by name is a
/// linear search: walks over bytecode ask for it every time).
pub fn extended_arg() -> Option<u8> {
    static OP: OnceLock<Option<u8>> = OnceLock::new();
    *OP.get_or_init(|| by_name("EXTENDED_ARG"))
}

/// The opcode with this name (real opcodes only, not pseudo-instructions).
pub fn by_name(n: &str) -> Option<u8> {
    static TABLE: OnceLock<Vec<(&'static str, u8)>> = OnceLock::new();
    let table = TABLE.get_or_init(|| (0..=255u8).filter_map(|op| name(op).map(|s| (s, op))).collect());
    table.iter().find(|(s, _)| *s == n).map(|&(_, op)| op)
}

/// Stack items popped and pushed by `op` with `oparg`.
pub fn stack_effect(op: u8, oparg: i32) -> (i32, i32) {
    unsafe { (ember_opcode_num_popped(op as c_int, oparg), ember_opcode_num_pushed(op as c_int, oparg)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_table_walks_and_flags_backward_jumps() {
        let table = scan_table();
        for op in 0..=255u8 {
            assert_eq!((table[op as usize] & scan::UNITS) as usize, 1 + caches(deopt(op)), "opcode {op}");
        }
        let flags = |name| table[by_name(name).unwrap() as usize] & !scan::UNITS;
        for name in ["JUMP_BACKWARD", "JUMP_BACKWARD_NO_JIT", "JUMP_BACKWARD_JIT"] {
            assert_eq!(flags(name), scan::JUMP_BACKWARD, "{name}");
        }
        assert_eq!(flags("JUMP_BACKWARD_NO_INTERRUPT"), scan::JUMP_BACKWARD_NO_INTERRUPT);
        assert_eq!(flags("JUMP_FORWARD"), 0);
    }

    #[test]
    fn scan_loops_finds_back_edges_not_cache_bytes() {
        let op = |name| by_name(name).unwrap() as u16;
        let unit = |name, oparg: u16| op(name) | oparg << 8;
        let backward = op("JUMP_BACKWARD");
        // LOAD_GLOBAL's four cache units, one of which holds JUMP_BACKWARD's
        // opcode in its low byte: no loop.
        let mut code = vec![unit("RESUME", 0), unit("LOAD_GLOBAL", 3), 0, backward, backward | 0x100, 0, unit("RETURN_VALUE", 0)];
        assert_eq!(scan_loops(&code), LoopScan::default());
        assert_eq!(scan_loops(&[unit("RESUME", 0), unit("RETURN_VALUE", 0)]), LoopScan::default());
        // A back-edge after it, with an EXTENDED_ARG prefix, and a
        // specialised one.
        code.pop();
        code.extend([unit("EXTENDED_ARG", 1), unit("JUMP_BACKWARD", 2), 0, unit("JUMP_BACKWARD_NO_JIT", 9), 0]);
        code.push(unit("RETURN_VALUE", 0));
        assert_eq!(scan_loops(&code), LoopScan { has_loops: true, back_edges: vec![(7, 0x102), (9, 9)] });
        // `yield from`'s loop: a loop, but no back-edge to enter compiled code at.
        let code = [unit("RESUME", 0), unit("JUMP_BACKWARD_NO_INTERRUPT", 1), unit("RETURN_VALUE", 0)];
        assert_eq!(scan_loops(&code), LoopScan { has_loops: true, back_edges: vec![] });
    }

    #[test]
    fn specialised_forms_map_to_generic() {
        let add_int = by_name("BINARY_OP_ADD_INT").unwrap();
        assert_eq!(deopt(add_int), by_name("BINARY_OP").unwrap());
        assert_eq!(name(by_name("RESUME").unwrap()), Some("RESUME"));
    }

    #[test]
    fn cache_sizes_match_3_14() {
        // From dis on 3.14: BINARY_OP has 5 cache units, LOAD_GLOBAL 4, CALL 3.
        assert_eq!(caches(by_name("BINARY_OP").unwrap()), 5);
        assert_eq!(caches(by_name("LOAD_GLOBAL").unwrap()), 4);
        assert_eq!(caches(by_name("CALL").unwrap()), 3);
        assert_eq!(caches(by_name("NOP").unwrap()), 0);
    }

    #[test]
    fn stack_effects() {
        let call = by_name("CALL").unwrap();
        assert_eq!(stack_effect(call, 2), (4, 1));
    }
}
