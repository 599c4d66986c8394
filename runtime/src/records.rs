//! One `CodeRecord` per code object, kept in the code object's `co_extra`
//! slot and freed with it.
//!
//! All of this state is touched only with the GIL held (the frame evaluator,
//! the `co_extra` free function and the Python API all run under it), which
//! is what makes the unsynchronised access below sound.

use core::cell::UnsafeCell;
use core::ffi::c_void;
use core::ptr;

use ember_profiler::{CodeProfile, GlobalCounters, Tier};

use crate::jit::{Settings, Tier1Totals};
use ember_pyabi::current as abi;
use pyo3::ffi;

pub struct CodeRecord {
    /// Borrowed: the record dies with its code object.
    pub code: *mut ffi::PyObject,
    pub profile: CodeProfile,
    /// Tier-1 code; freed with the record, which outlives every frame
    /// running it (a frame holds its code object).
    pub compiled: Option<Box<ember_tier1::compile::Compiled>>,
    /// Why tier 1 would not compile this code object.
    pub refusal: Option<ember_tier1::compile::Refusal>,
    pub compile_ns: u64,
    /// Instrumentation version `compiled` is valid for.
    pub compiled_version: u64,
    /// Compiled code replaced after re-instrumentation; kept until the code
    /// object dies, since frames may still be running it.
    pub retired: Vec<Box<ember_tier1::compile::Compiled>>,
    /// Position in `State::records`, for O(1) removal.
    registry_index: usize,
}

pub struct State {
    /// `co_extra` index from `PyUnstable_Eval_RequestCodeExtraIndex`, or -1.
    pub extra_index: isize,
    pub records: Vec<*mut CodeRecord>,
    pub totals: GlobalCounters,
    pub settings: Settings,
    pub tier1: Tier1Totals,
}

pub struct GilCell<T>(UnsafeCell<T>);
// SAFETY: accessed only with the GIL held (see the module comment).
unsafe impl<T> Sync for GilCell<T> {}

pub static STATE: GilCell<State> = GilCell(UnsafeCell::new(State {
    extra_index: -1,
    records: Vec::new(),
    totals: GlobalCounters { frames: 0, code_objects_seen: 0, code_objects_freed: 0 },
    settings: Settings { tier1_threshold: 8, max_tier: Tier::Interpreter, code_limit: 512 << 20, perf_map: false },
    tier1: Tier1Totals { compiled: 0, refused: None, compile_ns: 0, code_bytes: 0, instructions: 0 },
}));

/// # Safety
/// The caller holds the GIL and keeps no other reference to the state alive.
#[inline(always)]
#[allow(clippy::mut_from_ref)]
pub unsafe fn state() -> &'static mut State {
    &mut *STATE.0.get()
}

/// The record already attached to `code`, without creating one. This is the
/// evaluator's common path, so it reads `co_extra` directly instead of
/// calling `PyUnstable_Code_GetExtra`.
///
/// # Safety
/// GIL held; `code` is a live code object; `index` came from CPython.
#[inline(always)]
pub unsafe fn lookup(code: *mut ffi::PyObject, index: isize) -> *mut CodeRecord {
    let extra = *((code as *mut u8).add(abi::CODE_CO_EXTRA) as *mut *mut abi::CodeObjectExtra);
    if extra.is_null() || (*extra).ce_size <= index {
        return ptr::null_mut();
    }
    *(*extra).ce_extras.as_ptr().add(index as usize) as *mut CodeRecord
}

/// The record of `code`, created on first use. Null only if CPython refused
/// to store it (memory error; the error indicator is cleared).
///
/// # Safety
/// GIL held; `code` is a live code object.
pub unsafe fn get_or_create(code: *mut ffi::PyObject) -> *mut CodeRecord {
    let st = state();
    let found = lookup(code, st.extra_index);
    if !found.is_null() {
        return found;
    }
    let rec = Box::into_raw(Box::new(CodeRecord {
        code,
        profile: CodeProfile::default(),
        compiled: None,
        refusal: None,
        compile_ns: 0,
        compiled_version: 0,
        retired: Vec::new(),
        registry_index: st.records.len(),
    }));
    if ffi::PyUnstable_Code_SetExtra(code, st.extra_index, rec as *mut c_void) != 0 {
        ffi::PyErr_Clear();
        drop(Box::from_raw(rec));
        return ptr::null_mut();
    }
    st.records.push(rec);
    st.totals.code_objects_seen += 1;
    rec
}

/// `freefunc` given to CPython for our `co_extra` slot.
pub unsafe extern "C" fn free_record(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    let st = state();
    let rec = Box::from_raw(p as *mut CodeRecord);
    let i = rec.registry_index;
    let last = st.records.pop().expect("record registry out of step");
    if i < st.records.len() {
        st.records[i] = last;
        (*last).registry_index = i;
    }
    st.totals.code_objects_freed += 1;
    // Frames are counted per record; keep the freed ones in the total.
    st.totals.frames += rec.profile.calls + rec.profile.resumes;
}

/// Check, on a live code object, that reading `co_extra` directly sees what
/// `PyUnstable_Code_SetExtra` stored: `_PyCodeObjectExtra` is private to
/// CPython's codeobject.c, so the headers cannot vouch for it.
///
/// # Safety
/// GIL held; `code` is a live code object with no Ember record yet.
pub unsafe fn self_test_extra(code: *mut ffi::PyObject, index: isize) -> Result<(), String> {
    let mut sentinel = 0u8;
    let p = &mut sentinel as *mut u8 as *mut c_void;
    if ffi::PyUnstable_Code_SetExtra(code, index, p) != 0 {
        ffi::PyErr_Clear();
        return Err("PyUnstable_Code_SetExtra failed".into());
    }
    let seen = lookup(code, index) as *mut c_void;
    if seen == p {
        // Clear the slot directly: through the API, CPython would hand the
        // sentinel to `free_record`.
        let extra = *((code as *mut u8).add(abi::CODE_CO_EXTRA) as *mut *mut abi::CodeObjectExtra);
        *(*extra).ce_extras.as_mut_ptr().add(index as usize) = ptr::null_mut();
        Ok(())
    } else {
        // The sentinel cannot be found to clear it: keep the code object
        // alive forever so that `free_record` never sees it.
        ffi::Py_IncRef(code);
        Err(format!("co_extra layout differs from Ember's: stored {p:?}, read {seen:?}"))
    }
}
