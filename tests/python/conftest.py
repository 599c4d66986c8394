"""Shared fixtures, and the end-of-session proof that Ember was exercised.

Every EMBER_STATS file written by a subprocess of this session goes to one
folder (difftest.stats_dir()); the in-process fixtures add a snapshot of
ember.stats() before they restore the evaluator. At the end of the session
one line says how many code objects went through Ember's hook, and the
session fails if none did: a suite that passes without Ember running has
tested nothing.
"""

import glob
import json
import os
import shutil
import tempfile

import pytest

import difftest

# (filename, qualname, firstlineno) -> tier, for code objects the in-process
# hook saw called or resumed.
_in_process: dict = {}
_summary: list[str] = []


def _seen(functions):
    return [f for f in functions if f["calls"] + f["resumes"] > 0]


def record_in_process_stats(stats: dict) -> None:
    for f in _seen(stats["functions"]):
        _in_process[(f["filename"], f["qualname"], f["firstlineno"])] = f["tier"]


def pytest_configure(config):
    difftest.set_stats_dir(tempfile.mkdtemp(prefix="ember-pytest-stats-"))


def _aggregate() -> dict:
    by_tier = {0: 0, 1: 0, 2: 0}
    try:
        import ember
    except ImportError:
        pass
    else:
        record_in_process_stats(ember.stats())
    for tier in _in_process.values():
        by_tier[tier] += 1
    for path in glob.glob(os.path.join(difftest.stats_dir(), "*.json")):
        with open(path, encoding="utf-8") as f:
            for func in _seen(json.load(f)["functions"]):
                by_tier[func["tier"]] += 1
    return by_tier


def pytest_sessionfinish(session, exitstatus):
    by_tier = _aggregate()
    shutil.rmtree(difftest.stats_dir(), ignore_errors=True)
    total = sum(by_tier.values())
    detail = ", ".join(f"tier {t}: {n}" for t, n in sorted(by_tier.items()))
    _summary.append(f"ember: {total} code objects went through Ember's hook "
                    f"in this pytest run ({detail})")
    if total == 0 and not session.config.option.collectonly and session.exitstatus == 0:
        _summary.append("ember: nothing went through Ember's hook, so this run tested "
                        "nothing of Ember: failing the session")
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter):
    for line in _summary:
        terminalreporter.write_line(line)


@pytest.fixture
def evaluator_restored():
    """Whatever the test does to the frame evaluator (Ember, the passthrough
    evaluator, none), put back the one installed before it."""
    import ember

    before = ember._ember._installed()
    try:
        yield ember
    finally:
        record_in_process_stats(ember.stats())
        ember._ember._uninstall_passthrough()
        ember.disable()
        if before == "ember":
            ember.enable()
        elif before == "passthrough":
            ember._ember._install_passthrough()


@pytest.fixture
def ember_on(evaluator_restored):
    """Ember enabled in this process for the test."""
    evaluator_restored.enable()
    return evaluator_restored


@pytest.fixture
def ember_off(evaluator_restored):
    """No frame evaluator installed in this process for the test."""
    evaluator_restored.disable()
    evaluator_restored._ember._uninstall_passthrough()
    assert evaluator_restored._ember._installed() == "default"
    return evaluator_restored
