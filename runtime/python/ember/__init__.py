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
# What Ember's environment variables mean and accept is in one table, in the
# extension (runtime/src/config.rs), so that the EMBER=1 autoload at every
# interpreter start-up needs the extension alone, not this package. Every
# ``EMBER*`` variable is validated before Ember turns on. A bad value prints
# one line naming the variable and what it accepts, and Ember stays off
# rather than guessing. ``EMBER_DEV_*`` belongs to the development scripts
# (``dev/env``) and is ignored.

#: A configuration value Ember cannot accept (a ValueError).
ConfigError = _ember.ConfigError


def _path(name: str, value: str) -> str:
    """A file to write at exit; "{pid}" in it becomes the id of the process
    that writes it (one file per process when a program forks or starts
    subprocesses with the same environment). It is kept in the value returned
    and replaced when the file is written; its directory is checked now, for
    this process."""
    _ember._check_path(name, value)
    return value


class _Config:
    # A plain class, not a dataclass: importing dataclasses would more than
    # double the time `import ember` adds to the start-up of a process.
    __slots__ = ("enabled", "stats_path", "tier1_threshold", "tier1_threshold_loopless",
                 "tier1_loop_work_ns_per_unit", "max_tier", "code_limit_mb", "perf_map")

    def __init__(self, fields):
        for name in self.__slots__:
            setattr(self, name, fields[name])

    def __repr__(self):
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"_Config({fields})"


def _from_environ(environ=None):
    """Parse and validate every EMBER* variable; raise ConfigError on the first bad one."""
    return _Config(_ember._environ_config(os.environ if environ is None else environ))


def _report(err):
    """Say on standard error, in one line, why Ember stays off (a bad value,
    another frame evaluator). Each message is said once per process: under
    `python -m ember` with EMBER set, both the ember.pth autoload and
    python -m ember check the environment and try to turn Ember on."""
    _ember._report(str(err))


def enable() -> None:
    """Install Ember's frame evaluator for this interpreter.

    Idempotent. Raises RuntimeError if another PEP 523 frame evaluator (for
    example TorchDynamo's) is installed: Ember does not chain evaluators and
    never replaces someone else's. Raises ConfigError if an EMBER_* variable
    is invalid.
    """
    stats_path = _ember._enable_from_environment()
    if stats_path:
        _write_stats_at_exit(stats_path)


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
    """Turn Ember on as EMBER* say. Never raises for configuration: a bad
    value is reported in one line and Ember stays off. (The ember.pth
    autoload does the same without importing this package.)"""
    started, stats_path = _ember._start_from_environment()
    if stats_path:
        _write_stats_at_exit(stats_path)
    return started


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
