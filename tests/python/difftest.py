"""Differential testing: CPython's interpreter is the specification.

``check(source)`` writes a snippet to a temporary file, runs it in a fresh
``python`` under stock CPython (no EMBER* variable at all) and under every
configuration in ``EMBER_CONFIGS``, always from the same path, and asserts
that stdout, stderr (tracebacks included) and the exit code are identical.

Each Ember run must also prove that Ember ran it: the harness sets
EMBER_STATS and asserts that the stats file exists, says Ember was enabled,
and shows calls > 0 for the snippet's functions. A run in which nothing went
through Ember's hook fails.

Later tiers extend ``EMBER_CONFIGS``, for example with
``Config("tier1-eager", {"EMBER": "1", "EMBER_TIER1_THRESHOLD": "0"})``.
"""

from __future__ import annotations

import difflib
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import types
import warnings
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Config:
    name: str
    env: dict = field(default_factory=dict)


STOCK = Config("stock", {})

#: Every configuration a snippet must behave identically under.
EMBER_CONFIGS: list[Config] = [
    Config("tier0", {"EMBER": "1", "EMBER_MAX_TIER": "0"}),
    Config("tier1-eager", {"EMBER": "1", "EMBER_TIER1_THRESHOLD": "0"}),
]

#: Same seed in every run, so that set and dict-of-str orders agree.
HASH_SEED = "0"

_CO_OPTIMIZED = 0x1

# Kinds of code object a snippet often defines without running, or lets die
# before exit (so before the EMBER_STATS file is written).
_NOT_EXPECTED_BY_DEFAULT = ("<lambda>", "<genexpr>", "__annotate__", "<generic parameters of")

_stats_dir: str | None = None
_counter = itertools.count()


def set_stats_dir(path: str) -> None:
    """Keep every EMBER_STATS file of the session in `path` (conftest.py
    aggregates them)."""
    global _stats_dir
    _stats_dir = path


def stats_dir() -> str:
    global _stats_dir
    if _stats_dir is None:
        _stats_dir = tempfile.mkdtemp(prefix="ember-difftest-stats-")
    return _stats_dir


def new_stats_path(label: str) -> str:
    """A fresh path for an EMBER_STATS file in the session's stats folder."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in label)
    return os.path.join(stats_dir(), f"{os.getpid()}-{next(_counter)}-{safe}.json")


def clean_environ(extra: dict | None = None) -> dict:
    """os.environ without any EMBER* variable (the stock interpreter), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER")}
    env["PYTHONHASHSEED"] = HASH_SEED
    if extra:
        env.update(extra)
    return env


@dataclass
class Run:
    config: Config
    stdout: str
    stderr: str
    returncode: int
    stats: dict | None = None


def run_file(path: str, config: Config, *, args=(), stats_path: str | None = None,
             timeout: float = 60, cwd: str | None = None) -> Run:
    """Run `python path args...` under `config`; read the stats file if any."""
    extra = dict(config.env)
    if stats_path:
        extra["EMBER_STATS"] = stats_path
    proc = subprocess.run(
        [sys.executable, path, *args],
        env=clean_environ(extra),
        cwd=cwd or os.path.dirname(path),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    stats = None
    if stats_path and os.path.exists(stats_path):
        with open(stats_path, encoding="utf-8") as f:
            stats = json.load(f)
    return Run(config, proc.stdout, proc.stderr, proc.returncode, stats)


def _code_objects(source: str, filename: str):
    with warnings.catch_warnings():
        # The runs show the snippet's compile-time warnings; this compile must not.
        warnings.simplefilter("ignore")
        todo = [compile(source, filename, "exec")]
    while todo:
        code = todo.pop()
        todo.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        yield code


def expected_functions(source: str, filename: str, names=None) -> set[tuple[str, int]]:
    """(qualname, firstlineno) of the snippet's functions that Ember must see
    called. names=None: every function body, except lambdas, generator
    expressions and annotation functions, which a snippet often does not run
    or lets die before exit; otherwise the functions of these qualnames."""
    if names is None:
        return {(c.co_qualname, c.co_firstlineno) for c in _code_objects(source, filename)
                if c.co_flags & _CO_OPTIMIZED
                and not any(s in c.co_qualname for s in _NOT_EXPECTED_BY_DEFAULT)}
    found = {(c.co_qualname, c.co_firstlineno) for c in _code_objects(source, filename)
             if c.co_qualname in names}
    unknown = set(names) - {q for q, _ in found}
    if unknown:
        raise ValueError(f"expect_seen: no function {sorted(unknown)} in the snippet")
    return found


def _diff(label: str, want: str, got: str, config: Config) -> str:
    lines = difflib.unified_diff(want.splitlines(keepends=True), got.splitlines(keepends=True),
                                 f"{label} (stock)", f"{label} ({config.name})")
    return "".join(lines)


def _check_ember_ran(run: Run, filename: str, expect: set) -> None:
    name = run.config.name
    if run.stats is None:
        raise AssertionError(
            f"[{name}] no EMBER_STATS file was written: Ember was not on in this run\n"
            f"stderr:\n{run.stderr}")
    if run.stats.get("schema") != "ember-stats" or not run.stats.get("enabled"):
        raise AssertionError(f"[{name}] stats file does not show Ember enabled: "
                             f"schema={run.stats.get('schema')!r} enabled={run.stats.get('enabled')!r}")
    seen = {}
    for f in run.stats["functions"]:
        if f["filename"] == filename:
            key = (f["qualname"], f["firstlineno"])
            seen[key] = seen.get(key, 0) + f["calls"]
    missing = sorted(k for k in expect if not seen.get(k))
    if missing:
        shown = ", ".join(f"{q} (line {n})" for q, n in missing)
        raise AssertionError(f"[{name}] Ember's hook never saw a call of: {shown}\n"
                             f"seen in the snippet: {sorted(seen.items())}")
    if not any(seen.values()):
        raise AssertionError(f"[{name}] Ember's hook saw no call of any function of the snippet")


def check(source: str, *, configs: list[Config] | None = None, args=(),
          returncode: int | None = 0, expect_seen=None, timeout: float = 60,
          ember_runs: list[Run] | None = None) -> Run:
    """Run `source` under stock CPython and each Ember configuration and
    assert identical behaviour. Returns the stock run.

    returncode: the exit code the stock run must have (None: any), so that a
        snippet broken under every interpreter does not pass unnoticed.
    expect_seen: qualnames of the functions each Ember run's stats must show
        called; default: see expected_functions().
    ember_runs: a list to which each Ember configuration's run (its stats
        included) is appended, for assertions on what Ember did.
    """
    source = textwrap.dedent(source)
    configs = EMBER_CONFIGS if configs is None else configs
    workdir = tempfile.mkdtemp(prefix="ember-diff-")
    path = os.path.join(os.path.realpath(workdir), "snippet.py")
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(source)
        expect = expected_functions(source, path, expect_seen)

        stock = run_file(path, STOCK, args=args, timeout=timeout)
        if returncode is not None and stock.returncode != returncode:
            raise AssertionError(
                f"stock CPython exited with {stock.returncode}, expected {returncode}\n"
                f"stdout:\n{stock.stdout}\nstderr:\n{stock.stderr}")
        for config in configs:
            run = run_file(path, config, args=args, timeout=timeout,
                           stats_path=new_stats_path(config.name))
            problems = []
            for label in ("stdout", "stderr"):
                want, got = getattr(stock, label), getattr(run, label)
                if want != got:
                    problems.append(_diff(label, want, got, config))
            if stock.returncode != run.returncode:
                problems.append(f"exit code: stock {stock.returncode}, "
                                f"{config.name} {run.returncode}\n")
            if problems:
                raise AssertionError(
                    f"[{config.name}] differs from stock CPython:\n" + "".join(problems))
            _check_ember_ran(run, path, expect)
            if ember_runs is not None:
                ember_runs.append(run)
        return stock
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

