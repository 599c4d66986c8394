"""Ember: a tiered JIT compiler for CPython 3.14.

    import ember
    ember.enable()          # every frame from now on goes through Ember
    ember.stats()           # what it did

or, without changing code: ``python -m ember script.py`` or ``EMBER=1``.
See docs/usage.md for every function and variable.
"""

import atexit
import os
import sys

from . import _config
from ._config import ConfigError
from . import _ember

__all__ = [
    "ConfigError",
    "dis",
    "disable",
    "enable",
    "is_compiled",
    "is_enabled",
    "pin",
    "stats",
    "tier_of",
    "unpin",
    "write_stats",
]

__version__ = "0.1.0"

#: Schema of ember.stats() and of the EMBER_STATS file (docs/stats.md).
STATS_SCHEMA = "ember-stats"
STATS_SCHEMA_VERSION = 1

#: The highest tier this build can run code at (0: the interpreter only).
MAX_AVAILABLE_TIER = _ember.MAX_AVAILABLE_TIER

_stats_path_registered: set[str] = set()


def enable() -> None:
    """Install Ember's frame evaluator for this interpreter.

    Idempotent. Raises RuntimeError if another PEP 523 frame evaluator (for
    example TorchDynamo's) is installed: Ember does not chain evaluators and
    never replaces someone else's. Raises ConfigError if an EMBER_* variable
    is invalid.
    """
    cfg = _config.from_environ()
    _ember._configure(cfg.tier1_threshold, cfg.tier1_threshold_loopless, cfg.tier1_loop_work_ns_per_unit,
                      cfg.max_tier, cfg.code_limit_mb << 20,
                      cfg.perf_map)
    _ember._enable()
    if cfg.stats_path:
        _write_stats_at_exit(cfg.stats_path)


def disable() -> bool:
    """Remove Ember's evaluator. Returns True if it was installed.

    Another evaluator installed after Ember's is left in place.
    """
    return _ember._disable()


def is_enabled() -> bool:
    """True when Ember's evaluator is the one the interpreter uses."""
    return _ember._installed() == "ember"


def _code_of(func, what: str):
    # Imported here: `types` is a module most programs never import, and
    # every EMBER=1 process imports this package at start-up.
    import types

    if isinstance(func, types.CodeType):
        return func
    if isinstance(func, (staticmethod, classmethod, types.MethodType)):
        func = func.__func__
    if isinstance(func, types.FunctionType):
        return func.__code__
    kind = type(func).__name__
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None)
    shown = f"{kind} {name!r}" if name else kind
    if isinstance(func, (types.BuiltinFunctionType, types.WrapperDescriptorType,
                         types.MethodDescriptorType, types.MethodWrapperType)):
        raise TypeError(f"{what} needs a Python function; {shown} is implemented in C "
                        "and is never compiled")
    raise TypeError(f"{what} needs a Python function, method or code object, not {shown}")


def _check_tier(tier, what: str) -> int:
    if isinstance(tier, bool) or not isinstance(tier, int):
        raise TypeError(f"{what}: tier must be an int (0, 1 or 2), not {type(tier).__name__}")
    if tier not in (0, 1, 2):
        raise ValueError(f"{what}: tier must be 0 (interpreter), 1 (baseline) or 2 "
                         f"(optimising), not {tier}")
    if tier > MAX_AVAILABLE_TIER:
        raise ValueError(f"{what}: tier {tier} is not available in this build of Ember "
                         f"(highest available: {MAX_AVAILABLE_TIER})")
    return tier


_MISSING = object()


def pin(func=_MISSING, tier=_MISSING):
    """Pin a function to a tier: ``pin(func, 0)`` keeps it in the interpreter.

    As a decorator: ``@ember.pin(tier=0)`` or ``@ember.pin(0)``. Accepts
    functions, methods, static/class methods and code objects; returns the
    function. The pin holds until ``unpin(func)``.
    """
    if func is _MISSING and tier is _MISSING:
        raise TypeError("pin() needs a tier: pin(func, tier) or @pin(tier=...)")
    if tier is _MISSING and isinstance(func, int) and not isinstance(func, bool):
        func, tier = _MISSING, func
    if func is _MISSING:
        _check_tier(tier, "pin()")

        def decorator(f):
            return pin(f, tier)

        return decorator
    if tier is _MISSING:
        raise TypeError("pin() needs a tier: pin(func, tier)")
    code = _code_of(func, "pin()")
    _ember._pin(code, _check_tier(tier, "pin()"))
    return func


def unpin(func) -> None:
    """Remove a pin set by pin(); the function follows the automatic policy again."""
    _ember._unpin(_code_of(func, "unpin()"))


def tier_of(func) -> int:
    """The tier the function's code runs at now (0: the interpreter)."""
    return _ember._code_info(_code_of(func, "tier_of()"))[0]


def is_compiled(func) -> bool:
    """True when the function's code has compiled code it runs in (tier 1 or 2)."""
    return _ember._code_info(_code_of(func, "is_compiled()"))[0] > 0


def dis(func, file=None) -> None:
    """Print the function's tier-1 machine code, each stencil under the
    bytecode instruction it implements (offsets as the `dis` module shows),
    then the stencils' rarely taken paths, each under its instruction."""
    import dis as _dis

    code = _code_of(func, "dis()")
    out = sys.stdout if file is None else file
    blocks = _ember._tier1_disassemble(code)
    if blocks is None:
        print(f"{code.co_qualname} has no compiled code (tier {tier_of(code)})", file=out)
        return
    instrs = {i.offset: i for i in _dis.get_instructions(code, adaptive=True)}
    size = sum(len(raw) for _, _, lines in blocks for _, raw, _ in lines)
    print(f"tier-1 code of {code.co_qualname} ({code.co_filename}:{code.co_firstlineno}), "
          f"{size} bytes", file=out)
    def what(index):
        ins = instrs.get(2 * index)
        return f"{ins.opname} {ins.argrepr}".rstrip() if ins else "?"

    for index, stencil, lines in blocks:
        if isinstance(index, tuple):
            at = index[1]
            if at is None:
                print(f"\n        shared exit    [cold part of {stencil}]", file=out)
            else:
                print(f"\n  {2 * at:>5} {what(at)}    [cold part of {stencil}]", file=out)
        elif index == "exits":
            print(f"\n  shared exits: {stencil}", file=out)
        elif index == "cold":
            print(f"\n  cold paths: {stencil}", file=out)
        else:
            print(f"\n  {2 * index:>5} {what(index)}    [stencil {stencil}]", file=out)
        for addr, raw, text in lines:
            print(f"    {addr:#x}  {raw.hex(' '):<30} {text}", file=out)


def stats() -> dict:
    """Ember's counters: global totals and one entry per code object seen.

    The layout is documented in docs/stats.md (schema "ember-stats", version 1;
    JSON Schema: docs/stats.schema.json). Back-edges are counted by compiled
    code only (null for code that never ran compiled); "deopts" stays empty
    until tier 2 exists.
    """
    raw = _ember._stats()
    functions = sorted(raw["functions"], key=lambda f: (-f["calls"], f["qualname"]))
    return {
        "schema": STATS_SCHEMA,
        "schema_version": STATS_SCHEMA_VERSION,
        "ember_version": __version__,
        "python_version": sys.version.split()[0],
        "enabled": is_enabled(),
        "max_available_tier": MAX_AVAILABLE_TIER,
        "global": raw["global"],
        "functions": functions,
    }


def write_stats(path: str) -> None:
    """Write stats() as JSON to path."""
    data = stats()
    # Written aside and renamed: a process killed while writing (signal tests
    # kill their children at exit) leaves no truncated file behind.
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        # Not Python's json module: importing it (and re) would change the
        # program being observed.
        _ember._write_json(data, tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _write_stats_at_exit(path: str, what: str = "EMBER_STATS") -> None:
    """Write stats() to `path` when the process exits. "{pid}" in `path` becomes
    the id of the process that exits, so that a child made by os.fork(), which
    inherits this handler, writes its own file rather than its parent's."""
    if path in _stats_path_registered:
        return
    _stats_path_registered.add(path)

    def write():
        target = path.replace("{pid}", str(os.getpid()))
        # No garbage collection while the stats are gathered: one triggered
        # here would run finalisers the program would not have run at this
        # point (a __del__ joining a daemon thread, before daemon threads are
        # stopped, never returns).
        gc_was_on = _ember._gc_pause()
        try:
            write_stats(target)
        except OSError as e:
            print(f"ember: could not write {what} file {target!r}: {e}", file=sys.stderr)
        finally:
            if gc_was_on:
                _ember._gc_resume()

    atexit.register(write)


def _start_from_environment() -> bool:
    """Turn Ember on as EMBER_* say (ember.pth, python -m ember). Never raises
    for configuration: a bad value is reported in one line and Ember stays off."""
    try:
        cfg = _config.from_environ()
    except ConfigError as e:
        _config.report(e)
        return False
    if not cfg.enabled:
        return False
    try:
        enable()
    except RuntimeError as e:  # another frame evaluator
        _config.report(e)
        return False
    return True
