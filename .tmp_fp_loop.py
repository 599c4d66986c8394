"""Small loop benchmark: attributes, methods, globals, floats, containers, builtins."""
import math, sys, time

class Body:
    def __init__(self, x, y, vx, vy, m):
        self.x = x; self.y = y; self.vx = vx; self.vy = vy; self.m = m
    def energy(self):
        return 0.5 * self.m * (self.vx * self.vx + self.vy * self.vy)

class Slot:
    __slots__ = ("count", "name")
    def __init__(self, name):
        self.count = 0; self.name = name

SCALE = 0.01

def advance(bodies, dt):
    for i in range(len(bodies)):
        a = bodies[i]
        for j in range(i + 1, len(bodies)):
            b = bodies[j]
            dx = a.x - b.x
            dy = a.y - b.y
            d2 = dx * dx + dy * dy + SCALE
            mag = dt / (d2 * math.sqrt(d2))
            if mag > 1e9:
                mag = 1e9
            a.vx -= dx * b.m * mag
            a.vy -= dy * b.m * mag
            b.vx += dx * a.m * mag
            b.vy += dy * a.m * mag
    e = 0.0
    for body in bodies:
        body.x += dt * body.vx
        body.y += dt * body.vy
        e += body.energy()
    return e

def tasks(n, slots, seen, table):
    out = []
    for i in range(n):
        s = slots[i % len(slots)]
        s.count += 1
        if s.name in seen:
            out.append(s.count)
        table[s.name] = s.count
        if isinstance(s, Slot) and s.name == "b":
            out.append(abs(-i))
    return len(out)

def run(iters):
    bodies = [Body(float(i), float(i * i % 7), 0.1 * i, -0.05 * i, 1.0 + i) for i in range(8)]
    slots = [Slot(c) for c in "abcdefg"]
    seen = {"a", "b", "c"}
    table = {}
    e = 0.0
    for _ in range(iters):
        e += advance(bodies, 0.001)
        tasks(200, slots, seen, table)
    return e

def main():
    for _ in range(20):          # warm-up: calls of advance/tasks (threshold 8)
        run(2)
    t0 = time.perf_counter()
    for _ in range(5):
        run(400)
    print(time.perf_counter() - t0)

main()
