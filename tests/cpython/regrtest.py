#!/usr/bin/env python3
"""Run CPython's own regression tests with Ember on, and compare with stock.

    dev/env python tests/cpython/regrtest.py --list ci
    dev/env python tests/cpython/regrtest.py --list full -j2 --config ember,ember-t1
    dev/env python tests/cpython/regrtest.py --list ci --config ember,pep523 --no-ignore
    dev/env --dbg python tests/cpython/regrtest.py --dbg --list refleak --config ember-t1 \
        --huntrleaks 3:3 -j1

For the chosen list of test modules, runs ``python -m test`` (through a small
driver that also records each module's result, _regrtest_driver.py) once
stock -- no EMBER* variable in the environment -- and once per
configuration, with identical regrtest options. Then it compares, test for
test:

* the failing and erroring testcases (ids such as
  ``test.test_x.TestY.test_z``; a failing subtest counts for its test), and
* the test modules that failed, crashed, timed out or gave no result;

With --huntrleaks W:R (regrtest -R W:R, on CPython's debug build: --dbg,
run through `dev/env --dbg`), a module that leaks references, memory blocks
or file descriptors fails with state REFLEAK, and the modules that leak are
compared like the ones that fail.

And it proves that Ember was on: every process of an Ember run writes its
ember.stats() (EMBER_STATS=.../stats-{pid}.json), and the run fails when the
hook saw no code object at all, or when a configuration that asks for a tier
compiled nothing at that tier.

Exit status: 0 when every configuration matches stock and passed its checks,
1 when anything differs or a check failed, 2 for usage errors. Results
(logs, JUnit XML, per-module records, Ember stats, summary.json) go to
tests/cpython/results/<list>-<time>/. See tests/cpython/README.md.

Standard library only.
"""

from __future__ import annotations

import argparse
import compileall
import dataclasses
import datetime
import glob
import hashlib
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
LISTS_DIR = HERE / "lists"
IGNORE_DIR = HERE / "ignore"
RESULTS_DIR = HERE / "results"
DRIVER = HERE / "_regrtest_driver.py"
PEP523_SOURCE = HERE / "pep523" / "_pep523_baseline.c"
PEP523_VAR = "REGRTEST_PEP523_BASELINE"

DEFAULT_TIMEOUT = 900
DEFAULT_RANDSEED = 20260101
DEFAULT_IGNORES = [IGNORE_DIR / "pep523.txt"]


# --------------------------------------------------------------------------
# Configurations
#
# An Ember configuration is the set of EMBER_* variables its run gets, and the
# tier (if any) it asks for: when it asks for tier N, the run must end with
# code objects at tier N, or it proves nothing about tier N. Add one here when
# a new stress setting exists; extra variables can also be given ad hoc with
# --env NAME=VALUE.
#
# ember-t1/ember-t2 name the variables the tiers are planned to read. Ember
# rejects unknown EMBER_* variables (and then stays off), so until a tier and
# its variable exist these configurations fail at the pre-flight check, as
# they should.
#
# `pep523` is not Ember: it installs a pass-through PEP 523 frame evaluator
# (pep523/_pep523_baseline.c) in every process. A difference that shows up
# under it too is caused by CPython's reaction to *any* frame evaluator, not
# by Ember's code.

@dataclasses.dataclass(frozen=True)
class Config:
    name: str
    env: dict
    require_tier: int | None
    description: str
    kind: str = "ember"   # "ember" or "pep523"


CONFIGS = {
    c.name: c for c in (
        Config("ember", {"EMBER": "1"}, None, "Ember on, default policy"),
        Config("ember-t0", {"EMBER": "1", "EMBER_MAX_TIER": "0"}, None,
               "Ember's hook on, compiling nothing (tier 0 only)"),
        Config("ember-t1", {"EMBER": "1", "EMBER_TIER1_THRESHOLD": "0"}, 1,
               "every function compiled at tier 1 at its first call"),
        Config("ember-t2", {"EMBER": "1", "EMBER_TIER2_THRESHOLD": "0"}, 2,
               "every function compiled at tier 2 at its first call"),
        Config("pep523", {PEP523_VAR: "1"}, None,
               "not Ember: a pass-through PEP 523 evaluator, to tell which differences "
               "any frame evaluator causes", kind="pep523"),
    )
}

# --------------------------------------------------------------------------
# regrtest's module states (test/libregrtest/result.py, class State), plus
# MISSING: regrtest ended without a result for the module.

FAILING_STATES = {
    "FAILED", "UNCAUGHT_EXC", "REFLEAK", "WORKER_FAILED", "WORKER_BUG",
    "TIMEOUT", "INTERRUPTED", "MISSING",
}
# States after which a module has no (complete) per-testcase result: its
# testcases are not compared one by one, its state is.
NO_TESTCASE_DATA_STATES = {
    "UNCAUGHT_EXC", "WORKER_FAILED", "WORKER_BUG", "TIMEOUT", "INTERRUPTED", "MISSING",
}
STATE_TEXT = {
    "PASSED": "passed",
    "FAILED": "failed",
    "SKIPPED": "skipped",
    "RESOURCE_DENIED": "skipped (resource denied)",
    "DID_NOT_RUN": "ran no tests",
    "ENV_CHANGED": "passed but altered the environment",
    "UNCAUGHT_EXC": "failed (uncaught exception)",
    "REFLEAK": "failed (leaked references, memory blocks or file descriptors)",
    "WORKER_FAILED": "crashed (worker exited non-zero)",
    "WORKER_BUG": "worker bug",
    "TIMEOUT": "timed out",
    "INTERRUPTED": "interrupted",
    "MISSING": "no result (regrtest stopped before it)",
}


def log(msg: str = "") -> None:
    print(msg, flush=True)


def fmt_duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    if h:
        return f"{h}h{m:02d}m{s:02d}s"
    if m:
        return f"{m}m{s:02d}s"
    return f"{s}s"


def rel(p) -> str:
    try:
        return str(Path(p).resolve().relative_to(REPO))
    except ValueError:
        return str(p)


class UsageError(Exception):
    pass


class CheckFailed(Exception):
    pass


# --------------------------------------------------------------------------
# Test lists and ignore files

def list_path(spec: str) -> Path:
    if "/" not in spec and not spec.endswith(".txt"):
        path = LISTS_DIR / f"{spec}.txt"
        if path.exists():
            return path
        known = ", ".join(sorted(p.stem for p in LISTS_DIR.glob("*.txt")))
        raise UsageError(f"--list {spec}: no such list (known: {known}; or give a file path)")
    path = Path(spec)
    if not path.exists():
        raise UsageError(f"--list {spec}: file not found")
    return path


def read_names(path: Path) -> list[str]:
    """Whitespace-separated names; '#' starts a comment."""
    names: list[str] = []
    seen = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        for name in line.split("#", 1)[0].split():
            if name not in seen:
                seen.add(name)
                names.append(name)
    return names


def read_list(path: Path) -> list[str]:
    names = [n[:-3] if n.endswith(".py") else n for n in read_names(path)]
    if not names:
        raise UsageError(f"{path}: the list is empty")
    return names


_TIMEOUT_DIRECTIVE = re.compile(r"^#\s*regrtest-timeout:\s*(\d+)\s*$", re.M)


def list_timeout(path: Path) -> int | None:
    """A list may set its own default --timeout: a line `# regrtest-timeout: SEC`."""
    m = _TIMEOUT_DIRECTIVE.search(path.read_text(encoding="utf-8"))
    return int(m.group(1)) if m else None


# --------------------------------------------------------------------------
# The Python the tests run with
#
# Both runs use one small venv made for this run (results/<run>/venv) on the
# same base interpreter as dev/env's python. Its site-packages has an
# ember.pth that puts a snapshot of the current Ember build on sys.path, then
# carries the EMBER=1 autoload line of the project's ember.pth (and the line
# that turns on the pep523 baseline). Why not dev/env's python directly:
# there `ember` is importable only through PYTHONPATH, which `python -E`/`-I`
# ignore, and many tests start such subprocesses; with EMBER=1 inherited,
# each of them prints "Error processing line 1 of ember.pth ... No module
# named 'ember'" on stderr, and tests that check a child's stderr fail under
# Ember only -- an artefact of the development set-up: an installed Ember (in
# site-packages) is on in those subprocesses. The snapshot also keeps a
# rebuild during a long run from changing Ember half-way.

def find_ember_package() -> Path:
    spec = importlib.util.find_spec("ember")
    if spec is None or not spec.submodule_search_locations:
        raise UsageError("cannot find the `ember` package: run this through dev/env "
                         "(`dev/env python tests/cpython/regrtest.py ...`)")
    return Path(list(spec.submodule_search_locations)[0])


def autoload_line() -> str:
    """The EMBER=1 autoload line of the ember.pth that dev/env installs in its
    venv (else the project's own file)."""
    candidates = [Path(sysconfig.get_path("purelib")) / "ember.pth",
                  *sorted(REPO.glob("runtime/**/ember.pth"))]
    for path in candidates:
        if path.exists():
            lines = [l for l in path.read_text(encoding="utf-8").splitlines()
                     if l.startswith("import ")]
            if len(lines) == 1:
                return lines[0]
            raise UsageError(f"{path}: expected one `import ...` line (the EMBER=1 autoload)")
    raise UsageError("cannot find ember.pth (the EMBER=1 autoload) in "
                     + ", ".join(str(p) for p in candidates))


def build_pep523(python: Path, out_dir: Path) -> Path:
    """Compile the pass-through evaluator against the installed headers."""
    out_dir.mkdir(parents=True, exist_ok=True)
    query = ("import sysconfig, json; print(json.dumps([sysconfig.get_path('include'), "
             "sysconfig.get_config_var('EXT_SUFFIX'), sysconfig.get_config_var('CC') or 'cc']))")
    include, suffix, cc = json.loads(subprocess.run(
        [str(python), "-c", query], check=True, capture_output=True, text=True,
        env=clean_env()).stdout)
    target = out_dir / f"_pep523_baseline{suffix}"
    cmd = [cc.split()[0], "-shared", "-fPIC", "-O2", "-Wall", f"-I{include}",
           str(PEP523_SOURCE), "-o", str(target)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CheckFailed(f"building the pep523 baseline failed: {' '.join(cmd)}\n{proc.stderr}")
    return out_dir


def make_test_python(run_dir: Path, want_pep523: bool) -> tuple[Path, dict]:
    pkg = find_ember_package()
    snapshot_root = run_dir / "ember-build"
    shutil.copytree(pkg, snapshot_root / "ember",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    # The module ember.pth's autoload line imports lives beside the package.
    shutil.copy2(REPO / "runtime" / "data" / "purelib" / "ember_autoload.py", snapshot_root)
    # Byte-compiled, as an installed package is: the test processes may run
    # with PYTHONDONTWRITEBYTECODE and would otherwise compile Ember's Python
    # half from source at every start (0.4 s under qemu-user).
    compileall.compile_dir(str(snapshot_root), quiet=1)
    so_hash = so_name = ""
    for so in sorted((snapshot_root / "ember").glob("_ember*.so")):
        so_hash = hashlib.sha256(so.read_bytes()).hexdigest()[:16]
        so_name = so.name
    venv = run_dir / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True,
                          env=clean_env()).stdout.strip()
    lines = [str(snapshot_root)]
    if want_pep523:
        lines.append(str(build_pep523(python, run_dir / "pep523-build")))
    lines.append(autoload_line())
    lines.append(f'import os; os.environ.get("{PEP523_VAR}") == "1" and '
                 f'__import__("_pep523_baseline").enable()')
    Path(site, "ember.pth").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return python, {"ember_package": str(pkg), "snapshot": str(snapshot_root / "ember"),
                    "ember_so_sha256": so_hash, "ember_so": so_name}


# Never passed to the test runs: Ember's variables (each run adds its own),
# the baseline's switch, dev/env's PYTHONPATH (the venv provides `ember`), and
# the terminal settings of whoever started the runner (an interactive run and
# a nohup run test the same thing; TERM is fixed below).
DROPPED_VARS = ("PYTHONPATH", "COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR",
                "PYTHON_COLORS", "CI", "TERM", PEP523_VAR)
DROPPED_PREFIXES = ("EMBER", "PYTEST", "CARGO")


def clean_env() -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in DROPPED_VARS and not k.startswith(DROPPED_PREFIXES)}
    env["TERM"] = "dumb"
    return env


PROBE = r"""
import importlib.util, json, os, sys
names = sys.argv[1:]
# The extension: the EMBER=1 autoload loads it, not the package.
mod = sys.modules.get("ember._ember")
base = sys.modules.get("_pep523_baseline")
info = {
    "version": sys.version,
    "machine": os.uname().machine,
    "executable": sys.executable,
    "debug": hasattr(sys, "gettotalrefcount"),
    "abiflags": sys.abiflags,
    "ember_loaded": mod is not None,
    "ember_enabled": bool(mod is not None and mod._installed() == "ember"),
    "max_tier": getattr(mod, "MAX_AVAILABLE_TIER", None),
    "pep523_enabled": bool(base is not None and base.is_enabled()),
    "missing_tests": [],
}
for name in names:
    full = name if name.startswith("test.") else "test." + name
    try:
        found = importlib.util.find_spec(full) is not None
    except ImportError:
        found = False
    except Exception:
        # A test package that skips itself on import (test_free_threading
        # raises SkipTest without the free-threaded build) exists.
        found = True
    if not found:
        info["missing_tests"].append(name)
print(json.dumps(info))
"""


def probe(python: Path, env: dict, flags=(), tests=()) -> tuple[dict, str]:
    proc = subprocess.run([str(python), *flags, "-c", PROBE, *tests], env=env,
                          capture_output=True, text=True, cwd=tempfile.gettempdir())
    if proc.returncode != 0:
        raise CheckFailed(f"probe of {python} {' '.join(flags)} failed "
                          f"(exit {proc.returncode}):\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def preflight(python: Path, config: Config, env: dict, probe_dir: Path) -> None:
    """The configuration is on, quietly, in `python` and `python -I`."""
    probe_dir.mkdir(parents=True)
    env = dict(env)
    if config.kind == "ember":
        env["EMBER_STATS"] = str(probe_dir / "stats-{pid}.json")
    shown = " ".join(f"{k}={v}" for k, v in env.items()
                     if k.startswith("EMBER") and k != "EMBER_STATS" or k == PEP523_VAR)
    what = f"configuration {config.name} ({shown})"
    for flags in ((), ("-I",)):
        info, err = probe(python, env, flags)
        on = info["ember_enabled"] if config.kind == "ember" else info["pep523_enabled"]
        if not on:
            raise CheckFailed(f"{what}: {'Ember' if config.kind == 'ember' else 'the baseline'} "
                              f"did not turn on in `python {' '.join(flags)}`"
                              + (f":\n{err.strip()}" if err.strip() else ""))
        if err.strip():
            raise CheckFailed(f"{what}: printed on stderr at start-up (tests would see it):\n"
                              f"{err.strip()}")
        if config.require_tier is not None and (info["max_tier"] or 0) < config.require_tier:
            raise CheckFailed(f"{what}: asks for tier {config.require_tier}, but this build of "
                              f"Ember runs up to tier {info['max_tier']}")
    if config.kind == "ember" and not list(probe_dir.glob("*.json")):
        raise CheckFailed(f"{what}: EMBER_STATS wrote no file")


# --------------------------------------------------------------------------
# Running regrtest

@dataclasses.dataclass
class RunSpec:
    label: str
    out_dir: Path
    tests: list[str]
    env: dict


def regrtest_options(ns, ignore_patterns: list[str]) -> list[str]:
    opts = ["-j", str(ns.jobs), "--timeout", str(ns.timeout), "--randseed", str(ns.randseed)]
    if ns.huntrleaks:
        opts += ["-R", ns.huntrleaks]
    if ns.use:
        opts += ["-u", ns.use]
    if ns.testdir:
        opts += ["--testdir", str(ns.testdir)]
    for pat in ignore_patterns:
        opts += ["-i", pat]
    return opts


def expand_tests(python: Path, env: dict, tests: list[str], options: list[str]) -> list[str]:
    """The test modules regrtest runs for these names: it splits some packages
    (test_asyncio, test_inspect, ...) into one test per submodule."""
    select = []
    if "--testdir" in options:
        i = options.index("--testdir")
        select = options[i:i + 2]
    proc = subprocess.run([str(python), "-m", "test", "--list-tests", *select, *tests],
                          capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
    if proc.returncode != 0:
        raise CheckFailed(f"python -m test --list-tests failed:\n{proc.stderr}")
    return [l.strip() for l in proc.stdout.splitlines() if l.strip()]


def run_regrtest(python: Path, spec: RunSpec, options: list[str], base_env: dict) -> dict:
    expected = expand_tests(python, base_env, spec.tests, options)
    out = spec.out_dir
    out.mkdir(parents=True, exist_ok=True)
    record = out / "record.jsonl"
    record.write_text("")
    junit = out / "junit.xml"
    stdout_log = out / "regrtest.log"
    # A short, private temporary directory per run: tests put AF_UNIX sockets
    # under it (108-byte path limit), and /tmp is shared with other jobs.
    tmp = Path(tempfile.mkdtemp(prefix="emrt-", dir="/tmp"))
    env = dict(spec.env, TMPDIR=str(tmp))
    cmd = [str(python), str(DRIVER), str(record), *options,
           "--junit-xml", str(junit), "--tempdir", str(tmp), *spec.tests]
    extra = {k: v for k, v in env.items() if k not in base_env}
    (out / "command.txt").write_text(
        "".join(f"{k}={v}\n" for k, v in sorted(extra.items())) + " ".join(cmd) + "\n",
        encoding="utf-8")
    shown = cmd[:-len(spec.tests)] + ([f"<{len(spec.tests)} tests>"] if len(spec.tests) > 8
                                      else spec.tests)
    words = [f"{k}={v}" for k, v in extra.items() if k != "TMPDIR"] + shown
    log(f"[{spec.label}] {' '.join(words)}".replace(str(REPO) + "/", ""))
    start = time.monotonic()
    stop = threading.Event()
    watcher = threading.Thread(target=watch_progress,
                               args=(spec.label, record, len(expected), start, stop),
                               daemon=True)
    with open(stdout_log, "wb") as logf:
        proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env,
                                cwd=str(tmp), start_new_session=True)
        watcher.start()
        try:
            rc = proc.wait()
        except BaseException:
            # Let regrtest stop its workers (it does on SIGINT), then make sure.
            try:
                os.killpg(proc.pid, signal.SIGINT)
                proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()
            raise
        finally:
            stop.set()
            watcher.join()
            leftovers = reap_leftovers(tmp)
            if leftovers:
                log(f"[{spec.label}] killed {leftovers} process(es) the run left behind")
            shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.monotonic() - start
    meta = {"label": spec.label, "returncode": rc, "seconds": elapsed,
            "tests": spec.tests, "expected": expected, "options": options}
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    log(f"[{spec.label}] regrtest exited with {rc} after {fmt_duration(elapsed)} "
        f"(log: {rel(stdout_log)})")
    return meta


def watch_progress(label, record: Path, total: int, start: float, stop: threading.Event):
    """Print the modules that did not pass as they finish, and a heartbeat."""
    pos = 0
    done = bad = 0
    pending: dict = {}   # worker failures, until their output says whether it was a timeout
    last_beat = time.monotonic()

    def report(name, state):
        log(f"[{label}] {done}/{total} {name} {STATE_TEXT.get(state, state)}")

    while True:
        finished = stop.wait(2.0)
        try:
            with open(record, "rb") as f:
                f.seek(pos)
                chunk = f.read()
        except OSError:
            chunk = b""
        end = chunk.rfind(b"\n") + 1
        pos += end
        for line in chunk[:end].decode("utf-8", "replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            name, state = entry.get("test"), entry.get("state")
            if entry.get("kind") == "output":
                if name in pending:
                    pending.pop(name)
                    report(name, "TIMEOUT" if entry.get("timed_out") else state)
                continue
            done += 1
            if state in FAILING_STATES:
                bad += 1
            if state == "WORKER_FAILED":
                pending[name] = state
            elif state in FAILING_STATES or state == "ENV_CHANGED":
                report(name, state)
        if finished:
            for name, state in pending.items():
                report(name, state)
            return
        now = time.monotonic()
        if now - last_beat >= 60:
            last_beat = now
            log(f"[{label}] {done}/{total} modules done, {bad} failing, "
                f"{fmt_duration(now - start)} elapsed")


def reap_leftovers(tmp: Path) -> int:
    """Kill what a run left behind: every process whose TMPDIR is in the run's
    private temporary directory (regrtest gives each worker a TMPDIR inside
    it, and children inherit it). A worker ended by its --timeout can leave a
    hung child of a test running."""
    mark = f"TMPDIR={tmp}".encode()
    killed = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if any(v == mark or v.startswith(mark + b"/") for v in env):
            try:
                os.kill(int(entry), signal.SIGKILL)
                killed += 1
            except OSError:
                pass
    return killed


# --------------------------------------------------------------------------
# Reading results

_TEST_STR = re.compile(r"^(\S+) \(([^()\s]+)\)")


def test_id(name: str) -> str:
    """Test id from the str() of a unittest test as regrtest reports it.

    'test_z (test.test_x.TestY.test_z)'            -> test.test_x.TestY.test_z
    'test_z (test.test_x.TestY.test_z) (i=1)'      -> test.test_x.TestY.test_z (a subtest)
    'setUpClass (test.test_x.TestY)'               -> test.test_x.TestY.setUpClass
    'f (test.test_x)' (a doctest)                  -> test.test_x.f
    """
    m = _TEST_STR.match(name)
    if not m:
        return name.strip()
    short, where = m.groups()
    if where == short or where.endswith("." + short):
        return where
    return f"{where}.{short}"


def last_line(text: str | None) -> str:
    lines = [l for l in (text or "").strip().splitlines() if l.strip()]
    return lines[-1].strip() if lines else ""


@dataclasses.dataclass
class RunResult:
    label: str
    meta: dict
    modules: dict        # module -> state
    module_info: dict    # module -> record entry (without its XML), plus "output"
    cases: dict          # test id -> passed/failure/error/skipped/xfail/unexpected-success
    case_module: dict    # test id -> module
    failing: dict        # test id -> sorted tuple of failure kinds
    details: dict        # test id -> last line of its traceback
    leaks: dict          # module -> regrtest's "leaked ..." lines (state REFLEAK, with -R)

    def count(self, status: str) -> int:
        return sum(1 for s in self.cases.values() if s == status)


FAIL_KINDS = ("failure", "error", "unexpected-success")
_RANK = {"passed": 0, "skipped": 1, "xfail": 2, "unexpected-success": 3, "failure": 4, "error": 5}


def load_run(out_dir: Path, label: str) -> RunResult:
    meta = json.loads((out_dir / "meta.json").read_text(encoding="utf-8"))
    modules: dict = {}
    info: dict = {}
    cases: dict = {}
    case_module: dict = {}
    failing: dict = {}
    details: dict = {}
    outputs: dict = {}

    def set_case(tid, status, module, detail=None):
        old = cases.get(tid)
        if old is None or _RANK[status] > _RANK[old]:
            cases[tid] = status
        case_module.setdefault(tid, module)
        if status in FAIL_KINDS:
            failing.setdefault(tid, set()).add(status)
            if detail and tid not in details:
                details[tid] = detail

    with open(out_dir / "record.jsonl", encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            entry = json.loads(line)
            name = entry["test"]
            if entry.get("kind") == "output":
                outputs[name] = entry
                continue
            modules[name] = entry["state"]
            xml_data = entry.pop("xml", [])
            info[name] = entry
            for xml_text in xml_data:
                for case in ET.fromstring(xml_text).iter("testcase"):
                    tid = case.get("name", "")
                    if not tid:
                        # Started but never finished, e.g. a test whose
                        # subtests failed: the module's failure list has it.
                        continue
                    status, detail = "passed", None
                    for child in case:
                        if child.tag in ("failure", "error"):
                            status = child.tag
                            detail = last_line(child.get("message")) or last_line(child.text)
                            break
                        if child.tag == "skipped":
                            status = "skipped"
                        elif child.tag == "output":
                            status = "xfail"
                        elif child.tag == "outcome" and (child.text or "").strip() == "UNEXPECTED_SUCCESS":
                            status = "unexpected-success"
                    set_case(tid, status, name, detail)
            # What the JUnit XML does not show: failing subtests (the
            # testcase itself looks unfinished) and errors in setUpClass or
            # setUpModule (no testcase element at all).
            for key, kind in (("error_details", "error"), ("failure_details", "failure")):
                for test_str, tb in entry.get(key, []):
                    set_case(test_id(test_str), kind, name, last_line(tb))
    for name, out in outputs.items():
        if name in info:
            info[name]["output"] = out
        # regrtest's --timeout makes faulthandler end the worker (exit 1), which
        # regrtest reports as a worker failure: call it what it is.
        if modules.get(name) == "WORKER_FAILED" and out.get("timed_out"):
            modules[name] = "TIMEOUT"
    for name in meta.get("expected") or meta["tests"]:
        if name not in modules:
            modules[name] = "MISSING"
    failing = {k: tuple(sorted(v)) for k, v in failing.items()}
    # A leaking module: its state, and the lines saying what leaked (from the
    # worker's output; "?" when there was none to read).
    leaks = {name: (outputs.get(name) or {}).get("refleaks") or ["?"]
             for name, state in modules.items() if state == "REFLEAK"}
    return RunResult(label, meta, modules, info, cases, case_module, failing, details, leaks)


_LEAK_KIND = re.compile(r" leaked \[[-\d, ]*\] (references|memory blocks|file descriptors)")


def leak_kinds(lines: list[str]) -> str:
    """'references+memory blocks' from regrtest's "leaked" lines."""
    kinds = sorted({m.group(1) for line in lines for m in [_LEAK_KIND.search(line)] if m})
    return "+".join(kinds) or "?"


def describe_leaks(r: RunResult) -> str:
    if not r.leaks:
        return "none"
    return f"{len(r.leaks)} modules: " + ", ".join(
        f"{name} ({leak_kinds(lines)})" for name, lines in sorted(r.leaks.items()))


def describe(r: RunResult) -> str:
    states: dict = {}
    for s in r.modules.values():
        states[s] = states.get(s, 0) + 1
    parts = [f"{n} {STATE_TEXT.get(s, s)}" for s, n in sorted(states.items(), key=lambda x: -x[1])]
    return (f"{len(r.modules)} modules in {fmt_duration(r.meta['seconds'])} "
            f"(regrtest exit {r.meta['returncode']})\n"
            f"    testcases: {len(r.cases)} run: {r.count('passed')} passed, "
            f"{r.count('failure')} failed, {r.count('error')} errors, "
            f"{r.count('skipped')} skipped, {r.count('xfail')} expected failures, "
            f"{r.count('unexpected-success')} unexpected successes\n"
            f"    modules: {', '.join(parts)}")


# --------------------------------------------------------------------------
# Ember's statistics

def ember_stats(stats_dir: Path) -> dict:
    total = {"processes": 0, "unreadable": 0, "code_objects_seen": 0, "frames": 0,
             "by_tier": {}, "enabled_processes": 0, "ever_compiled": {}, "interpreter_reasons": {}}
    for path in sorted(glob.glob(str(stats_dir / "*.json"))):
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            g = data["global"]
            if data.get("schema") != "ember-stats":
                raise ValueError(data.get("schema"))
        except (OSError, ValueError, KeyError, TypeError):
            total["unreadable"] += 1
            continue
        total["processes"] += 1
        total["enabled_processes"] += bool(data.get("enabled"))
        total["code_objects_seen"] += int(g.get("code_objects_seen", 0))
        total["frames"] += int(g.get("frames", 0))
        for tier, n in (g.get("code_objects_by_tier") or {}).items():
            total["by_tier"][str(tier)] = total["by_tier"].get(str(tier), 0) + int(n)
        # Over each process's whole run, freed code objects included.
        for tier, n in (g.get("code_objects_ever_compiled") or {}).items():
            total["ever_compiled"][str(tier)] = total["ever_compiled"].get(str(tier), 0) + int(n)
        for why, n in (g.get("interpreter_reasons") or {}).items():
            total["interpreter_reasons"][why] = total["interpreter_reasons"].get(why, 0) + int(n)
    return total


def check_ember_stats(stats: dict, config: Config) -> list[str]:
    t1 = stats["by_tier"].get("1", 0)
    t2 = stats["by_tier"].get("2", 0)
    log(f"ember: {stats['processes']} processes, {stats['code_objects_seen']} code objects "
        f"seen by the hook, compiled at tier 1: {t1}, tier 2: {t2}"
        + (f" ({stats['unreadable']} unreadable stats files)" if stats["unreadable"] else ""))
    ever = stats["ever_compiled"].get("1", 0)
    seen = stats["code_objects_seen"]
    if ever and seen:
        reasons = sorted(stats["interpreter_reasons"].items(), key=lambda kv: -kv[1])
        not_hot = seen - ever - sum(n for _, n in reasons)
        others = [f"{why}: {n}" for why, n in reasons] + ([f"not hot enough: {not_hot}"] if not_hot else [])
        log(f"ember: over the whole run (code objects freed before exit included): {ever} of {seen} "
            f"ever compiled at tier 1 ({100 * ever / seen:.2f}%)"
            + (f"; in the interpreter: {', '.join(others)}" if others else ""))
    problems = []
    if stats["processes"] == 0:
        problems.append("no process of the Ember run wrote EMBER_STATS: Ember was not on")
    if stats["code_objects_seen"] == 0:
        problems.append("Ember's hook saw no code object: this run tested nothing about Ember")
    if config.require_tier is not None and stats["by_tier"].get(str(config.require_tier), 0) == 0:
        problems.append(f"configuration {config.name} asks for tier {config.require_tier}, "
                        f"but no code object was compiled at tier {config.require_tier}")
    return problems


# --------------------------------------------------------------------------
# Comparing

@dataclasses.dataclass
class Diff:
    kind: str    # "module" or "case"
    name: str
    stock: object
    other: object
    module: str
    detail: str = ""

    @property
    def key(self):
        return (self.kind, self.name)


def compare(stock: RunResult, other: RunResult, modules: list[str] | None = None):
    """Differences that count, and notes (env changes, skips) that do not."""
    diffs: list[Diff] = []
    notes: list[str] = []
    names = modules if modules is not None else sorted(set(stock.modules) | set(other.modules))
    comparable = set()
    for name in names:
        s = stock.modules.get(name, "MISSING")
        o = other.modules.get(name, "MISSING")
        if s != o and (s in FAILING_STATES or o in FAILING_STATES):
            detail = module_detail(other if o in FAILING_STATES else stock, name)
            diffs.append(Diff("module", name, s, o, name, detail))
        elif s != o:
            notes.append(f"{name}: {STATE_TEXT.get(s, s)} under stock, "
                         f"{STATE_TEXT.get(o, o)} under {other.label}")
        elif s == "REFLEAK" and leak_kinds(stock.leaks[name]) != leak_kinds(other.leaks[name]):
            # Both leak, but not the same thing.
            diffs.append(Diff("module", name, f"leaked {leak_kinds(stock.leaks[name])}",
                              f"leaked {leak_kinds(other.leaks[name])}", name,
                              "; ".join(other.leaks[name])))
        if s not in NO_TESTCASE_DATA_STATES and o not in NO_TESTCASE_DATA_STATES:
            comparable.add(name)

    for tid in sorted(set(stock.failing) | set(other.failing)):
        module = stock.case_module.get(tid) or other.case_module.get(tid)
        if module not in comparable:
            continue
        s = stock.failing.get(tid, ())
        o = other.failing.get(tid, ())
        if s != o:
            detail = other.details.get(tid) if o else stock.details.get(tid)
            diffs.append(Diff("case", tid, s or stock.cases.get(tid, "not run"),
                              o or other.cases.get(tid, "not run"), module, detail or ""))

    # Testcases that ran in one run only: not a difference (skips are not),
    # but worth a count.
    ran_s = {t for t, st in stock.cases.items() if st != "skipped" and stock.case_module[t] in comparable}
    ran_o = {t for t, st in other.cases.items() if st != "skipped" and other.case_module[t] in comparable}
    for a, b, x, y in ((ran_s, ran_o, "stock", other.label), (ran_o, ran_s, other.label, "stock")):
        if a - b:
            notes.append(f"{len(a - b)} testcases ran under {x} but were skipped or absent "
                         f"under {y}, e.g. {', '.join(sorted(a - b)[:4])}")
    return diffs, notes


def module_detail(r: RunResult, name: str) -> str:
    entry = r.module_info.get(name) or {}
    out = entry.get("output") or {}
    parts = []
    if out.get("fatal_error"):
        parts.append(out["fatal_error"])
    if out.get("err_msg"):
        parts.append(out["err_msg"])
    if out.get("timed_out"):
        parts.append("faulthandler timeout")
    parts += out.get("refleaks") or []
    if entry.get("state") == "FAILED" and not (entry.get("errors") or entry.get("failures")):
        parts.append("failed without a failing testcase (unexpected success, "
                     "or a failure outside unittest)")
    if entry.get("state") == "UNCAUGHT_EXC" and out.get("stdout_tail"):
        parts.append(last_line(out["stdout_tail"]))
    parts += entry.get("env_changed_reasons") or []
    return "; ".join(parts)


def show_value(v) -> str:
    if isinstance(v, (tuple, list)):
        return "+".join(v) if v else "ok"
    return STATE_TEXT.get(v, str(v))


def print_diffs(label: str, diffs: list[Diff], confirm: dict | None, baseline: dict | None,
                out_file: Path, per_module: int = 10) -> None:
    """Log the differences (at most `per_module` testcases per module and
    category) and write all of them to out_file."""
    def line(d: Diff) -> str:
        text = f"  {d.name}: stock {show_value(d.stock)}, {label} {show_value(d.other)}"
        if d.kind == "case":
            text += f"  [{d.module}]"
        tags = []
        if confirm is not None:
            tags.append("reproduced on re-run" if confirm.get(d.key) else "NOT reproduced on re-run: flaky?")
        if baseline is not None:
            tags.append("also under the pep523 baseline" if d.key in baseline
                        else f"{label} only, not under the pep523 baseline")
        if tags:
            text += f"  ({'; '.join(tags)})"
        if d.detail:
            text += f"\n      {d.detail[:300]}"
        return text

    cases = [d for d in diffs if d.kind == "case"]
    full = []
    for title, items in (
        ("test modules whose state differs", [d for d in diffs if d.kind == "module"]),
        (f"testcases failing only under {label}", [d for d in cases if not isinstance(d.stock, tuple)]),
        ("testcases failing only under stock", [d for d in cases if not isinstance(d.other, tuple)]),
        ("testcases failing differently", [d for d in cases if isinstance(d.stock, tuple)
                                           and isinstance(d.other, tuple)]),
    ):
        if not items:
            continue
        log(f"{title} ({len(items)}):")
        full.append(f"{title} ({len(items)}):")
        shown: dict = {}
        for d in items:
            full.append(line(d))
            n = shown[d.module] = shown.get(d.module, 0) + 1
            if d.kind == "module" or n <= per_module:
                log(line(d))
        for module, n in shown.items():
            if n > per_module:
                log(f"  ... and {n - per_module} more in {module} (all in {rel(out_file)})")
    out_file.write_text("\n".join(full) + "\n", encoding="utf-8")


def confirm_diffs(python, run_dir, config, base_env, env, diffs, options) -> dict:
    """Re-run the modules with differences, stock and this configuration,
    once more: does each difference show up again?"""
    modules = sorted({d.module for d in diffs})
    log(f"[confirm] re-running {len(modules)} module(s) with differences, stock and {config.name}")
    sdir = run_dir / f"confirm-{config.name}" / "stock"
    odir = run_dir / f"confirm-{config.name}" / config.name
    run_env = dict(env)
    if config.kind == "ember":
        stats_dir = odir / "ember-stats"
        stats_dir.mkdir(parents=True)
        run_env["EMBER_STATS"] = str(stats_dir / "stats-{pid}.json")
    run_regrtest(python, RunSpec("confirm-stock", sdir, modules, base_env), options, base_env)
    run_regrtest(python, RunSpec(f"confirm-{config.name}", odir, modules, run_env), options, base_env)
    again, _ = compare(load_run(sdir, "stock"), load_run(odir, config.name), modules)
    keys = {d.key for d in again}
    return {d.key: d.key in keys for d in diffs}


# --------------------------------------------------------------------------
# Stock cache: keyed by everything that can change a stock result here.

def cache_key(tests: list[str], version: str, machine: str, options: list[str],
              env: dict) -> str:
    # sys.version does not name the ISA: an arm64 stock result (dev/env --arch
    # arm64) must never stand in for an x86-64 one, or the reverse.
    env_for_key = {k: v for k, v in env.items() if k != "TMPDIR"}
    blob = json.dumps({"tests": tests, "version": version, "machine": machine,
                       "options": options, "env": env_for_key}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def save_stock_cache(stock_dir: Path, cache_dir: Path) -> None:
    """Replace the cached stock result; safe against a concurrent run doing
    the same (the last one wins)."""
    tmp = cache_dir.with_name(f"{cache_dir.name}.tmp-{os.getpid()}")
    try:
        shutil.copytree(stock_dir, tmp, ignore=shutil.ignore_patterns("regrtest.log", "junit.xml"))
        shutil.rmtree(cache_dir, ignore_errors=True)
        os.rename(tmp, cache_dir)
    except OSError as e:
        log(f"[stock] warning: could not save the stock result to {rel(cache_dir)}: {e}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --------------------------------------------------------------------------
# Command line

def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="regrtest.py",
        description="Run CPython's regression tests stock and under Ember; compare test for test.",
        epilog="Configurations: " + "; ".join(
            f"{c.name} = {' '.join(f'{k}={v}' for k, v in c.env.items())} ({c.description})"
            for c in CONFIGS.values()))
    p.add_argument("--list", metavar="ci|full|FILE",
                   help="test modules to run: a list in tests/cpython/lists/, or a file")
    p.add_argument("--config", action="append", metavar="NAME[,NAME]",
                   help="configuration(s) to compare with stock (default: ember); repeatable")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="extra EMBER_* variable for the Ember runs; repeatable")
    p.add_argument("-j", "--jobs", type=int, default=2,
                   help="regrtest worker processes (default 2)")
    p.add_argument("--timeout", type=int, default=None,
                   help=f"per-test-module timeout in seconds (default: the list's "
                        f"`# regrtest-timeout:` line, else {DEFAULT_TIMEOUT})")
    p.add_argument("-u", "--use", default="",
                   help="regrtest resources (-u), the same in every run (default: none)")
    p.add_argument("--dbg", action="store_true",
                   help="the tests run on CPython's debug build (python3.14d, Py_DEBUG) with "
                        "Ember's debug build: run through `dev/env --dbg`; refuses otherwise")
    p.add_argument("--huntrleaks", "-R", metavar="WARMUPS:RUNS",
                   help="regrtest -R WARMUPS:RUNS in every run: a module whose every counted "
                        "run leaks references, memory blocks or file descriptors fails "
                        "(state REFLEAK); needs --dbg")
    p.add_argument("--randseed", type=int, default=DEFAULT_RANDSEED,
                   help="regrtest random seed, the same in every run (default %(default)s)")
    p.add_argument("--ignore", action="append", type=Path, metavar="FILE",
                   help="file of test patterns that no run executes (regrtest -i); default: "
                        + ", ".join(rel(p) for p in DEFAULT_IGNORES))
    p.add_argument("--no-ignore", action="store_true",
                   help="run every test of the list, ignoring no pattern")
    p.add_argument("--only-ember", action="store_true",
                   help="do not run stock: compare with a cached stock result if there is one, "
                        "otherwise only run the checks of each configuration")
    p.add_argument("--stock-cache", action="store_true",
                   help="reuse the stock result of an earlier run with the same list, options "
                        "and Python (every stock run is saved to the cache)")
    p.add_argument("--no-confirm", action="store_true",
                   help="do not re-run modules with differences to see whether they reproduce")
    p.add_argument("--allow-flaky", action="store_true",
                   help="differences that do not reproduce on the re-run do not fail the run")
    p.add_argument("--testdir", type=Path,
                   help="run test modules from this directory instead of CPython's test "
                        "suite (regrtest --testdir; used by selftest.py)")
    p.add_argument("--results", type=Path, default=RESULTS_DIR,
                   help="where run directories go (default tests/cpython/results)")
    p.add_argument("--write-full-list", action="store_true",
                   help="regenerate lists/full.txt from `python -m test --list-tests` and exit")
    ns = p.parse_args(argv)
    if not ns.write_full_list and not ns.list:
        p.error("--list is required")
    names = []
    for item in ns.config or ["ember"]:
        for name in item.split(","):
            name = name.strip()
            if name not in CONFIGS:
                p.error(f"--config {name}: unknown (known: {', '.join(CONFIGS)})")
            if name not in names:
                names.append(name)
    ns.configs = [CONFIGS[n] for n in names]
    ns.extra_env = {}
    for item in ns.env:
        k, sep, v = item.partition("=")
        if not sep or not k.startswith("EMBER"):
            p.error(f"--env {item}: expected EMBER_NAME=VALUE")
        ns.extra_env[k] = v
    if ns.huntrleaks is not None:
        if not re.fullmatch(r"[1-9]\d*:[1-9]\d*", ns.huntrleaks):
            p.error(f"--huntrleaks {ns.huntrleaks}: expected WARMUPS:RUNS, e.g. 3:3")
        if not ns.dbg:
            p.error("--huntrleaks needs CPython's debug build: add --dbg and run through "
                    "`dev/env --dbg python tests/cpython/regrtest.py ...`")
    if ns.jobs < 1:
        p.error("-j must be at least 1: tests run in worker processes, so that a crash "
                "is a result and not the end of the run")
    if ns.testdir is not None:
        ns.testdir = ns.testdir.resolve()
        if not ns.testdir.is_dir():
            p.error(f"--testdir {ns.testdir}: not a directory")
    ns.ignore_files = [] if ns.no_ignore else (ns.ignore or DEFAULT_IGNORES)
    for path in ns.ignore_files:
        if not path.exists():
            p.error(f"--ignore {path}: file not found")
    return ns


def list_all_tests(python: str, env: dict | None = None) -> list[str]:
    proc = subprocess.run([python, "-m", "test", "--list-tests"], capture_output=True,
                          text=True, env=env or clean_env(), cwd=tempfile.gettempdir())
    if proc.returncode != 0:
        raise CheckFailed(f"python -m test --list-tests failed:\n{proc.stderr}")
    return [l.strip() for l in proc.stdout.splitlines() if l.strip().startswith("test")]


def write_full_list() -> int:
    names = list_all_tests(sys.executable)
    path = LISTS_DIR / "full.txt"
    header = (
        "# Every test module of CPython's test suite as `python -m test --list-tests`\n"
        "# lists them (what a plain `python -m test` runs). Generated by\n"
        "#   dev/env python tests/cpython/regrtest.py --write-full-list\n"
        f"# with Python {sys.version.split()[0]}: {len(names)} modules.\n"
    )
    path.write_text(header + "\n".join(names) + "\n", encoding="utf-8")
    log(f"wrote {rel(path)}: {len(names)} test modules")
    return 0


# --------------------------------------------------------------------------
# Main

def main(argv=None) -> int:
    ns = parse_args(argv)
    if ns.write_full_list:
        return write_full_list()

    if ns.dbg and not hasattr(sys, "gettotalrefcount"):
        # The tests' venv is made from this interpreter.
        raise UsageError(f"--dbg: {sys.executable} is not CPython's debug build (no "
                         f"sys.gettotalrefcount): run through `dev/env --dbg python "
                         f"tests/cpython/regrtest.py --dbg ...`")
    lpath = list_path(ns.list)
    tests = read_list(lpath)
    if ns.timeout is None:
        ns.timeout = list_timeout(lpath) or DEFAULT_TIMEOUT
    ignore_patterns = [pat for f in ns.ignore_files for pat in read_names(f)]
    list_name = lpath.stem if lpath.parent.resolve() == LISTS_DIR else lpath.name.replace(".", "_")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    ns.results.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:   # concurrent runs may start in the same second
        run_dir = ns.results / (f"{list_name}-{stamp}" + (f"-{n}" if n > 1 else ""))
        try:
            run_dir.mkdir()
            break
        except FileExistsError:
            n += 1
    overall_start = time.monotonic()
    log(f"== CPython regrtest under Ember: list {rel(lpath)} ({len(tests)} names), "
        f"configurations {', '.join(c.name for c in ns.configs)}; results in {rel(run_dir)}")
    if ignore_patterns:
        log(f"ignored in every run: {len(ignore_patterns)} test patterns from "
            f"{', '.join(rel(f) for f in ns.ignore_files)} (--no-ignore runs them)")

    want_pep523 = any(c.kind == "pep523" for c in ns.configs)
    python, build = make_test_python(run_dir, want_pep523)
    base_env = clean_env()
    options = regrtest_options(ns, ignore_patterns)

    # Pre-flight: stock has Ember off, the list names real tests, and every
    # configuration is on (with and without -I) without a word on stderr.
    info, _ = probe(python, base_env, tests=() if ns.testdir else tests)
    if ns.testdir:
        info["missing_tests"] = [t for t in tests if not (ns.testdir / f"{t}.py").exists()
                                 and not (ns.testdir / t).is_dir()]
    if info["ember_loaded"] or info["pep523_enabled"]:
        raise CheckFailed("Ember or the baseline is on in the stock environment")
    if info["missing_tests"]:
        raise UsageError(f"{rel(lpath)}: no such test module(s): {', '.join(info['missing_tests'])}")
    if ns.dbg:
        if not info["debug"]:
            raise UsageError(f"--dbg: {info['executable']} is not CPython's debug build (no "
                             f"sys.gettotalrefcount): run through `dev/env --dbg python "
                             f"tests/cpython/regrtest.py --dbg ...`")
        if not build["ember_so"].startswith(f"_ember.cpython-314{info['abiflags']}-"):
            raise UsageError(f"--dbg: the Ember build {build['ember_so']} is not built for "
                             f"the debug interpreter (ABI flags {info['abiflags']!r}): run "
                             f"through `dev/env --dbg`")
    version = info["version"]
    log(f"python {version.split()[0]} ({info['machine']}"
        + (f", debug build, ABI flags {info['abiflags']!r}" if info["debug"] else "")
        + f"), regrtest options: {' '.join(options)}")
    log(f"ember build {build['ember_so_sha256']} {build['ember_so']} "
        f"(snapshot of {build['ember_package']})")
    if lpath.resolve() == (LISTS_DIR / "full.txt") and not ns.testdir:
        current = list_all_tests(str(python), base_env)
        new, gone = sorted(set(current) - set(tests)), sorted(set(tests) - set(current))
        if new or gone:
            log(f"warning: lists/full.txt is out of date with this test suite "
                f"({len(new)} new, {len(gone)} gone); regenerate it with --write-full-list")

    config_envs = {}
    for config in ns.configs:
        env = {**base_env, **config.env}
        if config.kind == "ember":
            env.update(ns.extra_env)
        preflight(python, config, env, run_dir / f"probe-{config.name}")
        config_envs[config.name] = env

    # Stock run (or its cached result).
    # sys.version is the same for CPython's release and debug builds.
    key = cache_key(tests, version + (" abiflags=" + info["abiflags"] if info["abiflags"] else ""),
                    info["machine"], options, base_env)
    cache_dir = ns.results / "stock-cache" / key
    stock = None
    stock_source = "run now"
    if (ns.stock_cache or ns.only_ember) and (cache_dir / "meta.json").exists():
        stock = load_run(cache_dir, "stock")
        stock_source = f"cached: {rel(cache_dir)}"
        log(f"[stock] using the cached stock result {rel(cache_dir)}")
    elif not ns.only_ember:
        run_regrtest(python, RunSpec("stock", run_dir / "stock", tests, base_env), options, base_env)
        stock = load_run(run_dir / "stock", "stock")
        save_stock_cache(run_dir / "stock", cache_dir)
    else:
        log("[stock] --only-ember and no cached stock result: nothing to compare with")

    runs = []
    for config in ns.configs:
        env = dict(config_envs[config.name])
        stats_dir = run_dir / config.name / "ember-stats"
        if config.kind == "ember":
            stats_dir.mkdir(parents=True)
            env["EMBER_STATS"] = str(stats_dir / "stats-{pid}.json")
        run_regrtest(python, RunSpec(config.name, run_dir / config.name, tests, env),
                     options, base_env)
        runs.append((config, load_run(run_dir / config.name, config.name),
                     ember_stats(stats_dir) if config.kind == "ember" else None))

    # Report.
    summary = {"list": rel(lpath), "names": len(tests), "options": options, "python": version,
               "machine": info["machine"], "debug": info["debug"],
               "ignore_files": [rel(f) for f in ns.ignore_files], "ember_build": build,
               "stock_source": stock_source, "configs": {}}
    compared = {}
    if stock is not None:
        for config, result, _ in runs:
            compared[config.name] = compare(stock, result)
    baseline = None
    if "pep523" in compared:
        baseline = {d.key for d in compared["pep523"][0]}

    log("")
    log("=" * 78)
    if stock is not None:
        log(f"stock ({stock_source}): {describe(stock)}")
        summary["stock"] = {"seconds": stock.meta["seconds"], "testcases": len(stock.cases),
                            "failing": sorted(stock.failing), "leaks": stock.leaks}
        if ns.huntrleaks:
            log(f"leaking under stock (-R {ns.huntrleaks}): {describe_leaks(stock)}")
    ok = True
    for config, result, stats in runs:
        log("")
        shown = {**config.env, **(ns.extra_env if config.kind == "ember" else {})}
        log(f"{config.name} ({' '.join(f'{k}={v}' for k, v in shown.items())}): {describe(result)}")
        entry = {"seconds": result.meta["seconds"], "testcases": len(result.cases),
                 "leaks": result.leaks}
        if ns.huntrleaks:
            log(f"leaking under {config.name} (-R {ns.huntrleaks}): {describe_leaks(result)}")
        if config.kind == "ember":
            problems = check_ember_stats(stats, config)
            entry["stats"] = stats
        else:
            problems = []
            log("pep523: the pass-through evaluator, not Ember (no Ember statistics)")
        if stock is None:
            bad = sorted(n for n, s in result.modules.items() if s in FAILING_STATES)
            log(f"no stock result to compare with; failing under {config.name}: "
                f"{len(bad)} modules, {len(result.failing)} testcases")
            for name in bad:
                log(f"  {name}: {STATE_TEXT.get(result.modules[name], result.modules[name])}")
            entry["compared"] = False
        else:
            diffs, notes = compared[config.name]
            confirm = None
            if diffs and not ns.no_confirm:
                confirm = confirm_diffs(python, run_dir, config, base_env,
                                        config_envs[config.name], diffs, options)
            both = sorted(t for t in set(stock.failing) & set(result.failing)
                          if stock.failing[t] == result.failing[t])
            both_mods = sorted(m for m, s in stock.modules.items()
                               if s in FAILING_STATES and result.modules.get(m) == s)
            log(f"failing alike under stock and {config.name}: {len(both_mods)} modules"
                + (f" ({' '.join(both_mods[:15])}{' ...' if len(both_mods) > 15 else ''})"
                   if both_mods else "")
                + f", {len(both)} testcases")
            for note in notes:
                log(f"note: {note}")
            if diffs:
                log(f"DIFFERENCES between stock and {config.name}: {len(diffs)}")
                print_diffs(config.name, diffs, confirm,
                            baseline if config.kind == "ember" else None,
                            run_dir / f"differences-{config.name}.txt")
            else:
                log(f"no difference between stock and {config.name}")
            counted = [d for d in diffs
                       if not (ns.allow_flaky and confirm is not None and not confirm.get(d.key))]
            if counted:
                problems.append(f"{len(counted)} differences from stock")
            entry.update(compared=True, differences=[dataclasses.asdict(d) for d in diffs],
                         also_under_pep523=None if baseline is None or config.kind != "ember"
                         else [list(d.key) for d in diffs if d.key in baseline],
                         reproduced=None if confirm is None
                         else [list(k) for k, v in confirm.items() if v],
                         notes=notes, failing_alike=both, failing_modules_alike=both_mods)
        for prob in problems:
            log(f"FAIL ({config.name}): {prob}")
        ok = ok and not problems
        entry["problems"] = problems
        summary["configs"][config.name] = entry
    total = time.monotonic() - overall_start
    summary["seconds"] = total
    summary["result"] = "PASS" if ok else "FAIL"
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n",
                                          encoding="utf-8")
    log("")
    log(f"RESULT: {'PASS' if ok else 'FAIL'} ({fmt_duration(total)} in all; details in {rel(run_dir)})")
    return 0 if ok else 1


def _terminate(signum, frame):
    raise KeyboardInterrupt


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _terminate)
    try:
        sys.exit(main())
    except UsageError as e:
        print(f"regrtest.py: error: {e}", file=sys.stderr)
        sys.exit(2)
    except CheckFailed as e:
        print(f"regrtest.py: FAIL: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("regrtest.py: interrupted", file=sys.stderr)
        sys.exit(130)
