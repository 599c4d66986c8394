//! Per-opcode knowledge of tier 1: the compile-time operands a stencil's
//! `_EMBER_OPERAND0/1` holes receive, and where its `_EMBER_JUMP` goes.
//! Each arm names the stencils (stencils/c/) it serves; a stencil that uses
//! an operand hole its opcode gets no value for fails to compile, loudly.
//!
//! Opcodes are classified by name once ([`Class::of`]); compiling then
//! matches on the class of each instruction's opcode.

use ember_pyabi::opcodes;

use crate::compile::{CodeInfo, Instr, Refusal, Resolver};

/// What tier 1 does with one opcode (specialised or not): which operands
/// and which jump target its stencil gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// No operands, no jump.
    Plain,
    // Eval-breaker and instrumentation checks (core.c, ops.c): the version.
    /// RESUME, CALL_KW, CALL_FUNCTION_EX.
    Version,
    /// CALL: the version; OPERAND1 of CALL_PY_EXACT_ARGS /
    /// CALL_BOUND_METHOD_EXACT_ARGS (ops.c) is the function version in the
    /// call cache (after the counter).
    Call,
    /// JUMP_BACKWARD (core.c): the version and the back-edge counter.
    JumpBackward,
    /// Names for error messages: `co_localsplusnames[oparg]`
    /// (LOAD_FAST_CHECK, DELETE_FAST, LOAD_FROM_DICT_OR_DEREF).
    LocalName,
    /// The locals' own stencils (core.c: LOAD_FAST, LOAD_FAST_BORROW,
    /// LOAD_FAST_AND_CLEAR, STORE_FAST, and the pairs): the byte offset of
    /// the local in the frame, of the second local's in OPERAND1 for pairs
    /// (`oparg >> 4` and `oparg & 15`).
    Local,
    LocalPair,
    LoadConst,
    LoadSmallInt,
    /// BINARY_OP: `_PyEval_BinaryOps[oparg]`; OPERAND1 of
    /// BINARY_OP_INPLACE_ADD_UNICODE (containers.c) is the local of the
    /// STORE_FAST it folds in.
    BinaryOp,
    /// OPERAND1 of BINARY_OP_EXTEND (ops.c): the interpreter's
    /// specialisation descriptor, a pointer in the inline cache.
    BinaryOpExtend,
    /// TO_BOOL_ALWAYS_TRUE (containers.c): the cached type version.
    ToBool,
    CompareOp,
    /// `co_names[oparg >> 1]` (LOAD_GLOBAL, LOAD_ATTR).
    NameHalf,
    /// `co_names[oparg]` (STORE_ATTR, and names.c: LOAD_NAME, STORE_NAME,
    /// DELETE_NAME, STORE_GLOBAL, DELETE_GLOBAL, LOAD_FROM_DICT_OR_GLOBALS,
    /// IMPORT_NAME, IMPORT_FROM, DELETE_ATTR).
    Name,
    /// `co_names[oparg >> 2]` (LOAD_SUPER_ATTR).
    NameQuarter,
    /// Specialised forms with cached values (stencils/c/fast.c).
    Fast(Fast),
    /// CALL_LIST_APPEND (fast.c): CALL's operands; the POP_TOP it folds in
    /// must follow, and it jumps past it.
    CallListAppend,
    /// BINARY_OP_INPLACE_ADD_UNICODE: BINARY_OP's operands; it jumps past
    /// the STORE_FAST it folds in.
    InplaceAddUnicode,
}

/// The specialised forms of fast.c, by what their inline cache holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fast {
    /// Type version at entry 1; offset of the value or slot at 3.
    VersionOffset,
    /// Type version at 1; the cached descriptor or attribute at 5.
    VersionDescr,
    /// Type version at 1, shared keys (or metaclass) version at 3; descriptor at 5.
    TwoVersionsDescr,
    /// Type version at 1, the dict's offset at 3; descriptor at 5.
    VersionDictOffsetDescr,
    /// STORE_ATTR_WITH_HINT: type version at 1, the entry's index in the
    /// instance's __dict__ at 3; the name (the entry's key must be it).
    WithHint,
    /// LOAD_ATTR_MODULE: keys version of the module's dict at 1, entry index at 3.
    Module,
    /// LOAD_GLOBAL_MODULE: keys version of the globals at 1 (16 bits), index at 3.
    GlobalModule,
    /// LOAD_GLOBAL_BUILTIN: keys versions of globals at 1 and builtins at 2
    /// (packed as 16-bit fields), the entry's index at 3.
    GlobalBuiltin,
}

/// Where an instruction's jump goes, by its generic opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JumpRule {
    None,
    /// next + oparg (JUMP_FORWARD, POP_JUMP_IF_*; SEND: the delegate
    /// returned, to the END_SEND).
    Forward,
    /// next - oparg (JUMP_BACKWARD, JUMP_BACKWARD_NO_INTERRUPT).
    Backward,
    /// FOR_ITER exhausted: past the END_FOR at the target, to the POP_ITER.
    ForIter,
    /// The exit that unwinds without a traceback entry (RAISE_VARARGS, and
    /// generators' END_ASYNC_FOR, CLEANUP_THROW: a re-raise from a handler).
    Reraise,
    /// Past the instruction it folds in (BINARY_OP_INPLACE_ADD_UNICODE:
    /// the STORE_FAST; CALL_LIST_APPEND: the POP_TOP).
    SkipOne,
}

impl Class {
    /// The class of `opcode` (specialised names first, then the generic one).
    pub fn of(opcode: u8) -> Class {
        let name = crate::compile::name_of(opcode);
        let base = crate::compile::name_of(opcodes::deopt(opcode));
        match name {
            "LOAD_ATTR_INSTANCE_VALUE" | "LOAD_ATTR_SLOT" | "STORE_ATTR_INSTANCE_VALUE" | "STORE_ATTR_SLOT" => {
                return Class::Fast(Fast::VersionOffset)
            }
            "LOAD_ATTR_METHOD_NO_DICT" | "LOAD_ATTR_NONDESCRIPTOR_NO_DICT" | "LOAD_ATTR_CLASS" => {
                return Class::Fast(Fast::VersionDescr)
            }
            "LOAD_ATTR_METHOD_WITH_VALUES"
            | "LOAD_ATTR_NONDESCRIPTOR_WITH_VALUES"
            | "LOAD_ATTR_CLASS_WITH_METACLASS_CHECK" => return Class::Fast(Fast::TwoVersionsDescr),
            "LOAD_ATTR_METHOD_LAZY_DICT" => return Class::Fast(Fast::VersionDictOffsetDescr),
            "STORE_ATTR_WITH_HINT" => return Class::Fast(Fast::WithHint),
            "LOAD_ATTR_MODULE" => return Class::Fast(Fast::Module),
            "LOAD_GLOBAL_MODULE" => return Class::Fast(Fast::GlobalModule),
            "LOAD_GLOBAL_BUILTIN" => return Class::Fast(Fast::GlobalBuiltin),
            "CALL_LIST_APPEND" => return Class::CallListAppend,
            "BINARY_OP_EXTEND" => return Class::BinaryOpExtend,
            "BINARY_OP_INPLACE_ADD_UNICODE" => return Class::InplaceAddUnicode,
            _ => {}
        }
        match base {
            "RESUME" | "CALL_KW" | "CALL_FUNCTION_EX" => Class::Version,
            "CALL" => Class::Call,
            "JUMP_BACKWARD" => Class::JumpBackward,
            "LOAD_FAST_CHECK" | "DELETE_FAST" | "LOAD_FROM_DICT_OR_DEREF" => Class::LocalName,
            "LOAD_FAST" | "LOAD_FAST_BORROW" | "LOAD_FAST_AND_CLEAR" | "STORE_FAST" => Class::Local,
            "LOAD_FAST_LOAD_FAST" | "LOAD_FAST_BORROW_LOAD_FAST_BORROW" | "STORE_FAST_LOAD_FAST"
            | "STORE_FAST_STORE_FAST" => Class::LocalPair,
            "LOAD_CONST" => Class::LoadConst,
            "LOAD_SMALL_INT" => Class::LoadSmallInt,
            "BINARY_OP" => Class::BinaryOp,
            "TO_BOOL" => Class::ToBool,
            "COMPARE_OP" => Class::CompareOp,
            "LOAD_GLOBAL" | "LOAD_ATTR" => Class::NameHalf,
            "STORE_ATTR" | "LOAD_NAME" | "STORE_NAME" | "DELETE_NAME" | "STORE_GLOBAL" | "DELETE_GLOBAL"
            | "LOAD_FROM_DICT_OR_GLOBALS" | "IMPORT_NAME" | "IMPORT_FROM" | "DELETE_ATTR" => Class::Name,
            "LOAD_SUPER_ATTR" => Class::NameQuarter,
            _ => Class::Plain,
        }
    }
}

impl JumpRule {
    pub fn of(opcode: u8) -> JumpRule {
        let name = crate::compile::name_of(opcode);
        if name == "BINARY_OP_INPLACE_ADD_UNICODE" || name == "CALL_LIST_APPEND" {
            return JumpRule::SkipOne;
        }
        match crate::compile::name_of(opcodes::deopt(opcode)) {
            "JUMP_FORWARD" | "POP_JUMP_IF_FALSE" | "POP_JUMP_IF_TRUE" | "POP_JUMP_IF_NONE" | "POP_JUMP_IF_NOT_NONE"
            | "SEND" => JumpRule::Forward,
            "JUMP_BACKWARD" | "JUMP_BACKWARD_NO_INTERRUPT" => JumpRule::Backward,
            "FOR_ITER" => JumpRule::ForIter,
            "RAISE_VARARGS" | "END_ASYNC_FOR" | "CLEANUP_THROW" => JumpRule::Reraise,
            _ => JumpRule::None,
        }
    }
}

/// Where an instruction's JUMP hole goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JumpTo {
    Instr(usize),
    /// The code object's exit that unwinds without a traceback entry.
    ReraiseExit,
    None,
}

#[inline]
pub fn jump(instr: &Instr, rule: JumpRule) -> JumpTo {
    let oparg = instr.oparg as usize;
    let next = instr.next as usize;
    match rule {
        JumpRule::None => JumpTo::None,
        JumpRule::Forward => JumpTo::Instr(next + oparg),
        JumpRule::Backward => JumpTo::Instr(next.wrapping_sub(oparg)),
        JumpRule::ForIter => JumpTo::Instr(next + oparg + 1),
        JumpRule::Reraise => JumpTo::ReraiseExit,
        JumpRule::SkipOne => JumpTo::Instr(next + 1),
    }
}

/// Opcode numbers operands need to recognise.
#[derive(Clone, Copy)]
pub struct Known {
    pub store_fast: Option<u8>,
    pub pop_top: Option<u8>,
}

/// Operands 0 and 1 for an instruction of class `class`.
#[inline]
pub fn operands(
    instr: &Instr,
    class: Class,
    known: &Known,
    info: &CodeInfo<'_>,
    resolver: &dyn Resolver,
) -> Result<(Option<u64>, Option<u64>), Refusal> {
    let oparg = instr.oparg;
    let item = |i: u32, table: &[u64]| {
        table.get(i as usize).copied().ok_or_else(|| {
            Refusal::Malformed(format!("{} oparg {i} out of range", crate::compile::name_of(instr.base)))
        })
    };
    let version = Some(info.instrumentation_version);
    let binary_op = || resolver.binary_op(oparg).ok_or_else(|| Refusal::Malformed("binary op".into()));
    Ok(match class {
        Class::Plain => return Ok((None, None)),
        Class::Version => (version, None),
        Class::Call => (version, cache_u32(instr, info, 1).map(u64::from)),
        Class::JumpBackward => (version, Some(info.back_edge_counter)),
        Class::LocalName => (Some(item(oparg, info.localsplusnames)?), None),
        Class::Local => (Some(local_offset(oparg)), None),
        Class::LocalPair => (Some(local_offset(oparg >> 4)), Some(local_offset(oparg & 15))),
        Class::LoadConst => (Some(item(oparg, info.consts)?), None),
        Class::LoadSmallInt => {
            (Some(resolver.small_int(oparg).ok_or_else(|| Refusal::Malformed("small int".into()))?), None)
        }
        Class::BinaryOp => (Some(binary_op()?), None),
        Class::InplaceAddUnicode => (Some(binary_op()?), inplace_add_store(instr, known, info).map(u64::from)),
        Class::BinaryOpExtend => (
            Some(binary_op()?),
            Some(cache_u64(instr, info, 1).filter(|&d| d != 0).ok_or_else(|| {
                Refusal::Malformed("BINARY_OP_EXTEND: bad inline cache".into())
            })?),
        ),
        Class::ToBool => (cache_u32(instr, info, 1).map(u64::from), None),
        Class::CompareOp => (None, compare_mask(oparg >> 5)),
        Class::NameHalf => (Some(item(oparg >> 1, info.names)?), None),
        Class::Name => (Some(item(oparg, info.names)?), None),
        Class::NameQuarter => (Some(item(oparg >> 2, info.names)?), None),
        Class::CallListAppend => {
            let next = info.bytecode.get(instr.next as usize).map(|w| (w & 0xff) as u8);
            if next.is_none() || next != known.pop_top {
                return Err(Refusal::Malformed("CALL_LIST_APPEND without its POP_TOP".into()));
            }
            (version, cache_u32(instr, info, 1).map(u64::from))
        }
        Class::Fast(kind) => fast_operands(instr, kind, info)?,
    })
}

/// The byte offset of `localsplus[index]` in an interpreter frame.
#[inline]
fn local_offset(index: u32) -> u64 {
    (ember_pyabi::current::FRAME_LOCALSPLUS + 8 * index as usize) as u64
}

/// The local a `BINARY_OP_INPLACE_ADD_UNICODE` stores to: the oparg of the
/// `STORE_FAST` right after it (the interpreter specialises only then).
fn inplace_add_store(instr: &Instr, known: &Known, info: &CodeInfo<'_>) -> Option<u32> {
    let word = *info.bytecode.get(instr.next as usize)?;
    (Some((word & 0xff) as u8) == known.store_fast).then_some(u32::from(word >> 8))
}

/// The 32-bit inline-cache value at cache entry `entry` (entry 0 is the
/// code unit right after the instruction), low half first.
#[inline]
fn cache_u32(instr: &Instr, info: &CodeInfo<'_>, entry: usize) -> Option<u32> {
    let at = instr.index as usize + 1 + entry;
    let lo = *info.bytecode.get(at)?;
    let hi = *info.bytecode.get(at + 1)?;
    Some(u32::from(lo) | (u32::from(hi) << 16))
}

/// Outcome bits of `COMPARE_OP_INT` (stencils/c/ops.c): 1 less, 2 equal,
/// 4 greater; the mask says which outcomes make the comparison true.
fn compare_mask(op: u32) -> Option<u64> {
    Some(match op {
        0 => 1,     // <
        1 => 1 | 2, // <=
        2 => 2,     // ==
        3 => 1 | 4, // !=
        4 => 4,     // >
        5 => 4 | 2, // >=
        _ => return None,
    })
}

/// The 16-bit and 64-bit inline-cache values at cache entry `entry`.
fn cache_u16(instr: &Instr, info: &CodeInfo<'_>, entry: usize) -> Option<u16> {
    info.bytecode.get(instr.index as usize + 1 + entry).copied()
}

fn cache_u64(instr: &Instr, info: &CodeInfo<'_>, entry: usize) -> Option<u64> {
    let lo = cache_u32(instr, info, entry)?;
    let hi = cache_u32(instr, info, entry + 2)?;
    Some(u64::from(lo) | (u64::from(hi) << 32))
}

/// The cached values the specialised stencils of stencils/c/fast.c bake in
/// as (OPERAND0, OPERAND1), read from the inline cache (CPython 3.14's
/// `_PyAttrCache`, `_PyLoadMethodCache`, `_PyLoadGlobalCache`: entry 0 is
/// the counter). Versions are never 0 in a specialised cache (0 would match
/// an unversioned dict or type): a 0 is refused rather than trusted.
fn fast_operands(instr: &Instr, kind: Fast, info: &CodeInfo<'_>) -> Result<(Option<u64>, Option<u64>), Refusal> {
    let u16_at = |e: usize| cache_u16(instr, info, e).map(u64::from);
    let version_at = |e: usize, wide: bool| {
        let v = if wide { cache_u32(instr, info, e).map(u64::from) } else { u16_at(e) };
        v.filter(|&v| v != 0)
    };
    let pack = |lo: Option<u64>, hi: Option<u64>| Some(lo? | (hi? << 32));
    let descr = || cache_u64(instr, info, 5).filter(|&d| d != 0);
    let ops = match kind {
        Fast::VersionOffset => (version_at(1, true), u16_at(3)),
        Fast::VersionDescr => (version_at(1, true), descr()),
        Fast::TwoVersionsDescr => (pack(version_at(1, true), version_at(3, true)), descr()),
        Fast::VersionDictOffsetDescr => (pack(version_at(1, true), u16_at(3)), descr()),
        Fast::WithHint => (pack(version_at(1, true), u16_at(3)), info.names.get(instr.oparg as usize).copied()),
        Fast::Module => (version_at(1, true), u16_at(3)),
        Fast::GlobalModule => (version_at(1, false), u16_at(3)),
        Fast::GlobalBuiltin => {
            (version_at(1, false).zip(version_at(2, false)).map(|(g, b)| g | (b << 16)), u16_at(3))
        }
    };
    match ops {
        (Some(_), Some(_)) => Ok(ops),
        _ => Err(Refusal::Malformed(format!("{}: bad inline cache", crate::compile::name_of(instr.opcode)))),
    }
}
