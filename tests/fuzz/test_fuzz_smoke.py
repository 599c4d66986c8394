"""Smoke test of the generated-program differential fuzzer (tests/fuzz).

    dev/env python -m pytest tests/fuzz -q -p no:cacheprovider

Runs 50 seeds through run.py's functions (plain CPython against tier 1 at
threshold 0) and proves that the comparison and the whole pipeline catch a
divergence and survive a crashing child. The full run is
`dev/env python tests/fuzz/run.py --seeds 0:10000` (README.md).
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import gen  # noqa: E402
import run  # noqa: E402

SMOKE_SEEDS = list(range(50))


def test_generator_is_deterministic_and_compiles():
    for seed in (0, 1, 17, 4242):
        src, meta = gen.generate(seed)
        assert gen.generate(seed)[0] == src
        assert meta["seed"] == seed and meta["units"]
        compile(src, f"<fuzz {seed}>", "exec")
    assert gen.generate(1)[0] != gen.generate(2)[0]


def test_smoke_seeds_do_not_diverge(tmp_path):
    total = run.run_seeds(SMOKE_SEEDS, batch=50, div_dir=str(tmp_path))
    assert total["programs"] == len(SMOKE_SEEDS)
    assert not total["divergences"], "\n".join(
        f"seed {d['seed']}:\n" + "".join(d["problems"]) for d in total["divergences"])
    assert total["enabled"], "Ember was not on in the tier1 child"
    # A run that compiled nothing at tier 1 tested nothing.
    assert total["compiled"] > 0
    assert total["returned"] > 0


def test_compare_catches_each_kind_of_difference():
    base = {"seed": 1, "sha": "abc", "out": "f = 1\ng ! ValueError: x @g:3:4\n", "err": "", "exc": None}
    assert run.compare(base, dict(base)) == []
    assert run.compare(base, {**base, "out": "f = 1\ng ! ValueError: x @g:4:4\n"})
    assert run.compare(base, {**base, "out": base["out"] + "extra\n"})
    assert run.compare(base, {**base, "err": "warning\n"})
    assert run.compare(base, {**base, "exc": ["ValueError", "boom", ["<module>:3"]]})
    assert run.compare(base, {**base, "sha": "def"})
    crashed = run.compare(base, None, None, {"returncode": -11, "timed_out": False, "stderr": "Segmentation fault"})
    assert crashed and "crashed" in crashed[0]
    hung = run.compare(base, None, None, {"returncode": None, "timed_out": True, "stderr": ""})
    assert hung and "hung" in hung[0]


def test_pipeline_reports_an_injected_divergence(tmp_path):
    total = run.run_seeds([5, 6, 7], batch=3, div_dir=str(tmp_path), extra_env={run.INJECT_VAR: "6"})
    assert [d["seed"] for d in total["divergences"]] == [6]
    assert (tmp_path / "6.py").read_text() == gen.generate(6)[0]
    assert "injected divergence" in (tmp_path / "6.txt").read_text()


def test_pipeline_survives_a_crashing_child(tmp_path):
    total = run.run_seeds([5, 6, 7], batch=3, div_dir=str(tmp_path), extra_env={run.INJECT_CRASH_VAR: "6"})
    assert [d["seed"] for d in total["divergences"]] == [6]
    assert "crashed" in total["divergences"][0]["problems"][0]
    # the seeds before and after the crash were still compared (in a new child)
    assert total["programs"] == 3


def test_a_program_asking_for_gigabytes_gets_memoryerror_in_both_children(tmp_path):
    # Seeds 106809 and 107490: a function the generator wrote for ints,
    # called once with a tuple, multiplied it by 1_000_000_007 (24 GB). Both
    # children were killed by the kernel (out of memory, two batches at
    # once), which the run reported as a divergence. Under the children's
    # memory cap the request fails as any failed allocation does, with a
    # MemoryError the program sees, the same in both.
    items = [{"seed": 1, "src": "t = (0,) * 1_000_000_000\n"}]  # 8 GB
    plain = run.run_mode("plain", items, str(tmp_path))
    tier1 = run.run_mode("tier1", items, str(tmp_path))
    assert not plain["crashes"] and not tier1["crashes"]
    p, t = plain["records"][1], tier1["records"][1]
    assert p["exc"] and p["exc"][0] == "MemoryError", p
    assert run.compare(p, t) == []
