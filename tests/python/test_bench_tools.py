"""benches/iterate.py and benches/counts.py: they run, and refuse what they
cannot measure."""

import os
import subprocess
import sys

import pytest

BENCHES = os.path.join(os.path.dirname(__file__), "..", "..", "benches")


def run(*args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER")}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300, env=env)


def test_iterate_runs_a_benchmark():
    # The benchmarks come from pyperformance, in the x86-64 environment only
    # (dev/recipe/venv-amd64.txt).
    pytest.importorskip("pyperformance", reason="pyperformance is in the x86-64 environment only")
    p = run(os.path.join(BENCHES, "iterate.py"), "fannkuch", "1")
    assert p.returncode == 0, p.stderr


def test_iterate_refuses_an_unknown_benchmark():
    p = run(os.path.join(BENCHES, "iterate.py"), "no_such_benchmark", "1")
    assert p.returncode != 0 and "BENCH: richards" in p.stderr, p.stderr


def test_counts_refuses_an_unknown_configuration():
    p = run(os.path.join(BENCHES, "counts.py"), "-b", "fannkuch", "--configs", "interp,bogus")
    assert p.returncode != 0 and "unknown configuration 'bogus'" in p.stderr, p.stderr


def test_counts_refuses_a_bad_window():
    p = run(os.path.join(BENCHES, "counts.py"), "-b", "fannkuch", "--window", "3:1")
    assert p.returncode != 0 and "--window wants A:B" in p.stderr, p.stderr


def test_counts_refuses_an_unknown_benchmark():
    p = run(os.path.join(BENCHES, "counts.py"), "-b", "richards,no_such_benchmark")
    assert p.returncode != 0 and "no iteration defined for 'no_such_benchmark'" in p.stderr, p.stderr
