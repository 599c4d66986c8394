"""The differential harness itself must be able to fail: a difference in any
output, or a run that Ember did not actually handle, is an error."""

import glob
import os

import pytest

import difftest
from difftest import Config, check

# Behaves differently when Ember has been loaded into the process.
EMBER_LOADED = 'import sys\ndef loaded():\n    return "ember._ember" in sys.modules\n'


def test_different_stdout_fails():
    with pytest.raises(AssertionError, match=r"(?s)differs from stock.*\+True"):
        check(EMBER_LOADED + "print(loaded())\n")


def test_different_stderr_fails():
    with pytest.raises(AssertionError, match=r"(?s)differs from stock.*stderr \(stock\)"):
        check(EMBER_LOADED + "if loaded():\n    print('x', file=sys.stderr)\n")


def test_different_exit_code_fails():
    with pytest.raises(AssertionError, match=r"exit code: stock 0, tier0 3"):
        check(EMBER_LOADED + "sys.exit(3 if loaded() else 0)\n")


def test_unexpected_stock_exit_code_fails():
    with pytest.raises(AssertionError, match="stock CPython exited with 1, expected 0"):
        check("def f():\n    raise SystemExit(1)\nf()\n")


def test_run_without_ember_fails():
    with pytest.raises(AssertionError, match="no EMBER_STATS file was written"):
        check("def f():\n    return 1\nprint(f())\n", configs=[Config("off", {"EMBER": "0"})])


def test_function_never_called_fails():
    with pytest.raises(AssertionError, match=r"never saw a call of: unused \(line 4\)"):
        check("def used():\n    return 1\n\ndef unused():\n    return 2\nprint(used())\n")


def test_snippet_without_functions_fails():
    with pytest.raises(AssertionError, match="saw no call of any function"):
        check("print(sum(range(10)))\n")


def test_passing_run_leaves_stats_file_for_the_session():
    before = set(glob.glob(os.path.join(difftest.stats_dir(), "*.json")))
    out = check("def f(x):\n    return x + 1\nprint(f(1))\n")
    assert out.stdout == "2\n" and out.returncode == 0
    new = set(glob.glob(os.path.join(difftest.stats_dir(), "*.json"))) - before
    assert len(new) == len(difftest.EMBER_CONFIGS)


def test_expected_functions():
    src = ("class C:\n"
           "    def m(self, x: int):\n"
           "        return [y for y in range(x)]\n"
           "def outer():\n"
           "    def inner():\n"
           "        return (i for i in ())\n"
           "    return inner, lambda: 1\n")
    assert difftest.expected_functions(src, "s.py") == {
        ("C.m", 2), ("outer", 4), ("outer.<locals>.inner", 5)}
    assert difftest.expected_functions(src, "s.py", ["outer.<locals>.<lambda>"]) == {
        ("outer.<locals>.<lambda>", 7)}
    with pytest.raises(ValueError, match="nothing"):
        difftest.expected_functions(src, "s.py", ["nothing"])


def test_clean_environ_drops_every_ember_variable(monkeypatch):
    monkeypatch.setenv("EMBER", "1")
    monkeypatch.setenv("EMBER_STATS", "/tmp/x.json")
    env = difftest.clean_environ({"EMBER": "1"})
    assert env["EMBER"] == "1" and "EMBER_STATS" not in env
    assert not any(k.startswith("EMBER") for k in difftest.clean_environ())
