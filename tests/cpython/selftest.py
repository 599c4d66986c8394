#!/usr/bin/env python3
"""Check that regrtest.py can fail: run it on fixture test modules that
behave differently under Ember on purpose, and check what it reports.

    dev/env python tests/cpython/selftest.py

The fixtures (tests/cpython/selftest/test_emberself_*.py) look at whether
Ember is on in their process and then fail, error, crash or hang only under
Ember or only under stock; one fails under any PEP 523 frame evaluator.
regrtest.py must exit 1 and name exactly those differences, and tell the
one that the pep523 baseline shares; on the module that behaves the same it
must exit 0 and print the Ember line; with Ember switched off it must
refuse; --stock-cache must reuse a stock result. About a minute (one fixture hangs until a 10-second --timeout).
"""

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "selftest"

ANY_EVALUATOR = "test_emberself_cases.AnyFrameEvaluator.test_fails_under_any_frame_evaluator"
EXPECTED = {
    ("module", "test_emberself_crash"): ("PASSED", "WORKER_FAILED"),
    ("module", "test_emberself_hang"): ("PASSED", "TIMEOUT"),
    ("case", "test_emberself_cases.Differ.test_fails_only_under_ember"): ("passed", ["failure"]),
    ("case", "test_emberself_cases.Differ.test_subtest_fails_only_under_ember"): ("passed", ["failure"]),
    ("case", "test_emberself_cases.Differ.test_fails_only_stock"): (["failure"], "passed"),
    ("case", "test_emberself_cases.Differ.test_error_instead_of_failure"): (["failure"], ["error"]),
    ("case", "test_emberself_cases.SetUpClassFailsUnderEmber.setUpClass"): ("not run", ["error"]),
    ("case", ANY_EVALUATOR): ("passed", ["failure"]),
}
EMBER_LINE = re.compile(r"^ember: [1-9]\d* processes, [1-9]\d* code objects seen by the hook, "
                        r"compiled at tier 1: \d+, tier 2: \d+$", re.M)


def run(results: Path, *args: str) -> tuple[int, str, dict | None]:
    cmd = [sys.executable, str(HERE / "regrtest.py"), "--testdir", str(FIXTURES),
           "--results", str(results), "--timeout", "10", "--no-ignore", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    summaries = sorted(results.glob("*/summary.json"), key=lambda p: p.stat().st_mtime)
    summary = json.loads(summaries[-1].read_text()) if summaries else None
    for p in summaries:
        p.unlink()
    return proc.returncode, proc.stdout + proc.stderr, summary


def orphans() -> list[int]:
    """Processes left by the hang fixture (they must have been killed)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"# emberself-orphan" in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def diffs_of(summary, config) -> dict:
    got = {}
    for d in (summary or {}).get("configs", {}).get(config, {}).get("differences", []):
        got[(d["kind"], d["name"])] = (d["stock"], d["other"])
    return got


def main() -> int:
    failures = []

    def check(cond, what, output=""):
        print(f"{'ok  ' if cond else 'FAIL'} {what}", flush=True)
        if not cond:
            failures.append(what)
            if output:
                print(output)

    with tempfile.TemporaryDirectory(prefix="ember-selftest-") as tmp:
        results = Path(tmp)
        same = results / "same.txt"
        same.write_text("test_emberself_same\n")

        rc, out, summary = run(results, "--list", str(same))
        check(rc == 0, "identical behaviour: exit 0", out)
        check(EMBER_LINE.search(out) is not None,
              "identical behaviour: prints the Ember processes/code objects line", out)

        rc, out, summary = run(results, "--list", str(same), "--stock-cache")
        rc, out, summary = run(results, "--list", str(same), "--stock-cache")
        check(rc == 0 and "using the cached stock result" in out and "[stock] " not in
              out.replace("[stock] using the cached", ""),
              "--stock-cache: the second run reuses the first one's stock result", out)

        rc, out, summary = run(results, "--list", str(FIXTURES / "list.txt"),
                               "--config", "ember,pep523", "--no-confirm")
        check(rc == 1, "planted differences: exit 1", out)
        got = diffs_of(summary, "ember")
        check(got == EXPECTED, "planted differences: exactly the expected ones under Ember",
              out + "\n" + "\n".join(f"  got {k}: {v}" for k, v in sorted(got.items())))
        got = diffs_of(summary, "pep523")
        check(set(got) == {("case", ANY_EVALUATOR)},
              "pep523 baseline: only the any-evaluator difference", str(got))
        shared = (summary or {}).get("configs", {}).get("ember", {}).get("also_under_pep523")
        check(shared == [["case", ANY_EVALUATOR]],
              "Ember's differences: the one shared with the baseline is told apart", str(shared))
        alike = (summary or {}).get("configs", {}).get("ember", {}).get("failing_alike")
        check(alike == ["test_emberself_cases.Same.test_fails_in_both"],
              "a failure common to both runs is not a difference", str(alike))

        check(re.search(r"\[ember\] killed [1-9]\d* process\(es\) the run left behind", out)
              is not None and not orphans(),
              "a hung test's child process is killed after the run", out + str(orphans()))

        rc, out, summary = run(results, "--list", str(same), "--env", "EMBER=0")
        check(rc == 1 and "did not turn on" in out, "Ember switched off: refused", out)

    print(f"selftest: {'FAIL' if failures else 'PASS'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
