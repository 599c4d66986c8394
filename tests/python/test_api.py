"""The Python API, in this process: enable/disable, refusal of a foreign
evaluator, stats() and its counters, pin/unpin/tier_of.

The fixtures of conftest.py put back whichever evaluator was installed
before each test.
"""

import asyncio
import functools
import gc
import json
import os
import threading
import types

import pytest

import ember

GLOBAL_KEYS = {"frames", "calls", "resumes", "code_objects_seen", "code_objects_freed", "code_objects_live",
               "code_objects_by_tier", "code_objects_freed_by_tier", "code_objects_ever_compiled",
               "interpreter_reasons", "tier1", "deopts"}
TIER1_GLOBAL_KEYS = {"compiled", "compile_ns", "publish_ns", "code_bytes", "hot_bytes", "instructions", "mapped_bytes", "handoffs",
                     "respecialisations_declined", "back_edges", "delegations_passed", "generators_made", "generators_drained",
                     "osr_entries", "refused"}
FUNCTION_KEYS = {"qualname", "filename", "firstlineno", "calls", "resumes", "handoffs", "respecialisations_declined",
                 "interpreted_ns", "back_edges", "tier",
                 "pinned", "compiles", "compile_ns", "deopts", "interpreter_reason"}
# Present only on functions compiled at tier 1.
TIER1_FUNCTION_KEYS = {"code_bytes", "hot_bytes", "total_bytes", "instructions", "compile_ns", "publish_ns", "address"}


def entry(func):
    """The stats() entry of a function's code object, or None."""
    code = func if isinstance(func, types.CodeType) else func.__code__
    for f in ember.stats()["functions"]:
        if (f["filename"], f["qualname"], f["firstlineno"]) == (
                code.co_filename, code.co_qualname, code.co_firstlineno):
            return f
    return None


def counts(func):
    f = entry(func)
    return (f["calls"], f["resumes"]) if f else (0, 0)


# --- enable / disable -------------------------------------------------------

def test_enable_is_idempotent(ember_off):
    assert not ember.is_enabled()
    assert ember.enable() is None
    assert ember.is_enabled()
    ember.enable()
    assert ember.is_enabled() and ember._ember._installed() == "ember"
    assert ember.disable() is True
    assert not ember.is_enabled()


def test_disable_reports_whether_ember_was_installed(ember_on):
    assert ember.disable() is True
    assert ember.disable() is False
    assert ember._ember._installed() == "default"


def test_hook_counts_only_while_enabled(ember_on):
    def f():
        return 1

    f()
    assert counts(f) == (1, 0)
    ember.disable()
    f()
    f()
    ember.enable()
    f()
    assert counts(f) == (2, 0)


def test_refuses_foreign_evaluator_and_leaves_it_installed(ember_off):
    ember._ember._install_passthrough()
    with pytest.raises(RuntimeError, match="another PEP 523 frame evaluator is installed"):
        ember.enable()
    assert not ember.is_enabled()
    assert ember._ember._installed() == "passthrough"
    assert ember.disable() is False
    assert ember._ember._installed() == "passthrough"
    assert ember._ember._uninstall_passthrough() is True
    ember.enable()
    assert ember.is_enabled()


def test_enable_refuses_invalid_configuration(ember_off, monkeypatch):
    monkeypatch.setenv("EMBER_NOT_A_VARIABLE", "1")
    with pytest.raises(ember.ConfigError, match="EMBER_NOT_A_VARIABLE is not an Ember variable"):
        ember.enable()
    assert not ember.is_enabled()


# --- stats() ----------------------------------------------------------------

def test_stats_structure(ember_on, monkeypatch):
    # The entry checked below is the default policy's (tier 0 after one
    # call), also when this process runs under EMBER_TIER1_THRESHOLD=0.
    for name in [k for k in os.environ if k.startswith("EMBER_")]:
        monkeypatch.delenv(name)
    ember.enable()

    def probe():
        return 1

    probe()
    s = ember.stats()
    assert s["schema"] == ember.STATS_SCHEMA == "ember-stats"
    assert s["schema_version"] == ember.STATS_SCHEMA_VERSION == 1
    assert s["enabled"] is True
    assert s["max_available_tier"] == ember.MAX_AVAILABLE_TIER
    assert s["ember_version"] == ember.__version__
    g = s["global"]
    assert set(g) == GLOBAL_KEYS
    assert set(g["tier1"]) == TIER1_GLOBAL_KEYS
    assert set(g["code_objects_by_tier"]) == {"0", "1", "2"}
    assert sum(g["code_objects_by_tier"].values()) == g["code_objects_live"] == len(s["functions"])
    assert g["code_objects_seen"] - g["code_objects_freed"] == g["code_objects_live"]
    assert sum(g["code_objects_freed_by_tier"].values()) == g["code_objects_freed"]
    live_compiled = sum(f["compiles"]["1"] > 0 for f in s["functions"])
    assert live_compiled <= g["code_objects_ever_compiled"]["1"] <= live_compiled + g["code_objects_freed"]
    live_reasons = {}
    for f in s["functions"]:
        if f["compiles"]["1"] == 0 and f["interpreter_reason"] is not None:
            live_reasons[f["interpreter_reason"]] = live_reasons.get(f["interpreter_reason"], 0) + 1
    assert all(g["interpreter_reasons"].get(r, 0) >= n for r, n in live_reasons.items())
    assert g["frames"] >= sum(f["calls"] + f["resumes"] for f in s["functions"])
    # Frames whose record could not be made count in frames only.
    assert g["frames"] >= g["calls"] + g["resumes"]
    assert g["calls"] >= sum(f["calls"] for f in s["functions"])
    assert g["resumes"] >= sum(f["resumes"] for f in s["functions"])
    # Deoptimisations by reason are tier 2's: none before it exists.
    assert ember.MAX_AVAILABLE_TIER >= 2 or g["deopts"] == {}
    for f in s["functions"]:
        assert set(f) - {"tier1"} == FUNCTION_KEYS
        assert ember.MAX_AVAILABLE_TIER >= 2 or f["deopts"] == {}
        # Back-edges are counted by compiled code only.
        assert (f["back_edges"] is None) == (f["compiles"]["1"] == 0), f
        assert ("tier1" in f) == (f["tier"] == 1)
        if "tier1" in f:
            assert set(f["tier1"]) == TIER1_FUNCTION_KEYS
        assert isinstance(f["qualname"], str) and isinstance(f["filename"], str)
        assert all(isinstance(f[k], int) and f[k] >= 0
                   for k in ("firstlineno", "calls", "resumes", "tier"))
        assert f["pinned"] in (None, 0, 1, 2)
    calls = [f["calls"] for f in s["functions"]]
    assert calls == sorted(calls, reverse=True)
    assert entry(probe) == {
        "qualname": "test_stats_structure.<locals>.probe",
        "filename": __file__,
        "firstlineno": probe.__code__.co_firstlineno,
        "calls": 1, "resumes": 0, "handoffs": 0, "respecialisations_declined": 0, "interpreted_ns": 0,
            "back_edges": None, "tier": 0, "pinned": None,
        "compiles": {"1": 0}, "compile_ns": {"1": 0}, "deopts": {}, "interpreter_reason": None,
    }
    assert json.loads(json.dumps(s)) == s


def test_stats_without_ember(ember_off):
    s = ember.stats()
    assert s["enabled"] is False and set(s["global"]) == GLOBAL_KEYS


def test_write_stats(ember_on, tmp_path):
    def probe():
        return 1

    probe()
    path = tmp_path / "stats.json"
    ember.write_stats(str(path))
    data = json.loads(path.read_text())
    assert data["schema"] == "ember-stats"
    assert any(f["qualname"] == probe.__qualname__ and f["calls"] == 1 for f in data["functions"])


def test_recursive_call_count_is_exact(ember_on):
    by_hand = [0]

    def fib(n):
        by_hand[0] += 1
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    # calls(n) = 1 + calls(n-1) + calls(n-2), calls(0) = calls(1) = 1
    expected = [1, 1]
    for _ in range(2, 16):
        expected.append(1 + expected[-1] + expected[-2])

    before = counts(fib)
    assert fib(15) == 610
    calls, resumes = counts(fib)
    assert calls - before[0] == expected[15] == by_hand[0] == 1973
    assert resumes == before[1] == 0


def test_generator_and_coroutine_resumes(ember_on):
    def gen():
        yield 1
        yield 2
        yield 3

    def looping():
        for _ in gen():
            pass

    def talker():
        try:
            x = yield 1
            yield x
        except ValueError:
            yield "handled"

    async def coro():
        await asyncio.sleep(0)
        return 1

    assert list(gen()) == [1, 2, 3]
    assert counts(gen) == (1, 4)  # three values, then StopIteration
    looping()
    assert counts(gen) == (2, 8)
    t = talker()
    next(t)
    t.send(5)
    t.throw(ValueError)
    t.close()  # the try block means close() has to run the frame
    assert counts(talker) == (1, 4)
    asyncio.run(coro())
    assert counts(coro) == (1, 2)


class Specialised:
    def __init__(self, x):
        self.x = x

    @property
    def prop(self):
        return self.x

    def __getitem__(self, i):
        return i

    def method(self, a):
        return a

    def __add__(self, other):
        return 5


def _spec_gen():
    yield 1
    yield 2


def _spec_kw(a, *, b):
    return b


def _spec_work():
    s = Specialised(1)
    s.prop, s[0], s.method(1), s + 1, _spec_kw(1, b=2)
    for _ in _spec_gen():
        pass


SPECIALISED = [Specialised.__init__, Specialised.prop.fget, Specialised.__getitem__,
               Specialised.method, Specialised.__add__, _spec_kw, _spec_gen]


def test_calls_through_call_sites_specialised_before_enable(evaluator_restored):
    # With no evaluator installed the interpreter specialises these call sites
    # to push the callee's frame itself (CALL_PY_EXACT_ARGS, LOAD_ATTR_PROPERTY,
    # BINARY_OP_SUBSCR_GETITEM, FOR_ITER_GEN, ...); once Ember is on, every one
    # of those calls must still reach the hook.
    ember.disable()
    for _ in range(1000):
        _spec_work()
    before = {f: counts(f) for f in SPECIALISED}
    ember.enable()
    for _ in range(100):
        _spec_work()
    for f in SPECIALISED:
        calls, resumes = counts(f)
        assert calls - before[f][0] == 100, f.__qualname__
        assert resumes - before[f][1] == (300 if f is _spec_gen else 0), f.__qualname__


def test_calls_counted_under_settrace_and_monitoring(ember_on):
    import sys

    def f(x):
        return x

    def tracer(frame, event, arg):
        return tracer

    sys.settrace(tracer)
    try:
        for i in range(10):
            f(i)
    finally:
        sys.settrace(None)
    assert counts(f) == (10, 0)
    mon = sys.monitoring
    tool = next(i for i in range(6) if mon.get_tool(i) is None)
    mon.use_tool_id(tool, "ember-test")
    try:
        mon.register_callback(tool, mon.events.PY_START, lambda code, offset: None)
        mon.set_events(tool, mon.events.PY_START | mon.events.LINE)
        for i in range(10):
            f(i)
    finally:
        mon.set_events(tool, 0)
        mon.free_tool_id(tool)
    assert counts(f) == (20, 0)


def test_calls_from_threads_are_all_counted(ember_on):
    def work(x):
        return x + 1

    def runner():
        for i in range(500):
            work(i)

    threads = [threading.Thread(target=runner) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counts(work) == (2000, 0)
    assert counts(runner) == (4, 0)


def test_records_freed_with_their_code_objects(ember_on):
    ns = {}
    exec(compile("def dynamic():\n    return 42\n", "<ember-dynamic>", "exec"), ns)
    assert ns["dynamic"]() == 42
    code = ns["dynamic"].__code__
    assert counts(code) == (1, 0)
    before = ember.stats()["global"]
    del ns, code
    gc.collect()
    after = ember.stats()["global"]
    assert after["code_objects_freed"] > before["code_objects_freed"]
    assert after["code_objects_seen"] - after["code_objects_freed"] == after["code_objects_live"]
    assert not any(f["filename"] == "<ember-dynamic>" for f in ember.stats()["functions"])


# --- pin / unpin / tier_of --------------------------------------------------

class Sample:
    def method(self):
        return 1

    @staticmethod
    def static():
        return 2

    @classmethod
    def klass(cls):
        return 3


def plain():
    return 0


ACCEPTED = {
    "function": (lambda: plain, plain.__code__),
    "bound method": (lambda: Sample().method, Sample.method.__code__),
    "staticmethod object": (lambda: Sample.__dict__["static"], Sample.static.__code__),
    "staticmethod via class": (lambda: Sample.static, Sample.static.__code__),
    "classmethod object": (lambda: Sample.__dict__["klass"], Sample.klass.__code__),
    "bound classmethod": (lambda: Sample.klass, Sample.klass.__code__),
    "code object": (lambda: plain.__code__, plain.__code__),
}
LAMBDA = lambda: 5  # noqa: E731
ACCEPTED["lambda"] = (lambda: LAMBDA, LAMBDA.__code__)


@pytest.mark.parametrize("kind", sorted(ACCEPTED))
def test_pin_accepts(kind):
    make, code = ACCEPTED[kind]
    obj = make()
    try:
        assert ember.pin(obj, 0) is obj
        assert ember.tier_of(obj) == 0
        assert entry(code)["pinned"] == 0
        ember.unpin(obj)
        assert entry(code)["pinned"] is None
        assert ember.tier_of(obj) == 0
    finally:
        ember.unpin(code)


def test_pin_decorator_forms():
    @ember.pin(0)
    def positional():
        return 1

    @ember.pin(tier=0)
    def keyword():
        return 2

    class C:
        @ember.pin(0)
        @staticmethod
        def s():
            return 3

    assert isinstance(positional, types.FunctionType) and positional() == 1
    assert keyword() == 2 and C.s() == 3
    for f in (positional, keyword, C.s):
        assert entry(f)["pinned"] == 0
        ember.unpin(f)
        assert entry(f)["pinned"] is None


def test_tier_of_unseen_function_is_interpreter():
    def never_called():
        pass

    assert ember.tier_of(never_called) == 0


class CallableObject:
    def __call__(self):
        return 1


REJECTED_CALLABLES = {
    "builtin function": len,
    "builtin method": [].append,
    "slot wrapper": object.__init__,
    "method descriptor": str.join,
    "method-wrapper": (1).__add__,
    "classmethod descriptor": dict.__dict__["fromkeys"],
    "staticmethod of builtin": staticmethod(len),
    "int": 42,
    "str": "plain",
    "None": None,
    "class": Sample,
    "partial": functools.partial(plain),
    "callable object": CallableObject(),
}


@pytest.mark.parametrize("kind", sorted(REJECTED_CALLABLES))
@pytest.mark.parametrize("api", ["pin", "unpin", "tier_of"])
def test_rejects_non_python_functions(api, kind):
    obj = REJECTED_CALLABLES[kind]
    args = (obj, 0) if api == "pin" else (obj,)
    with pytest.raises(TypeError, match=rf"{api}\(\) needs a Python function"):
        getattr(ember, api)(*args)


def test_builtin_rejection_says_why():
    with pytest.raises(TypeError, match="'len' is implemented in C"):
        ember.pin(len, 0)


@pytest.mark.parametrize("tier", [True, False, "0", 0.0, None, [0]])
def test_pin_rejects_non_int_tier(tier):
    with pytest.raises(TypeError, match="tier must be an int"):
        ember.pin(plain, tier)
    with pytest.raises(TypeError):
        ember.pin(tier=tier)


def test_pin_needs_a_tier():
    for call in (lambda: ember.pin(), lambda: ember.pin(plain), lambda: ember.pin(True),
                 lambda: ember.pin("0")):
        with pytest.raises(TypeError, match="needs a tier"):
            call()


@pytest.mark.parametrize("tier", [3, -1, 10**20])
def test_pin_rejects_unknown_tier(tier):
    with pytest.raises(ValueError, match="tier must be 0"):
        ember.pin(plain, tier)
    with pytest.raises(ValueError, match="tier must be 0"):
        ember.pin(tier)
    with pytest.raises(ValueError, match="tier must be 0"):
        ember.pin(tier=tier)


@pytest.mark.parametrize("tier", [1, 2])
def test_pin_tiers_above_max_available(tier):
    if tier <= ember.MAX_AVAILABLE_TIER:
        pytest.skip(f"tier {tier} is available in this build")
    ember.pin(plain, 0)
    try:
        with pytest.raises(ValueError, match=f"tier {tier} is not available"):
            ember.pin(plain, tier)
        with pytest.raises(ValueError, match="not available"):
            ember.pin(tier)
        assert entry(plain)["pinned"] == 0  # a refused pin changes nothing
    finally:
        ember.unpin(plain)


def test_max_available_tier():
    assert ember.MAX_AVAILABLE_TIER == ember._ember.MAX_AVAILABLE_TIER
    assert ember.MAX_AVAILABLE_TIER in (0, 1, 2)
