//! CPython 3.14 (GIL build) private layout, as Ember uses it.
//!
//! Every item here is compared with the installed headers by
//! [`check_layout`](crate::check_layout).

use core::ffi::c_void;

pub type PyObject = c_void;
pub type PyThreadState = c_void;
pub type CodeUnit = u16;

/// `_PyStackRef`: a tagged `PyObject *` (low bit set = deferred/immortal).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackRef(pub usize);

pub const PY_TAG_BITS: usize = 3;
pub const PY_TAG_REFCNT: usize = 1;

impl StackRef {
    #[inline(always)]
    pub fn as_ptr(self) -> *mut PyObject {
        (self.0 & !PY_TAG_REFCNT) as *mut PyObject
    }
}

/// `struct _PyInterpreterFrame` (pycore_interpframe_structs.h), non-debug and
/// debug builds alike (the debug build splits `visited` into bitfields of the
/// same byte).
#[repr(C)]
pub struct InterpreterFrame {
    pub f_executable: StackRef,
    pub previous: *mut InterpreterFrame,
    pub f_funcobj: StackRef,
    pub f_globals: *mut PyObject,
    pub f_builtins: *mut PyObject,
    pub f_locals: *mut PyObject,
    pub frame_obj: *mut PyObject,
    pub instr_ptr: *mut CodeUnit,
    pub stackpointer: *mut StackRef,
    pub return_offset: u16,
    pub owner: i8,
    pub visited: u8,
    pub localsplus: [StackRef; 0],
}

/// Offset of `localsplus` in `_PyInterpreterFrame` (checked against the
/// headers with the other offsets below).
pub const FRAME_LOCALSPLUS: usize = core::mem::offset_of!(InterpreterFrame, localsplus);

pub const FRAME_OWNED_BY_GENERATOR: i8 = 1;
pub const FRAME_OWNED_BY_INTERPRETER: i8 = 3;
pub const FRAME_OWNED_BY_CSTACK: i8 = 4;

/// Offset of the bytecode (`co_code_adaptive`) in `PyCodeObject`.
pub const CODE_CO_CODE_ADAPTIVE: usize = 208;

/// Offsets of the `PyCodeObject` fields tier 1 reads when compiling.
pub const CODE_CO_CONSTS: usize = 24;
pub const CODE_CO_NAMES: usize = 32;
pub const CODE_CO_LOCALSPLUSNAMES: usize = 96;
pub const CODE_CO_FLAGS: usize = 48;
/// `co_linetable` (bytes) and `co_firstlineno` (int): where lines start.
pub const CODE_CO_LINETABLE: usize = 136;
pub const CODE_CO_FIRSTLINENO: usize = 68;
/// `co_filename`, `co_name` and `co_qualname` (str): which code object it is.
pub const CODE_CO_FILENAME: usize = 112;
pub const CODE_CO_NAME: usize = 120;
pub const CODE_CO_QUALNAME: usize = 128;
/// Instrumentation version the code was last instrumented for.
pub const CODE_CO_INSTRUMENTATION_VERSION: usize = 168;
/// Its monitoring data (NULL until sys.monitoring or tracing first
/// instruments it): where events set on this code object alone are kept.
pub const CODE_CO_MONITORING: usize = 176;
/// `PyThreadState.eval_breaker`: pending-event bits below, the interpreter's
/// instrumentation version above `PY_EVAL_EVENTS_MASK`.
pub const TSTATE_EVAL_BREAKER: usize = 24;
pub const PY_EVAL_EVENTS_MASK: usize = 0xff;
/// Highest `BINARY_OP` oparg (`_PyEval_BinaryOps` has one more entry).
pub const NB_OPARG_LAST: usize = 26;
/// `BINARY_OP` opargs of `**`, `/` and their augmented forms.
pub const NB_POWER: usize = 8;
pub const NB_TRUE_DIVIDE: usize = 11;
pub const NB_INPLACE_POWER: usize = 21;
pub const NB_INPLACE_TRUE_DIVIDE: usize = 24;

/// `PyCodeEvent` (cpython/code.h).
pub const PY_CODE_EVENT_CREATE: i32 = 0;
pub const PY_CODE_EVENT_DESTROY: i32 = 1;
pub type CodeWatchCallback = unsafe extern "C" fn(event: i32, code: *mut PyObject) -> i32;

pub type EvalFrameFn =
    unsafe extern "C" fn(*mut PyThreadState, *mut InterpreterFrame, i32) -> *mut PyObject;

extern "C" {
    pub fn _PyEval_EvalFrameDefault(
        tstate: *mut PyThreadState,
        frame: *mut InterpreterFrame,
        throwflag: i32,
    ) -> *mut PyObject;
    pub fn _PyInterpreterState_GetEvalFrameFunc(interp: *mut c_void) -> Option<EvalFrameFn>;
    pub fn _PyInterpreterState_SetEvalFrameFunc(interp: *mut c_void, f: Option<EvalFrameFn>);
    pub fn PyCode_AddWatcher(callback: CodeWatchCallback) -> i32;
}

/// The Rust side of the table that `layout.c` exports.
pub(crate) fn expected() -> Vec<(&'static str, usize)> {
    use core::mem::{offset_of, size_of};
    type F = InterpreterFrame;
    vec![
        ("_PyInterpreterFrame.f_executable", offset_of!(F, f_executable)),
        ("_PyInterpreterFrame.previous", offset_of!(F, previous)),
        ("_PyInterpreterFrame.f_funcobj", offset_of!(F, f_funcobj)),
        ("_PyInterpreterFrame.f_globals", offset_of!(F, f_globals)),
        ("_PyInterpreterFrame.f_builtins", offset_of!(F, f_builtins)),
        ("_PyInterpreterFrame.f_locals", offset_of!(F, f_locals)),
        ("_PyInterpreterFrame.frame_obj", offset_of!(F, frame_obj)),
        ("_PyInterpreterFrame.instr_ptr", offset_of!(F, instr_ptr)),
        ("_PyInterpreterFrame.stackpointer", offset_of!(F, stackpointer)),
        ("_PyInterpreterFrame.return_offset", offset_of!(F, return_offset)),
        ("_PyInterpreterFrame.owner", offset_of!(F, owner)),
        ("_PyInterpreterFrame.localsplus", offset_of!(F, localsplus)),
        ("PY_CODE_EVENT_CREATE", PY_CODE_EVENT_CREATE as usize),
        ("PY_CODE_EVENT_DESTROY", PY_CODE_EVENT_DESTROY as usize),
        ("PyCodeObject.co_code_adaptive", CODE_CO_CODE_ADAPTIVE),
        ("PyCodeObject.co_consts", CODE_CO_CONSTS),
        ("PyCodeObject.co_names", CODE_CO_NAMES),
        ("PyCodeObject.co_localsplusnames", CODE_CO_LOCALSPLUSNAMES),
        ("PyCodeObject.co_flags", CODE_CO_FLAGS),
        ("PyCodeObject.co_linetable", CODE_CO_LINETABLE),
        ("PyCodeObject.co_firstlineno", CODE_CO_FIRSTLINENO),
        ("PyCodeObject.co_filename", CODE_CO_FILENAME),
        ("PyCodeObject.co_name", CODE_CO_NAME),
        ("PyCodeObject.co_qualname", CODE_CO_QUALNAME),
        ("PyCodeObject._co_instrumentation_version", CODE_CO_INSTRUMENTATION_VERSION),
        ("PyCodeObject._co_monitoring", CODE_CO_MONITORING),
        ("PyThreadState.eval_breaker", TSTATE_EVAL_BREAKER),
        ("_PY_EVAL_EVENTS_MASK", PY_EVAL_EVENTS_MASK),
        ("NB_OPARG_LAST", NB_OPARG_LAST),
        ("NB_POWER", NB_POWER),
        ("NB_TRUE_DIVIDE", NB_TRUE_DIVIDE),
        ("NB_INPLACE_POWER", NB_INPLACE_POWER),
        ("NB_INPLACE_TRUE_DIVIDE", NB_INPLACE_TRUE_DIVIDE),
        ("sizeof(_PyStackRef)", size_of::<StackRef>()),
        ("Py_TAG_BITS", PY_TAG_BITS),
        ("Py_TAG_REFCNT", PY_TAG_REFCNT),
        ("FRAME_OWNED_BY_GENERATOR", FRAME_OWNED_BY_GENERATOR as usize),
        ("FRAME_OWNED_BY_CSTACK", FRAME_OWNED_BY_CSTACK as usize),
        ("FRAME_OWNED_BY_INTERPRETER", FRAME_OWNED_BY_INTERPRETER as usize),
    ]
}
