"""Ember's environment variables: the one table of what they mean and accept.

Every ``EMBER_*`` variable is validated before Ember turns on. A bad value
prints one line naming the variable and what it accepts, and Ember stays off
rather than guessing. ``EMBER_DEV_*`` belongs to the development scripts
(``dev/env``) and is ignored here.
"""

import os


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


class Config:
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
        return f"Config({fields})"

    def __eq__(self, other):
        if not isinstance(other, Config):
            return NotImplemented
        return self._values() == other._values()


# name -> (parser, Config attribute, one-line description for the docs)
VARIABLES = {
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


def from_environ(environ=None) -> Config:
    """Parse and validate every EMBER_* variable; raise ConfigError on the first bad one."""
    environ = os.environ if environ is None else environ
    cfg = Config()
    for name in sorted(environ):
        if not name.startswith("EMBER") or name.startswith("EMBER_DEV_"):
            continue
        if name not in VARIABLES:
            known = ", ".join(sorted(VARIABLES))
            raise ConfigError(f"{name} is not an Ember variable (known: {known})")
        parse, attr, _ = VARIABLES[name]
        setattr(cfg, attr, parse(name, environ[name]))
        cfg.raw[name] = environ[name]
    if "EMBER_TIER1_THRESHOLD" in cfg.raw:
        # One threshold for every function, as given.
        cfg.tier1_threshold_loopless = cfg.tier1_threshold
        cfg.tier1_loop_work_ns_per_unit = 0
    return cfg


_reported: set[str] = set()


def report(err: Exception) -> None:
    """Say on standard error, in one line, why Ember stays off (a bad value,
    another frame evaluator). Each message is said once per process: under
    `python -m ember` with EMBER set, both the ember.pth autoload and
    python -m ember check the environment and try to turn Ember on."""
    import sys

    message = f"ember: {err}; Ember stays off"
    if message in _reported:
        return
    _reported.add(message)
    print(message, file=sys.stderr)
