//! Hot/cold splitting of x86-64 stencils.
//!
//! clang lays a stencil out as one function: the common path, and between
//! and after its pieces the rare ones (a guard that failed, an error, a
//! deallocation, a call to a slow helper). Copied back to back, stencils
//! then spread the instructions a loop actually runs over several times the
//! cache lines they need, and compiled code runs out of the instruction
//! cache long before the interpreter does. So each stencil is cut after the
//! first jump to its continuation (the end of its common path, as clang
//! orders blocks), or, with no unconditional one, after the first
//! conditional one (a guard whose failure clang laid out after it; the
//! branch is inverted to reach the failure): the part before stays `code`,
//! the rest becomes `cold`, which tier 1 places after all the code of a
//! function.
//!
//! Both parts keep their instructions' bytes; only the branches between
//! the parts change. A branch from one part to the other becomes a 32-bit
//! branch whose displacement is a hole (`Cold` or `Code`, plus the target's
//! offset); a short branch within a part that no longer reaches is widened;
//! a branch to the end of the code, or a fall through it, becomes a jump to
//! `Continue`. A stencil is left whole when anything in it could depend on
//! where its instructions are and is not a hole or a plain branch (a
//! RIP-relative operand without a relocation, a call within the stencil,
//! an encoding not recognised), when its common path would run into a
//! helper copied after its own code, or when its data refers to its code.
//! Helpers copied after it (a stencil's miss path, tail-called: see
//! `MISS_HELPER` in ember_stencil.h) go to the cold part whole.

use iced_x86::{Decoder, DecoderOptions, FlowControl, OpKind};

use crate::types::{Hole, HoleValue, RelocKind};
use crate::BuiltStencil;

/// Cold parts smaller than this are not worth a separate place.
const MIN_COLD: usize = 16;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Part {
    Hot,
    Cold,
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    /// Copied as is (holes within move with it).
    Opaque,
    /// `jcc` (condition code) or `jmp` (`None`) within the stencil, without
    /// a hole; `target` is an old offset (`code.len()`: the end).
    Branch { cc: Option<u8>, target: u32 },
}

#[derive(Clone, Copy, Debug)]
struct Insn {
    off: u32,
    len: u32,
    kind: Kind,
    /// Encoded with a 32-bit displacement in the new layout.
    near: bool,
    /// New offset, within its part.
    new_off: u32,
    /// A call (to a helper: calls within the stencil are not split).
    call: bool,
}

impl Insn {
    fn new_len(&self) -> u32 {
        match self.kind {
            Kind::Opaque => self.len,
            Kind::Branch { cc, .. } => match (self.near, cc) {
                (false, _) => 2,
                (true, None) => 5,
                (true, Some(_)) => 6,
            },
        }
    }
}

/// Splits `s` in place if it can (x86-64 stencils only); returns whether it did.
pub(crate) fn split_cold(s: &mut BuiltStencil) -> bool {
    match plan(s) {
        Some((code, code_holes, cold, cold_holes, tail)) => {
            s.code = code;
            s.code_holes = code_holes;
            s.cold = cold;
            s.cold_holes = cold_holes;
            s.trailing_continue = tail;
            true
        }
        None => false,
    }
}

type Plan = (Vec<u8>, Vec<Hole>, Vec<u8>, Vec<Hole>, Option<u32>);

/// The rel32 field of a branch to the continuation, at `offset`.
fn continue_hole(offset: u32) -> Hole {
    Hole { offset, kind: RelocKind::X86_64_PC32, value: HoleValue::Continue, addend: -4 }
}

fn is_continue_jump(code: &[u8], holes: &[Hole], off: u32, len: u32) -> bool {
    len == 5 && code[off as usize] == 0xE9 && holes.contains(&continue_hole(off + 1))
}

/// `jmp Jump`: JUMP() (the instruction's jump target), unconditionally.
fn is_jump_jump(code: &[u8], holes: &[Hole], off: u32, len: u32) -> bool {
    let jump_hole = Hole { offset: off + 1, kind: RelocKind::X86_64_PC32, value: HoleValue::Jump, addend: -4 };
    len == 5 && code[off as usize] == 0xE9 && holes.contains(&jump_hole)
}

/// `jcc Continue` (a conditional tail call clang emitted for CONTINUE()).
fn is_cond_continue_jump(code: &[u8], holes: &[Hole], off: u32, len: u32) -> bool {
    len == 6
        && code[off as usize] == 0x0F
        && code[off as usize + 1] & 0xF0 == 0x80
        && holes.contains(&continue_hole(off + 2))
}

/// Appends `jmp Continue`.
fn push_continue_jump(buf: &mut Vec<u8>, holes: &mut Vec<Hole>) {
    buf.push(0xE9);
    holes.push(continue_hole(buf.len() as u32));
    buf.extend_from_slice(&[0; 4]);
}

fn plan(s: &BuiltStencil) -> Option<Plan> {
    let code = &s.code;
    let end = code.len() as u32;
    if !s.cold.is_empty() || code.len() < MIN_COLD {
        return None;
    }
    if s.data_holes.iter().any(|h| h.value == HoleValue::Code) {
        return None;
    }
    // Holes by offset; every field must lie inside one instruction.
    let mut holes = s.code_holes.clone();
    holes.sort_by_key(|h| h.offset);

    let mut insns: Vec<Insn> = Vec::new();
    let mut decoder = Decoder::with_ip(64, code, 0, DecoderOptions::NONE);
    let mut hole_i = 0;
    while decoder.can_decode() {
        let ins = decoder.decode();
        if ins.is_invalid() {
            return None;
        }
        let off = ins.ip() as u32;
        let len = ins.len() as u32;
        // Holes starting in this instruction.
        let first = hole_i;
        while hole_i < holes.len() && holes[hole_i].offset < off + len {
            if holes[hole_i].offset < off {
                return None;
            }
            hole_i += 1;
        }
        let has_hole = hole_i > first;
        let bytes = &code[off as usize..(off + len) as usize];
        let branch = ins.op0_kind() == OpKind::NearBranch64 || ins.op0_kind() == OpKind::NearBranch32;
        let kind = if has_hole {
            Kind::Opaque
        } else if branch {
            let target = ins.near_branch_target();
            if target > end as u64 {
                return None;
            }
            let target = target as u32;
            let cc = match (bytes, ins.flow_control()) {
                ([b, _], FlowControl::ConditionalBranch) if (0x70..=0x7F).contains(b) => Some(b & 0x0F),
                ([0x0F, b, _, _, _, _], FlowControl::ConditionalBranch) if (0x80..=0x8F).contains(b) => Some(b & 0x0F),
                ([0xEB, _], FlowControl::UnconditionalBranch) | ([0xE9, _, _, _, _], FlowControl::UnconditionalBranch) => {
                    None
                }
                // A call within the stencil, loop, jrcxz, a prefixed form...
                _ => return None,
            };
            Kind::Branch { cc, target }
        } else if ins.is_ip_rel_memory_operand() {
            // Addresses something relative to itself with no relocation.
            return None;
        } else {
            Kind::Opaque
        };
        let near = len > 2 && matches!(kind, Kind::Branch { .. });
        let call = matches!(ins.flow_control(), FlowControl::Call | FlowControl::IndirectCall);
        insns.push(Insn { off, len, kind, near, new_off: 0, call });
    }
    if hole_i != holes.len() {
        return None;
    }
    let offs: Vec<u32> = insns.iter().map(|i| i.off).collect();
    let index_of = |off: u32| offs.binary_search(&off).ok();
    // Every branch lands on an instruction (or the end).
    for i in &insns {
        if let Kind::Branch { target, .. } = i.kind {
            if target != end && index_of(target).is_none() {
                return None;
            }
        }
    }
    // The common path ends at the first jump to the continuation; without
    // an unconditional one, at the first conditional one (a guard, clang
    // having laid out its failure after it), which then branches to the
    // cold part when the guard fails instead. A conditional one before the
    // first unconditional one also ends it when a call lies between them:
    // clang's conditional tail call to the continuation, with the rare path
    // that calls a helper (RESUME_CHECK's pending events) laid out after it.
    let uncond = insns.iter().position(|i| is_continue_jump(code, &holes, i.off, i.len));
    let is_cond = |i: &Insn| {
        matches!(i.kind, Kind::Branch { cc: Some(_), target } if target == end)
            || is_cond_continue_jump(code, &holes, i.off, i.len)
    };
    let cond = insns.iter().position(is_cond);
    // A stencil whose own code never continues (the continuation is in a
    // miss helper copied after it, or there is none) and whose common path
    // ends in a jump to the instruction's target (an unpacking that does
    // its stores, then jumps past their code) ends it there.
    let home_jump = || {
        insns.iter().position(|i| i.off < s.home_len && is_jump_jump(code, &holes, i.off, i.len)).map(|j| (j + 1, false))
    };
    let (cut, inverted) = match (uncond, cond) {
        // A reference closed last is two such jumps, one instruction
        // apart (`test; jne` past a tagged one, `decl; jne` past the free):
        // the decrement stays on the common path.
        (Some(u), Some(c)) if c < u && insns[c + 1..u].iter().any(|i| i.call) => {
            let mut last = c;
            while let Some(next) = insns.get(last + 2).filter(|_| last + 2 < u) {
                let between = &insns[last + 1];
                if !is_cond(next) || between.call || !matches!(between.kind, Kind::Opaque) || is_cond(between) {
                    break;
                }
                last += 2;
            }
            (last + 1, true)
        }
        (Some(u), _) if insns[u].off >= s.home_len && cond.is_none_or(|c| insns[c].off >= s.home_len) => {
            home_jump().unwrap_or((u + 1, false))
        }
        (Some(u), _) => (u + 1, false),
        (None, Some(c)) => (c + 1, true),
        (None, None) => home_jump()?,
    };
    if cut >= insns.len() {
        return None;
    }
    let split_off = insns[cut].off;
    // Helpers copied after the stencil's own code (a miss path it tail-calls)
    // go to the cold part whole.
    if split_off > s.home_len {
        return None;
    }
    if (end - split_off) < MIN_COLD as u32 {
        return None;
    }
    if inverted {
        let i = &mut insns[cut - 1];
        let cc = match i.kind {
            Kind::Branch { cc: Some(c), .. } => c,
            _ => {
                // `jcc Continue`: its hole goes, the branch is rewritten.
                let at = i.off + 2;
                holes.retain(|h| h.offset != at);
                code[i.off as usize + 1] & 0x0F
            }
        };
        // x86 condition codes come in pairs that differ in the low bit.
        i.kind = Kind::Branch { cc: Some(cc ^ 1), target: split_off };
    }
    let part = |off: u32| if off < split_off { Part::Hot } else { Part::Cold };
    // The cold part must not run off its end into whatever follows it: the
    // original fell through into the next stencil there.
    let last = insns.last().unwrap();
    let falls_through = !matches!(
        decode_flow(code, last.off),
        Some(FlowControl::UnconditionalBranch | FlowControl::IndirectBranch | FlowControl::Return | FlowControl::Exception)
    );

    // Branches to the other part, or to the end, are 32-bit holes.
    for i in insns.iter_mut() {
        if let Kind::Branch { target, .. } = i.kind {
            if target == end || part(target) != part(i.off) {
                i.near = true;
            }
        }
    }
    // Lay out; widen short branches that no longer reach, until none does.
    loop {
        let mut pos = [0u32; 2];
        for i in insns.iter_mut() {
            let p = part(i.off) as usize;
            i.new_off = pos[p];
            pos[p] += i.new_len();
        }
        let mut widened = false;
        for k in 0..insns.len() {
            let i = insns[k];
            if let (Kind::Branch { target, .. }, false) = (i.kind, i.near) {
                let t = insns[index_of(target).unwrap()].new_off as i64;
                let disp = t - (i.new_off + i.new_len()) as i64;
                if disp < i8::MIN as i64 || disp > i8::MAX as i64 {
                    insns[k].near = true;
                    widened = true;
                }
            }
        }
        if !widened {
            break;
        }
    }
    let new_target = |off: u32| -> (Part, u32) {
        let t = &insns[index_of(off).unwrap()];
        (part(off), t.new_off)
    };

    let mut out: [(Vec<u8>, Vec<Hole>); 2] = [(Vec::new(), Vec::new()), (Vec::new(), Vec::new())];
    let mut hole_i = 0;
    for i in &insns {
        let p = part(i.off);
        let (buf, hs) = &mut out[p as usize];
        debug_assert_eq!(buf.len() as u32, i.new_off);
        match i.kind {
            Kind::Opaque => {
                buf.extend_from_slice(&code[i.off as usize..(i.off + i.len) as usize]);
                while hole_i < holes.len() && holes[hole_i].offset < i.off + i.len {
                    let h = holes[hole_i];
                    hole_i += 1;
                    let field = h.offset - i.off;
                    let mut moved = Hole { offset: i.new_off + field, ..h };
                    if h.value == HoleValue::Code {
                        // An address within the stencil: where it went.
                        let pc_relative = matches!(h.kind, RelocKind::X86_64_PC32);
                        // For a PC-relative field the instruction's target is
                        // the addend plus the distance from the field to its end.
                        let bias = if pc_relative { (i.len - field) as i64 } else { 0 };
                        let old_target = h.addend + bias;
                        if old_target < 0 || old_target > end as i64 {
                            return None;
                        }
                        let old_target = old_target as u32;
                        if old_target == end || index_of(old_target).is_none() {
                            return None;
                        }
                        let (tp, t) = new_target(old_target);
                        moved.value = if tp == Part::Hot { HoleValue::Code } else { HoleValue::Cold };
                        moved.addend = t as i64 - bias;
                    }
                    hs.push(moved);
                }
            }
            Kind::Branch { cc, target } => {
                let next = i.new_off + i.new_len();
                if !i.near {
                    let (_, t) = new_target(target);
                    let disp = (t as i64 - next as i64) as i8;
                    buf.push(match cc {
                        Some(c) => 0x70 | c,
                        None => 0xEB,
                    });
                    buf.push(disp as u8);
                    continue;
                }
                match cc {
                    Some(c) => buf.extend_from_slice(&[0x0F, 0x80 | c]),
                    None => buf.push(0xE9),
                }
                let field = buf.len() as u32;
                if target == end {
                    buf.extend_from_slice(&[0; 4]);
                    hs.push(continue_hole(field));
                    continue;
                }
                let (tp, t) = new_target(target);
                if tp == p {
                    buf.extend_from_slice(&(t as i32 - next as i32).to_le_bytes());
                } else if let Some(h) = (p == Part::Hot).then(|| exit_jump_hole(code, &holes, target)).flatten() {
                    // The common path branches straight to where the rare
                    // part's `jmp` would go (clang forms conditional tail
                    // calls only when optimising for size): the same hole,
                    // one taken jump fewer, the same length.
                    buf.extend_from_slice(&[0; 4]);
                    hs.push(Hole { offset: field, ..h });
                } else {
                    buf.extend_from_slice(&[0; 4]);
                    let value = if tp == Part::Hot { HoleValue::Code } else { HoleValue::Cold };
                    hs.push(Hole { offset: field, kind: RelocKind::X86_64_PC32, value, addend: t as i64 - 4 });
                }
            }
        }
    }
    let [(mut hot, mut hot_holes), (mut cold, mut cold_holes)] = out;
    if inverted {
        push_continue_jump(&mut hot, &mut hot_holes);
    }
    if falls_through {
        push_continue_jump(&mut cold, &mut cold_holes);
    }
    // The common path ends with its jump to the continuation (dropped when
    // the next stencil follows), or to the instruction's target.
    let tail = hot.len() as u32 - 5;
    if is_continue_jump(&hot, &hot_holes, tail, 5) {
        return Some((hot, hot_holes, cold, cold_holes, Some(tail)));
    }
    debug_assert!(is_jump_jump(&hot, &hot_holes, tail, 5));
    Some((hot, hot_holes, cold, cold_holes, None))
}

/// The hole of the `jmp rel32` at `off` when it leaves the stencil (to the
/// continuation, another exit or a helper: a PC-relative hole in its
/// displacement that does not point back into the stencil).
fn exit_jump_hole(code: &[u8], holes: &[Hole], off: u32) -> Option<Hole> {
    if code.get(off as usize) != Some(&0xE9) || off as usize + 5 > code.len() {
        return None;
    }
    let i = holes.binary_search_by_key(&(off + 1), |h| h.offset).ok()?;
    let h = holes[i];
    (h.kind == RelocKind::X86_64_PC32 && h.addend == -4 && !matches!(h.value, HoleValue::Code | HoleValue::Cold)).then_some(h)
}

fn decode_flow(code: &[u8], off: u32) -> Option<FlowControl> {
    let mut d = Decoder::with_ip(64, &code[off as usize..], off as u64, DecoderOptions::NONE);
    let ins = d.decode();
    (!ins.is_invalid()).then(|| ins.flow_control())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stencil(code: Vec<u8>, code_holes: Vec<Hole>) -> BuiltStencil {
        let code_len = code.len() as u32;
        BuiltStencil {
            name: "T".into(),
            source: "t.c".into(),
            code,
            code_holes,
            data: Vec::new(),
            data_holes: Vec::new(),
            data_align: 1,
            trailing_continue: None,
            cold: Vec::new(),
            cold_holes: Vec::new(),
            home_len: code_len,
        }
    }

    fn cont(offset: u32) -> Hole {
        continue_hole(offset)
    }

    /// The hot part both guard shapes split into: test rdi,rdi; jne rel32 ->
    /// Cold+0; jmp CONTINUE (dropped when the next stencil follows).
    fn assert_inverted_guard(s: &BuiltStencil) {
        assert_eq!(s.code, vec![0x48, 0x85, 0xFF, 0x0F, 0x85, 0, 0, 0, 0, 0xE9, 0, 0, 0, 0]);
        assert_eq!(s.trailing_continue, Some(9));
        assert_eq!(
            s.code_holes,
            vec![Hole { offset: 5, kind: RelocKind::X86_64_PC32, value: HoleValue::Cold, addend: -4 }, cont(10)]
        );
    }

    #[test]
    fn splits_after_the_first_continue_jump() {
        // 0: test rdi,rdi; 3: je +6 (-> 11); 5: jmp CONTINUE; 10: nop;
        // 11: mov eax,1 (5 bytes); 16: jmp -18 (-> 0, back into the hot part);
        // 18..34: nops; then falls off the end.
        let mut code = vec![0x48, 0x85, 0xFF, 0x74, 0x06, 0xE9, 0, 0, 0, 0, 0x90, 0xB8, 1, 0, 0, 0, 0xEB, 0xEE];
        code.extend(std::iter::repeat_n(0x90, 16));
        let mut s = stencil(code, vec![cont(6)]);
        assert!(split_cold(&mut s));
        // Hot: test; je rel32 -> Cold+1 (after the nop); jmp CONTINUE.
        assert_eq!(s.code, vec![0x48, 0x85, 0xFF, 0x0F, 0x84, 0, 0, 0, 0, 0xE9, 0, 0, 0, 0]);
        assert_eq!(s.trailing_continue, Some(9));
        assert_eq!(
            s.code_holes,
            vec![Hole { offset: 5, kind: RelocKind::X86_64_PC32, value: HoleValue::Cold, addend: 1 - 4 }, cont(10)]
        );
        // Cold: nop; mov; jmp rel32 -> Code+0; 16 nops; jmp CONTINUE (fell off the end).
        assert_eq!(s.cold[..6], [0x90, 0xB8, 1, 0, 0, 0]);
        assert_eq!(s.cold[6], 0xE9);
        assert_eq!(s.cold.len(), 6 + 5 + 16 + 5);
        assert_eq!(
            s.cold_holes,
            vec![
                Hole { offset: 7, kind: RelocKind::X86_64_PC32, value: HoleValue::Code, addend: -4 },
                cont(6 + 5 + 16 + 1)
            ]
        );
    }

    /// A hole for a branch within the stencil to `target` (a helper's start),
    /// its rel32 field at `offset`.
    fn to_code(offset: u32, target: i64) -> Hole {
        Hole { offset, kind: RelocKind::X86_64_PC32, value: HoleValue::Code, addend: target - 4 }
    }

    #[test]
    fn a_helper_copied_after_the_stencil_goes_to_the_cold_part() {
        // 0: test rdi,rdi; 3: jne helper (rel32 hole); 9: jmp CONTINUE;
        // 14: int3 padding; 16: the helper, 16 nops then jmp CONTINUE.
        let mut code = vec![0x48, 0x85, 0xFF, 0x0F, 0x85, 0, 0, 0, 0, 0xE9, 0, 0, 0, 0, 0xCC, 0xCC];
        code.extend(std::iter::repeat_n(0x90, 16));
        code.extend([0xE9, 0, 0, 0, 0]);
        let mut s = stencil(code, vec![to_code(5, 16), cont(10), cont(33)]);
        s.home_len = 14;
        assert!(split_cold(&mut s));
        assert_eq!(s.code, vec![0x48, 0x85, 0xFF, 0x0F, 0x85, 0, 0, 0, 0, 0xE9, 0, 0, 0, 0]);
        assert_eq!(s.trailing_continue, Some(9));
        // The branch reaches the helper where it went: after the padding, in the cold part.
        assert_eq!(
            s.code_holes,
            vec![Hole { offset: 5, kind: RelocKind::X86_64_PC32, value: HoleValue::Cold, addend: 2 - 4 }, cont(10)]
        );
        assert_eq!(s.cold.len(), 2 + 16 + 5);
        assert_eq!(s.cold_holes, vec![cont(2 + 16 + 1)]);
    }

    #[test]
    fn a_common_path_that_ends_in_a_jump_to_the_target_is_split_there() {
        // UNPACK_SEQUENCE_*__STORES: 0: test rdi,rdi; 3: jne +5 (-> 10);
        // 5: jmp JUMP; 10: 16 nops; 26: jmp helper (rel32 hole); 31: int3;
        // 32: the helper, 8 nops then jmp CONTINUE: the stencil's own code
        // never continues.
        let jump = |offset| Hole { offset, kind: RelocKind::X86_64_PC32, value: HoleValue::Jump, addend: -4 };
        let mut code = vec![0x48, 0x85, 0xFF, 0x75, 0x05, 0xE9, 0, 0, 0, 0];
        code.extend(std::iter::repeat_n(0x90, 16));
        code.extend([0xE9, 0, 0, 0, 0, 0xCC]);
        code.extend(std::iter::repeat_n(0x90, 8));
        code.extend([0xE9, 0, 0, 0, 0]);
        let mut s = stencil(code, vec![jump(6), to_code(27, 32), cont(41)]);
        s.home_len = 31;
        assert!(split_cold(&mut s));
        // Hot: test; jne rel32 -> Cold+0; jmp JUMP.
        assert_eq!(s.code, vec![0x48, 0x85, 0xFF, 0x0F, 0x85, 0, 0, 0, 0, 0xE9, 0, 0, 0, 0]);
        assert_eq!(s.trailing_continue, None);
        assert_eq!(s.code_holes, vec![Hole { offset: 5, kind: RelocKind::X86_64_PC32, value: HoleValue::Cold, addend: -4 }, jump(10)]);
        assert_eq!(s.cold.len(), 16 + 5 + 1 + 8 + 5);
    }

    #[test]
    fn a_common_path_that_runs_into_a_helper_is_not_split() {
        // 0: test rdi,rdi; 3: jmp helper (rel32 hole); 8: int3 padding;
        // 16: the helper: jmp CONTINUE, then 16 nops (its rare path).
        let mut code = vec![0x48, 0x85, 0xFF, 0xE9, 0, 0, 0, 0];
        code.extend(std::iter::repeat_n(0xCC, 8));
        code.extend([0xE9, 0, 0, 0, 0]);
        code.extend(std::iter::repeat_n(0x90, 16));
        let mut s = stencil(code, vec![to_code(4, 16), cont(17)]);
        s.home_len = 8;
        assert!(!split_cold(&mut s));
    }

    #[test]
    fn splits_after_a_guard_that_continues() {
        // 0: test rdi,rdi; 3: je +16 (-> 21, the end: the continuation);
        // 5..21: the guard's failure (nops), falling off the end.
        let mut code = vec![0x48, 0x85, 0xFF, 0x74, 0x10];
        code.extend(std::iter::repeat_n(0x90, 16));
        let mut s = stencil(code, vec![]);
        assert!(split_cold(&mut s));
        assert_inverted_guard(&s);
        // Cold: the nops, then the jump to the continuation they fell into.
        assert_eq!(s.cold.len(), 16 + 5);
        assert_eq!(s.cold[16], 0xE9);
        assert_eq!(s.cold_holes, vec![cont(17)]);
    }

    #[test]
    fn splits_after_a_conditional_tail_call_to_the_continuation() {
        // 0: test rdi,rdi; 3: je CONTINUE (0F 84 + hole); 9..25: the guard's
        // failure: nops, then 25: jmp DEOPT.
        let mut code = vec![0x48, 0x85, 0xFF, 0x0F, 0x84, 0, 0, 0, 0];
        code.extend(std::iter::repeat_n(0x90, 16));
        code.extend([0xE9, 0, 0, 0, 0]);
        let deopt = Hole { offset: 26, kind: RelocKind::X86_64_PC32, value: HoleValue::Deopt, addend: -4 };
        let mut s = stencil(code, vec![cont(5), deopt]);
        assert!(split_cold(&mut s));
        assert_inverted_guard(&s);
        // Cold: the nops and the jump to DEOPT, which does not fall through.
        assert_eq!(s.cold.len(), 16 + 5);
        assert_eq!(s.cold_holes, vec![Hole { offset: 17, ..deopt }]);
    }

    /// 0: test rdi,rdi; 3: je CONTINUE; 9: the fall-through (`middle`);
    /// then jmp CONTINUE and 16 nops after it.
    fn conditional_then_unconditional(middle: &[u8], middle_holes: Vec<Hole>) -> BuiltStencil {
        let mut code = vec![0x48, 0x85, 0xFF, 0x0F, 0x84, 0, 0, 0, 0];
        code.extend_from_slice(middle);
        let jmp = code.len() as u32;
        code.extend([0xE9, 0, 0, 0, 0]);
        code.extend(std::iter::repeat_n(0x90, 16));
        let mut holes = vec![cont(5)];
        holes.extend(middle_holes);
        holes.push(cont(jmp + 1));
        stencil(code, holes)
    }

    #[test]
    fn a_branch_to_an_exit_jump_in_the_cold_part_goes_to_the_exit() {
        // POP_JUMP_IF_NONE's shape: 0: test rdi,rdi; 3: je +5 (-> 10);
        // 5: jmp CONTINUE; 10: jmp JUMP; 15..31: nops.
        let mut code = vec![0x48, 0x85, 0xFF, 0x74, 0x05, 0xE9, 0, 0, 0, 0, 0xE9, 0, 0, 0, 0];
        code.extend(std::iter::repeat_n(0x90, 16));
        let jump = |offset| Hole { offset, kind: RelocKind::X86_64_PC32, value: HoleValue::Jump, addend: -4 };
        let mut s = stencil(code, vec![cont(6), jump(11)]);
        assert!(split_cold(&mut s));
        // Hot: test; je JUMP (rel32, the exit's own hole); jmp CONTINUE.
        assert_eq!(s.code, vec![0x48, 0x85, 0xFF, 0x0F, 0x84, 0, 0, 0, 0, 0xE9, 0, 0, 0, 0]);
        assert_eq!(s.code_holes, vec![jump(5), cont(10)]);
        // The exit itself stays in the cold part.
        assert_eq!(s.cold[0], 0xE9);
        assert_eq!(s.cold_holes[0], jump(1));
    }

    #[test]
    fn a_branch_to_a_jump_within_the_stencil_is_not_retargeted() {
        // As above, but 10: jmp -12 (-> 0): no hole to take over.
        let mut code = vec![0x48, 0x85, 0xFF, 0x74, 0x05, 0xE9, 0, 0, 0, 0, 0xE9, 0xF1, 0xFF, 0xFF, 0xFF];
        code.extend(std::iter::repeat_n(0x90, 16));
        let mut s = stencil(code, vec![cont(6)]);
        assert!(split_cold(&mut s));
        assert_eq!(
            s.code_holes,
            vec![Hole { offset: 5, kind: RelocKind::X86_64_PC32, value: HoleValue::Cold, addend: -4 }, cont(10)]
        );
    }

    #[test]
    fn a_conditional_continuation_before_a_call_ends_the_common_path() {
        // The fall-through calls a helper (call [rip+GOT]): RESUME_CHECK's
        // shape, its pending-events path after the conditional tail call.
        let got = Hole { offset: 11, kind: RelocKind::X86_64_GOTPCREL, value: HoleValue::Symbol(0), addend: -4 };
        let mut s = conditional_then_unconditional(&[0xFF, 0x15, 0, 0, 0, 0], vec![got]);
        assert!(split_cold(&mut s));
        assert_inverted_guard(&s);
        // Cold: the call, the jump to the continuation, the nops after it.
        assert_eq!(s.cold[..2], [0xFF, 0x15]);
        assert_eq!(s.cold.len(), 6 + 5 + 16 + 5);
    }

    #[test]
    fn a_conditional_continuation_without_a_call_after_it_stays_on_the_common_path() {
        // The fall-through is a decrement (dec dword [rdi]): a common path
        // that also continues, as in POP_TOP; the cut stays after its jmp.
        let mut s = conditional_then_unconditional(&[0xFF, 0x0F], vec![]);
        assert!(split_cold(&mut s));
        assert_eq!(s.code[..11], [0x48, 0x85, 0xFF, 0x0F, 0x84, 0, 0, 0, 0, 0xFF, 0x0F]);
        assert_eq!(s.code[11], 0xE9);
        assert_eq!(s.code_holes, vec![cont(5), cont(12)]);
        assert_eq!(s.cold.len(), 16 + 5);
    }

    #[test]
    fn leaves_whole_what_it_cannot_move() {
        // lea rax,[rip+0] without a relocation.
        let mut code = vec![0x48, 0x8D, 0x05, 0, 0, 0, 0, 0xE9, 0, 0, 0, 0];
        code.extend(std::iter::repeat_n(0x90, 20));
        let mut s = stencil(code.clone(), vec![cont(8)]);
        assert!(!split_cold(&mut s));
        assert_eq!(s.code, code);
        // No jump to the continuation: nothing to cut after.
        let mut s = stencil(vec![0x90; 40], vec![]);
        assert!(!split_cold(&mut s));
        // A guard whose failure is too short to be worth moving.
        let mut s = stencil(vec![0x48, 0x85, 0xFF, 0x74, 0x04, 0x90, 0x90, 0x90, 0x90], vec![]);
        assert!(!split_cold(&mut s));
    }
}
