"""Differential tests: containers, unpacking, formatting, slicing, and the
TO_BOOL / BINARY_OP specialisations over built-in types
(stencils/c/containers.c, tier1/csrc/containers.c).

Each snippet runs under stock CPython and every Ember configuration, plus
"tier1-warm": tier 1 compiles a function only after the interpreter has run
(and specialised) it for a while, so the specialised stencils and their
guards are exercised too. Every run must also show the snippet's functions
compiled at tier 1 (read from the runs' EMBER_STATS files). In-process
tests check that the specialised stencils are the ones tier 1 chose.
"""

import glob
import json
import os
import textwrap
import types

import pytest

import difftest
from difftest import EMBER_CONFIGS, Config, check

# A helper most snippets define among their functions (indented as they
# are): what a call returns, or the exception it raises, as text.
ATTEMPT = """\
        def attempt(func, *args):
            try:
                return func(*args)
            except Exception as e:
                return f"{type(e).__name__}: {e}"
"""

WARM = Config("tier1-warm", {"EMBER": "1", "EMBER_TIER1_THRESHOLD": "20"})
CONFIGS = EMBER_CONFIGS + [WARM]
TIER1_CONFIGS = ("tier1-eager", "tier1-warm")


def check_tier1(source, compiled, *, returncode=0):
    """check() under CONFIGS, then assert that in every tier-1 run each
    function of `compiled` (qualnames) was compiled at tier 1."""
    stats_dir = difftest.stats_dir()
    before = set(glob.glob(os.path.join(stats_dir, "*.json")))
    out = check(source, configs=CONFIGS, returncode=returncode)
    new = sorted(set(glob.glob(os.path.join(stats_dir, "*.json"))) - before)
    for config in TIER1_CONFIGS:
        paths = [p for p in new if p.endswith(f"-{config}.json")]
        assert len(paths) == 1, f"no stats file of the {config} run among {new}"
        with open(paths[0], encoding="utf-8") as f:
            functions = [fn for fn in json.load(f)["functions"] if fn["filename"].endswith("snippet.py")]
        for name in compiled:
            entries = [fn for fn in functions if fn["qualname"] == name]
            assert entries, f"[{config}] {name} never ran"
            for fn in entries:
                assert fn["tier"] == 1 and fn["interpreter_reason"] is None, (
                    f"[{config}] {name} not compiled at tier 1: {fn}")
    return out


# --- unpacking ---------------------------------------------------------------

def test_unpack_sequence_and_ex():
    out = check_tier1("""
        import traceback

        def gen(n):
            for i in range(n):
                yield i

        class Seq:
            def __getitem__(self, i):
                if i < 3:
                    return i * 10
                raise IndexError(i)

        # Subclasses go through iteration, whatever the site is specialised for.
        class BackwardsTuple(tuple):
            def __iter__(self):
                return reversed(tuple(tuple.__iter__(self)))

        class BackwardsList(list):
            def __iter__(self):
                return reversed(self)

        def unpack2(v):
            a, b = v
            return a, b

        def unpack3(v):
            a, b, c = v
            return c, b, a

        def unpack_ex(v):
            first, *rest = v
            *init, last = v
            a, *mid, b, c = v
            return first, rest, init, last, a, mid, b, c

        def nested(pairs):
            out = []
            for (k, (x, y)) in pairs:
                out.append(k + x * y)
            return out

        def swap(a, b):
            a, b = b, a
            return a, b

        def many(v):
            (a0, a1, a2, a3, a4, a5, a6, a7, a8, a9,
             b0, b1, b2, b3, b4, b5, b6, b7, b8, b9) = v
            return a0 + b9, a9 + b0

        def bad_iter():
            yield 1
            raise KeyError("from inside the iterator")

""" + ATTEMPT + """
        for _ in range(30):
            values = [
                unpack2((1, 2)), unpack2([3, 4]), unpack2("xy"), unpack2(gen(2)),
                unpack2({"k": 1, "j": 2}), unpack2(iter(range(2))),
                unpack2(BackwardsTuple((1, 2))), unpack2(BackwardsList([3, 4])), unpack2([5, 6]),
                unpack3([7, 8, 9]), unpack3((10, 11, 12)), unpack3(BackwardsList([1, 2, 3])),
                unpack3((1, 2, 3)), unpack3([4, 5, 6]), unpack3(Seq()), unpack3(b"abc"),
                unpack_ex((1, 2, 3, 4, 5)), unpack_ex([1, 2, 3]), unpack_ex(range(7)),
                nested([(1, (2, 3)), (4, [5, 6])]), swap(1, 2), many(list(range(20))),
                attempt(unpack2, 5), attempt(unpack2, None), attempt(unpack2, (1, 2, 3)),
                attempt(unpack2, [1]), attempt(unpack2, "abc"), attempt(unpack2, gen(3)),
                attempt(unpack2, gen(1)), attempt(unpack3, (1, 2)), attempt(unpack3, [1, 2, 3, 4]),
                attempt(unpack2, bad_iter()), attempt(unpack_ex, (1, 2)), attempt(unpack_ex, 7),
                attempt(unpack_ex, bad_iter()), attempt(many, range(19)),
            ]
        for v in values:
            print(v)

        try:
            unpack3([1, 2])
        except ValueError:
            traceback.print_exc()
        try:
            unpack_ex(None)
        except TypeError:
            traceback.print_exc()
    """, ["unpack2", "unpack3", "unpack_ex", "nested", "swap", "many", "attempt"])
    assert "ValueError: too many values to unpack (expected 2, got 3)" in out.stdout
    assert "TypeError: cannot unpack non-iterable int object" in out.stdout
    assert "ValueError: not enough values to unpack (expected at least 3, got 2)" in out.stdout
    assert "KeyError: 'from inside the iterator'" in out.stdout
    assert "in unpack3" in out.stderr and "in unpack_ex" in out.stderr


# --- building containers ---------------------------------------------------

def test_build_map_set_and_comprehensions():
    out = check_tier1("""
        class Key:
            def __init__(self, n):
                self.n = n
            def __hash__(self):
                if self.n < 0:
                    raise RuntimeError(f"no hash for {self.n}")
                return self.n
            def __eq__(self, other):
                return isinstance(other, Key) and other.n == self.n
            def __repr__(self):
                return f"Key({self.n})"

        class Noisy:
            def __init__(self, name):
                self.name = name
            def __del__(self):
                print("del", self.name)

        def maps(a, b):
            empty = {}
            one = {"a": a}
            two = {a: b, b: a}
            dup = {1: "x", 1.0: "y", True: "z"}
            big = {0: a, 1: a, 2: a, 3: a, 4: a, 5: a, 6: a, 7: a, 8: a, 9: a,
                   10: b, 11: b, 12: b, 13: b, 14: b, 15: b, 16: b, 17: b, 18: b, 19: b}
            merged = {**one, "b": b, **two}
            # 9 pairs: 18 stack items, more than the helper's small buffer.
            nine = {a: 0, b: 1, "c": a, "d": b, "e": a, "f": b, "g": a, "h": b, "i": a}
            return empty, one, two, dup, len(big), sorted(big.items())[-1], merged, nine

        def sets(a, b):
            s = {a, b, a}
            big = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, a}
            star = {*s, *"ab", b}
            return sorted(s, key=repr), len(big), sorted(star, key=repr)

        def comps(n):
            squares = {i: i * i for i in range(n)}
            evens = {i for i in range(n) if i % 2 == 0}
            keyed = {Key(i): str(i) for i in range(3)}
            return squares, sorted(evens), keyed

        def bad_map(k):
            return {"a": 1, k: 2, "c": 3}

        def bad_set(k):
            return {1, k, Noisy("set item")}

        def bad_comp(keys):
            return {k: 1 for k in keys}

        def bad_setcomp(keys):
            return {k for k in keys}

""" + ATTEMPT + """
        for _ in range(25):
            results = [maps(1, 2), maps("x", "y"), sets(1, 2), sets("a", (1, 2)), comps(5),
                       attempt(bad_map, []), attempt(bad_map, Key(-1)), attempt(bad_set, {}),
                       attempt(bad_comp, [1, [2]]), attempt(bad_comp, [Key(1), Key(-2)]),
                       attempt(bad_setcomp, [1, {}])]
        for r in results:
            print(r)
        print(attempt(bad_set, Key(-5)))
        print({Key(1): 1, Key(1): 2})
        bad_map({})
    """, ["maps", "sets", "comps", "bad_map", "bad_set", "bad_comp", "bad_setcomp", "attempt"], returncode=1)
    assert "cannot use 'list' as a dict key" in out.stdout
    assert "RuntimeError: no hash for -1" in out.stdout
    assert "del set item" in out.stdout
    assert "in bad_map" in out.stderr and "TypeError" in out.stderr


def test_star_displays_and_errors():
    out = check_tier1("""
        import traceback

        class Mapping:
            def keys(self):
                return ["k", "j"]
            def __getitem__(self, key):
                return key.upper()

        class BadKeys:
            def keys(self):
                raise AttributeError("keys broke")

        class NotIterable:
            pass

        class BrokenIter:
            def __iter__(self):
                raise ValueError("iter broke")

        def lists(a, b):
            return [*a, *b], [1, *a, 2], [*range(3), *b, *"xy"]

        def tuples(a, b):
            return (*a, *b), (*a,)

        def sets(a, b):
            return sorted({*a, *b}), sorted({1, *a})

        def dicts(a, b):
            return {**a, **b}, {"z": 0, **a}

""" + ATTEMPT + """
        for _ in range(25):
            results = [
                lists([1], (2, 3)), lists("ab", {4: 5}), tuples([1], [2]), sets([3, 1], (2,)),
                dicts({"a": 1}, {"a": 2, "b": 3}), dicts(Mapping(), {}),
                attempt(lists, 1, []), attempt(lists, [], NotIterable()), attempt(lists, BrokenIter(), []),
                attempt(tuples, [], None), attempt(sets, 5, []), attempt(sets, [[1]], []),
                attempt(dicts, 1, {}), attempt(dicts, {}, [1, 2]), attempt(dicts, BadKeys(), {}),
                attempt(dicts, {}, Mapping()),
            ]
        for r in results:
            print(r)
        try:
            lists([], 5)
        except TypeError:
            traceback.print_exc()
    """, ["lists", "tuples", "sets", "dicts", "attempt"])
    assert "TypeError: Value after * must be an iterable, not int" in out.stdout
    assert "TypeError: 'int' object is not a mapping" in out.stdout
    assert "ValueError: iter broke" in out.stdout
    assert "AttributeError: keys broke" in out.stdout or "not a mapping" in out.stdout
    assert "in lists" in out.stderr


def test_dict_merge_in_calls():
    out = check_tier1("""
        def target(*args, **kwargs):
            return args, sorted(kwargs.items())

        def calls(a, b):
            return target(**a), target(1, **a, **b), target(*b, z=1, **a)

""" + ATTEMPT + """
        for _ in range(25):
            results = [calls({"x": 1}, {"y": 2}), attempt(calls, {"x": 1}, {"x": 2}),
                       attempt(calls, 1, {}), attempt(calls, {}, 3), attempt(calls, {1: 2}, {})]
        for r in results:
            print(r)
    """, ["target", "calls", "attempt"])
    assert "target() got multiple values for keyword argument 'x'" in out.stdout
    assert "argument after ** must be a mapping, not int" in out.stdout


# --- formatting --------------------------------------------------------------

def test_fstrings():
    out = check_tier1("""
        import traceback

        class Fmt:
            def __format__(self, spec):
                if spec == "boom":
                    raise ValueError("bad spec for Fmt")
                return f"<Fmt {spec!r}>"
            def __repr__(self):
                return "Fmt()"
            def __str__(self):
                return "str of Fmt"

        class BadRepr:
            def __repr__(self):
                raise RuntimeError("repr broke")

        class StrSub(str):
            def __format__(self, spec):
                return "formatted " + str.__str__(self)

        def simple(x, y):
            return f"{x}", f"{x} and {y}", f"[{x!r}] [{x!s}] [{x!a}]", f"{x=}", f"{y!r:>12}"

        def spec(x, width, prec):
            return f"{x:>{width}}", f"{x:{width}.{prec}f}" if isinstance(x, float) else f"{x:^{width}}"

        def many(a):
            return (f"{a}{a}{a}{a}{a}{a}{a}{a}{a}{a}{a}{a}{a}{a}{a}{a}{a}{a}{a}{a}"
                    f"-{a}-{a}-{a}-{a}")

""" + ATTEMPT + """
        for _ in range(25):
            results = [simple(1, "two"), simple("é", 2.5), simple(Fmt(), None), simple(StrSub("s"), [1]),
                       spec(3.14159, 10, 3), spec("ab", 6, 0), spec(Fmt(), 3, 1), many("x"), many(7),
                       attempt(simple, BadRepr(), 1), attempt(simple, 1, BadRepr()),
                       attempt(spec, 1.5, "z", 2), attempt(spec, "s", -1, 0),
                       attempt(lambda v: f"{v:boom}", Fmt()), attempt(lambda v: f"{v:d}", "str")]
        for r in results:
            print(r)
        try:
            simple(BadRepr(), 0)
        except RuntimeError:
            traceback.print_exc()
    """, ["simple", "spec", "many", "attempt"])
    assert "<Fmt '>3'>" in out.stdout and "formatted s" in out.stdout
    assert "RuntimeError: repr broke" in out.stdout and "in simple" in out.stderr
    assert "ValueError: bad spec for Fmt" in out.stdout
    assert "Unknown format code 'd' for object of type 'str'" in out.stdout


def test_template_strings():
    out = check_tier1("""
        class BadRepr:
            def __repr__(self):
                raise RuntimeError("repr broke")

        def template(x, w):
            t = t"value {x!r:>{w}} and {x} and {w:03d}"
            return t

        def show(t):
            return t.strings, [(i.value, i.expression, i.conversion, i.format_spec) for i in t.interpolations]

""" + ATTEMPT + """
        for _ in range(25):
            results = [show(template(1, 4)), show(template("s", 2)), attempt(template, 1, "x"),
                       type(template(BadRepr(), 1).interpolations[0].value).__name__]
        for r in results:
            print(r)
        print(attempt(repr, template(BadRepr(), 1)))
    """, ["template", "show", "attempt"])
    assert "(1, 'x', 'r', '>4')" in out.stdout and "(4, 'w', None, '03d')" in out.stdout
    assert "('s', 'x', 'r', '>2')" in out.stdout and "RuntimeError: repr broke" in out.stdout


# --- slices, subscripts, len -------------------------------------------------

def test_slices_and_del():
    out = check_tier1("""
        import traceback

        class Recorder:
            def __getitem__(self, key):
                return ("get", key)
            def __setitem__(self, key, value):
                print("set", key, value)
            def __delitem__(self, key):
                print("del", key)

        class Index:
            def __index__(self):
                return 1

        def slices(seq, a, b, c):
            return seq[a:b], seq[a:b:c], seq[::c], seq[a:], seq[:b]

        def store(seq, a, b, value):
            seq[a:b] = value
            seq[a:b:1] = value
            return seq

        def delete(container, key):
            del container[key]
            return container

        def delete_slice(seq, a, b):
            del seq[a:b]
            del seq[::2]
            return seq

""" + ATTEMPT + """
        for _ in range(25):
            results = [
                slices([0, 1, 2, 3, 4, 5], 1, 5, 2), slices("abcdef", None, Index(), -1), slices(Recorder(), 1, "x", None),
                store([0, 1, 2, 3], 1, 3, ["a", "b"]), store(bytearray(b"abcd"), 0, 2, b"xy"),
                delete({"k": 1, "j": 2}, "k"), delete([1, 2, 3], -1), delete_slice(list(range(10)), 2, 4),
                attempt(slices, [1], "a", 2, 1), attempt(slices, [1], 1, 2, 0), attempt(store, (1, 2), 0, 1, [3]),
                attempt(store, [1, 2, 3], 0, 3, 5), attempt(delete, {}, "missing"), attempt(delete, [1], 5),
                attempt(delete, (1,), 0), attempt(delete, "s", 0), attempt(delete_slice, (1, 2), 0, 1),
                attempt(delete, {}, [1]),
            ]
        for r in results:
            print(r)
        store(Recorder(), 1, 2, "v")
        delete(Recorder(), slice(1, 2))
        try:
            delete([], 0)
        except IndexError:
            traceback.print_exc()
    """, ["slices", "store", "delete", "delete_slice", "attempt"])
    assert "IndexError: list assignment index out of range" in out.stdout
    assert "KeyError: 'missing'" in out.stdout
    assert "slice step cannot be zero" in out.stdout
    assert "set slice(1, 2, None) v" in out.stdout and "in delete" in out.stderr


def test_plain_slices_of_lists_tuples_and_strings():
    # seq[a:b] and lst[a:b] = v on an exact list, tuple or str with bounds
    # that are small exact ints or None are done without making a slice
    # (tier1/csrc/containers.c): the same objects as the subscript with a
    # slice (a whole tuple or str is itself, an empty one the shared empty
    # one), and every other bound or container the general way.
    check_tier1("""
        class Index:
            def __index__(self):
                return 2

        class MyInt(int):
            pass

        class L(list):
            pass

        class T(tuple):
            pass

        class Noisy:
            def __init__(self, name, into):
                self.name, self.into = name, into
            def __del__(self):
                print("del", self.name, "sees", len(self.into))

        def get(seq, a, b):
            return seq[a:b]

        def whole(seq):
            return seq[:]

        def put(seq, a, b, value):
            seq[a:b] = value
            return seq

""" + ATTEMPT + """
        bounds = [None, 0, 1, 3, -1, -3, 7, -9, 2**70, -2**70, True, Index(), MyInt(2), 2**40]
        for _ in range(20):
            seen = []
            for seq in ([0, 1, 2, 3, 4], (0, 1, 2, 3, 4), "abcde", "ab\u00e9\u65e5x", L([0, 1, 2]), T((0, 1, 2)),
                        b"bytes", range(6)):
                for a in bounds:
                    for b in bounds:
                        got = get(seq, a, b)
                        seen.append((type(got).__name__, got))
                t = (1, 2)
                s = "xy"
                seen.append((whole(t) is t, whole(s) is s, get(t, 5, 1) is tuple(), get(s, 3, 3) is str(),
                             get(T((1,)), None, None)))
                seen.append((whole([1, 2]), get(t, None, None) is t, get(t, 0, 2) is t, get(t, -2, None) is t))
            for a in bounds:
                for b in bounds:
                    seen.append(put(list(range(6)), a, b, ["x", "y"]))
                    seen.append(put(L(range(4)), a, b, "pq"))
            lst = [1, 2, 3]
            seen.append((put(lst, None, None, lst), put(lst, 1, 2, (i for i in "gen")), put([1], 0, 0, ())))
            seen.append((attempt(put, [1, 2], 0, 1, 5), attempt(put, [1, 2], "a", 1, []), attempt(get, [1], 1.5, 2),
                         attempt(put, (1, 2), 0, 1, [3]), attempt(get, 5, 0, 1)))
        for r in seen:
            print(r)
        victims = []
        victims.extend([Noisy("first", victims), Noisy("second", victims), 3])
        put(victims, 0, 2, [Noisy("third", victims)])
        print(len(victims))
    """, ["get", "whole", "put", "attempt"])


def test_match_len_and_patterns():
    out = check_tier1("""
        class Point:
            __match_args__ = ("x", "y")
            def __init__(self, x, y):
                self.x, self.y = x, y

        class BadLen(list):
            def __len__(self):
                raise RuntimeError("len broke")

        class BadMatch:
            __match_args__ = 5

        def classify(v):
            match v:
                case []:
                    return "empty"
                case [x]:
                    return f"one {x}"
                case [x, y, *rest]:
                    return f"many {x} {y} {rest}"
                case {"kind": "pt", "x": x, **others}:
                    return f"mapping {x} {others}"
                case {"kind": k}:
                    return f"kind {k}"
                case Point(0, y):
                    return f"on axis {y}"
                case Point(x=x, y=y) if x == y:
                    return f"diagonal {x}"
                case Point():
                    return "point"
                case str() | bytes():
                    return "text"
                case BadMatch(1):
                    return "never"
                case _:
                    return "other"

""" + ATTEMPT + """
        for _ in range(25):
            results = [classify(v) for v in ([], [1], (1, 2, 3), {"kind": "pt", "x": 1, "z": 2}, {"kind": 5},
                                             Point(0, 3), Point(2, 2), Point(1, 2), "s", b"b", 3.5)]
            results += [attempt(classify, BadLen([1])), attempt(classify, BadMatch())]
        for r in results:
            print(r)
    """, ["classify", "attempt"])
    assert "many 1 2 [3]" in out.stdout and "mapping 1 {'z': 2}" in out.stdout
    assert "RuntimeError: len broke" in out.stdout
    assert "__match_args__ must be a tuple" in out.stdout


# --- specialisations: fast path, then the guard failing ----------------------

def test_to_bool_specialisations():
    out = check_tier1("""
        class Plain:
            pass

        class WithBool:
            def __bool__(self):
                return False

        class BadBool:
            def __bool__(self):
                raise ValueError("no truth")

        class Sized(list):
            def __len__(self):
                return 0

        class Dying:
            def __del__(self):
                print("dying")

        def truth(v):
            if v:
                return "yes"
            return "no"

        def negate(v):
            return not v

""" + ATTEMPT + """
        import types
        kinds = {"int": (0, 5, -3, 2**100), "str": ("", "x"), "list": ([], [0]), "none": (None,),
                 "bool": (True, False), "plain": (Plain(),)}
        # One code object per kind, each specialised for its values.
        funcs = {kind: types.FunctionType(truth.__code__.replace(), globals()) for kind in kinds}
        for _ in range(30):
            for kind, values in kinds.items():
                for v in values:
                    funcs[kind](v)
        others = [0, 1, "", "s", [], [1], None, True, False, Plain(), WithBool(), Sized([1]), 0.0, 2.5, (), {1: 2}]
        for kind in kinds:
            print(kind, [funcs[kind](v) for v in others], attempt(funcs[kind], BadBool()))
        # The type the interpreter saw changes: its cached version goes stale.
        Plain.__bool__ = lambda self: False
        print("plain now", funcs["plain"](Plain()), funcs["plain"](1))
        del Plain.__bool__
        print("plain again", funcs["plain"](Plain()))
        funcs["list"]([Dying()])
        print("after list")
        for _ in range(30):
            truth(1); truth("s"); negate([]); negate(None)
        print([truth(v) for v in others], [negate(v) for v in others], attempt(negate, BadBool()))
    """, ["truth", "negate"])
    assert "plain now no yes" in out.stdout and "plain again yes" in out.stdout
    assert "ValueError: no truth" in out.stdout
    assert "dying\nafter list" in out.stdout


def test_binary_op_specialisations():
    out = check_tier1("""
        import traceback

        class MissingDict(dict):
            def __missing__(self, key):
                return f"missing {key}"

        class Key:
            def __hash__(self):
                raise RuntimeError("unhashable Key")

        class Tup(tuple):
            def __getitem__(self, i):
                return "sub"

        def tuple_item(t, i):
            return t[i]

        def str_item(s, i):
            return s[i]

        def dict_item(d, k):
            return d[k]

        def list_slice(l, s):
            return l[s]

        def concat(a, b):
            return a + b

        def grow(parts):
            s = ""
            for p in parts:
                s += p
            return s

        def grow_shared(parts):
            s = "start"
            keep = s
            for p in parts:
                s = s + p
                keep = s
            return s, keep

        def grow_other(parts):
            s = "a"
            t = "b"
            for p in parts:
                t = s + p
            return t

""" + ATTEMPT + """
        for _ in range(30):
            tuple_item((1, 2, 3), 1); str_item("abc", 2); dict_item({"a": 1}, "a")
            list_slice([1, 2, 3], slice(1, None)); concat("a", "b")
            grow(["x", "y"]); grow_shared(["x"]); grow_other(["x"])
        print([tuple_item((1, 2, 3), i) for i in (0, 2, -1)], tuple_item([4, 5], 1), tuple_item(Tup((1,)), 0),
              tuple_item({7: "seven"}, 7), tuple_item((1, 2), True))
        print([str_item("abcé", i) for i in (0, 3, -1)], str_item("日本", 1), str_item(b"xy", 0), str_item(["l"], 0))
        print(dict_item({"a": 1}, "a"), dict_item(MissingDict(), "k"), dict_item([1, 2], 0), dict_item({(1, 2): 3}, (1, 2)))
        print(list_slice([1, 2, 3, 4], slice(None, None, -1)), list_slice((1, 2), slice(1)), list_slice("abc", slice(2)),
              list_slice([1, 2], 0))
        print(concat("x", "y"), concat(1, 2), concat([1], [2]), concat("é", "日"))
        print(grow(["a", "b", "c"] * 50)[:10], len(grow(["ab"] * 1000)), grow([]))
        print(grow_shared(["1", "2"]), grow_other(["1", "2"]))
        for args in [(tuple_item, (1,), 5), (tuple_item, (1,), "x"), (str_item, "ab", 9), (str_item, "ab", 1.5),
                     (dict_item, {}, "nope"), (dict_item, {}, Key()), (dict_item, {}, [1]),
                     (list_slice, [1], slice("a", None)), (concat, "a", 1), (concat, 1, "a"), (grow, ["a", 1]),
                     (grow_shared, ["x", None]), (grow_other, [2])]:
            print(attempt(*args))
        try:
            dict_item({}, "absent")
        except KeyError:
            traceback.print_exc()
    """, ["tuple_item", "str_item", "dict_item", "list_slice", "concat", "grow", "grow_shared",
          "grow_other"])
    assert "IndexError: tuple index out of range" in out.stdout
    assert "IndexError: string index out of range" in out.stdout
    assert "KeyError: 'nope'" in out.stdout and "RuntimeError: unhashable Key" in out.stdout
    assert 'can only concatenate str (not "int") to str' in out.stdout
    assert "missing k" in out.stdout and "in dict_item" in out.stderr


# --- in process: the specialised stencils are the ones compiled ------------

def _reference(func):
    """The same function on a fresh, never specialised or compiled copy of
    its code object."""
    return types.FunctionType(func.__code__.replace(), func.__globals__, func.__name__,
                              func.__defaults__, func.__closure__)


def _outcome(func, args):
    try:
        return ("ok", func(*args))
    except Exception as e:
        tb = e.__traceback__
        while tb.tb_next is not None:
            tb = tb.tb_next
        return ("raised", type(e).__name__, str(e), tb.tb_lineno)


def _specialise_and_compile(ember, func, warm_args, expect_stencils):
    ember.pin(func, 0)
    for _ in range(40):
        for args in warm_args:
            func(*args)
    ember.unpin(func)
    assert ember._ember._compile(func.__code__) is None
    _, _, stencils = ember._ember._tier1_code(func.__code__)
    names = {name for _, _, name in stencils}
    missing = set(expect_stencils) - names
    assert not missing, f"{func.__name__}: tier 1 did not use {missing}; it used {sorted(names)}"


def _same_as_interpreter(ember, func, cases):
    ref = _reference(func)
    ember.pin(ref, 0)
    try:
        for args in cases:
            got, want = _outcome(func, args), _outcome(ref, args)
            assert got == want, f"{func.__name__}{args!r}: compiled {got!r}, interpreter {want!r}"
    finally:
        ember.unpin(ref)
    assert ember.is_compiled(func)


class _Plain:
    pass


def _unpack_two(v):
    a, b = v
    return b, a


def _unpack_three(v):
    a, b, c = v
    return c, b, a


def _unpack_three_of_first(v):
    a, b, c = v[0]
    return c, b, a


def _truth(v):
    return "yes" if v else "no"


def _subscr(c, i):
    return c[i]


def _concat(a, b):
    return a + b


def _grow(parts):
    s = ""
    for p in parts:
        s += p
    return s


def test_specialised_unpack_in_process(ember_on):
    ember = ember_on
    two = _reference(_unpack_two)
    _specialise_and_compile(ember, two, [((1, 2),)], ["UNPACK_SEQUENCE_TWO_TUPLE"])
    _same_as_interpreter(ember, two, [((3, 4),), ([5, 6],), ((1, 2, 3),), ((1,),), ("ab",), (7,), ({"k": 1, "j": 2},)])
    tup = _reference(_unpack_three)
    _specialise_and_compile(ember, tup, [((1, 2, 3),)], ["UNPACK_SEQUENCE_TUPLE__LOAD_STORES"])
    _same_as_interpreter(ember, tup, [((3, 4, 5),), ([5, 6, 7],), ((1, 2),), (None,), ("abc",)])
    lst = _reference(_unpack_three)
    _specialise_and_compile(ember, lst, [([1, 2, 3],)], ["UNPACK_SEQUENCE_LIST__LOAD_STORES"])
    _same_as_interpreter(ember, lst, [([3, 4, 5],), ((5, 6, 7),), ([1, 2, 3, 4],), ({1: 2},), ("abc",)])
    tup = _reference(_unpack_three_of_first)
    _specialise_and_compile(ember, tup, [([(1, 2, 3)],)], ["UNPACK_SEQUENCE_TUPLE__STORES"])
    _same_as_interpreter(ember, tup, [([(3, 4, 5)],), ([[5, 6, 7]],), ([(1, 2)],), ([None],), (["abc"],)])
    lst = _reference(_unpack_three_of_first)
    _specialise_and_compile(ember, lst, [([[1, 2, 3]],)], ["UNPACK_SEQUENCE_LIST__STORES"])
    _same_as_interpreter(ember, lst, [([[3, 4, 5]],), ([(5, 6, 7)],), ([[1, 2, 3, 4]],), ([{1: 2}],), (["abc"],)])


@pytest.mark.parametrize("kind, warm, stencil", [
    ("int", [(0,), (7,)], "TO_BOOL_INT"),
    ("str", [("",), ("s",)], "TO_BOOL_STR"),
    ("list", [([],), ([1],)], "TO_BOOL_LIST"),
    ("none", [(None,)], "TO_BOOL_NONE"),
    ("bool", [(True,), (False,)], "TO_BOOL_BOOL"),
    ("always_true", [(_Plain(),)], "TO_BOOL_ALWAYS_TRUE"),
])
def test_specialised_to_bool_in_process(ember_on, kind, warm, stencil):
    ember = ember_on
    func = _reference(_truth)
    _specialise_and_compile(ember, func, warm, [stencil])
    _same_as_interpreter(ember, func, [(0,), (3,), (2**80,), ("",), ("x",), ([],), ([0],), (None,), (True,),
                                       (False,), (_Plain(),), (0.0,), ((),), ({},), (type("T", (), {"__len__": lambda s: 0})(),)])


@pytest.mark.parametrize("warm, stencil", [
    ([((1, 2), 0)], "BINARY_OP_SUBSCR_TUPLE_INT"),
    ([("abc", 1)], "BINARY_OP_SUBSCR_STR_INT"),
    ([({"a": 1}, "a")], "BINARY_OP_SUBSCR_DICT"),
    ([([1, 2, 3], slice(1, 2))], "BINARY_OP_SUBSCR_LIST_SLICE"),
])
def test_specialised_subscr_in_process(ember_on, warm, stencil):
    ember = ember_on
    func = _reference(_subscr)
    _specialise_and_compile(ember, func, warm, [stencil])
    _same_as_interpreter(ember, func, [((1, 2), 1), ((1, 2), 2), ((1, 2), -1), ("abé", 2), ("abc", 3), ("日本", 0),
                                       ({"a": 1}, "a"), ({}, "b"), ({}, []), ([1, 2, 3], slice(None, None, 2)),
                                       ([1], slice("x", None)), ([4, 5], 1), ((1, 2), slice(1)), (5, 0)])


def test_specialised_unicode_add_in_process(ember_on):
    ember = ember_on
    concat = _reference(_concat)
    _specialise_and_compile(ember, concat, [("a", "b")], ["BINARY_OP_ADD_UNICODE"])
    _same_as_interpreter(ember, concat, [("x", "y"), ("é", "日"), (1, 2), ("a", 1), ([1], [2])])
    grow = _reference(_grow)
    _specialise_and_compile(ember, grow, [(["a", "b"],)], ["BINARY_OP_INPLACE_ADD_UNICODE"])
    _same_as_interpreter(ember, grow, [(["x"] * 100,), ([],), (["a", 1],), ([1, 2],), (["é", "日"],)])


def _add(a, b):
    return a + b


def test_binary_op_extend_in_process(ember_on):
    """BINARY_OP_EXTEND runs the interpreter's own specialisation descriptor
    (guard and action) from the inline cache, and the generic operation when
    the guard fails."""
    import dis
    ember = ember_on
    func = _reference(_add)
    warm = [(1, 2.5), (3, 0.5)]
    ember.pin(func, 0)
    for _ in range(40):
        for args in warm:
            func(*args)
    ember.unpin(func)
    assert "BINARY_OP_EXTEND" in {i.opname for i in dis.get_instructions(func, adaptive=True)}
    _specialise_and_compile(ember, func, warm, ["BINARY_OP_EXTEND"])
    cases = [(2, 1.5), (1.5, 2), ("a", "b"), (1, "b"), (10**30, 0.5), (1, float("inf"))]
    _same_as_interpreter(ember, func, cases)


def test_set_add_to_rebound_conditional_annotations():
    # Module-level annotations under a condition are recorded with SET_ADD in
    # __conditional_annotations__, which code can rebind to anything: 3.14.10
    # raises TypeError there (gh-154902); compiled code crashed.
    check("""
        class S(set):
            pass

        def main():
            for value in ("0", "{}", "[]", "''", "frozenset()", "S()", "set()"):
                try:
                    exec(f"__conditional_annotations__ = {value}\\nx: int\\n", {"S": S})
                    print(value, "ok")
                except TypeError as e:
                    print(value, "TypeError:", e)

        main()
    """, expect_seen=["main"])
