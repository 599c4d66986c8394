"""The tier-1 surface: compilation policy, pinning, is_compiled, dis, the
perf map and the stats of compiled code."""

import io
import json
import os
import re
import subprocess
import sys
import textwrap

import ember
import pytest


def run(source, env_extra, tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(source))
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER")}
    env.update(env_extra)
    return subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)


def test_pin_to_tier1_compiles_and_runs(ember_on):
    def add(a, b):
        return a + b

    assert not ember.is_compiled(add)
    ember.pin(add, 1)
    # Two calls: once monitoring has been used in the process (other tests
    # do), the interpreter must run a code object once before it compiles.
    assert add(2, 3) == 5 and add(3, 4) == 7
    assert ember.is_compiled(add) and ember.tier_of(add) == 1
    entry = next(f for f in ember.stats()["functions"] if f["qualname"] == add.__qualname__)
    assert entry["tier"] == 1 and entry["tier1"]["code_bytes"] > 0 and entry["interpreter_reason"] is None
    ember.unpin(add)


def test_pin_to_interpreter_prevents_compilation(ember_on):
    def mul(a, b):
        return a * b

    ember.pin(mul, 0)
    for i in range(50):
        mul(i, i)
    assert not ember.is_compiled(mul) and ember.tier_of(mul) == 0
    ember.unpin(mul)


def test_threshold_policy(tmp_path):
    source = """
        import ember
        def f(x):
            return x + 1
        for i in range(3):
            f(i)
        print(ember.is_compiled(f))
        for i in range(3):
            f(i)
        print(ember.is_compiled(f))
    """
    p = run(source, {"EMBER": "1", "EMBER_TIER1_THRESHOLD": "5"}, tmp_path)
    assert p.stdout == "False\nTrue\n", p.stderr
    p = run(source, {"EMBER": "1", "EMBER_TIER1_THRESHOLD": "5", "EMBER_MAX_TIER": "0"}, tmp_path)
    assert p.stdout == "False\nFalse\n", p.stderr
    # Without any tier-1 setting, tier 1 is off (opt-in).
    p = run(source, {"EMBER": "1"}, tmp_path)
    assert p.stdout == "False\nFalse\n", p.stderr
    p = run(source, {"EMBER": "1", "EMBER_MAX_TIER": "1"}, tmp_path)
    assert p.stdout == "False\nFalse\n", p.stderr  # default threshold 8 > 6 calls


@pytest.mark.parametrize("var,value", [("EMBER_TIER1_THRESHOLD", "-1"), ("EMBER_TIER1_THRESHOLD", "x"),
                                       ("EMBER_MAX_TIER", "2"), ("EMBER_CODE_LIMIT_MB", "1.5"),
                                       ("EMBER_PERF_MAP", "yes")])
def test_bad_compile_settings_keep_ember_off(tmp_path, var, value):
    p = run("import ember; print(ember.is_enabled())", {"EMBER": "1", var: value}, tmp_path)
    assert p.stdout == "False\n"
    assert p.stderr.count("\n") == 1 and p.stderr.startswith(f"ember: {var}=")


def test_dis_shows_machine_code_per_instruction(ember_on):
    def sub(a, b):
        return a - b

    out = io.StringIO()
    ember.dis(sub, file=out)
    assert "has no compiled code" in out.getvalue()
    ember.pin(sub, 1)
    sub(5, 3), sub(6, 3)
    out = io.StringIO()
    ember.dis(sub, file=out)
    text = out.getvalue()
    assert text.startswith("tier-1 code of ")
    assert re.search(r"^\s+0 RESUME", text, re.M)
    assert re.search(r"RETURN_VALUE\s+\[stencil RETURN_VALUE\]", text)
    # Every instruction line carries an address, its bytes and a mnemonic.
    lines = [l for l in text.splitlines() if l.startswith("    0x")]
    assert len(lines) > 10 and all(re.match(r"    0x[0-9a-f]+  ([0-9a-f]{2} ?)+\s+\S", l) for l in lines)
    ember.unpin(sub)


def test_perf_map_matches_compiled_code(tmp_path):
    source = """
        import ember, json, os
        def work(n):
            t = 0
            for i in range(n):
                t += i
            return t
        work(10)
        entries = [f for f in ember.stats()["functions"] if "tier1" in f]
        print(json.dumps([[f["qualname"], f["tier1"]["address"], f["tier1"]["code_bytes"]] for f in entries]))
        print(os.getpid())
    """
    p = run(source, {"EMBER": "1", "EMBER_TIER1_THRESHOLD": "0", "EMBER_PERF_MAP": "1"}, tmp_path)
    assert p.returncode == 0, p.stderr
    compiled, pid = p.stdout.splitlines()
    compiled = json.loads(compiled)
    path = f"/tmp/perf-{pid}.map"
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    finally:
        os.unlink(path)
    parsed = {}
    for line in lines:
        m = re.fullmatch(r"([0-9a-f]+) ([0-9a-f]+) py::(.+):ember-t1", line)
        assert m, line
        parsed[int(m.group(1), 16)] = (int(m.group(2), 16), m.group(3))
    assert compiled and any(q == "work" for q, _, _ in compiled)
    for qualname, address, size in compiled:
        assert parsed[address] == (size, qualname)
