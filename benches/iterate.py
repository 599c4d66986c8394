"""Runs one of the dev set's pyperformance benchmark functions N times, in
this process, with nothing around it: what benches/counts.py measures.

    python benches/iterate.py BENCH N

Each call is one iteration of the benchmark at pyperformance's default size
(richards: one Richards().run(1); nbody: 2,000 steps; chaos: one picture of
2,000 iterations; ...).
"""

import importlib.util
import pathlib
import sys
import types


def load(name: str):
    import pyperformance

    path = pathlib.Path(pyperformance.__file__).parent / "data-files" / "benchmarks" / f"bm_{name}" / "run_benchmark.py"
    if not path.exists():
        sys.exit(f"iterate.py: no pyperformance benchmark {name!r} ({path})")
    spec = importlib.util.spec_from_file_location(f"bm_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def chaos(m):
    # main() builds the chaosgame and hands pyperf's runner the function to
    # time; a stand-in runner keeps it.
    kept = []

    class Runner:
        metadata = {}

        def bench_func(self, _name, func, *args):
            kept.append(lambda: func(*args))

    args = types.SimpleNamespace(thickness=m.DEFAULT_THICKNESS, width=m.DEFAULT_WIDTH, height=m.DEFAULT_HEIGHT,
                                 iterations=2000, filename=None, rng_seed=m.DEFAULT_RNG_SEED)
    m.main(Runner(), args)
    return kept[0]


ITERATION = {
    "richards": lambda m: lambda: m.Richards().run(1),
    "nbody": lambda m: lambda: m.bench_nbody(1, "sun", 2000),
    "float": lambda m: lambda: m.benchmark(10000),
    "chaos": chaos,
    "spectral_norm": lambda m: lambda: m.bench_spectral_norm(1),
    "nqueens": lambda m: lambda: m.bench_n_queens(6),
    "fannkuch": lambda m: lambda: m.fannkuch(7),
    "generators": lambda m: lambda: m.bench_generators(1),
    "coroutines": lambda m: lambda: m.bench_coroutines(1),
    "unpack_sequence": lambda m: lambda: m.bench_all(50),
}


def main() -> None:
    if len(sys.argv) != 3 or sys.argv[1] not in ITERATION:
        sys.exit(__doc__ + "\nBENCH: " + ", ".join(ITERATION))
    name, n = sys.argv[1], int(sys.argv[2])
    iteration = ITERATION[name](load(name))
    for _ in range(n):
        iteration()


if __name__ == "__main__":
    main()
