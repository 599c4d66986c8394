"""The benchmark configurations, and what every benchmark process does with them.

This directory (benches/site) is put first on PYTHONPATH of every process the
runner starts, pyperf's workers included. Its sitecustomize.py calls
``startup()``, which applies the configuration named by ``EBENCH_CONFIG``;
``Hook`` is a pyperf hook (entry point in ebench_hook-1.0.dist-info) that
writes ``facts()`` into each worker's pyperf metadata, so that the runner can
check that the configuration really was active where the timing was taken.

The runner's variables use the prefix EBENCH_, not EMBER*: Ember rejects any
environment variable starting with "EMBER" that it does not know, and then
stays off.
"""

from __future__ import annotations

import os
import sys

ENV_CONFIG = "EBENCH_CONFIG"


class Config:
    """One configuration (a plain class: sitecustomize imports this module in
    every process, so it keeps start-up imports minimal for cold runs)."""

    def __init__(self, env=None, setup=None, expect=None, expect_warm=None,
                 warmup_s=0.0, description=""):
        #: Environment variables of every process of this configuration.
        self.env = dict(env or {})
        #: What sitecustomize does at start-up: None, "passthrough" or "cinderx".
        self.setup = setup
        #: Facts every process must show after running the benchmark (see
        #: facts()): a value, or ">0".
        self.expect = dict(expect or {})
        #: Facts a steady-state worker must show in addition, after its warm-up.
        self.expect_warm = dict(expect_warm or {})
        #: Minimum warm-up per steady-state worker, in seconds.
        self.warmup_s = warmup_s
        self.description = description


# One line per configuration: Config(env, setup, expect, expect_warm, warmup_s, description).
# Expected facts (see facts()): a value, or ">0". A later tier is one more line.
CONFIGS: dict[str, Config] = {
    "interp":      Config({}, None, {"evaluator": "default", "pyjit": 0}, {}, 0.0,
                          "stock CPython 3.14 interpreter, no PEP 523 evaluator"),
    "passthrough": Config({}, "passthrough", {"evaluator": "passthrough", "pyjit": 0}, {}, 0.0,
                          "ember._ember._install_passthrough(): an empty PEP 523 evaluator (floor cost of any PEP 523 user)"),
    "ember":       Config({"EMBER": "1"}, None, {"evaluator": "ember", "ember_enabled": 1, "pyjit": 0},
                          {"ember_code_objects_seen": ">0"}, 0.0,
                          "EMBER=1: Ember with its default settings"),
    "ember-t0":    Config({"EMBER": "1", "EMBER_MAX_TIER": "0"}, None, {"evaluator": "ember", "ember_enabled": 1, "pyjit": 0},
                          {"ember_code_objects_seen": ">0", "ember_tier1": 0}, 0.0,
                          "EMBER=1 EMBER_MAX_TIER=0: Ember's hook counting only (tier 0)"),
    "ember-t1":    Config({"EMBER": "1", "EMBER_MAX_TIER": "1"}, None, {"evaluator": "ember", "ember_enabled": 1, "pyjit": 0},
                          {"ember_tier1_compiled": ">0"}, 0.0,
                          "EMBER=1 EMBER_MAX_TIER=1: up to tier 1 (copy-and-patch), default threshold"),
    "ember-t1-eager": Config({"EMBER": "1", "EMBER_TIER1_THRESHOLD": "0"}, None,
                          {"evaluator": "ember", "ember_enabled": 1, "pyjit": 0},
                          {"ember_tier1_compiled": ">0"}, 0.0,
                          "EMBER=1 EMBER_TIER1_THRESHOLD=0: every function compiled at tier 1 at its first call"),
    "pyjit":       Config({"PYTHON_JIT": "1"}, None, {"evaluator": "default", "pyjit": 1},
                          {"pyjit_executors": ">0"}, 0.0,
                          "PYTHON_JIT=1: CPython's own experimental copy-and-patch JIT"),
    "cinderx":     Config({}, "cinderx", {"cinderx_enabled": 1, "pyjit": 0},
                          {"cinderx_compiled": ">0"}, 1.0,
                          "import cinderx.jit; cinderx.jit.auto() (compiles after 1000 calls, in the background)"),
}


def config(name: str) -> Config:
    try:
        return CONFIGS[name]
    except KeyError:
        raise KeyError(f"unknown configuration {name!r} (known: {', '.join(CONFIGS)})") from None


# --- start-up (sitecustomize) ------------------------------------------------

def startup() -> None:
    """Apply the configuration named by EBENCH_CONFIG. On any failure, say so and
    end the process with exit code 3: a benchmark must never run silently in
    the wrong configuration."""
    name = os.environ.get(ENV_CONFIG)
    if not name:
        return
    try:
        cfg = config(name)
        if cfg.setup == "passthrough":
            from ember import _ember
            _ember._install_passthrough()
        elif cfg.setup == "cinderx":
            import cinderx
            import cinderx.jit
            if not cinderx.jit.is_available():
                raise RuntimeError(f"cinderx.jit is not available: {cinderx.get_import_error()!r}")
            cinderx.jit.auto()
            if not cinderx.jit.is_enabled():
                raise RuntimeError("cinderx.jit.auto() left the JIT disabled")
        elif cfg.setup is not None:
            raise ValueError(f"unknown setup {cfg.setup!r}")
        for var, value in cfg.env.items():
            if os.environ.get(var) != value:
                raise RuntimeError(f"{var} should be {value!r} in this process, is {os.environ.get(var)!r}")
    except BaseException as e:  # noqa: BLE001 - anything here must stop the process
        sys.stderr.write(f"ebench: cannot apply configuration {name!r} in pid {os.getpid()}: "
                         f"{type(e).__name__}: {e}\n")
        sys.stderr.flush()
        os._exit(3)


# --- what is active now ------------------------------------------------------

def _eval_frame_function() -> str:
    """Which PEP 523 evaluator the interpreter uses: default, ember, passthrough,
    cinderx or other:0x...; read from CPython itself, so it does not trust any
    JIT's own report."""
    import ctypes

    api = ctypes.pythonapi
    api.PyInterpreterState_Get.restype = ctypes.c_void_p
    get = api._PyInterpreterState_GetEvalFrameFunc
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.c_void_p]
    cur = get(api.PyInterpreterState_Get())
    default = ctypes.cast(api._PyEval_EvalFrameDefault, ctypes.c_void_p).value
    if not cur or cur == default:
        return "default"
    emb = sys.modules.get("ember._ember")
    if emb is not None and emb._installed() in ("ember", "passthrough"):
        return emb._installed()
    cx = sys.modules.get("cinderx")
    if cx is not None and getattr(cx, "is_frame_evaluator_installed", lambda: False)():
        return "cinderx"
    return f"other:{cur:#x}"


def _all_codes():
    """Code objects of every live Python function, nested code included."""
    import gc
    import types

    seen, stack = set(), [f.__code__ for f in gc.get_objects() if isinstance(f, types.FunctionType)]
    while stack:
        code = stack.pop()
        if id(code) in seen:
            continue
        seen.add(id(code))
        yield code
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))


def _pyjit_executors() -> int:
    """ENTER_EXECUTOR instructions (CPython JIT traces attached) in all live code."""
    import dis

    op = dis.opmap.get("ENTER_EXECUTOR")
    n = 0
    for code in _all_codes():
        raw = code._co_code_adaptive
        n += sum(1 for i in range(0, len(raw), 2) if raw[i] == op)
    return n


def facts() -> dict:
    """What this process runs with, as flat str/int values (pyperf metadata)."""
    f = {"config": os.environ.get(ENV_CONFIG, "(none)"), "pid": os.getpid(),
         "evaluator": _eval_frame_function()}
    jit = getattr(sys, "_jit", None)
    f["pyjit"] = int(bool(jit is not None and jit.is_enabled()))
    if f["pyjit"]:
        f["pyjit_executors"] = _pyjit_executors()
    cxjit = sys.modules.get("cinderx.jit")
    if cxjit is not None:
        f["cinderx_enabled"] = int(cxjit.is_enabled())
        f["cinderx_compiled"] = len(cxjit.get_compiled_functions())
    # The extension, not the package: the EMBER=1 autoload loads only it,
    # and importing the package here would add to the process measured.
    emb = sys.modules.get("ember._ember")
    if emb is not None:
        f["ember_path"] = os.path.dirname(os.path.abspath(emb.__file__))
        f["ember_enabled"] = int(emb._installed() == "ember")
        if f["ember_enabled"]:
            g = emb._stats(with_functions=False)["global"]
            for key, value in g.items():
                if isinstance(value, int):
                    f[f"ember_{key}"] = value
                elif isinstance(value, dict) and key != "code_objects_by_tier":
                    # e.g. tier1: {compiled, compile_ns, code_bytes, ...} -> ember_tier1_compiled, ...
                    for k2, v2 in value.items():
                        if isinstance(v2, int):
                            f[f"ember_{key}_{k2}"] = v2
            for tier, count in g.get("code_objects_by_tier", {}).items():
                f[f"ember_tier{tier}"] = count  # code objects alive at that tier
    return f


def check(name: str, got: dict, warm: bool) -> list[str]:
    """Problems with the facts of one process of configuration `name`."""
    cfg = config(name)
    want = dict(cfg.expect)
    if warm:
        want.update(cfg.expect_warm)
    problems = []
    if got.get("config") != name:
        problems.append(f"config is {got.get('config')!r}, expected {name!r}")
    for key, expected in want.items():
        value = got.get(key)
        if expected == ">0":
            ok = isinstance(value, (int, float)) and value > 0
        else:
            ok = value == expected
        if not ok:
            problems.append(f"{key}={value!r}, expected {expected}")
    return problems


def metadata_facts(metadata: dict) -> dict:
    """facts() back from pyperf metadata written by Hook."""
    return {k[len("ebench_"):]: v for k, v in metadata.items() if k.startswith("ebench_")}


# --- pyperf hook -------------------------------------------------------------

class Hook:
    """pyperf hook (``--hook ebench``): around each timed call, let background
    compilers finish first (their compile time is not steady state); at the end
    of each series, record facts() in the worker's metadata."""

    def __init__(self):
        self._cinderx = sys.modules.get("cinderx.jit")

    def __enter__(self):
        if self._cinderx is not None:
            self._cinderx.wait_for_background_compiles()
        return self

    def __exit__(self, *exc):
        return None

    def teardown(self, metadata):
        for key, value in facts().items():
            metadata[f"ebench_{key}"] = value
