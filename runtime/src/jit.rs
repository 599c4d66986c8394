//! Tier 1 in the runtime: when to compile, gathering what the compiler
//! needs from a code object, and resolving symbols for it.

use core::ffi::{c_char, c_void};
use std::collections::HashMap;
use std::time::Instant;

use ember_profiler::Tier;
use ember_pyabi::current as abi;
use ember_tier1::compile::{self, CodeInfo, Compiler, Refusal, Resolver, SymbolCache};
use pyo3::ffi;

use crate::records::{state, CodeRecord};

extern "C" {
    fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void;
}

/// Compilation settings, set from the EMBER* variables (config.rs).
pub struct Settings {
    /// Calls before a code object is compiled at tier 1 (0: at its first
    /// call); and, for one without a loop, at least as many as the second.
    pub tier1_threshold: u64,
    pub tier1_threshold_loopless: u64,
    /// A function with a loop is compiled between the two thresholds once
    /// its frames have run this long in the interpreter, per code unit of
    /// its bytecode (compiling costs about in proportion to its length);
    /// 0: at `tier1_threshold` whatever they ran.
    pub tier1_loop_work_ns_per_unit: u64,
    /// Highest tier the automatic policy uses (0: count only).
    pub max_tier: Tier,
    /// Executable memory compiled code may occupy; past it, compilation waits
    /// until code objects die and free theirs.
    pub code_limit: usize,
    /// Write /tmp/perf-<pid>.map entries for compiled code.
    pub perf_map: bool,
}

impl Settings {
    /// The default policy is in force: no threshold was set
    /// (`EMBER_TIER1_THRESHOLD`), which makes the loop-work rule 0.
    #[inline(always)]
    pub fn by_policy(&self) -> bool {
        self.tier1_loop_work_ns_per_unit != 0
    }
}

/// Per-process tier-1 totals.
pub struct Tier1Totals {
    pub compiled: u64,
    /// Refusals by reason (created on first use: statics cannot build a map).
    pub refused: Option<HashMap<String, u64>>,
    pub compile_ns: u64,
    /// The part of `compile_ns` spent making code executable.
    pub publish_ns: u64,
    pub code_bytes: u64,
    /// The part of `code_bytes` on the common paths (before the cold parts).
    pub hot_bytes: u64,
    pub instructions: u64,
}

struct PyResolver;

/// Stencil symbols, resolved at the first compilation.
static SYMBOLS: std::sync::OnceLock<SymbolCache> = std::sync::OnceLock::new();

/// The compiler, made at the first compilation (it resolves every stencil
/// symbol then).
static COMPILER: std::sync::OnceLock<Compiler> = std::sync::OnceLock::new();

pub(crate) fn compiler() -> &'static Compiler {
    COMPILER.get_or_init(|| Compiler::new(&PyResolver))
}

impl Resolver for PyResolver {
    fn stencil_symbol(&self, index: u16) -> Option<u64> {
        SYMBOLS.get_or_init(|| SymbolCache::new(|name| self.symbol(name))).get(index)
    }

    fn symbol(&self, name: &str) -> Option<u64> {
        if let Some(a) = ember_tier1::glue::symbol(name) {
            return Some(a);
        }
        if name == "ember_eval_frame" {
            return Some(crate::hook::ember_fn() as usize as u64);
        }
        let c = std::ffi::CString::new(name).ok()?;
        // RTLD_DEFAULT (NULL on glibc): the interpreter exports its API.
        let p = unsafe { dlsym(core::ptr::null_mut(), c.as_ptr()) };
        (!p.is_null()).then_some(p as u64)
    }

    fn small_int(&self, value: u32) -> Option<u64> {
        if value > 256 {
            return None;
        }
        // Small ints are immortal: the new reference needs no release.
        let o = unsafe { ffi::PyLong_FromLong(value as _) };
        if o.is_null() {
            unsafe { ffi::PyErr_Clear() };
            return None;
        }
        Some(o as u64)
    }

    fn binary_op(&self, oparg: u32) -> Option<u64> {
        if oparg as usize > abi::NB_OPARG_LAST {
            return None;
        }
        // The operators the interpreter never specialises for floats: tier
        // 1's functions compute floats without the generic dispatch
        // (tier1/csrc/arith.c), and hand anything else to the interpreter's.
        match oparg as usize {
            abi::NB_TRUE_DIVIDE => return self.symbol("ember_true_divide"),
            abi::NB_INPLACE_TRUE_DIVIDE => return self.symbol("ember_inplace_true_divide"),
            abi::NB_POWER => return self.symbol("ember_power"),
            abi::NB_INPLACE_POWER => return self.symbol("ember_inplace_power"),
            _ => {}
        }
        static TABLE: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
        let table = (*TABLE.get_or_init(|| self.symbol("_PyEval_BinaryOps")))? as *const u64;
        Some(unsafe { *table.add(oparg as usize) })
    }
}

/// A field of a code object, at its offset (`ember_pyabi`).
pub(crate) unsafe fn field<T: Copy>(code: *mut ffi::PyObject, off: usize) -> T {
    *((code as *const u8).add(off) as *const T)
}

/// The items of a tuple, in place.
unsafe fn tuple_items<'a>(t: *mut ffi::PyObject) -> &'a [u64] {
    let n = ffi::Py_SIZE(t).max(0) as usize;
    if n == 0 {
        return &[];
    }
    let items = (*(t as *mut ffi::PyTupleObject)).ob_item.as_ptr();
    debug_assert_eq!(*items, ffi::PyTuple_GetItem(t, 0));
    // PyObject pointers, as addresses.
    core::slice::from_raw_parts(items as *const u64, n)
}

/// The interpreter's current instrumentation version, as `tstate` sees it.
pub unsafe fn instrumentation_version(tstate: *mut c_void) -> u64 {
    let breaker = *((tstate as *const u8).add(abi::TSTATE_EVAL_BREAKER) as *const usize);
    (breaker & !abi::PY_EVAL_EVENTS_MASK) as u64
}

/// The version a code object was last instrumented (or checked) for.
pub unsafe fn code_version(code: *mut ffi::PyObject) -> u64 {
    field::<usize>(code, abi::CODE_CO_INSTRUMENTATION_VERSION) as u64
}

/// Why a code object called once or more is not compiled yet, though
/// nothing refuses it.
pub const DEFERRED_INSTRUMENTATION: &str = "instrumentation changed since it last ran (compiled at a later call)";

/// Why a code object that tier 1 would compile waits: compiled code already
/// fills `EMBER_CODE_LIMIT_MB`.
pub const DEFERRED_CODE_LIMIT: &str = "code memory limit";

/// Whether `code` is an `__init__`: objects made in a loop get their
/// attributes there, so its attribute stores add more than they replace.
unsafe fn is_initialiser(code: *mut ffi::PyObject) -> bool {
    let name: *mut ffi::PyObject = field(code, abi::CODE_CO_NAME);
    ffi::PyUnicode_CompareWithASCIIString(name, c"__init__".as_ptr()) == 0
}

/// Compile `code` at tier 1 and attach the result (or the refusal) to its
/// record. Code the interpreter has not yet brought up to the current
/// instrumentation version is left for later (no refusal recorded).
///
/// # Safety
/// GIL held; `rec` is `code`'s record.
pub unsafe fn compile_tier1(code: *mut ffi::PyObject, rec: &mut CodeRecord) {
    let version = instrumentation_version(ffi::PyThreadState_Get() as *mut c_void);
    if code_version(code) != version {
        // Monitoring or tracing changed the instrumentation since this code
        // last ran: the interpreter brings it up to date when it runs it
        // (which this call now does), and a later call compiles it.
        rec.deferred = Some(DEFERRED_INSTRUMENTATION);
        return;
    }
    rec.deferred = None;
    if ember_tier1::jitmem::mapped_bytes() >= state().settings.code_limit {
        // Not a refusal of this code: it may compile once memory is freed.
        rec.deferred = Some(DEFERRED_CODE_LIMIT);
        *state().tier1.refused.get_or_insert_with(HashMap::new).entry(DEFERRED_CODE_LIMIT.into()).or_default() += 1;
        return;
    }
    let start = Instant::now();
    let n_units = ffi::Py_SIZE(code) as usize;
    let bytecode_ptr = (code as *mut u8).add(abi::CODE_CO_CODE_ADAPTIVE) as *const u16;
    let consts = tuple_items(field(code, abi::CODE_CO_CONSTS));
    let names = tuple_items(field(code, abi::CODE_CO_NAMES));
    let lpnames = tuple_items(field(code, abi::CODE_CO_LOCALSPLUSNAMES));
    let linetable = {
        let table: *mut ffi::PyObject = field(code, abi::CODE_CO_LINETABLE);
        core::slice::from_raw_parts(ffi::PyBytes_AsString(table) as *const u8, ffi::PyBytes_Size(table) as usize)
    };
    let seen = bytecode_seen(code, rec, core::slice::from_raw_parts(bytecode_ptr, n_units));
    let info = CodeInfo {
        code_object: code as u64,
        bytecode: &seen,
        bytecode_addr: bytecode_ptr as u64,
        consts,
        names,
        localsplusnames: lpnames,
        instrumentation_version: version,
        linetable,
        first_line: field(code, abi::CODE_CO_FIRSTLINENO),
        // The record is boxed and outlives its compiled code (retired code too).
        back_edge_counter: core::ptr::addr_of_mut!(rec.profile.back_edges) as u64,
        adds_attributes: is_initialiser(code),
    };
    let result = compiler().compile(&info);
    let elapsed = start.elapsed().as_nanos() as u64;
    let totals = &mut state().tier1;
    match result {
        Ok(c) => {
            totals.compiled += 1;
            totals.compile_ns += elapsed;
            totals.publish_ns += c.publish_ns;
            totals.code_bytes += c.code_bytes as u64;
            totals.hot_bytes += c.cold_offset as u64;
            totals.instructions += c.n_instructions as u64;
            rec.compile_ns = elapsed;
            rec.tier1_compiles += 1;
            rec.tier1_compile_ns_total += elapsed;
            rec.profile.tier = Some(Tier::Baseline);
            rec.compiled_version = version;
            rec.work_at_compile = rec.profile.calls + rec.profile.back_edges;
            let frames_run = rec.profile.calls + rec.profile.resumes;
            rec.long_frames = rec.interpreted_ns >= crate::records::LONG_FRAME_NS.saturating_mul(frames_run.max(1));
            if state().settings.perf_map {
                perf_map_add(code, &c);
            }
            (rec.entries, rec.n_entries) = c.entry_table();
            rec.compiled = Some(Box::new(c));
            crate::records::refresh_direct(rec);
            // Frames of it that the interpreter runs (handed over) may come
            // back at a back-edge; and instrumenting it for events set on it
            // alone drops the entries, which tells its running frames.
            if crate::records::has_loops(rec) {
                install_osr(code, rec);
            }
        }
        Err(why) => {
            *totals.refused.get_or_insert_with(HashMap::new).entry(refusal_key(&why)).or_default() += 1;
            rec.refusal = Some(why);
        }
    }
}

/// Put on-stack-replacement entries at `code`'s back-edges, once
/// (tier1/csrc/osr.c).
///
/// # Safety
/// GIL held; `rec` is `code`'s record.
pub unsafe fn install_osr(code: *mut ffi::PyObject, rec: &mut CodeRecord) {
    if rec.osr_installed {
        return;
    }
    rec.osr_installed = true;
    let back_edges = match rec.back_edges.take() {
        Some(found) => found,
        None => ember_pyabi::opcodes::scan_loops(crate::records::code_units(code)).back_edges.into_boxed_slice(),
    };
    if ember_tier1::glue::osr_install(code as *mut c_void, &back_edges) < 0 {
        ffi::PyErr_Clear();
    }
}

/// Whether the interpreter has specialised (or despecialised) instructions
/// of `code` since `c` was compiled from it.
///
/// # Safety
/// GIL held; `c` was compiled from `code`.
pub unsafe fn quickening_changed(
    code: *mut ffi::PyObject,
    rec: &CodeRecord,
    c: &ember_tier1::compile::Compiled,
) -> bool {
    let n_units = ffi::Py_SIZE(code) as usize;
    let bytecode = (code as *mut u8).add(abi::CODE_CO_CODE_ADAPTIVE) as *const u16;
    compile::opcode_signature(&bytecode_seen(code, rec, core::slice::from_raw_parts(bytecode, n_units)))
        != c.opcode_signature
}

/// `code`'s quickened bytecode as the compiler reads it: without the
/// on-stack-replacement entries at its back-edges (tier1/csrc/osr.c).
unsafe fn bytecode_seen<'a>(code: *mut ffi::PyObject, rec: &CodeRecord, units: &'a [u16]) -> std::borrow::Cow<'a, [u16]> {
    if !rec.osr_installed {
        return std::borrow::Cow::Borrowed(units);
    }
    let mut copy = units.to_vec();
    ember_tier1::glue::osr_see_through(code as *mut c_void, &mut copy);
    std::borrow::Cow::Owned(copy)
}

/// Monitoring or tracing re-instrumented `code` since it was compiled: stop
/// entering its compiled code (frames still running it hand themselves to
/// the interpreter at their next check) and allow a recompile once the code
/// is clean again.
pub fn retire(rec: &mut CodeRecord) {
    if let Some(c) = rec.compiled.take() {
        rec.entries = core::ptr::null();
        rec.n_entries = 0;
        crate::records::refresh_direct(rec);
        rec.retired.push(c);
        rec.profile.tier = Some(Tier::Interpreter);
    }
}

/// Refusals grouped for the stats: the kind, and the opcode when unsupported.
pub fn refusal_key(r: &Refusal) -> String {
    match r {
        Refusal::Malformed(_) => "malformed".into(),
        Refusal::Memory(_) => "memory".into(),
        other => other.to_string(),
    }
}

/// Append a line for `c` to /tmp/perf-<pid>.map, the format Linux perf reads
/// for JIT code: `START SIZE NAME`, hexadecimal without 0x. Opened per
/// process id, so a forked child writes its own map.
unsafe fn perf_map_add(code: *mut ffi::PyObject, c: &ember_tier1::compile::Compiled) {
    use std::io::Write;
    let qualname = {
        let q = ffi::PyObject_GetAttrString(code, c"co_qualname".as_ptr());
        let name = if q.is_null() { std::ptr::null() } else { ffi::PyUnicode_AsUTF8(q) };
        let s = if name.is_null() {
            ffi::PyErr_Clear();
            "?".to_string()
        } else {
            core::ffi::CStr::from_ptr(name).to_string_lossy().into_owned()
        };
        if !q.is_null() {
            ffi::Py_DecRef(q);
        }
        s
    };
    let path = format!("/tmp/perf-{}.map", std::process::id());
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(&path) {
        let _ = writeln!(f, "{:x} {:x} py::{}:ember-t1", c.addr(), c.code_bytes, qualname);
    }
}
