"""Ember's benchmark runner: pyperformance's benchmarks under several
configurations of one interpreter, interleaved, with ratios against `interp`.

    dev/env python benches/run.py [--benchmarks richards,nbody,...|--set dev|--set overhead]
        [--configs interp,passthrough,ember,pyjit,cinderx] [--mode steady|cold|both]
        [--fast] [--out DIR]

See benches/README.md for what is measured and how to read the results.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import glob
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SITE = os.path.join(HERE, "site")
COLD_DRIVER = os.path.join(HERE, "cold.py")
sys.path.insert(0, SITE)

import ebench  # noqa: E402  (benches/site/ebench.py: the configuration table)

REFERENCE = "interp"

#: Directory holding the private copy of the `ember` package that every
#: benchmark process imports (see snapshot_ember), or None.
EMBER_SNAPSHOT: str | None = None

SETS = {
    "dev": ["richards", "nbody", "float", "chaos", "spectral_norm", "nqueens", "fannkuch",
            "generators", "coroutines", "unpack_sequence"],
    "overhead": ["richards", "nbody", "float", "chaos", "spectral_norm", "nqueens", "generators"],
}

# (rounds, processes per round and configuration, values per process, warm-ups per
# process, cold repetitions). Cold: 40, because one whole process on the
# development VM varies by 20 percentage points (interquartile range) from
# the next: with 10 a median ratio moves by about 6 points from one run to
# another, more than the 3% issue #4 asks to resolve (benches/README.md).
FULL = dict(rounds=10, processes=3, values=3, warmups=1, cold_runs=40)
FAST = dict(rounds=2, processes=1, values=3, warmups=1, cold_runs=3)


class BenchError(Exception):
    pass


# --- benchmarks ---------------------------------------------------------------

class Bench:
    def __init__(self, name, script, extra_opts):
        self.name = name
        self.script = script
        self.extra_opts = list(extra_opts)


def load_benchmarks(names: list[str]) -> list[Bench]:
    """pyperformance's bundled benchmarks by name, with their dependencies checked."""
    try:
        from pyperformance import _manifest
    except ImportError as e:
        raise BenchError(f"pyperformance is not installed in this Python ({e})") from None
    import importlib.metadata

    manifest = _manifest.load_manifest(None)
    by_name = {b.name: b for b in manifest.benchmarks}
    out, problems = [], []
    for name in names:
        b = by_name.get(name)
        if b is None:
            import difflib

            close = difflib.get_close_matches(name, sorted(by_name), n=6, cutoff=0.6)
            problems.append(f"unknown benchmark {name!r}" + (f" (did you mean: {', '.join(close)}?)" if close else ""))
            continue
        missing = []
        for dep in b._get_metadata_value("dependencies", []) or []:
            dist = dep.split(";")[0].strip()
            for sep in "<>=!~[ ":
                dist = dist.split(sep)[0]
            try:
                importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                missing.append(dist)
        if missing:
            problems.append(f"benchmark {name!r} needs packages that are not installed: {', '.join(missing)} "
                            "(add them to dev/recipe/venv-amd64.txt)")
            continue
        out.append(Bench(b.name, b.runscript, b.extra_opts))
    if problems:
        raise BenchError("\n".join(problems))
    return out


# --- processes ----------------------------------------------------------------

def writes_stats(config: str) -> bool:
    """Whether the configuration's processes run Ember, and so can write EMBER_STATS."""
    return ebench.config(config).env.get("EMBER") == "1"


def child_env(config: str, stats_path: str | None) -> tuple[dict, list[str]]:
    """Environment of one configuration's processes, and the variables pyperf
    must hand on to its workers."""
    cfg = ebench.config(config)
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("EMBER") and not k.startswith("EMBER_DEV_"))
           and not k.startswith("EBENCH_") and k not in ("PYTHON_JIT", "PYTHONPATH")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SITE, EMBER_SNAPSHOT, os.environ.get("PYTHONPATH")) if p)
    env[ebench.ENV_CONFIG] = config
    env.update(cfg.env)
    inherit = [ebench.ENV_CONFIG, *cfg.env]
    if stats_path and writes_stats(config):
        env["EMBER_STATS"] = stats_path
        inherit.append("EMBER_STATS")
    return env, inherit


def snapshot_ember() -> dict:
    """Copy the importable `ember` package (dev/env's build/<arch>/ember) to a
    private directory that goes first on the benchmark processes' PYTHONPATH:
    a rebuild of the shared work tree during a long run must not change what
    is measured half-way. Returns a description of the build."""
    global EMBER_SNAPSHOT
    import hashlib
    import importlib.util

    spec = importlib.util.find_spec("ember")
    if spec is None or not spec.submodule_search_locations:
        return {"ember": "not importable"}
    src = list(spec.submodule_search_locations)[0]
    root = tempfile.mkdtemp(prefix="ember-bench-build-")
    shutil.copytree(src, os.path.join(root, "ember"), ignore=shutil.ignore_patterns("__pycache__"))
    # Byte-compiled, as an installed package is (cold runs would otherwise
    # compile Ember's Python half at every start when PYTHONDONTWRITEBYTECODE is set).
    import compileall
    compileall.compile_dir(os.path.join(root, "ember"), quiet=1)
    EMBER_SNAPSHOT = root
    info = {"ember_source": src, "ember_snapshot": root}
    for so in glob.glob(os.path.join(root, "ember", "_ember*.so")):
        with open(so, "rb") as f:
            info["ember_so_sha256"] = hashlib.sha256(f.read()).hexdigest()[:16]
        info["ember_so_mtime"] = datetime.datetime.fromtimestamp(
            os.path.getmtime(os.path.join(src, os.path.basename(so)))).isoformat(timespec="seconds")
    return info


def fmt_build(info: dict) -> str:
    if "ember_source" not in info:
        return info.get("ember", "?")
    return (f"{info['ember_source']} (_ember .so sha256 {info.get('ember_so_sha256', '?')}, "
            f"built {info.get('ember_so_mtime', '?')}), copied for this run")


def check_snapshot(facts: dict) -> list[str]:
    path = facts.get("ember_path")
    if EMBER_SNAPSHOT and path and not path.startswith(EMBER_SNAPSHOT):
        return [f"ember imported from {path}, not from the run's snapshot {EMBER_SNAPSHOT}"]
    return []


def fmt_dur(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class Progress:
    """Counts finished jobs; the ETA sums, over the jobs still to run, the mean
    duration of the same (mode, benchmark, configuration) so far, else of the
    same (mode, configuration), else of everything."""

    def __init__(self, jobs: list[tuple[str, str, str]]):
        self.total = len(jobs)
        self.pending = collections.Counter(jobs)
        self.done = 0
        self.start = time.monotonic()
        self.times: dict[tuple, list[float]] = collections.defaultdict(list)

    def _estimate(self, job, overall: float) -> float:
        mode, _, config = job
        for key in (job, (mode, config)):
            if self.times.get(key):
                return statistics.mean(self.times[key])
        return overall

    def finish(self, job: tuple[str, str, str], label: str, seconds: float, extra: str = ""):
        mode, _, config = job
        self.done += 1
        self.pending[job] -= 1
        self.times[job].append(seconds)
        self.times[(mode, config)].append(seconds)
        self.times["all"].append(seconds)
        overall = statistics.mean(self.times["all"])
        eta = sum(n * self._estimate(j, overall) for j, n in self.pending.items() if n > 0)
        elapsed = time.monotonic() - self.start
        w = len(str(self.total))
        print(f"[{self.done:>{w}}/{self.total}] {label}: {seconds:.1f}s{extra}"
              f"   (elapsed {fmt_dur(elapsed)}, ETA {fmt_dur(eta)})", flush=True)


def summarize_ember_stats(paths: list[str]) -> dict | None:
    """Per-process EMBER_STATS files -> medians of the global counters."""
    rows = []
    for p in paths:
        try:
            with open(p, encoding="utf-8") as f:
                rows.append(json.load(f)["global"])
        except (OSError, ValueError, KeyError) as e:
            print(f"  warning: unreadable EMBER_STATS file {p}: {e}", file=sys.stderr)
    if not rows:
        return None
    out = {"processes": len(rows)}
    for key, value in rows[0].items():
        if isinstance(value, int):
            out[key] = statistics.median(r.get(key, 0) for r in rows)
        elif isinstance(value, dict) and key != "code_objects_by_tier":
            for k2, v2 in value.items():  # e.g. tier1: {compiled, compile_ns, code_bytes, ...}
                if isinstance(v2, int):
                    out[f"{key}_{k2}"] = statistics.median(r.get(key, {}).get(k2, 0) for r in rows)
    for tier in sorted(rows[0].get("code_objects_by_tier", {})):
        out[f"tier{tier}"] = statistics.median(r["code_objects_by_tier"].get(tier, 0) for r in rows)
    return out


def fmt_ember_stats(s: dict | None) -> str:
    if not s:
        return "no EMBER_STATS file from any worker"
    tiers = ", ".join(f"tier {k[4:]}: {v:g}" for k, v in s.items() if re.fullmatch(r"tier\d+", k))
    text = (f"{s['processes']} processes, median {s.get('code_objects_seen', 0):g} code objects seen "
            f"(alive at exit: {tiers}), {s.get('frames', 0):,.0f} frames")
    if "tier1_compiled" in s:
        text += (f"; tier 1: {s['tier1_compiled']:g} compiled in {s.get('tier1_compile_ns', 0) / 1e6:.1f} ms, "
                 f"{s.get('tier1_code_bytes', 0) / 1024:.0f} KiB")
    return text


# --- steady state ---------------------------------------------------------------

class Steady:
    def __init__(self, args, out, benches, configs, progress, stats_dir):
        self.args, self.out, self.benches, self.configs = args, out, benches, configs
        self.progress, self.stats_dir = progress, stats_dir
        self.raw_dir = os.path.join(out, "raw", "steady")
        os.makedirs(self.raw_dir, exist_ok=True)
        # results[bench_name][config] = list of (round, pyperf.Benchmark)
        self.results: dict[str, dict[str, list]] = {}
        self.ember_stats: dict[str, dict[str, dict]] = {}

    def jobs(self) -> list[str]:
        return [("steady", b.name, c) for b in self.benches for r in range(self.args.rounds) for c in self.configs]

    def warmups_for(self, config: str, value_time: dict) -> int:
        """pyperf warm-ups for a configuration: the base count, or more when the
        configuration asks for a minimum warm-up time (background compilers)."""
        base = self.args.warmups
        need = ebench.config(config).warmup_s
        if need <= 0:
            return base
        est = value_time.get(config)
        if est is None:  # not measured yet: assume it may be 4x faster than interp
            est = value_time.get(REFERENCE, self.args.min_time) / 4
        return max(base, math.ceil(need / max(est, 1e-3)))

    def run(self):
        import pyperf

        for bench in self.benches:
            loops = None
            value_time: dict[str, float] = {}  # seconds per value (loops included)
            for rnd in range(self.args.rounds):
                k = rnd % len(self.configs)
                order = self.configs[k:] + self.configs[:k]
                for config in order:
                    path = os.path.join(self.raw_dir, f"{bench.name}.{config}.r{rnd + 1}.json")
                    log = path[:-5] + ".log"
                    stats_path = os.path.join(self.stats_dir, f"steady-{bench.name}-{config}-r{rnd + 1}-{{pid}}.json")
                    env, inherit = child_env(config, stats_path)
                    warmups = self.warmups_for(config, value_time)
                    cmd = [sys.executable, "-u", bench.script, *bench.extra_opts,
                           "--processes", str(self.args.processes), "--values", str(self.args.values),
                           "--warmups", str(warmups), "--min-time", str(self.args.min_time),
                           "--hook", "ebench", "--inherit-environ", ",".join(inherit),
                           "--timeout", str(self.args.timeout), "--output", path]
                    if loops:
                        cmd += ["--loops", str(loops)]
                    if os.path.exists(path):
                        os.unlink(path)
                    t0 = time.monotonic()
                    with open(log, "w", encoding="utf-8") as lf:
                        lf.write(" ".join(cmd) + "\n\n")
                        lf.flush()
                        rc = subprocess.run(cmd, env=env, stdout=lf, stderr=subprocess.STDOUT).returncode
                    dt = time.monotonic() - t0
                    if rc != 0 or not os.path.exists(path):
                        with open(log, encoding="utf-8") as lf:
                            tail = "".join(lf.readlines()[-30:])
                        raise BenchError(f"{bench.name} under {config} failed (exit {rc}); log {log}:\n{tail}")
                    suite = pyperf.BenchmarkSuite.load(path)
                    pids = self.verify(bench.name, config, suite, path)
                    per_value = []
                    for b in suite.get_benchmarks():
                        self.results.setdefault(b.get_name(), {}).setdefault(config, []).append((rnd, b))
                        for run in b.get_runs():
                            if run.values:
                                per_value.append(statistics.mean(run.values) * run.get_total_loops())
                    if per_value:
                        value_time[config] = statistics.median(per_value)
                    if loops is None and config == REFERENCE and len(suite) == 1:
                        loops = suite.get_benchmarks()[0].get_runs()[-1].get_loops()
                    extra = ""
                    if config == REFERENCE and rnd == 0:
                        extra = f", loops={loops}" if loops else ", loops calibrated per invocation"
                    if warmups != self.args.warmups:
                        extra += f", {warmups} warm-ups"
                    if "EMBER_STATS" in env:
                        files = [p for p in glob.glob(stats_path.replace("{pid}", "*"))
                                 if int(p.rsplit("-", 1)[1][:-5]) in pids]
                        s = summarize_ember_stats(files)
                        seen = self.ember_stats.setdefault(bench.name, {}).setdefault(config, [])
                        def counts(x):  # what a change of is worth a line (not timings)
                            return x and {k: v for k, v in x.items() if not k.endswith(("_ns", "frames"))}

                        if not seen or counts(s) != counts(seen[-1]):
                            extra += f"\n      ember: {fmt_ember_stats(s)}"
                        seen.append(s)
                    self.progress.finish(("steady", bench.name, config),
                                         f"steady {bench.name} round {rnd + 1}/{self.args.rounds} {config}",
                                         dt, extra)
        self.merge()

    def load_raw(self):
        """Results of an earlier run from its raw/steady files (for --report)."""
        import pyperf

        pattern = re.compile(r"^(?P<bench>[^.]+)\.(?P<config>[^.]+)\.r(?P<round>\d+)\.json$")
        for path in sorted(glob.glob(os.path.join(self.raw_dir, "*.json"))):
            m = pattern.match(os.path.basename(path))
            if not m or m["config"] not in self.configs:
                continue
            bench, config, rnd = m["bench"], m["config"], int(m["round"]) - 1
            suite = pyperf.BenchmarkSuite.load(path)
            pids = set()
            for b in suite.get_benchmarks():
                self.results.setdefault(b.get_name(), {}).setdefault(config, []).append((rnd, b))
                pids |= {ebench.metadata_facts(run.get_metadata()).get("pid") for run in b.get_runs()}
            files = [p for p in glob.glob(os.path.join(self.stats_dir, f"steady-{bench}-{config}-r{rnd + 1}-*.json"))
                     if int(p.rsplit("-", 1)[1][:-5]) in pids]
            if files:
                self.ember_stats.setdefault(bench, {}).setdefault(config, []).append(summarize_ember_stats(files))

    def verify(self, bench: str, config: str, suite, path: str) -> set[int]:
        """Every worker run must carry ebench facts that match the configuration."""
        problems, pids = [], set()
        cfg = ebench.config(config)
        for b in suite.get_benchmarks():
            for i, run in enumerate(b.get_runs()):
                md = run.get_metadata()
                facts = ebench.metadata_facts(md)
                if not facts:
                    problems.append(f"{b.get_name()} run {i}: no ebench metadata (hook not run in the worker?)")
                    continue
                pids.add(facts.get("pid"))
                warm = bool(run.values)
                for p in ebench.check(config, facts, warm) + check_snapshot(facts):
                    problems.append(f"{b.get_name()} run {i} (pid {facts.get('pid')}): {p}")
                if warm and cfg.warmup_s > 0:
                    spent = sum(loops * v for loops, v in run.warmups) * (run.get_total_loops() // run.get_loops())
                    if spent < 0.5 * cfg.warmup_s:
                        print(f"  warning: {bench} {config} run {i}: only {spent:.2f}s of warm-up "
                              f"(configuration asks for {cfg.warmup_s}s)", file=sys.stderr)
        if problems:
            raise BenchError(f"configuration {config!r} was NOT active as expected in {bench} ({path}):\n  "
                             + "\n  ".join(problems[:20]))
        return pids

    def merge(self):
        """One pyperf JSON per configuration with every round's runs."""
        import pyperf

        for config in self.configs:
            benches = []
            for name, per_cfg in self.results.items():
                parts = per_cfg.get(config, [])
                if not parts:
                    continue
                merged = pyperf.Benchmark(parts[0][1].get_runs())
                for _, b in parts[1:]:
                    merged.add_runs(b)
                benches.append(merged)
            if benches:
                pyperf.BenchmarkSuite(benches).dump(os.path.join(self.out, f"steady-{config}.json"), replace=True)

    def analysis(self, ref: str = REFERENCE) -> dict:
        """{bench: {config: {...}}} with medians, speed-ups against `ref` and their spread."""
        res = {}
        for name, per_cfg in self.results.items():
            if ref not in per_cfg:
                continue
            ref_round = {}
            for rnd, b in per_cfg[ref]:
                vals = [v for run in b.get_runs() for v in run.values]
                if vals:
                    ref_round[rnd] = statistics.median(vals)
            ref_all = statistics.median(v for _, b in per_cfg[ref] for run in b.get_runs() for v in run.values)
            row = {}
            for config, parts in per_cfg.items():
                vals = [v for _, b in parts for run in b.get_runs() for v in run.values]
                samples = [ref_round[rnd] / statistics.median(run.values)
                           for rnd, b in parts for run in b.get_runs() if run.values and rnd in ref_round]
                if not vals or not samples:
                    continue
                med = statistics.median(vals)
                row[config] = dict(median=med, iqr_rel=iqr(vals) / med, n=len(vals),
                                   speedup=statistics.median(samples), spread=quartiles(samples),
                                   samples=len(samples), ratio_of_medians=ref_all / med)
            res[name] = row
        return res


# --- cold -------------------------------------------------------------------------

class Cold:
    def __init__(self, args, out, benches, configs, progress, stats_dir):
        self.args, self.out, self.benches, self.configs = args, out, benches, configs
        self.progress, self.stats_dir = progress, stats_dir
        self.raw_dir = os.path.join(out, "raw", "cold")
        os.makedirs(self.raw_dir, exist_ok=True)
        # wall[bench][config] = [(rep, seconds)]; calls[pyperf name][config] = [(rep, seconds)]
        self.wall: dict[str, dict[str, list]] = {}
        self.calls: dict[str, dict[str, list]] = {}
        self.ember_stats: dict[str, dict[str, dict]] = {}

    def jobs(self) -> list[str]:
        return [("cold", b.name, c) for b in self.benches for r in range(self.args.cold_runs) for c in self.configs]

    def one(self, bench, config: str, side: str, stats_path: str | None) -> tuple[float, dict]:
        """One cold process: its wall time and what its driver recorded."""
        env, _ = child_env(config, stats_path)
        cmd = [sys.executable, COLD_DRIVER, side, bench.script, *bench.extra_opts]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        dt = time.perf_counter() - t0
        if proc.returncode != 0 or not os.path.exists(side):
            raise BenchError(f"cold {bench.name} under {config} failed (exit {proc.returncode}):\n"
                             + proc.stderr[-3000:])
        with open(side, encoding="utf-8") as f:
            data = json.load(f)
        problems = ebench.check(config, data["facts"], warm=False) + check_snapshot(data["facts"])
        if problems:
            raise BenchError(f"configuration {config!r} was NOT active as expected in cold "
                             f"{bench.name} (pid {data['facts'].get('pid')}): " + "; ".join(problems))
        return dt, data

    def run(self):
        for bench in self.benches:
            for rep in range(self.args.cold_runs):
                k = rep % len(self.configs)
                order = self.configs[k:] + self.configs[:k]
                for config in order:
                    side = os.path.join(self.raw_dir, f"{bench.name}.{config}.{rep + 1}.json")
                    # Timed without EMBER_STATS: gathering and writing the
                    # stats at exit costs ~10 ms, which no program pays
                    # unless it asks for them.
                    dt, data = self.one(bench, config, side, None)
                    data["process_wall"] = dt
                    with open(side, "w", encoding="utf-8") as f:
                        json.dump(data, f)
                    self.wall.setdefault(bench.name, {}).setdefault(config, []).append((rep, dt))
                    for c in data["calls"]:
                        self.calls.setdefault(c["name"], {}).setdefault(config, []).append((rep, c["value"]))
                    self.progress.finish(("cold", bench.name, config),
                                         f"cold {bench.name} run {rep + 1}/{self.args.cold_runs} {config}", dt)
            # What Ember did in such a process: one more, untimed, writes it.
            for config in self.configs:
                if not writes_stats(config):
                    continue
                side = os.path.join(self.raw_dir, f"{bench.name}.{config}.stats.json")
                stats_path = os.path.join(self.stats_dir, f"cold-{bench.name}-{config}-stats-{{pid}}.json")
                _, data = self.one(bench, config, side, stats_path)
                files = glob.glob(stats_path.replace("{pid}", str(data["facts"]["pid"])))
                s = summarize_ember_stats(files)
                self.ember_stats.setdefault(bench.name, {}).setdefault(config, []).append(s)
                print(f"      cold {bench.name} {config}, untimed, for its stats: ember: {fmt_ember_stats(s)}",
                      flush=True)
        self.dump()

    def load_raw(self):
        """Results of an earlier run from its raw/cold files (for --report)."""
        pattern = re.compile(r"^(?P<bench>[^.]+)\.(?P<config>[^.]+)\.(?P<rep>\d+)\.json$")
        for path in sorted(glob.glob(os.path.join(self.raw_dir, "*.json"))):
            m = pattern.match(os.path.basename(path))
            if not m or m["config"] not in self.configs:
                continue
            bench, config, rep = m["bench"], m["config"], int(m["rep"]) - 1
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            self.wall.setdefault(bench, {}).setdefault(config, []).append((rep, data["process_wall"]))
            for c in data["calls"]:
                self.calls.setdefault(c["name"], {}).setdefault(config, []).append((rep, c["value"]))
        for bench in {b for b in self.wall}:
            for config in self.configs:
                files = glob.glob(os.path.join(self.stats_dir, f"cold-{bench}-{config}-stats-*.json"))
                if files:
                    self.ember_stats.setdefault(bench, {}).setdefault(config, []).append(summarize_ember_stats(files))

    def dump(self):
        """pyperf JSON per configuration: one run per process, one value each."""
        import pyperf

        for what, table in (("process", self.wall), ("call", self.calls)):
            for config in self.configs:
                benches = []
                for name, per_cfg in table.items():
                    runs = [pyperf.Run([v], metadata={"name": name, "unit": "second", "loops": 1},
                                       collect_metadata=False)
                            for _, v in per_cfg.get(config, [])]
                    if runs:
                        benches.append(pyperf.Benchmark(runs))
                if benches:
                    pyperf.BenchmarkSuite(benches).dump(
                        os.path.join(self.out, f"cold-{what}-{config}.json"), replace=True)

    @staticmethod
    def analyse(table, ref_name: str = REFERENCE) -> dict:
        res = {}
        for name, per_cfg in table.items():
            if ref_name not in per_cfg:
                continue
            ref = dict(per_cfg[ref_name])
            ref_med = statistics.median(ref.values())
            row = {}
            for config, pairs in per_cfg.items():
                vals = [v for _, v in pairs]
                med = statistics.median(vals)
                if config == ref_name:  # its own spread: each run against the median
                    samples = [ref_med / v for v in vals]
                else:  # paired with the interp run of the same repetition
                    samples = [ref[rep] / v for rep, v in pairs if rep in ref]
                row[config] = dict(median=med, iqr_rel=iqr(vals) / med, n=len(vals),
                                   speedup=statistics.median(samples), spread=quartiles(samples),
                                   samples=len(samples), ratio_of_medians=ref_med / med)
            res[name] = row
        return res


# --- statistics and report ------------------------------------------------------------

def quartiles(xs: list[float]) -> tuple[float, float] | None:
    if len(xs) < 2:
        return None
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return (q[0], q[2])


def iqr(xs: list[float]) -> float:
    q = quartiles(xs)
    return q[1] - q[0] if q else 0.0


def geomean(xs: list[float]) -> float:
    return math.exp(statistics.mean(math.log(x) for x in xs)) if xs else float("nan")


def fmt_time(s: float) -> str:
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    if s >= 1e-6:
        return f"{s * 1e6:.1f} us"
    return f"{s * 1e9:.1f} ns"


def table_md(title: str, what: str, res: dict, configs: list[str], ref: str = REFERENCE) -> str:
    others = [c for c in configs if c != ref and (ref == REFERENCE or c != REFERENCE)]
    lines = [f"### {title}", "", what, ""]
    lines.append(f"| benchmark | {ref}: median (own spread) | " + " | ".join(others) + " |")
    lines.append("|---|---:|" + "---:|" * len(others))
    speedups = {c: [] for c in others}
    for name in sorted(res):
        row = res[name]
        base = row[ref]
        own = f" ({base['spread'][0]:.2f}–{base['spread'][1]:.2f})" if base["spread"] else ""
        cells = [f"{fmt_time(base['median'])}{own}"]
        for c in others:
            r = row.get(c)
            if r is None:
                cells.append("–")
                continue
            speedups[c].append(r["speedup"])
            sp = f" ({r['spread'][0]:.2f}–{r['spread'][1]:.2f})" if r["spread"] else ""
            cells.append(f"{r['speedup']:.3f}x{sp}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("| **geometric mean** | | " + " | ".join(
        f"**{geomean(speedups[c]):.3f}x**" for c in others) + " |")
    lines.append("")
    noise = [row[ref]["spread"] for row in res.values() if row[ref]["spread"]]
    if noise:
        width = statistics.median(q3 - q1 for q1, q3 in noise)
        lines.append(f"Noise floor: {ref}'s samples against its own reference spread over a median "
                     f"interquartile width of {width * 100:.1f} percentage points; differences between "
                     f"configurations smaller than that are not resolved by this run.")
        lines.append("")
    return "\n".join(lines)


def absolute_md(res: dict, configs: list[str]) -> str:
    lines = ["| benchmark | " + " | ".join(configs) + " |", "|---|" + "---:|" * len(configs)]
    for name in sorted(res):
        cells = []
        for c in configs:
            r = res[name].get(c)
            cells.append(f"{fmt_time(r['median'])} ± {r['iqr_rel'] * 100:.1f}% (n={r['n']})" if r else "–")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def chart(path: str, panels: list[tuple[str, dict]], configs: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    others = [c for c in configs if c != REFERENCE]
    width = max(8.0, 0.55 * (len(panels[0][1]) + 1) * max(1, len(others)) ** 0.5 + 3)
    fig, axes = plt.subplots(len(panels), 1, figsize=(width, 4.8 * len(panels)), squeeze=False)
    for ax, (title, res) in zip(axes[:, 0], panels):
        names = sorted(res) + ["geomean"]
        width = 0.8 / max(1, len(others))
        for i, c in enumerate(others):
            ys, lo, hi = [], [], []
            for n in names:
                if n == "geomean":
                    y = geomean([res[m][c]["speedup"] for m in res if c in res[m]])
                    ys.append(y)
                    lo.append(0)
                    hi.append(0)
                    continue
                r = res[n].get(c)
                y = r["speedup"] if r else float("nan")
                ys.append(y)
                q = r["spread"] if r and r["spread"] else (y, y)
                lo.append(max(0.0, y - q[0]))
                hi.append(max(0.0, q[1] - y))
            xs = [j + (i - (len(others) - 1) / 2) * width for j in range(len(names))]
            bars = ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=c)
            ax.bar_label(bars, fmt="%.2f", fontsize=6, padding=1)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=30, ha="right")
        ax.set_ylabel("speed-up vs interp (higher is faster)")
        ax.set_title(title)
        ax.legend(fontsize="small", ncol=len(others))
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def machine_md(with_load: bool = True) -> str:
    import platform

    text = f"Python {platform.python_version()} ({sys.executable}), {platform.machine()}, {os.cpu_count()} CPUs"
    if with_load:
        try:
            load = os.getloadavg()
            text += f", load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
        except OSError:
            pass
    return text


# --- main ------------------------------------------------------------------------

def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="benches/run.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="configurations:\n" + "\n".join(
                                    f"  {n:12} {c.description}" for n, c in ebench.CONFIGS.items())
                                + "\nsets:\n" + "\n".join(f"  {n:12} {', '.join(b)}" for n, b in SETS.items()))
    sel = p.add_mutually_exclusive_group()
    sel.add_argument("--benchmarks", "-b", help="comma-separated pyperformance benchmark names")
    sel.add_argument("--set", choices=sorted(SETS), help="a named set of benchmarks (default: dev)")
    p.add_argument("--configs", "-c", default="interp,passthrough,ember,pyjit,cinderx",
                   help="comma-separated configurations; interp (the reference) is added if missing")
    p.add_argument("--mode", choices=("steady", "cold", "both"), default="steady")
    p.add_argument("--fast", action="store_true", help="few rounds and processes: a quick check, not a result")
    p.add_argument("--out", help="output directory (default: benches/results/<timestamp>)")
    p.add_argument("--report", metavar="DIR",
                   help="run nothing: write DIR's table.md, results.json and chart.png again from its raw files")
    p.add_argument("--also-vs", metavar="CONFIG",
                   help="add tables with CONFIG as the reference instead of interp (default: passthrough, "
                        "when it and an ember configuration run: Ember's own share of the hook cost); "
                        "'none' for no such table")
    g = p.add_argument_group("steady state (defaults: full / --fast)")
    g.add_argument("--rounds", type=int, help=f"interleaved rounds per benchmark ({FULL['rounds']} / {FAST['rounds']})")
    g.add_argument("--processes", "-p", type=int,
                   help=f"pyperf worker processes per configuration and round ({FULL['processes']} / {FAST['processes']})")
    g.add_argument("--values", "-n", type=int, help=f"values per worker ({FULL['values']} / {FAST['values']})")
    g.add_argument("--warmups", "-w", type=int, help=f"warm-up values per worker ({FULL['warmups']} / {FAST['warmups']})")
    g.add_argument("--min-time", type=float, default=0.1, help="pyperf's minimum time per value, seconds (0.1)")
    g.add_argument("--timeout", type=int, default=900, help="pyperf's timeout per worker, seconds (900)")
    g = p.add_argument_group("cold")
    g.add_argument("--cold-runs", type=int,
                   help=f"processes per benchmark and configuration ({FULL['cold_runs']} / {FAST['cold_runs']})")
    args = p.parse_args(argv)
    defaults = FAST if args.fast else FULL
    for k, v in defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.report:
        return report_again(os.path.abspath(args.report))
    names = args.benchmarks.split(",") if args.benchmarks else SETS[args.set or "dev"]
    names = [n.strip() for n in names if n.strip()]
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    for c in configs:
        if c not in ebench.CONFIGS:
            print(f"run.py: unknown configuration {c!r} (known: {', '.join(ebench.CONFIGS)})", file=sys.stderr)
            return 2
    if REFERENCE not in configs:
        configs.insert(0, REFERENCE)
    else:  # the reference first: its first run calibrates the loop count
        configs.remove(REFERENCE)
        configs.insert(0, REFERENCE)
    configs = list(dict.fromkeys(configs))
    also_vs = args.also_vs
    if also_vs is None:
        also_vs = "passthrough" if "passthrough" in configs and any(c.startswith("ember") for c in configs) else "none"
    if also_vs != "none" and (also_vs not in configs or also_vs == REFERENCE):
        print(f"run.py: --also-vs {also_vs}: not one of the configurations run (besides interp)", file=sys.stderr)
        return 2
    also_cfgs = [also_vs] + [c for c in configs if c not in (REFERENCE, also_vs)]
    try:
        benches = load_benchmarks(names)
    except BenchError as e:
        print(f"run.py: {e}", file=sys.stderr)
        return 2

    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = os.path.abspath(args.out or os.path.join(HERE, "results", stamp))
    os.makedirs(out, exist_ok=True)
    stats_dir = tempfile.mkdtemp(prefix="ember-bench-stats-")
    build = snapshot_ember()
    modes = ["steady", "cold"] if args.mode == "both" else [args.mode]

    command = "dev/env python benches/run.py " + " ".join(argv if argv is not None else sys.argv[1:])
    meta = {"stamp": stamp, "command": command, "configs": configs, "benchmarks": names, "modes": modes,
            "settings": {k: getattr(args, k) for k in FULL} | {"min_time": args.min_time},
            "build": build, "also_vs": also_vs}
    with open(os.path.join(out, "run.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1)
    print(f"benchmarks: {', '.join(b.name for b in benches)}")
    print(f"configurations: {', '.join(configs)}; modes: {', '.join(modes)}; output: {out}")
    print(f"ember: {fmt_build(build)}")
    if "steady" in modes:
        print(f"steady: {args.rounds} rounds x {args.processes} processes x {args.values} values "
              f"(+{args.warmups} warm-ups) per benchmark and configuration")
    if "cold" in modes:
        print(f"cold: {args.cold_runs} processes per benchmark and configuration")

    runners = []
    if "steady" in modes:
        runners.append(Steady(args, out, benches, configs, None, stats_dir))
    if "cold" in modes:
        runners.append(Cold(args, out, benches, configs, None, stats_dir))
    jobs = [j for r in runners for j in r.jobs()]
    progress = Progress(jobs)
    for r in runners:
        r.progress = progress
    t_start = time.monotonic()
    try:
        for r in runners:
            r.run()
    except BenchError as e:
        print(f"\nrun.py: FAILED: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nrun.py: interrupted", file=sys.stderr)
        return 130
    finally:
        kept = os.path.join(out, "ember-stats")
        if glob.glob(os.path.join(stats_dir, "*.json")):
            shutil.copytree(stats_dir, kept, dirs_exist_ok=True)
        shutil.rmtree(stats_dir, ignore_errors=True)
        if EMBER_SNAPSHOT:
            shutil.rmtree(EMBER_SNAPSHOT, ignore_errors=True)
    meta["elapsed"] = time.monotonic() - t_start
    meta["machine"] = machine_md()
    with open(os.path.join(out, "run.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1)
    report(out, runners, meta)
    return 0


def report_again(out: str) -> int:
    """--report DIR: the tables and chart again from DIR's raw files."""
    meta_path = os.path.join(out, "run.json")
    if not os.path.exists(meta_path):
        meta_path = os.path.join(out, "results.json")  # runs from before run.json existed
    try:
        with open(meta_path, encoding="utf-8") as f:
            meta = json.load(f)
    except OSError as e:
        print(f"run.py: {out} is not a results directory ({e})", file=sys.stderr)
        return 2
    meta.setdefault("stamp", os.path.basename(out.rstrip("/")))
    configs = meta["configs"]
    if "also_vs" not in meta:
        meta["also_vs"] = ("passthrough" if "passthrough" in configs
                           and any(c.startswith("ember") for c in configs) else "none")
    args = argparse.Namespace(**meta["settings"])
    stats_dir = os.path.join(out, "ember-stats")
    runners = []
    if os.path.isdir(os.path.join(out, "raw", "steady")):
        r = Steady(args, out, [], configs, None, stats_dir)
        r.load_raw()
        runners.append(r)
    if os.path.isdir(os.path.join(out, "raw", "cold")):
        r = Cold(args, out, [], configs, None, stats_dir)
        r.load_raw()
        runners.append(r)
    report(out, runners, meta)
    return 0


def report(out: str, runners: list, meta: dict) -> None:
    """table.md, results.json and chart.png in `out`; the table is printed too."""
    configs, also_vs, st = meta["configs"], meta["also_vs"], meta["settings"]
    also_cfgs = [also_vs] + [c for c in configs if c not in (REFERENCE, also_vs)]
    panels, md = [], []
    summary = dict(meta)
    md.append(f"## Ember benchmarks, {meta['stamp']}\n")
    elapsed = f"; total time {fmt_dur(meta['elapsed'])}" if "elapsed" in meta else ""
    md.append(f"Command: `{meta['command']}`  \n{meta.get('machine') or machine_md(with_load=False)}{elapsed}.  \n"
              f"Ember: {fmt_build(meta.get('build', {}))}.\n")
    md.append("Speed-up: median over samples of (interp time / configuration time), each sample "
              "pairing a measurement with interp measured next to it (>1 is faster, 0.97x is 3% "
              "slower); in parentheses the interquartile range of those samples. The interp column "
              "gives interp's own median time and the spread of its samples (see benches/README.md).\n")
    for r in runners:
        if isinstance(r, Steady):
            res = r.analysis()
            md.append(table_md("Steady state", f"{st['rounds']} interleaved rounds x {st['processes']} "
                               f"processes x {st['values']} values per configuration; samples: the "
                               f"median of each worker process against the same round's interp median.", res, configs))
            if also_vs != "none":
                res2 = r.analysis(also_vs)
                md.append(table_md(f"Steady state relative to {also_vs}", f"The same measurements, with "
                                   f"{also_vs} as the reference (pairs within each round).", res2,
                                   also_cfgs, also_vs))
                summary[f"steady_vs_{also_vs}"] = res2
            md.append("Median time per value ± interquartile range, all configurations:\n")
            md.append(absolute_md(res, configs))
            panels.append(("steady state", res))
            summary["steady"] = res
            summary["steady_ember_stats"] = r.ember_stats
        else:
            res_w = Cold.analyse(r.wall)
            res_c = Cold.analyse(r.calls)
            md.append(table_md("Cold: whole process", f"{st['cold_runs']} fresh processes per configuration, "
                               "each running the benchmark function once (loops=1, no warm-up), timed from "
                               "spawn to exit; samples: each repetition's interp / configuration.", res_w, configs))
            md.append(table_md("Cold: the first call alone", "The same processes, timing only the "
                               "benchmark's own single call (includes compilation).", res_c, configs))
            if also_vs != "none":
                res2 = Cold.analyse(r.wall, also_vs)
                md.append(table_md(f"Cold: whole process, relative to {also_vs}", f"The same processes, "
                                   f"{also_vs} as the reference (pairs within each repetition).", res2,
                                   also_cfgs, also_vs))
                summary[f"cold_process_vs_{also_vs}"] = res2
            panels.append(("cold (whole process)", res_w))
            summary["cold_process"] = res_w
            summary["cold_call"] = res_c
            summary["cold_ember_stats"] = r.ember_stats
    ember_lines = []
    for r in runners:
        for bench, per_cfg in r.ember_stats.items():
            for config, stats in per_cfg.items():
                s = [x for x in stats if x]
                if s:
                    def med(key):
                        return statistics.median(x.get(key, 0) for x in s)

                    tiers = {k: med(k) for k in s[0] if re.fullmatch(r"tier\d+", k)}
                    t1 = (f"{med('tier1_compiled'):g} | {med('tier1_compile_ns') / 1e6:.1f} ms | "
                          f"{med('tier1_code_bytes') / 1024:.0f} KiB" if "tier1_compiled" in s[0] else "– | – | –")
                    ember_lines.append(f"| {'steady' if isinstance(r, Steady) else 'cold'} | {bench} | {config} | "
                                       f"{med('code_objects_seen'):g} | "
                                       + ", ".join(f"{k[4:]}: {v:g}" for k, v in tiers.items()) + f" | {t1} |")
    if ember_lines:
        md.append("### Ember: code objects per process (median of EMBER_STATS files)\n")
        md.append("| mode | benchmark | config | seen | alive at exit, by tier | tier-1 compiled | "
                  "compile time | code size |\n|---|---|---|---:|---|---:|---:|---:|")
        md.append("\n".join(ember_lines) + "\n")
    text = "\n".join(md)
    with open(os.path.join(out, "table.md"), "w", encoding="utf-8") as f:
        f.write(text)
    with open(os.path.join(out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1, default=str)
    if panels:
        try:
            chart(os.path.join(out, "chart.png"), panels, configs)
        except ImportError as e:
            print(f"run.py: no chart ({e}); add matplotlib to dev/recipe/venv-amd64.txt", file=sys.stderr)
    print("\n" + text)
    print(f"results in {out}")


if __name__ == "__main__":
    sys.exit(main())
