//! The PEP 523 frame evaluator.
//!
//! CPython calls it for every frame it would otherwise hand to
//! `_PyEval_EvalFrameDefault`: each Python-to-Python call (installing any
//! evaluator turns off the interpreter's inlined calls), each generator or
//! coroutine resumption, each module body. Its common path must stay tiny.

use core::ffi::c_void;

use ember_pyabi::current::{self as abi, EvalFrameFn, InterpreterFrame, PyThreadState};
use pyo3::ffi;

use crate::records::{self, state};

/// Ember's evaluator: count, then run the frame in the interpreter (the only
/// tier this build has).
pub unsafe extern "C" fn ember_eval_frame(
    tstate: *mut PyThreadState,
    frame: *mut InterpreterFrame,
    throwflag: i32,
) -> *mut abi::PyObject {
    let st = state();
    st.totals.frames += 1;
    let code = (*frame).f_executable.as_ptr() as *mut ffi::PyObject;
    let mut rec = records::lookup(code, st.extra_index);
    if rec.is_null() {
        rec = records::get_or_create(code);
    }
    if !rec.is_null() {
        let at_start = (*frame).instr_ptr == code_start(code);
        if at_start && throwflag == 0 {
            (*rec).profile.calls += 1;
        } else {
            (*rec).profile.resumes += 1;
        }
    }
    abi::_PyEval_EvalFrameDefault(tstate, frame, throwflag)
}

/// A pass-through evaluator that does nothing but call the interpreter: the
/// floor of what any PEP 523 user pays, for measuring Ember's own share, and
/// a stand-in "foreign" evaluator in tests.
pub unsafe extern "C" fn passthrough_eval_frame(
    tstate: *mut PyThreadState,
    frame: *mut InterpreterFrame,
    throwflag: i32,
) -> *mut abi::PyObject {
    abi::_PyEval_EvalFrameDefault(tstate, frame, throwflag)
}

#[inline(always)]
unsafe fn code_start(code: *mut ffi::PyObject) -> *mut abi::CodeUnit {
    (code as *mut u8).add(abi::CODE_CO_CODE_ADAPTIVE) as *mut abi::CodeUnit
}

pub fn ember_fn() -> EvalFrameFn {
    ember_eval_frame
}

pub fn passthrough_fn() -> EvalFrameFn {
    passthrough_eval_frame
}

/// Which evaluator the current interpreter runs frames with.
pub enum Installed {
    Default,
    Ember,
    Passthrough,
    Other(usize),
}

/// # Safety
/// GIL held.
pub unsafe fn installed() -> Installed {
    let interp = ffi::PyInterpreterState_Get() as *mut c_void;
    let cur = abi::_PyInterpreterState_GetEvalFrameFunc(interp).map(|f| f as usize);
    match cur {
        None => Installed::Default,
        Some(f) if f == abi::_PyEval_EvalFrameDefault as EvalFrameFn as usize => Installed::Default,
        Some(f) if f == ember_fn() as usize => Installed::Ember,
        Some(f) if f == passthrough_fn() as usize => Installed::Passthrough,
        Some(f) => Installed::Other(f),
    }
}

/// # Safety
/// GIL held.
pub unsafe fn install(f: Option<EvalFrameFn>) {
    let interp = ffi::PyInterpreterState_Get() as *mut c_void;
    abi::_PyInterpreterState_SetEvalFrameFunc(interp, f);
}
