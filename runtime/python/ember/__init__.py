"""Ember: a tiered JIT compiler for CPython 3.14.

    import ember
    ember.enable()          # every frame from now on goes through Ember
    ember.stats()           # what it did

or, without changing code: ``python -m ember script.py`` or ``EMBER=1``.
See docs/usage.md for every function and variable.
"""

import os
import sys

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


# --- Configuration.
#
# Ember's environment variables: the one table of what they mean and accept.
# Every ``EMBER_*`` variable is validated before Ember turns on. A bad value
# prints one line naming the variable and what it accepts, and Ember stays off
# rather than guessing. ``EMBER_DEV_*`` belongs to the development scripts
# (``dev/env``) and is ignored here.


class ConfigError(ValueError):
    """A configuration value Ember cannot accept."""


def _flag(name: str, value: str) -> bool:
    if value in ("0", "1"):
        return value == "1"
    raise ConfigError(f"{name}={value!r} is not accepted: expected 1 (on) or 0 (off)")


def _path(name: str, value: str) -> str:
    """A file to write at exit; "{pid}" in it becomes the id of the process
    that writes it (one file per process when a program forks or starts
    subprocesses with the same environment). It is kept in the value returned
    and replaced when the file is written; its directory is checked now, for
    this process."""
    if not value:
        raise ConfigError(f"{name} is empty: expected the path of a file to write")
    parent = os.path.dirname(os.path.abspath(value.replace("{pid}", str(os.getpid()))))
    if not os.path.isdir(parent):
        raise ConfigError(f"{name}={value!r} is not accepted: directory {parent!r} does not exist")
    return value


def _count(name: str, value: str) -> int:
    if value.isdigit() and value.isascii():
        return int(value)
    raise ConfigError(f"{name}={value!r} is not accepted: expected a whole number >= 0")


def _tier(name: str, value: str) -> int:
    if value in ("0", "1"):
        return int(value)
    raise ConfigError(f"{name}={value!r} is not accepted: expected 0 (interpreter only) "
                      "or 1 (baseline compiler), the tiers this build has")


#: Defaults of the compilation settings. Compiling costs, in a short
#: program whose caches are cold, about 1-1.5 us per instruction (and the new
#: code is not in cache either), while compiled code saves a fraction of the
#: interpreter's time: compiling pays only once the interpreter has spent a
#: few times that on the function. A function without a loop runs each
#: instruction once per call, so it is compiled after many calls (start-up
#: code, imports, runs most of its functions fewer times). One with a loop
#: may run long in few calls (a benchmark's main loop: once per iteration).
#: So a function with a loop is compiled once its frames have run in the
#: interpreter for DEFAULT_TIER1_LOOP_WORK_NS_PER_UNIT ns per code unit of
#: its bytecode (less the time of frames of other such functions they call)
#: and its loops have gone round 64 times there (runtime/src/hook.rs,
#: MIN_LOOP_ITERATIONS: time alone compiled start-up code whose few
#: iterations wait on files, importlib.metadata's, in every process):
#: at one of its loop's back-edges, the frame going on in compiled code from
#: there (on-stack replacement, tier1/csrc/osr.c), or at its second call (its
#: first, in the interpreter, has specialised the instructions it ran).
#: A generator's or coroutine's resumptions count as calls here: its one
#: frame may run a program's main loop, and compiled code can take it over
#: at its next resumption. A loop that runs long is compiled; the loops of
#: code run a few times at start-up (imports: enum, re, dataclasses), which
#: compiling made a short program pay for, are not. The values were chosen
#: by whole-process times of pyperformance's benchmarks run once
#: (benches/README.md, cold runs): 128 calls and 1000 ns compiled about 115
#: functions of start-up code per process, 1024 and 4000 about 25, and were
#: slower by 2 to 4% of the whole process; 4096 and 8000 compiled the
#: benchmarks' own functions too late. Since imports run without the
#: evaluator (hook.rs, run_import), start-up code's calls are mostly not
#: counted: 256 compiles no more start-up functions than 1024 in those
#: processes (2026-11-29), and compiles a program's own functions sooner
#: (chaos's set-up calls a few of them some 3,000 times: whole cold runs,
#: 40 processes, 0.964x/0.965x against the interpreter at 1024 and
#: 0.970x/0.979x at 256 in two runs; the other nine within noise).
DEFAULT_TIER1_THRESHOLD = 2
DEFAULT_TIER1_THRESHOLD_LOOPLESS = 256
DEFAULT_TIER1_LOOP_WORK_NS_PER_UNIT = 4000
# Tier 1 is on by default: with every function compiled at its first call it
# gives CPython's own test suite the interpreter's results, and it is what
# makes a program faster (tier 0 only counts, at the hook's cost).
DEFAULT_MAX_TIER = 1
DEFAULT_CODE_LIMIT_MB = 512


class _Config:
    # A plain class, not a dataclass: importing dataclasses would more than
    # double the time `import ember` adds to the start-up of every EMBER=1 process.
    __slots__ = ("enabled", "stats_path", "tier1_threshold", "tier1_threshold_loopless",
                 "tier1_loop_work_ns_per_unit", "max_tier", "code_limit_mb", "perf_map", "raw")

    def __init__(self, enabled: bool = False, stats_path: str | None = None,
                 raw: dict | None = None):
        self.enabled = enabled
        self.stats_path = stats_path
        self.tier1_threshold = DEFAULT_TIER1_THRESHOLD
        self.tier1_threshold_loopless = DEFAULT_TIER1_THRESHOLD_LOOPLESS
        self.tier1_loop_work_ns_per_unit = DEFAULT_TIER1_LOOP_WORK_NS_PER_UNIT
        self.max_tier = DEFAULT_MAX_TIER
        self.code_limit_mb = DEFAULT_CODE_LIMIT_MB
        self.perf_map = False
        # Raw values, for the stats header.
        self.raw = {} if raw is None else raw

    def _values(self) -> tuple:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"_Config({fields})"

    def __eq__(self, other):
        if not isinstance(other, _Config):
            return NotImplemented
        return self._values() == other._values()


# name -> (parser, _Config attribute, one-line description for the docs)
_VARIABLES = {
    "EMBER": (_flag, "enabled", "1 turns Ember on at interpreter start-up (via ember.pth), 0 leaves it off"),
    "EMBER_TIER1_THRESHOLD": (_count, "tier1_threshold",
                              f"calls before a function is compiled at tier 1, for every function; 0 compiles at the first call "
                              f"(default: {DEFAULT_TIER1_THRESHOLD} for a function with a loop, "
                              f"{DEFAULT_TIER1_THRESHOLD_LOOPLESS} for one without)"),
    "EMBER_MAX_TIER": (_tier, "max_tier",
                       "highest tier the automatic policy compiles to; 0 only counts (default 0, "
                       "or 1 when EMBER_TIER1_THRESHOLD is set)"),
    "EMBER_CODE_LIMIT_MB": (_count, "code_limit_mb",
                            f"executable memory compiled code may use, in MiB; when reached, new code "
                            f"stays in the interpreter until compiled code is freed (default {DEFAULT_CODE_LIMIT_MB})"),
    "EMBER_PERF_MAP": (_flag, "perf_map", "1 writes /tmp/perf-<pid>.map so that Linux perf names compiled functions"),
    "EMBER_STATS": (_path, "stats_path", "write ember.stats() as JSON to this path at exit; {pid} becomes the id of the process that writes it"),
}


def _from_environ(environ=None) -> _Config:
    """Parse and validate every EMBER_* variable; raise ConfigError on the first bad one."""
    environ = os.environ if environ is None else environ
    cfg = _Config()
    for name in sorted(environ):
        if not name.startswith("EMBER") or name.startswith("EMBER_DEV_"):
            continue
        if name not in _VARIABLES:
            known = ", ".join(sorted(_VARIABLES))
            raise ConfigError(f"{name} is not an Ember variable (known: {known})")
        parse, attr, _ = _VARIABLES[name]
        setattr(cfg, attr, parse(name, environ[name]))
        cfg.raw[name] = environ[name]
    if "EMBER_TIER1_THRESHOLD" in cfg.raw:
        # One threshold for every function, as given.
        cfg.tier1_threshold_loopless = cfg.tier1_threshold
        cfg.tier1_loop_work_ns_per_unit = 0
    return cfg


_reported: set[str] = set()


def _report(err: Exception) -> None:
    """Say on standard error, in one line, why Ember stays off (a bad value,
    another frame evaluator). Each message is said once per process: under
    `python -m ember` with EMBER set, both the ember.pth autoload and
    python -m ember check the environment and try to turn Ember on."""
    message = f"ember: {err}; Ember stays off"
    if message in _reported:
        return
    _reported.add(message)
    print(message, file=sys.stderr)


def enable() -> None:
    """Install Ember's frame evaluator for this interpreter.

    Idempotent. Raises RuntimeError if another PEP 523 frame evaluator (for
    example TorchDynamo's) is installed: Ember does not chain evaluators and
    never replaces someone else's. Raises ConfigError if an EMBER_* variable
    is invalid.
    """
    _enable_with(_from_environ())


def _enable_with(cfg: _Config) -> None:
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
    # Imported here: most processes never ask for stats, and importing even a
    # built-in module at start-up costs every EMBER=1 process about 25 us.
    import atexit

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
        cfg = _from_environ()
    except ConfigError as e:
        _report(e)
        return False
    if not cfg.enabled:
        return False
    try:
        # The configuration just read, not read again as enable() would.
        _enable_with(cfg)
    except RuntimeError as e:  # another frame evaluator
        _report(e)
        return False
    return True


# The per-function calls live in ember/_api.py, imported at the first use of
# one of them: the package is imported at the start-up of every EMBER=1
# process, and importing less there is start-up time saved.
_API = ("dis", "is_compiled", "pin", "tier_of", "unpin")


def __getattr__(name: str):
    if name in _API:
        from . import _api

        value = getattr(_api, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ember' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_API))
