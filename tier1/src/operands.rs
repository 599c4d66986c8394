//! Per-opcode knowledge of tier 1: the compile-time operands a stencil's
//! `_EMBER_OPERAND0/1` holes receive, and where its `_EMBER_JUMP` goes.
//! Each arm names the stencils (stencils/c/) it serves; a stencil that uses
//! an operand hole its opcode gets no value for fails to compile, loudly.

use crate::compile::{CodeInfo, Instr, Refusal, Resolver};

/// Operands 0 and 1 for an instruction whose generic opcode is `base`.
pub fn operands(
    instr: &Instr,
    base: &str,
    info: &CodeInfo<'_>,
    resolver: &dyn Resolver,
) -> Result<(Option<u64>, Option<u64>), Refusal> {
    let oparg = instr.oparg;
    let item = |i: u32, table: &[u64]| {
        table.get(i as usize).copied().ok_or_else(|| Refusal::Malformed(format!("{base} oparg {i} out of range")))
    };
    let instr_addr = |idx: usize| info.bytecode_addr + 2 * idx as u64;
    let version = Some(info.instrumentation_version);
    Ok(match base {
        // Eval-breaker and instrumentation checks (core.c, ops.c).
        "RESUME" | "CALL" | "CALL_KW" => (version, None),
        "JUMP_BACKWARD" => (version, Some(instr_addr(instr.next.wrapping_sub(oparg as usize)))),
        // Names for error messages.
        "LOAD_FAST_CHECK" | "DELETE_FAST" => (Some(item(oparg, info.localsplusnames)?), None),
        "LOAD_CONST" => (Some(item(oparg, info.consts)?), None),
        "LOAD_SMALL_INT" => {
            (Some(resolver.small_int(oparg).ok_or_else(|| Refusal::Malformed("small int".into()))?), None)
        }
        "BINARY_OP" => {
            (Some(resolver.binary_op(oparg).ok_or_else(|| Refusal::Malformed("binary op".into()))?), None)
        }
        "COMPARE_OP" => (None, compare_mask(oparg >> 5)),
        "LOAD_GLOBAL" | "LOAD_ATTR" => (Some(item(oparg >> 1, info.names)?), None),
        "STORE_ATTR" => (Some(item(oparg, info.names)?), None),
        _ => (None, None),
    })
}

/// Where an instruction's JUMP hole goes.
pub enum JumpTo {
    Instr(usize),
    /// The code object's exit that unwinds without a traceback entry.
    ReraiseExit,
    None,
}

pub fn jump(instr: &Instr, base: &str) -> JumpTo {
    let oparg = instr.oparg as usize;
    match base {
        "JUMP_FORWARD" | "POP_JUMP_IF_FALSE" | "POP_JUMP_IF_TRUE" | "POP_JUMP_IF_NONE" | "POP_JUMP_IF_NOT_NONE" => {
            JumpTo::Instr(instr.next + oparg)
        }
        "JUMP_BACKWARD" | "JUMP_BACKWARD_NO_INTERRUPT" => JumpTo::Instr(instr.next.wrapping_sub(oparg)),
        // Exhausted: past the END_FOR at the target, to the POP_ITER.
        "FOR_ITER" => JumpTo::Instr(instr.next + oparg + 1),
        "RAISE_VARARGS" => JumpTo::ReraiseExit,
        _ => JumpTo::None,
    }
}

/// Outcome bits of `COMPARE_OP_INT` (stencils/c/ops.c): 1 less, 2 greater,
/// 8 equal; the mask says which outcomes make the comparison true.
fn compare_mask(op: u32) -> Option<u64> {
    Some(match op {
        0 => 1,     // <
        1 => 1 | 8, // <=
        2 => 8,     // ==
        3 => 1 | 2, // !=
        4 => 2,     // >
        5 => 2 | 8, // >=
        _ => return None,
    })
}
