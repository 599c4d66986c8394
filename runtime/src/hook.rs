//! The PEP 523 frame evaluator.
//!
//! CPython calls it for every frame it would otherwise hand to
//! `_PyEval_EvalFrameDefault`: each Python-to-Python call (installing any
//! evaluator turns off the interpreter's inlined calls), each generator or
//! coroutine resumption, each module body. Its common path must stay tiny.

use core::ffi::c_void;
use core::sync::atomic::{AtomicBool, Ordering};

use ember_pyabi::current::{self as abi, EvalFrameFn, InterpreterFrame, PyThreadState};
use pyo3::ffi;

use ember_profiler::Tier;
use ember_tier1::glue::{ember_resume, ember_run};

use crate::jit;
use crate::records::{self, state};

/// Ember's evaluator: count, compile when the policy says so, and run the
/// frame in compiled code when there is an entry for where it stands;
/// otherwise in the interpreter.
pub unsafe extern "C" fn ember_eval_frame(
    tstate: *mut PyThreadState,
    frame: *mut InterpreterFrame,
    throwflag: i32,
) -> *mut abi::PyObject {
    let st = state();
    let code = (*frame).f_executable.as_ptr() as *mut ffi::PyObject;
    let rec = records::lookup(code);
    if !rec.is_null() && runs_without_evaluator(&*rec, &st.settings) {
        return run_import(tstate, frame, throwflag, &mut *rec);
    }
    // The common case with tier 1 off: a known code object called afresh
    // or resumed (a generator's next()), nothing to do but count. Kept free
    // of calls so that it needs no saved registers; everything else is in
    // the cold function.
    if !rec.is_null()
        && throwflag == 0
        && st.settings.max_tier == Tier::Interpreter
        && (*rec).profile.pinned.is_none()
        && (*rec).compiled.is_none()
    {
        if (*frame).instr_ptr == code_start(code) {
            (*rec).profile.calls += 1;
        } else {
            (*rec).profile.resumes += 1;
        }
        return abi::_PyEval_EvalFrameDefault(tstate, frame, 0);
    }
    // The common case with tier 1 on: compiled code, valid for the code
    // object's instrumentation, entered afresh or resumed, with no decision
    // due (the slow path's: a hand-off to check for re-specialisation, a
    // recompile check at a power-of-two call count, a pin to the
    // interpreter). `rec.direct` holds that decision but for the call count
    // and the version (records::refresh_direct); compiled code's own calls
    // read it too (tier1/csrc/glue.h, ember_direct_enterable).
    if !rec.is_null() && throwflag == 0 && !(*rec).direct.entries.is_null() {
        let r = &mut *rec;
        if jit::code_version(code) == r.direct.version && !has_local_events(code) {
            let start = code_start(code);
            let ip = (*frame).instr_ptr;
            if ip == start {
                let calls = r.profile.calls + 1;
                if r.direct.entry != 0 && !calls.is_power_of_two() {
                    r.profile.calls = calls;
                    return ember_run(tstate, frame as *mut c_void, r.direct.entry) as *mut abi::PyObject;
                }
            } else {
                let index = ip.offset_from(start) as usize;
                if index < r.direct.n_entries as usize {
                    let entry = *r.direct.entries.add(index);
                    if entry != 0 {
                        r.profile.resumes += 1;
                        return ember_resume(tstate, frame as *mut c_void, entry) as *mut abi::PyObject;
                    }
                }
            }
        }
    }
    // The common case with tier 1 on for code that is not compiled: a code
    // object without a loop that stays below the call count that compiles
    // it (wants_tier1), or one tier 1 refused. Nothing to do but count:
    // most frames of a short program (imports, start-up) are these.
    if !rec.is_null() && throwflag == 0 && (*rec).compiled.is_none() && (*rec).profile.pinned.is_none() {
        let r = &mut *rec;
        let at_start = (*frame).instr_ptr == code_start(code);
        let calls = r.profile.calls + at_start as u64;
        let compiles_at = st.settings.tier1_threshold.max(st.settings.tier1_threshold_loopless);
        if r.refusal.is_some() || (r.has_loops == Some(false) && calls < compiles_at) {
            if at_start {
                r.profile.calls = calls;
            } else {
                r.profile.resumes += 1;
            }
            return abi::_PyEval_EvalFrameDefault(tstate, frame, 0);
        }
    }
    eval_frame_slow(tstate, frame, throwflag, code, rec)
}

#[cold]
#[inline(never)]
unsafe fn eval_frame_slow(
    tstate: *mut PyThreadState,
    frame: *mut InterpreterFrame,
    throwflag: i32,
    code: *mut ffi::PyObject,
    mut rec: *mut records::CodeRecord,
) -> *mut abi::PyObject {
    let st = state();
    if rec.is_null() {
        rec = records::get_or_create(code);
        if rec.is_null() {
            st.totals.frames += 1;
            return abi::_PyEval_EvalFrameDefault(tstate, frame, throwflag);
        }
    }
    let rec = &mut *rec;
    if runs_without_evaluator(rec, &st.settings) {
        return run_import(tstate, frame, throwflag, rec);
    }
    let start = code_start(code);
    let at_start = (*frame).instr_ptr == start;
    if at_start && throwflag == 0 {
        rec.profile.calls += 1;
    } else {
        rec.profile.resumes += 1;
    }
    if throwflag == 0 && rec.profile.pinned != Some(Tier::Interpreter) {
        // Code compiled before the interpreter quickened it runs generic
        // stencils; once the interpreter has specialised it (the generic
        // stencils hand frames over when their counters trigger), compile it
        // again. Checked after a frame of it was handed over (the first
        // MAX_EAGER_RECOMPILES times: a polymorphic site makes the
        // interpreter re-specialise every ~53 executions, forever), and at
        // calls 2, 4, 8, ...: a scan of the bytecode each; and only once it
        // has run enough since it was compiled (records::recompile_due).
        // Under the default policy the hand-off is followed at a
        // resumption too: a generator called once, compiled at one of its
        // resumptions (wants_tier1), is never called again.
        let eager = records::eager_recompile_due(rec);
        let at_resumption = !at_start && throwflag == 0 && st.settings.by_policy();
        if (at_start || at_resumption) && eager
            || at_start && rec.profile.calls >= 2 && rec.profile.calls.is_power_of_two()
        {
            recompile_if_requickened(code, rec);
        }
        if rec.compiled.is_none() && rec.refusal.is_none() && wants_tier1(rec, &st.settings) {
            jit::compile_tier1(code, rec);
        }
        if rec.compiled.is_some() && jit::code_version(code) != rec.compiled_version {
            jit::retire(rec);
        }
        if let Some(c) = rec.compiled.as_deref().filter(|_| !has_local_events(code)) {
            let index = (*frame).instr_ptr.offset_from(start) as usize;
            if let Some(entry) = c.entry(index) {
                return ember_run(tstate, frame as *mut c_void, entry) as *mut abi::PyObject;
            }
        }
        if awaits_loop_work(rec, &st.settings) {
            // Its frames may then move to compiled code at a back-edge once
            // they have run long enough (osr_policy).
            jit::install_osr(code, rec);
            // The record dies with its code object, which the frame holds;
            // frames of it that this one calls update it meanwhile.
            let rec: *mut records::CodeRecord = rec;
            let outer = TIMED_CALLEES_NS;
            let outer_frame = TIMED_FRAME;
            TIMED_CALLEES_NS = 0;
            let t0 = std::time::Instant::now();
            TIMED_FRAME = Some(TimedFrame { frame, t0, own_when_moved: None });
            let result = eval_interpreted(tstate, frame, throwflag);
            let moved = TIMED_FRAME.and_then(|t| t.own_when_moved);
            TIMED_FRAME = outer_frame;
            let ns = elapsed_ns(t0);
            // A frame that moved to compiled code ran in the interpreter
            // until then only.
            let own = moved.unwrap_or_else(|| ns.saturating_sub(TIMED_CALLEES_NS));
            TIMED_CALLEES_NS = outer.saturating_add(ns);
            (*rec).interpreted_ns = (*rec).interpreted_ns.saturating_add(own);
            return result;
        }
    }
    eval_interpreted(tstate, frame, throwflag)
}

/// The check that follows a hand-off or a power-of-two call count: clear
/// the hand-off, and compile `code` again if the interpreter has specialised
/// (or despecialised) it since and a recompilation is due.
unsafe fn recompile_if_requickened(code: *mut ffi::PyObject, rec: &mut records::CodeRecord) {
    rec.handed_off = false;
    records::refresh_direct(rec);
    if let Some(c) = rec.compiled.as_deref() {
        if records::recompile_due(rec) && jit::quickening_changed(code, rec, c) {
            // Compiled once (by policy, pin or request): compile again
            // whatever the policy says now.
            jit::retire(rec);
            rec.recompiles += 1;
            jit::compile_tier1(code, rec);
        }
    }
}

/// The interpreter runs `frame`: from one of its back-edges it may go on in
/// compiled code (`osr_policy`).
#[inline(always)]
unsafe fn eval_interpreted(
    tstate: *mut PyThreadState,
    frame: *mut InterpreterFrame,
    throwflag: i32,
) -> *mut abi::PyObject {
    ember_tier1::glue::eval_interpreted(tstate as *mut c_void, frame as *mut c_void, throwflag) as *mut abi::PyObject
}

/// The innermost timed frame (`awaits_loop_work`): when it started, and its
/// own time in the interpreter if it moved to compiled code (`osr_policy`).
#[derive(Clone, Copy)]
struct TimedFrame {
    frame: *mut InterpreterFrame,
    t0: std::time::Instant,
    own_when_moved: Option<u64>,
}
static mut TIMED_FRAME: Option<TimedFrame> = None;

fn elapsed_ns(t0: std::time::Instant) -> u64 {
    u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// `frame`'s own time in the interpreter so far, if it is the innermost
/// timed frame (its callees that returned are not its own).
unsafe fn timed_own_ns(frame: *mut InterpreterFrame) -> Option<u64> {
    match TIMED_FRAME {
        Some(t) if t.frame == frame => Some(elapsed_ns(t.t0).saturating_sub(TIMED_CALLEES_NS)),
        _ => None,
    }
}

/// The time a code object's first frame must have run in the interpreter
/// before it is compiled at a back-edge (see `osr_policy`).
const OSR_FIRST_FRAME_NS: u64 = 1_000_000;

/// At a back-edge of `frame`, which the interpreter runs (tier1/csrc/osr.c;
/// while the code is not compiled, at every 16th back-edge only):
/// the compiled entry to go on in, or 0. Its code object is compiled here
/// once its frames have run as long in the interpreter as the policy asks
/// of a function with a loop (`loop_work_done`, counting the time this
/// frame has run so far): unlike at a call, the code compiled is used at
/// once, so the frame need not be a second one.
pub unsafe extern "C" fn osr_policy(_tstate: *mut c_void, frame: *mut c_void, index: u64, handed_over: i32) -> u64 {
    let frame = frame as *mut InterpreterFrame;
    let st = state();
    let code = (*frame).f_executable.as_ptr() as *mut ffi::PyObject;
    let rec = records::lookup(code);
    if rec.is_null() {
        return 0;
    }
    let rec = &mut *rec;
    if rec.profile.pinned == Some(Tier::Interpreter) || st.settings.max_tier < Tier::Baseline {
        return ember_tier1::glue::OSR_NEVER;
    }
    // With a threshold set, a frame compiled code handed over stays in the
    // interpreter, as before on-stack replacement: the interpreter then
    // sees the rest of its run, as the tests of its specialisation expect
    // (test_opcache: sites whose types change are despecialised).
    if has_local_events(code) || (handed_over != 0 && !st.settings.by_policy()) {
        return 0;
    }
    if rec.compiled.is_none() {
        if rec.refusal.is_some() {
            return ember_tier1::glue::OSR_NEVER;
        }
        if rec.profile.pinned.is_some() {
            return 0;
        }
        if st.settings.tier1_loop_work_ns_per_unit == 0 {
            return 0;
        }
        let own_so_far = timed_own_ns(frame).unwrap_or(0);
        let units = ffi::Py_SIZE(code) as u64;
        let mut wanted = st.settings.tier1_loop_work_ns_per_unit.saturating_mul(units);
        if rec.profile.calls + rec.profile.resumes <= 1 {
            // Its first frame: compiled at a back-edge only once that frame
            // runs long. The interpreter's first run of an instruction may
            // fail to specialise it for want of what later runs have (an
            // attribute stored in the loop is missing from a fresh object's
            // dict at the first call, present at the second: test_opcache's
            // STORE_ATTR_WITH_HINT); compiled code runs such an instruction
            // generic until a hand-off lets the interpreter try again, and
            // hand-offs are rationed. A frame running this long is worth it.
            wanted = wanted.max(OSR_FIRST_FRAME_NS);
        }
        if rec.interpreted_ns.saturating_add(own_so_far) < wanted || rec.interpreted_back_edges < MIN_LOOP_ITERATIONS {
            return 0;
        }
        jit::compile_tier1(code, rec);
    } else if rec.handed_off {
        // A frame of it was handed to the interpreter (this one, maybe),
        // which may have specialised what the compiled code ran generic: as
        // at a call, compile again if so. With a threshold set, at calls
        // only, as before on-stack replacement (CPython's reference-leak
        // runs, at threshold 0, otherwise saw code recompiled during their
        // first repetitions, the interpreter's caches still filling).
        if st.settings.by_policy() && records::eager_recompile_due(rec) {
            recompile_if_requickened(code, rec);
        }
    }
    if rec.compiled.is_some() && jit::code_version(code) != rec.compiled_version {
        jit::retire(rec);
    }
    let entry = match rec.compiled.as_deref() {
        Some(c) => c.entry(index as usize).unwrap_or(0),
        None => 0,
    };
    if entry != 0 {
        if let (Some(t), Some(own)) = (TIMED_FRAME.filter(|t| t.own_when_moved.is_none()), timed_own_ns(frame)) {
            TIMED_FRAME = Some(TimedFrame { own_when_moved: Some(own), ..t });
        }
    }
    entry
}

/// Time of the timed frames (`awaits_loop_work`) the current timed frame
/// called, directly or not: not its own. Under the GIL.
static mut TIMED_CALLEES_NS: u64 = 0;

/// A function with a loop that the policy would compile once its frames
/// have run long enough in the interpreter: its frames are timed.
#[inline(always)]
fn awaits_loop_work(rec: &mut records::CodeRecord, settings: &jit::Settings) -> bool {
    settings.tier1_loop_work_ns_per_unit != 0
        && settings.max_tier >= Tier::Baseline
        && rec.profile.pinned.is_none()
        && rec.compiled.is_none()
        && rec.refusal.is_none()
        && rec.profile.calls < settings.tier1_threshold_loopless
        && records::has_loops(rec)
}

/// Its frames have run, in the interpreter, for what compiling it is worth:
/// long enough, and through enough iterations of its loops. Time alone
/// counts what its calls and I/O took: start-up code that loops over a few
/// files (importlib.metadata reading entry points) ran long in few
/// iterations, and compiling it would gain nothing.
#[inline(always)]
unsafe fn loop_work_done(rec: &records::CodeRecord, settings: &jit::Settings) -> bool {
    let units = ffi::Py_SIZE(rec.code) as u64;
    rec.interpreted_ns >= settings.tier1_loop_work_ns_per_unit.saturating_mul(units)
        && rec.interpreted_back_edges >= MIN_LOOP_ITERATIONS
}

/// Back-edges a function's frames must take in the interpreter before the
/// default policy compiles it for its loops.
const MIN_LOOP_ITERATIONS: u64 = 64;

#[inline(always)]
fn wants_tier1(rec: &mut records::CodeRecord, settings: &jit::Settings) -> bool {
    match rec.profile.pinned {
        Some(t) => t >= Tier::Baseline,
        None => {
            // Under the default policy the resumptions of a generator's or
            // coroutine's frames count too: a generator called once may run
            // a program's main loop, resumed at each item, and compiled code
            // can take its frame over at any resumption (the entry table),
            // which no other running frame allows.
            let runs = if settings.by_policy() {
                rec.profile.calls + rec.profile.resumes
            } else {
                rec.profile.calls
            };
            settings.max_tier >= Tier::Baseline
                && runs >= settings.tier1_threshold
                && (rec.profile.calls >= settings.tier1_threshold_loopless
                    || (records::has_loops(rec) && unsafe { loop_work_done(rec, settings) }))
        }
    }
}

/// Set while an import runs with no evaluator installed ([`run_import`]):
/// Ember counts as installed, and is put back when the import ends.
static SUSPENDED_FOR_IMPORT: AtomicBool = AtomicBool::new(false);

/// Whether `rec`'s frames are imports that [`run_import`] runs.
#[inline(always)]
fn runs_without_evaluator(rec: &records::CodeRecord, settings: &jit::Settings) -> bool {
    rec.import_boundary && settings.by_policy()
}

/// An import of a module not yet loaded (a frame of importlib's
/// `_find_and_load`): finding the module, loading it and running its body,
/// and the imports that does, run with no evaluator installed, as in
/// CPython without Ember. An installed evaluator turns off the interpreter's
/// inlined Python-to-Python calls, and calls become C calls through it:
/// that cost, not the compiling, was most of what a short program (mostly
/// imports) lost under Ember. Code run while an import runs is neither
/// counted nor entered in compiled code (other threads' too: the evaluator
/// belongs to the interpreter): start-up code that the default policy would
/// rarely compile. Only under that policy: with a threshold set (0: every
/// function at its first call) imports are compiled like everything else.
#[cold]
#[inline(never)]
unsafe fn run_import(
    tstate: *mut PyThreadState,
    frame: *mut InterpreterFrame,
    throwflag: i32,
    rec: &mut records::CodeRecord,
) -> *mut abi::PyObject {
    if throwflag == 0 && (*frame).instr_ptr == code_start(rec.code) {
        rec.profile.calls += 1;
    } else {
        rec.profile.resumes += 1;
    }
    install(None);
    SUSPENDED_FOR_IMPORT.store(true, Ordering::Relaxed);
    let result = abi::_PyEval_EvalFrameDefault(tstate, frame, throwflag);
    // Not put back if Ember was turned off meanwhile (`disable`).
    if SUSPENDED_FOR_IMPORT.swap(false, Ordering::Relaxed) && matches!(installed_now(), Installed::Default) {
        install(Some(ember_eval_frame));
    }
    result
}

/// Turn Ember's evaluator off: what `ember.disable()` does. Whether it was on.
///
/// # Safety
/// GIL held.
pub unsafe fn uninstall_ember() -> bool {
    if SUSPENDED_FOR_IMPORT.swap(false, Ordering::Relaxed) {
        return true;
    }
    if let Installed::Ember = installed() {
        install(None);
        true
    } else {
        false
    }
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

/// Events of sys.monitoring are set on `code` alone: the interpreter runs
/// it (its instrumentation version does not show them). Code that was
/// never monitored has no monitoring data: that is checked here, without a
/// call into the glue, on every frame the evaluator enters.
#[inline(always)]
unsafe fn has_local_events(code: *mut ffi::PyObject) -> bool {
    !jit::field::<*mut c_void>(code, abi::CODE_CO_MONITORING).is_null()
        && ember_tier1::glue::has_local_events(code as *mut c_void)
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

/// Ember counts as installed while an import runs without it.
///
/// # Safety
/// GIL held.
pub unsafe fn installed() -> Installed {
    match installed_now() {
        Installed::Default if SUSPENDED_FOR_IMPORT.load(Ordering::Relaxed) => Installed::Ember,
        i => i,
    }
}

unsafe fn installed_now() -> Installed {
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
