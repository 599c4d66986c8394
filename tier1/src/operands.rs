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
    let version = Some(info.instrumentation_version);
    // Specialised forms with cached values (stencils/c/fast.c).
    if let Some(ops) = fast_operands(instr, info)? {
        return Ok(ops);
    }
    Ok(match base {
        // Eval-breaker and instrumentation checks (core.c, ops.c).
        "RESUME" | "CALL_KW" => (version, None),
        // OPERAND1 of CALL_PY_EXACT_ARGS / CALL_BOUND_METHOD_EXACT_ARGS
        // (ops.c): the function version in the call cache (after the counter).
        "CALL" => (version, cache_u32(instr, info, 1).map(u64::from)),
        // OPERAND1 of JUMP_BACKWARD (core.c): the back-edge counter.
        "JUMP_BACKWARD" => (version, Some(info.back_edge_counter)),
        // Names for error messages.
        "LOAD_FAST_CHECK" | "DELETE_FAST" => (Some(item(oparg, info.localsplusnames)?), None),
        "LOAD_CONST" => (Some(item(oparg, info.consts)?), None),
        "LOAD_SMALL_INT" => {
            (Some(resolver.small_int(oparg).ok_or_else(|| Refusal::Malformed("small int".into()))?), None)
        }
        // OPERAND1 of BINARY_OP_INPLACE_ADD_UNICODE (containers.c): the
        // local of the STORE_FAST it folds in.
        // OPERAND1 of BINARY_OP_EXTEND (ops.c): the interpreter's
        // specialisation descriptor, a pointer in the inline cache.
        "BINARY_OP" if crate::compile::name_of(instr.opcode) == "BINARY_OP_EXTEND" => (
            Some(resolver.binary_op(oparg).ok_or_else(|| Refusal::Malformed("binary op".into()))?),
            Some(cache_u64(instr, info, 1).filter(|&d| d != 0).ok_or_else(|| {
                Refusal::Malformed("BINARY_OP_EXTEND: bad inline cache".into())
            })?),
        ),
        "BINARY_OP" => (
            Some(resolver.binary_op(oparg).ok_or_else(|| Refusal::Malformed("binary op".into()))?),
            inplace_add_store(instr, info).map(u64::from),
        ),
        // TO_BOOL_ALWAYS_TRUE (containers.c): the cached type version.
        "TO_BOOL" => (cache_u32(instr, info, 1).map(u64::from), None),
        "COMPARE_OP" => (None, compare_mask(oparg >> 5)),
        "LOAD_GLOBAL" | "LOAD_ATTR" => (Some(item(oparg >> 1, info.names)?), None),
        "STORE_ATTR" => (Some(item(oparg, info.names)?), None),
        // names.c: the name, from co_names or (for the class-body cell
        // lookup) co_localsplusnames; CALL_FUNCTION_EX checks as CALL does.
        "LOAD_NAME" | "STORE_NAME" | "DELETE_NAME" | "STORE_GLOBAL" | "DELETE_GLOBAL"
        | "LOAD_FROM_DICT_OR_GLOBALS" | "IMPORT_NAME" | "IMPORT_FROM" | "DELETE_ATTR" => {
            (Some(item(oparg, info.names)?), None)
        }
        "LOAD_SUPER_ATTR" => (Some(item(oparg >> 2, info.names)?), None),
        "LOAD_FROM_DICT_OR_DEREF" => (Some(item(oparg, info.localsplusnames)?), None),
        "CALL_FUNCTION_EX" => (version, None),
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
        // Generators (stencils/c/gen.c): the delegate returned, to the
        // END_SEND; a re-raise from a handler, without a traceback entry.
        "SEND" => JumpTo::Instr(instr.next + oparg),
        "END_ASYNC_FOR" | "CLEANUP_THROW" => JumpTo::ReraiseExit,
        // BINARY_OP_INPLACE_ADD_UNICODE: past the STORE_FAST it folds in.
        "BINARY_OP" if is_inplace_add_unicode(instr) => JumpTo::Instr(instr.next + 1),
        // CALL_LIST_APPEND (fast.c): past the POP_TOP it folds in.
        "CALL" if crate::compile::name_of(instr.opcode) == "CALL_LIST_APPEND" => JumpTo::Instr(instr.next + 1),
        _ => JumpTo::None,
    }
}

fn is_inplace_add_unicode(instr: &Instr) -> bool {
    crate::compile::name_of(instr.opcode) == "BINARY_OP_INPLACE_ADD_UNICODE"
}

/// The local a `BINARY_OP_INPLACE_ADD_UNICODE` stores to: the oparg of the
/// `STORE_FAST` right after it (the interpreter specialises only then).
fn inplace_add_store(instr: &Instr, info: &CodeInfo<'_>) -> Option<u32> {
    if !is_inplace_add_unicode(instr) {
        return None;
    }
    let word = *info.bytecode.get(instr.next)?;
    (crate::compile::name_of((word & 0xff) as u8) == "STORE_FAST").then_some(u32::from(word >> 8))
}

/// The 32-bit inline-cache value at cache entry `entry` (entry 0 is the
/// code unit right after the instruction), low half first.
fn cache_u32(instr: &Instr, info: &CodeInfo<'_>, entry: usize) -> Option<u32> {
    let at = instr.index + 1 + entry;
    let lo = *info.bytecode.get(at)?;
    let hi = *info.bytecode.get(at + 1)?;
    Some(u32::from(lo) | (u32::from(hi) << 16))
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

/// The 16-bit and 64-bit inline-cache values at cache entry `entry`.
fn cache_u16(instr: &Instr, info: &CodeInfo<'_>, entry: usize) -> Option<u16> {
    info.bytecode.get(instr.index + 1 + entry).copied()
}

fn cache_u64(instr: &Instr, info: &CodeInfo<'_>, entry: usize) -> Option<u64> {
    let lo = cache_u32(instr, info, entry)?;
    let hi = cache_u32(instr, info, entry + 2)?;
    Some(u64::from(lo) | (u64::from(hi) << 32))
}

/// The cached values the specialised stencils of stencils/c/fast.c bake in
/// as (OPERAND0, OPERAND1), read from the inline cache (CPython 3.14's
/// `_PyAttrCache`, `_PyLoadMethodCache`, `_PyLoadGlobalCache`: entry 0 is
/// the counter). None: not one of them. Versions are never 0 in a
/// specialised cache (0 would match an unversioned dict or type): a 0 is
/// refused rather than trusted.
fn fast_operands(instr: &Instr, info: &CodeInfo<'_>) -> Result<Option<(Option<u64>, Option<u64>)>, Refusal> {
    let name = crate::compile::name_of(instr.opcode);
    let u16_at = |e: usize| cache_u16(instr, info, e).map(u64::from);
    let version_at = |e: usize, wide: bool| {
        let v = if wide { cache_u32(instr, info, e).map(u64::from) } else { u16_at(e) };
        v.filter(|&v| v != 0)
    };
    let pack = |lo: Option<u64>, hi: Option<u64>| Some(lo? | (hi? << 32));
    let ops = match name {
        // Type version at entry 1; offset of the value or slot at 3.
        "LOAD_ATTR_INSTANCE_VALUE" | "LOAD_ATTR_SLOT" | "STORE_ATTR_INSTANCE_VALUE" | "STORE_ATTR_SLOT" => {
            (version_at(1, true), u16_at(3))
        }
        // Type version at 1; the cached descriptor or attribute at 5.
        "LOAD_ATTR_METHOD_NO_DICT" | "LOAD_ATTR_NONDESCRIPTOR_NO_DICT" | "LOAD_ATTR_CLASS" => {
            (version_at(1, true), cache_u64(instr, info, 5).filter(|&d| d != 0))
        }
        // Type version at 1, shared keys (or metaclass) version at 3.
        "LOAD_ATTR_METHOD_WITH_VALUES"
        | "LOAD_ATTR_NONDESCRIPTOR_WITH_VALUES"
        | "LOAD_ATTR_CLASS_WITH_METACLASS_CHECK" => {
            (pack(version_at(1, true), version_at(3, true)), cache_u64(instr, info, 5).filter(|&d| d != 0))
        }
        // Type version at 1, the dict's offset at 3.
        "LOAD_ATTR_METHOD_LAZY_DICT" => {
            (pack(version_at(1, true), u16_at(3)), cache_u64(instr, info, 5).filter(|&d| d != 0))
        }
        // Type version at 1, the entry's index in the instance's __dict__
        // at 3; the name (the entry's key must be it).
        "STORE_ATTR_WITH_HINT" => (pack(version_at(1, true), u16_at(3)), info.names.get(instr.oparg as usize).copied()),
        // Keys version of the module's dict at 1, entry index at 3.
        "LOAD_ATTR_MODULE" => (version_at(1, true), u16_at(3)),
        // Keys versions of the globals at 1 and builtins at 2 (packed as
        // 16-bit fields), the entry's index at 3.
        "LOAD_GLOBAL_MODULE" => (version_at(1, false), u16_at(3)),
        "LOAD_GLOBAL_BUILTIN" => {
            (version_at(1, false).zip(version_at(2, false)).map(|(g, b)| g | (b << 16)), u16_at(3))
        }
        // The POP_TOP it folds in must be there; its operands are CALL's.
        "CALL_LIST_APPEND" => {
            let next = info.bytecode.get(instr.next).map(|w| crate::compile::name_of((w & 0xff) as u8));
            if next != Some("POP_TOP") {
                return Err(Refusal::Malformed("CALL_LIST_APPEND without its POP_TOP".into()));
            }
            return Ok(None);
        }
        _ => return Ok(None),
    };
    match ops {
        (Some(_), Some(_)) => Ok(Some(ops)),
        _ => Err(Refusal::Malformed(format!("{name}: bad inline cache"))),
    }
}
