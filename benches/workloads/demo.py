"""Ember's demo workload: under a second of ordinary Python (recursion, classes,
generators, floats, dicts) whose results are printed so that a run under Ember
can be compared with the interpreter's."""

import time


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


class Vec:
    __slots__ = ("x", "y", "z")

    def __init__(self, x, y, z):
        self.x, self.y, self.z = x, y, z

    def add(self, o):
        return Vec(self.x + o.x, self.y + o.y, self.z + o.z)

    def scale(self, k):
        return Vec(self.x * k, self.y * k, self.z * k)

    def dot(self, o):
        return self.x * o.x + self.y * o.y + self.z * o.z


def orbit(steps):
    pos, vel = Vec(1.0, 0.0, 0.0), Vec(0.0, 1.0, 0.0)
    dt = 0.001
    for _ in range(steps):
        r2 = pos.dot(pos)
        acc = pos.scale(-1.0 / (r2 * r2 ** 0.5))
        vel = vel.add(acc.scale(dt))
        pos = pos.add(vel.scale(dt))
    return round(pos.x, 6), round(pos.y, 6)


def primes():
    found = []
    n = 2
    while True:
        if all(n % p for p in found if p * p <= n):
            found.append(n)
            yield n
        n += 1


def word_counts(n):
    words = ["ember", "tier", "stencil", "frame", "guard", "deopt", "patch"]
    counts = {}
    for i in range(n):
        w = words[(i * 7 + i // 3) % len(words)]
        counts[w] = counts.get(w, 0) + 1
    return sorted(counts.items())


def main():
    t0 = time.perf_counter()
    print("fib(25) =", fib(25))
    print("orbit   =", orbit(200_000))
    gen = primes()
    print("prime #2000 =", [next(gen) for _ in range(2000)][-1])
    print("words   =", word_counts(300_000)[:3])
    print(f"elapsed {time.perf_counter() - t0:.2f}s")


if __name__ == "__main__":
    main()
