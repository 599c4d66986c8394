//! One `CodeRecord` per code object, found through a side table keyed by the
//! code object's address and freed when a code watcher reports the code
//! object's destruction.
//!
//! Not `co_extra`: CPython 3.14 treats a code object that carries any
//! `co_extra` data as stateful (`_PyCode_CheckNoInternalState`), so
//! subinterpreters would refuse to share functions they share without Ember.
//!
//! All of this state is touched only with the GIL held (the frame evaluator,
//! the code watcher and the Python API all run under it), which is what makes
//! the unsynchronised access below sound.

use core::cell::UnsafeCell;
use core::ptr;

use ember_profiler::{CodeProfile, GlobalCounters, PtrMap, Tier};

use crate::jit::{Settings, Tier1Totals};
use ember_pyabi::current as abi;
use pyo3::ffi;

/// What a call from compiled code needs to enter a compiled callee without
/// the evaluator (tier1/csrc/glue.h, `ember_direct_enterable`, reads it; C layout).
#[repr(C)]
pub struct DirectEntry {
    /// The compiled entry at the first instruction when the evaluator would
    /// enter it on a call with nothing to decide (see [`refresh_direct`]),
    /// else 0.
    pub entry: u64,
    /// The instrumentation version `entry` is valid for.
    pub version: u64,
    /// The record's `profile.calls`.
    pub calls: *mut u64,
    /// The entry table when the evaluator would enter the compiled code at
    /// all (compiled, not pinned to the interpreter), else null; its length.
    pub entries: *const u64,
    pub n_entries: u64,
    /// The record's `profile.resumes`.
    pub resumes: *mut u64,
    /// The record's `interpreted_back_edges`.
    pub interpreted_back_edges: *mut u64,
}

/// `direct` kept first, for C; the fields in the order written.
#[repr(C)]
pub struct CodeRecord {
    pub direct: DirectEntry,
    /// Borrowed: the record dies with its code object.
    pub code: *mut ffi::PyObject,
    // The two fields the evaluator reads first for every frame, next to the
    // others its common paths read (`direct`, `profile`, `compiled`): the
    // record's first cache lines, not its last (perf: the record's load was
    // a fifth of the evaluator's own time in a short program).
    /// importlib's `_find_and_load`: its frames run with no evaluator
    /// installed (see hook.rs, run_import).
    pub import_boundary: bool,
    /// Whether its bytecode has a loop (computed when first needed).
    pub has_loops: Option<bool>,
    pub profile: CodeProfile,
    /// Tier-1 code; freed with the record, which outlives every frame
    /// running it (a frame holds its code object).
    pub compiled: Option<Box<ember_tier1::compile::Compiled>>,
    /// `compiled`'s entry table and its length, for the evaluator's fast
    /// path; null exactly when `compiled` is None (kept so by `jit`).
    pub entries: *const u64,
    pub n_entries: usize,
    /// Why tier 1 would not compile this code object.
    pub refusal: Option<ember_tier1::compile::Refusal>,
    /// Why it is not compiled yet, when it may be later.
    pub deferred: Option<&'static str>,
    pub compile_ns: u64,
    /// Instrumentation version `compiled` is valid for.
    pub compiled_version: u64,
    /// Compiled code replaced after re-instrumentation; kept until the code
    /// object dies, since frames may still be running it.
    pub retired: Vec<Box<ember_tier1::compile::Compiled>>,
    /// Times compiled again because the interpreter specialised it since.
    pub recompiles: u64,
    /// A frame of it was handed to the interpreter, which may have
    /// specialised it: check at the next call.
    pub handed_off: bool,
    /// Frames handed from tier-1 code to the interpreter (tier 1's deopts:
    /// a failed guard, an adaptive counter that triggered, or
    /// instrumentation switched on).
    pub handoffs: u64,
    /// Of them, those allowed for `retry::HOPELESS` (see `may_respecialise`).
    pub hopeless_handoffs: u64,
    /// Times its compiled code did not hand a frame over for the interpreter
    /// to specialise an instruction again (`may_respecialise`).
    pub respecialisations_declined: u64,
    /// Its frames ran for `LONG_FRAME_NS` or more on average in the
    /// interpreter before it was compiled (set when it is compiled).
    pub long_frames: bool,
    /// Its `JUMP_BACKWARD`s (code unit, full oparg), found with `has_loops`
    /// and kept until its on-stack-replacement entries are put.
    pub back_edges: Option<Box<[(u32, u32)]>>,
    /// Time its frames ran in the interpreter (callees included) while it
    /// was waiting to be compiled (`jit::Settings::tier1_loop_work_ns_per_unit`).
    pub interpreted_ns: u64,
    /// Back-edges its frames took in the interpreter while it had no
    /// compiled entries, as the on-stack-replacement entries see them
    /// (tier1/csrc/osr.c counts them, EMBER_OSR_CHECK_EVERY at a time;
    /// from its first timed frame, when the entries are put).
    pub interpreted_back_edges: u64,
    /// Its back-edges have on-stack-replacement entries (tier1/csrc/osr.c;
    /// put once, when its frames are first timed).
    pub osr_installed: bool,
    /// `profile.calls + profile.back_edges` when last compiled.
    pub work_at_compile: u64,
    /// Tier-1 compilations of it (recompilations included) and their time.
    pub tier1_compiles: u64,
    pub tier1_compile_ns_total: u64,
    /// Position in `State::records`, for O(1) removal.
    registry_index: usize,
}

pub struct State {
    /// Code object address -> its record.
    pub by_code: PtrMap<*mut CodeRecord>,
    /// Code watcher id from `PyCode_AddWatcher`, or -1 before import.
    pub watcher: i32,
    /// Every live record, in creation order (what `ember.stats()` lists).
    pub records: Vec<*mut CodeRecord>,
    pub totals: GlobalCounters,
    pub settings: Settings,
    pub tier1: Tier1Totals,
    /// Hand-offs to the interpreter, freed records' included.
    pub totals_handoffs: u64,
    /// `respecialisations_declined`, freed records' included.
    pub totals_respecialisations_declined: u64,
    /// Counters of freed records, kept for the totals.
    pub freed: FreedCounts,
}

/// What freed records had counted (the totals of `ember.stats()` include them).
pub struct FreedCounts {
    pub calls: u64,
    pub resumes: u64,
    pub back_edges: u64,
    /// Freed code objects by the tier they were at when they died.
    pub by_tier: [u64; 3],
    /// Freed code objects that had tier-1 code at some point.
    pub compiled_tier1: u64,
    /// Freed code objects never compiled, by the reason they stayed in the
    /// interpreter (refusal or deferral; none: not hot enough).
    pub reasons: Option<std::collections::HashMap<String, u64>>,
}

impl CodeRecord {
    /// Why this code runs in the interpreter, if something kept it there.
    pub fn interpreter_reason(&self) -> Option<String> {
        match (&self.refusal, self.deferred) {
            (Some(r), _) => Some(r.to_string()),
            (None, Some(why)) if self.compiled.is_none() => Some(why.to_string()),
            _ => None,
        }
    }
}

pub struct GilCell<T>(UnsafeCell<T>);
// SAFETY: accessed only with the GIL held (see the module comment).
unsafe impl<T> Sync for GilCell<T> {}

pub static STATE: GilCell<State> = GilCell(UnsafeCell::new(State {
    by_code: PtrMap::new(ptr::null_mut()),
    watcher: -1,
    records: Vec::new(),
    totals: GlobalCounters { frames: 0, code_objects_seen: 0, code_objects_freed: 0 },
    settings: Settings { tier1_threshold: 2, tier1_threshold_loopless: 256, tier1_loop_work_ns_per_unit: 0, max_tier: Tier::Interpreter, code_limit: 512 << 20, perf_map: false },
    tier1: Tier1Totals { compiled: 0, refused: None, compile_ns: 0, publish_ns: 0, code_bytes: 0, hot_bytes: 0, instructions: 0 },
    totals_handoffs: 0,
    totals_respecialisations_declined: 0,
    freed: FreedCounts { calls: 0, resumes: 0, back_edges: 0, by_tier: [0; 3], compiled_tier1: 0, reasons: None },
}));

/// # Safety
/// The caller holds the GIL and keeps no other reference to the state alive.
#[inline(always)]
#[allow(clippy::mut_from_ref)]
pub unsafe fn state() -> &'static mut State {
    &mut *STATE.0.get()
}

/// Show compiled code the current table of records (after an insertion,
/// which may have moved it).
///
/// # Safety
/// GIL held.
pub unsafe fn publish_records() {
    let raw = state().by_code.raw();
    ember_tier1::glue::set_records(raw.slots as *const core::ffi::c_void, raw.mask, raw.shift);
}

/// Recompute `rec.direct` after anything it depends on changed: entered
/// directly exactly when the evaluator's common path would enter the
/// compiled code at a call (runtime/src/hook.rs): compiled, not pinned to
/// the interpreter, no recompilation check due after a hand-off; and its
/// entry table exactly when the evaluator would resume a frame in it (under
/// the default policy, not while such a check is due either). (The
/// call count and the instrumentation version are checked each time.)
pub fn refresh_direct(rec: &mut CodeRecord) {
    let enterable = !rec.entries.is_null() && rec.profile.pinned != Some(Tier::Interpreter);
    let eager = eager_recompile_due(rec);
    // Under the default policy the evaluator checks for a recompilation at
    // a resumption too (hook.rs, eval_frame_slow): resumptions go through it
    // until then, or a generator that is never called again would not be.
    // SAFETY: the records are only touched under the GIL.
    let by_policy = unsafe { state() }.settings.by_policy();
    let resumable = enterable && !(eager && by_policy);
    (rec.direct.entries, rec.direct.n_entries) =
        if resumable { (rec.entries, rec.n_entries as u64) } else { (ptr::null(), 0) };
    rec.direct.entry = if enterable && !eager {
        // SAFETY: a non-null entry table has an entry per code unit, and a
        // code object has at least one.
        unsafe { *rec.entries }
    } else {
        0
    };
    rec.direct.version = rec.compiled_version;
}

/// Recompilations prompted by hand-offs, per code object; later ones wait
/// for the next power-of-two call count.
pub const MAX_EAGER_RECOMPILES: u64 = 8;

/// A frame of `rec` was handed over since the last check, and the
/// recompilations that prompts are not used up: the evaluator checks
/// whether to compile again before entering compiled code.
pub fn eager_recompile_due(rec: &CodeRecord) -> bool {
    rec.handed_off && rec.recompiles < MAX_EAGER_RECOMPILES
}

/// Recompilations of a code object (to pick up the interpreter's newer
/// specialisations) made as soon as they are found due: the first ones
/// follow the interpreter's first specialisations of code compiled early
/// (threshold 0, a pin) and its re-specialisations after a change of types.
const FREE_RECOMPILES: u64 = 2;
/// Later ones wait until the code object has run this many calls plus loop
/// iterations since it was last compiled, doubled with each recompilation
/// up to 16 times. Recompiling costs as much as compiling: in short
/// programs, recompiling whatever had changed at once took most of tier 1's
/// compile time (richards, one cold run: 18 of 25 ms).
const RECOMPILE_WORK: u64 = 256;

/// Whether `rec` may be compiled again now.
pub fn recompile_due(rec: &CodeRecord) -> bool {
    if rec.recompiles < FREE_RECOMPILES {
        return true;
    }
    let work = (rec.profile.calls + rec.profile.back_edges).saturating_sub(rec.work_at_compile);
    work >= RECOMPILE_WORK << (rec.recompiles - FREE_RECOMPILES).min(4)
}

/// The record already made for `code`, without creating one (null if none):
/// the evaluator's common path.
///
/// # Safety
/// GIL held.
#[inline(always)]
pub unsafe fn lookup(code: *mut ffi::PyObject) -> *mut CodeRecord {
    state().by_code.get(code as usize)
}

/// Whether `code` is importlib's `_find_and_load`, which runs every import
/// of a module not yet loaded: finding, loading and executing its body.
unsafe fn is_import_boundary(code: *mut ffi::PyObject) -> bool {
    let name: *mut ffi::PyObject = crate::jit::field(code, abi::CODE_CO_QUALNAME);
    let file: *mut ffi::PyObject = crate::jit::field(code, abi::CODE_CO_FILENAME);
    ffi::PyUnicode_CompareWithASCIIString(name, c"_find_and_load".as_ptr()) == 0
        && ffi::PyUnicode_CompareWithASCIIString(file, c"<frozen importlib._bootstrap>".as_ptr()) == 0
        // For measuring what running imports without the evaluator saves.
        && std::env::var("EMBER_DEV_HOOKED_IMPORTS").as_deref() != Ok("1")
}

/// The record of `code`, created on first use.
///
/// # Safety
/// GIL held; `code` is a live code object.
pub unsafe fn get_or_create(code: *mut ffi::PyObject) -> *mut CodeRecord {
    let st = state();
    let found = st.by_code.get(code as usize);
    if !found.is_null() {
        return found;
    }
    let rec = Box::into_raw(Box::new(CodeRecord {
        direct: DirectEntry {
            entry: 0,
            version: 0,
            calls: ptr::null_mut(),
            entries: ptr::null(),
            n_entries: 0,
            resumes: ptr::null_mut(),
            interpreted_back_edges: ptr::null_mut(),
        },
        code,
        profile: CodeProfile::default(),
        compiled: None,
        refusal: None,
        deferred: None,
        compile_ns: 0,
        compiled_version: 0,
        entries: core::ptr::null(),
        n_entries: 0,
        retired: Vec::new(),
        recompiles: 0,
        handed_off: false,
        handoffs: 0,
        hopeless_handoffs: 0,
        respecialisations_declined: 0,
        has_loops: None,
        back_edges: None,
        import_boundary: is_import_boundary(code),
        long_frames: false,
        interpreted_ns: 0,
        interpreted_back_edges: 0,
        osr_installed: false,
        work_at_compile: 0,
        tier1_compiles: 0,
        tier1_compile_ns_total: 0,
        registry_index: st.records.len(),
    }));
    (*rec).direct.calls = ptr::addr_of_mut!((*rec).profile.calls);
    (*rec).direct.resumes = ptr::addr_of_mut!((*rec).profile.resumes);
    (*rec).direct.interpreted_back_edges = ptr::addr_of_mut!((*rec).interpreted_back_edges);
    st.by_code.insert(code as usize, rec);
    publish_records();
    st.records.push(rec);
    st.totals.code_objects_seen += 1;
    rec
}

/// The code watcher: frees a code object's record as the code object dies.
/// CPython calls it for every code object of the interpreter, created or
/// destroyed; those Ember never ran are not in the table.
pub unsafe extern "C" fn code_watcher(event: i32, code: *mut abi::PyObject) -> i32 {
    if event != abi::PY_CODE_EVENT_DESTROY {
        return 0;
    }
    let st = state();
    // Most code objects die without a record (at exit, thousands, one after
    // another): the map's filter, which stays in cache where its slots do
    // not, sends nearly all of them back.
    if !st.by_code.may_contain(code as usize) {
        return 0;
    }
    let Some(p) = st.by_code.remove(code as usize) else {
        return 0;
    };
    let rec = Box::from_raw(p);
    let i = rec.registry_index;
    let last = st.records.pop().expect("record registry out of step");
    if i < st.records.len() {
        st.records[i] = last;
        (*last).registry_index = i;
    }
    st.totals.code_objects_freed += 1;
    // Frames are counted per record; keep the freed ones in the total.
    st.totals.frames += rec.profile.calls + rec.profile.resumes;
    st.freed.calls += rec.profile.calls;
    st.freed.resumes += rec.profile.resumes;
    st.freed.back_edges += rec.profile.back_edges;
    st.freed.by_tier[rec.profile.current_tier().number() as usize] += 1;
    if rec.tier1_compiles > 0 {
        st.freed.compiled_tier1 += 1;
    } else if let Some(why) = rec.interpreter_reason() {
        *st.freed.reasons.get_or_insert_with(Default::default).entry(why).or_default() += 1;
    }
    0
}

/// Hand-offs a code object with a loop may always make to have the interpreter
/// try again to specialise an instruction whose last attempts failed; past
/// them, one per `RESPECIALISE_CALLS_PER_HANDOFF` frames run (calls and
/// resumes). An instruction whose attempts have failed so often in a row
/// that CPython likely does not specialise its operands (`retry::HOPELESS`:
/// a float `**` in nbody's loop, whose function runs once per iteration)
/// gets one free hand-off of its own (`RESPECIALISE_FREE_HOPELESS_HANDOFFS`),
/// whatever other hand-offs the code made: with 8 in all, each of a
/// program's first 8 runs of such a loop went mostly to the interpreter.
/// Not none: the failures may have come from a passing state (test_opcache's
/// `test_store_attr_with_hint` stores a new attribute into each object in
/// the first call, an existing one from the second on, which specialises).
const RESPECIALISE_FREE_HANDOFFS: u64 = 8;
/// The same for re-specialising an instruction whose guard keeps failing.
/// The interpreter re-specialises such an instruction after every ~53
/// misses; at a polymorphic site that would hand a frame to the interpreter
/// as often, each time leaving it the rest of the frame, and tier 1 would
/// recompile for each new specialisation. One: a function called once per
/// long loop (richards' `schedule`, over four task classes) loses a whole
/// run of its loop to each hand-off (with 8, its first 8 compiled calls ran
/// mostly in the interpreter).
const RESPECIALISE_FREE_MISS_HANDOFFS: u64 = 1;
const RESPECIALISE_FREE_HOPELESS_HANDOFFS: u64 = 1;
const RESPECIALISE_CALLS_PER_HANDOFF: u64 = 256;
/// Frames that ran this long in the interpreter, on average, before their
/// code was compiled are long (`CodeRecord::long_frames`): a hand-off gives
/// the interpreter a loop that runs for tens of milliseconds or more
/// (nbody's `advance`, one call per benchmark iteration: the second call
/// lost its loop to a LOAD_GLOBAL run once per call, the third to a float
/// `**`), so such code gets no free hand-offs, only the budget of one per
/// `RESPECIALISE_CALLS_PER_HANDOFF` frames. Well above what tests of
/// specialisation run per call (test_opcache's `test_store_attr_with_hint`
/// needs its free hand-off, and failed at 1 ms on a loaded machine).
pub const LONG_FRAME_NS: u64 = 20_000_000;

/// Whether the record's code object has a loop (scanned once). Under the
/// default policy the scan also keeps its back-edges, where
/// [`crate::jit::install_osr`] puts its entries when its first frame runs
/// (one walk over the bytecode rather than two).
pub fn has_loops(rec: &mut CodeRecord) -> bool {
    if let Some(known) = rec.has_loops {
        return known;
    }
    // SAFETY: a record's code object is alive (the record dies with it).
    let found = unsafe { ember_pyabi::opcodes::scan_loops(code_units(rec.code)) };
    rec.has_loops = Some(found.has_loops);
    // SAFETY: the records are only touched under the GIL.
    if !found.back_edges.is_empty() && unsafe { state() }.settings.by_policy() {
        rec.back_edges = Some(found.back_edges.into_boxed_slice());
    }
    found.has_loops
}

/// `code`'s code units, from its first (quickened as the interpreter runs
/// them).
///
/// # Safety
/// GIL held; `code` is a live code object, and the slice is not kept past
/// a point where it may die.
pub unsafe fn code_units<'a>(code: *mut ffi::PyObject) -> &'a [u16] {
    let n_units = ffi::Py_SIZE(code) as usize;
    core::slice::from_raw_parts((code as *const u8).add(abi::CODE_CO_CODE_ADAPTIVE) as *const u16, n_units)
}

/// Tier 1's re-specialisation policy (see
/// `ember_tier1::glue::set_respecialise_policy`): 1 to hand the frame over.
pub unsafe extern "C" fn may_respecialise(code: *mut core::ffi::c_void, why: i32) -> i32 {
    use ember_tier1::glue::retry;
    let rec = lookup(code as *mut ffi::PyObject);
    if rec.is_null() {
        return 1;
    }
    let rec = &mut *rec;
    // Without a loop a frame cannot run long: handing the rest of it to
    // the interpreter costs little, and the interpreter's re-specialisation
    // follows the types a site sees in phases.
    if !has_loops(rec) {
        return 1;
    }
    let frames = rec.profile.calls + rec.profile.resumes;
    let allowed = match why {
        _ if rec.long_frames => (rec.handoffs + 1).saturating_mul(RESPECIALISE_CALLS_PER_HANDOFF) <= frames,
        retry::FIRST => true,
        retry::HOPELESS => {
            let allowed = rec.hopeless_handoffs < RESPECIALISE_FREE_HOPELESS_HANDOFFS
                || (rec.handoffs + 1).saturating_mul(RESPECIALISE_CALLS_PER_HANDOFF) <= frames;
            rec.hopeless_handoffs += allowed as u64;
            allowed
        }
        _ => {
            let free = if why == retry::MISS { RESPECIALISE_FREE_MISS_HANDOFFS } else { RESPECIALISE_FREE_HANDOFFS };
            rec.handoffs < free || rec.handoffs.saturating_mul(RESPECIALISE_CALLS_PER_HANDOFF) < frames
        }
    };
    if allowed {
        return 1;
    }
    rec.respecialisations_declined += 1;
    state().totals_respecialisations_declined += 1;
    0
}

/// Tier 1's hand-off observer (see `ember_tier1::glue::set_handoff_observer`).
pub unsafe extern "C" fn note_handoff(code: *mut core::ffi::c_void) {
    let rec = lookup(code as *mut ffi::PyObject);
    if !rec.is_null() {
        (*rec).handed_off = true;
        refresh_direct(&mut *rec);
        (*rec).handoffs += 1;
        state().totals_handoffs += 1;
    }
}
