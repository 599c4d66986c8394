"""The stats document (ember.stats(), EMBER_STATS files) against its
published JSON Schema, docs/stats.schema.json."""

import copy
import json
import os
import platform
import subprocess
import sys
import textwrap

import jsonschema
import pytest

import difftest
import ember

# Tier 1 places the stencils' rare paths after a function's code on x86-64
# only (stencil-build's split.rs). On both, the stores an unpacking does
# itself (UNPACK_SEQUENCE's __STORES form) go there too.
SPLITS = platform.machine() == "x86_64"

SCHEMA_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "stats.schema.json")

PROGRAM = textwrap.dedent("""
    def gen(n):
        for i in range(n):
            yield i * i

    def work(n):
        total = 0
        for _ in range(n):
            total += sum(gen(10))
        return total

    print(work(50))
""")


@pytest.fixture(scope="module")
def validator():
    with open(SCHEMA_PATH, encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def stats_file(tmp_path, env):
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    path = difftest.new_stats_path("schema")
    p = subprocess.run([sys.executable, str(script)], env=difftest.clean_environ({**env, "EMBER_STATS": path}),
                       capture_output=True, text=True, timeout=120)
    assert (p.returncode, p.stdout, p.stderr) == (0, "14250\n", "")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def consistent(doc):
    g = doc["global"]
    assert g["code_objects_live"] == len(doc["functions"]) == sum(g["code_objects_by_tier"].values())
    assert g["code_objects_seen"] == g["code_objects_live"] + g["code_objects_freed"]
    assert g["calls"] >= sum(f["calls"] for f in doc["functions"])
    assert g["resumes"] >= sum(f["resumes"] for f in doc["functions"])
    assert g["tier1"]["back_edges"] >= sum(f["back_edges"] or 0 for f in doc["functions"])
    assert sum(f["compiles"]["1"] for f in doc["functions"]) <= g["tier1"]["compiled"]
    for f in doc["functions"]:
        assert ("tier1" in f) == (f["tier"] == 1), f
        # Back-edges are seen by compiled code only: unknown for code that never was.
        assert (f["back_edges"] is None) == (f["compiles"]["1"] == 0), f
        # Tier 2's deopts by reason: nothing until tier 2 exists.
        assert doc["max_available_tier"] >= 2 or f["deopts"] == {}
        if "tier1" in f:
            assert f["tier1"]["compile_ns"] <= f["compile_ns"]["1"]
            # Publishing is a part of compiling, and takes a system call at least.
            assert 0 < f["tier1"]["publish_ns"] < f["tier1"]["compile_ns"], f
            assert 0 < f["tier1"]["hot_bytes"] <= f["tier1"]["code_bytes"], f
            assert f["tier1"]["hot_bytes"] < f["tier1"]["code_bytes"] or not SPLITS, f
    assert g["tier1"]["publish_ns"] <= g["tier1"]["compile_ns"]
    # Common paths first, the rare ones after them (x86-64: aarch64's
    # stencils are not split, and all their code but an unpacking's own
    # stores counts as common paths).
    assert (0 < g["tier1"]["hot_bytes"] <= g["tier1"]["code_bytes"]) == (g["tier1"]["compiled"] > 0)
    if g["tier1"]["compiled"] > 0:
        assert g["tier1"]["hot_bytes"] < g["tier1"]["code_bytes"] or not SPLITS
    assert (g["tier1"]["publish_ns"] > 0) == (g["tier1"]["compiled"] > 0)


@pytest.mark.parametrize("env, tier1", [
    ({"EMBER": "1", "EMBER_MAX_TIER": "0"}, False),
    ({"EMBER": "1", "EMBER_TIER1_THRESHOLD": "0"}, True),
])
def test_stats_file_matches_schema(validator, tmp_path, env, tier1):
    doc = stats_file(tmp_path, env)
    validator.validate(doc)
    consistent(doc)
    work = next(f for f in doc["functions"] if f["qualname"] == "work")
    assert work["calls"] == 1 and (work["tier"] == 1) == tier1
    gen = next(f for f in doc["functions"] if f["qualname"] == "gen")
    # Ten resumptions yield, the eleventh finishes the generator.
    assert gen["calls"] == 50 and gen["resumes"] == 50 * 11
    if tier1:
        assert doc["global"]["tier1"]["compiled"] > 0 and work["tier1"]["code_bytes"] > 0
        # work's loop: FOR_ITER's adaptive counter triggers on its second
        # execution and the interpreter takes the frame over to specialise.
        assert work["handoffs"] >= 1 and doc["global"]["tier1"]["handoffs"] >= work["handoffs"]
        # Its 50 iterations, less those the interpreter ran after a hand-off.
        assert 0 <= work["back_edges"] <= 50 and doc["global"]["tier1"]["back_edges"] >= work["back_edges"]
    else:
        assert work["handoffs"] == 0 and doc["global"]["tier1"]["handoffs"] == 0
        assert all(f["back_edges"] is None for f in doc["functions"])
        assert doc["global"]["tier1"]["back_edges"] == 0


def test_in_process_stats_match_schema(validator, ember_on):
    def f(x):
        return x + 1

    ember.pin(f, 1)
    f(1), f(2)
    doc = ember.stats()
    validator.validate(doc)
    ember.unpin(f)


def test_schema_rejects_broken_documents(validator, tmp_path):
    doc = stats_file(tmp_path, {"EMBER": "1"})
    broken = []
    d = copy.deepcopy(doc); del d["global"]["frames"]; broken.append(d)
    d = copy.deepcopy(doc); d["schema_version"] = 2; broken.append(d)
    d = copy.deepcopy(doc); d["functions"][0]["calls"] = -1; broken.append(d)
    d = copy.deepcopy(doc); d["functions"][0]["tier"] = 3; broken.append(d)
    d = copy.deepcopy(doc); d["global"]["unexpected"] = 0; broken.append(d)
    d = copy.deepcopy(doc); d["functions"][0]["back_edges"] = "many"; broken.append(d)
    d = copy.deepcopy(doc); del d["functions"][0]["deopts"]; broken.append(d)
    d = copy.deepcopy(doc); d["functions"][0]["compile_ns"] = {"3": 1}; broken.append(d)
    d = copy.deepcopy(doc); d["global"]["deopts"] = {"guard": -2}; broken.append(d)
    for d in broken:
        with pytest.raises(jsonschema.ValidationError):
            validator.validate(d)
