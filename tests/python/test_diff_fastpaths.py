"""Differential tests of the specialised stencils (stencils/c/fast.c).

Tier 1 compiles the interpreter's quickened bytecode, so a function only
gets the specialised stencils after the interpreter has warmed it up. Each
snippet therefore runs, besides stock CPython and difftest's configurations,
under "tier1-warm": functions compile at their WARM_CALLS-th call, after
warming up in the interpreter. The snippets call their functions more often
than that with the types the caches expect, then break the guards (another
type, a class or dict modified after compilation, a global rebound, a
builtin shadowed, ...): output, tracebacks and exit codes must match stock
CPython's throughout.

Under tier1-warm the snippet also writes, for each of its functions, the
stencils its compiled code uses (an exit hook reads ember.dis; stdout is not
touched), and the test asserts that the specialised stencils it exercises
were really there. The in-process tests at the end check the same with
ember.pin after a warm-up in the interpreter.
"""

import ast
import io
import os
import re
import subprocess
import sys
import tempfile
import textwrap

import pytest

import difftest
from difftest import Config

WARM_CALLS = 10

# Run at exit (also after an uncaught exception) under tier1-warm: each
# function's stencils, to FASTPATH_REPORT.
_REPORT = r'''
import builtins, ember, io, os, re, types
with builtins.open(os.environ["FASTPATH_REPORT"], "w") as f:
    for name, fn in builtins.list(_g.items()):
        # Functions, and the methods of classes ("C.m").
        if builtins.isinstance(fn, builtins.type) and fn.__module__ == "__main__":
            funcs = [(name + "." + k, v) for k, v in builtins.list(fn.__dict__.items())
                     if builtins.isinstance(v, types.FunctionType)]
        elif builtins.isinstance(fn, types.FunctionType) and fn.__module__ == "__main__":
            funcs = [(name, fn)]
        else:
            funcs = []
        for name, fn in funcs:
            # The function, and the code objects nested in it ("f.<genexpr>").
            codes = [(name, fn.__code__)]
            codes += [(name + "." + c.co_name, c) for c in fn.__code__.co_consts
                      if builtins.isinstance(c, types.CodeType)]
            for label, code in codes:
                out = io.StringIO()
                ember.dis(code, file=out)
                used = builtins.sorted(builtins.set(re.findall(r"\[stencil (\w+)\]", out.getvalue())))
                f.write(label + " " + " ".join(used) + "\n")
'''

# Prepended to every snippet (lambdas and exec'd code are not functions the
# harness expects to see called). The report runs in a namespace of its own
# and takes builtins from the module: snippets shadow and patch names.
_HEADER = f"""\
import atexit as _atexit, os as _os
if _os.environ.get("FASTPATH_REPORT"):
    _atexit.register(lambda: exec({_REPORT!r}, {{"_g": globals()}}))
"""


def check(source, expect, *, eager=True, **kwargs):
    """difftest.check over the standard configurations plus tier1-warm;
    `expect` maps function names to stencils their compiled code must use.
    eager=False leaves out tier1-eager, for behaviour in which CPython's
    specialised instruction differs from its generic one: code compiled
    before any specialisation keeps the generic behaviour, as the
    interpreter would if it never specialised (see the report)."""
    fd, report = tempfile.mkstemp(prefix="ember-fastpath-", suffix=".txt")
    os.close(fd)
    try:
        warm = Config("tier1-warm", {"EMBER": "1", "EMBER_TIER1_THRESHOLD": str(WARM_CALLS),
                                     "FASTPATH_REPORT": report})
        source = _HEADER + textwrap.dedent(source)
        configs = [c for c in difftest.EMBER_CONFIGS if eager or c.name != "tier1-eager"]
        stock = difftest.check(source, configs=configs + [warm], **kwargs)
        with open(report, encoding="utf-8") as f:
            used = {line.split()[0]: set(line.split()[1:]) for line in f if line.strip()}
    finally:
        os.unlink(report)
    for func, stencils in expect.items():
        assert func in used, f"{func} is not a function of the snippet"
        missing = set(stencils) - used[func]
        assert not missing, f"{func}: compiled without {sorted(missing)}; used {sorted(used[func])}"
    return stock


# ---- Attribute loads --------------------------------------------------


def test_load_attr_instance_value_and_slot():
    out = check("""
        class P:
            def __init__(self, x, y):
                self.x = x
                self.y = y

        class Q:
            def __init__(self):
                self.y = "q.y"
                self.x = "q.x"

        class S:
            __slots__ = ("a", "b")
            def __init__(self, a):
                self.a = a

        def get_x(p):
            return p.x

        def get_a(s):
            return s.a

        def call_attr(p):
            return p.x()

        for i in range(20):
            get_x(P(i, 0)); get_a(S(i)); call_attr(P(lambda: 1, 0))
        print(get_x(P(1, 2)), get_a(S("slot")), call_attr(P(lambda: "called", 0)))

        # Another class with the attribute at another offset.
        print(get_x(Q()))
        # An attribute deleted from the instance: the error of the generic path.
        p = P(1, 2)
        del p.x
        try:
            get_x(p)
        except AttributeError as e:
            print("AttributeError:", e)
        # The class modified after compilation: a property takes over.
        p5 = P(5, 6)
        P.x = property(lambda self: "property")
        print(get_x(p5))
        del P.x
        print(get_x(P(7, 8)))
        # The instance's values moved to a dict.
        p = P(9, 10)
        p.__dict__ = {"x": "from dict"}
        print(get_x(p))
        # An unset slot, a slot from another class.
        s = S(1)
        del s.a
        try:
            get_a(s)
        except AttributeError as e:
            print("AttributeError:", e)
        class S2:
            __slots__ = ("b", "a")
        s2 = S2()
        s2.a = "other slots"
        print(get_a(s2))
        print(get_a(type("T", (), {"a": "class attr"})()))
        # Not callable any more.
        try:
            call_attr(P(3, 4))
        except TypeError as e:
            print("TypeError:", e)
        get_x(None)
    """, {"get_x": {"LOAD_ATTR_INSTANCE_VALUE"}, "get_a": {"LOAD_ATTR_SLOT"},
          "call_attr": {"LOAD_ATTR_INSTANCE_VALUE__NULL"}}, returncode=1)
    assert "1 slot called" in out.stdout and "q.x" in out.stdout
    assert "AttributeError: 'P' object has no attribute 'x'" in out.stdout
    assert "property\n7\nfrom dict\n" in out.stdout and "other slots\nclass attr\n" in out.stdout
    assert "AttributeError: 'NoneType' object has no attribute 'x'" in out.stderr


def test_load_attr_methods():
    out = check("""
        class A:
            def __init__(self):
                self.v = 1
            def m(self):
                return "A.m"

        class B:
            __slots__ = ()
            def m(self):
                return "B.m"

        class MyInt(int):
            def m(self):
                return f"MyInt.m {int(self)}"

        def call_a(o):
            return o.m()

        def call_b(o):
            return o.m()

        def call_lazy(o):
            return o.m()

        def upper(s):
            return s.upper()

        for i in range(20):
            call_a(A()); call_b(B()); call_lazy(MyInt(i)); upper("x")
        print(call_a(A()), call_b(B()), call_lazy(MyInt(3)), upper("abc"))

        # An instance attribute shadowing the method (shared keys change).
        a = A()
        a.m = lambda: "shadowed"
        print(call_a(a), call_a(A()))
        # The method replaced on the class (the originals kept alive).
        originals = (A.m, B.m)
        A.m = lambda self: "replaced"
        print(call_a(A()))
        B.m = lambda self: "B replaced"
        print(call_b(B()))
        # The lazily created __dict__ exists now and shadows the method.
        x = MyInt(5)
        x.m = lambda: "instance dict"
        print(call_lazy(x), call_lazy(MyInt(6)))
        # Other types at the same sites.
        print(call_b(A()), upper(b"bytes"))
        class U(str):
            def upper(self):
                return "U.upper"
        print(upper(U("u")))
        try:
            call_a(42)
        except AttributeError as e:
            print("AttributeError:", e)
    """, {"call_a": {"LOAD_ATTR_METHOD_WITH_VALUES"}, "call_b": {"LOAD_ATTR_METHOD_NO_DICT"},
          "call_lazy": {"LOAD_ATTR_METHOD_LAZY_DICT"}, "upper": {"LOAD_ATTR_METHOD_NO_DICT"}})
    assert "A.m B.m MyInt.m 3 ABC" in out.stdout and "shadowed A.m\nreplaced\nB replaced\n" in out.stdout
    assert "instance dict MyInt.m 6" in out.stdout and "U.upper" in out.stdout
    assert "AttributeError: 'int' object has no attribute 'm'" in out.stdout


def test_polymorphic_attribute_sites():
    # Loads, stores and method loads that see four classes in turn, with the
    # attribute at different offsets: the sites' caches fill with the
    # interpreter's specialisations for each class (loop-free functions hand
    # frames over as it re-specialises). Then an entry's class changes
    # (a property, a new method), an instance's values move to a dict, an
    # instance shadows a method, an attribute is deleted: each must take the
    # generic path, as the interpreter would.
    out = check("""
        class A:
            def __init__(self, v): self.v = v; self.w = -v
            def m(self): return ("A", self.v)
        class B(A):
            def __init__(self, v): self.pad = 0; self.w = 10 * v; self.v = v
            def m(self): return ("B", self.v)
        class C:
            def __init__(self, v): self.x1 = 1; self.x2 = 2; self.v = v
            def m(self): return ("C", self.v)
        class D(C):
            def m(self): return ("D", self.v)

        def get(o):
            return o.v
        def put(o, x):
            o.v = x
        def call(o):
            return o.m()

        objs = [A(1), B(2), C(3), D(4)]
        total = 0
        for i in range(2000):
            o = objs[i % 4]
            put(o, get(o) % 5 + 1)
            total += call(o)[1]
        print(total, [get(o) for o in objs], [call(o) for o in objs])
        B.v = property(lambda self: "B.v property", lambda self, x: print("set B.v", x))
        print([get(o) for o in objs])
        put(objs[1], 99)
        old_m = D.m
        D.m = lambda self: ("D new", self.v)
        print([call(o) for o in objs])
        c = C(5)
        c.__dict__ = {"v": "from dict"}
        print(get(c), call(c))
        put(c, "stored in dict")
        print(c.__dict__)
        d = D(6)
        d.m = lambda: "instance m"
        print(call(d), call(D(7)))
        a = A(8)
        del a.v
        try:
            get(a)
        except AttributeError as e:
            print("AttributeError:", e)
        put(a, "back")
        print(get(a), [call(o) for o in objs])
    """, {"get": {"LOAD_ATTR_INSTANCE_VALUE"}, "put": {"STORE_ATTR_INSTANCE_VALUE"},
          "call": {"LOAD_ATTR_METHOD_WITH_VALUES"}})
    assert "B.v property" in out.stdout and "set B.v 99" in out.stdout
    assert "('D new', 4)" in out.stdout and "from dict ('C', 'from dict')" in out.stdout
    assert "instance m ('D new', 7)" in out.stdout
    assert "AttributeError: 'A' object has no attribute 'v'" in out.stdout


def test_attribute_stores_of_an_initialiser():
    # In an __init__, attribute stores mostly add attributes (the __NEW
    # variant keeps that on the common path): new attributes in the order
    # stored (vars(), the dict made from the values afterwards), an
    # attribute stored twice, __init__ called again on a live object
    # (replacing), deleted and stored again, a subclass's own attributes,
    # and an old value freed by the store, its finaliser seeing the object.
    out = check("""
        class Noisy:
            def __init__(self, name):
                self.name = name
            def __del__(self):
                print("del", self.name)

        class P:
            def __init__(self, x, y, z=0):
                self.x = x
                self.y = y
                self.x = x * 10
                self.z = z

        class Q(P):
            def __init__(self, x):
                self.w = "w"
                super().__init__(x, x + 1)
                self.extra = [x]

        points = [P(i, i * 2) for i in range(300)]
        print(sum(p.x + p.y + p.z for p in points), list(vars(points[7]).items()))
        p = points[3]
        p.__init__(5, 6, 7)
        print(list(vars(p).items()))
        del p.y
        p.__init__(8, 9)
        print(list(vars(p).items()), p.__dict__)
        qs = [Q(i) for i in range(200)]
        print(list(vars(qs[5]).items()))
        keep = P(0, 0, Noisy("first"))
        keep.__init__(1, 1, Noisy("second"))
        print("re-initialised")
        keep.__init__(2, 3)
        print(list(vars(keep).items()))
    """, {"P.__init__": {"STORE_ATTR_INSTANCE_VALUE__NEW"}, "Q.__init__": {"STORE_ATTR_INSTANCE_VALUE__NEW"}})
    assert "del first" in out.stdout and "del second" in out.stdout


def test_sites_learning_types_in_a_running_loop():
    # A loop that keeps running compiled meets more classes than the
    # interpreter's inline cache has held: its attribute and method sites
    # learn them from what the specialiser would cache (tier1/csrc/fast.c).
    # Among them classes whose loads must stay generic (a property, a
    # staticmethod, __getattr__, __slots__, an instance attribute shadowing
    # the method), and classes changed between calls.
    out = check("""
        class Base:
            def __init__(self, v): self.v = v
            def m(self): return ("Base.m", self.v)
        class P1(Base): pass
        class P2(Base):
            def m(self): return ("P2.m", self.v)
        class P3(Base):
            def __init__(self, v): self.pad = 1; self.v = v
        class P4(P3): pass
        class Prop(Base):
            def __init__(self, v): self.w = v
            v = property(lambda self: "Prop.v")
            m = staticmethod(lambda: ("static m",))
        class GetAttr(Base):
            def __getattr__(self, name): return ("getattr", name)
        class Slots:
            __slots__ = ("v",)
            def __init__(self, v): self.v = v
            def m(self): return ("Slots.m", self.v)
        class Shadow(Base):
            def __init__(self, v):
                self.v = v
                self.m = lambda: ("instance m", v)

        def loop(objs, n):
            out = []
            for i in range(n):
                o = objs[i % len(objs)]
                out.append((o.v, o.m()))
            return out

        objs = [Base(0), P1(1), P2(2), P3(3), P4(4), Prop(5), GetAttr(6), Slots(7), Shadow(8)]
        for k in range(14):
            r = loop(objs, 3 * len(objs))
            if k == 11:
                old_m = P2.m
                P2.m = lambda self: ("P2 new m", self.v)
                P3.v = property(lambda self: "P3.v property")
                objs[0].m = lambda: "Base instance m"
            if k >= 10:
                print(k, r[:len(objs)])
        print(objs[6].missing)
        p = P1(1)
        del p.v
        try:
            loop([Base(2), p], 4)
        except AttributeError as e:
            print("AttributeError", e)
    """, {"loop": {"LOAD_ATTR_METHOD_WITH_VALUES"}}, eager=False)
    assert "('P2 new m', 2)" in out.stdout and "P3.v property" in out.stdout
    assert "Base instance m" in out.stdout and "('getattr', 'missing')" in out.stdout


def test_load_attr_class_and_nondescriptor():
    out = check("""
        class Meta(type):
            pass

        class K:
            CONST = "K.CONST"
            def f(x):
                return ("K.f", x)

        class M(metaclass=Meta):
            CONST = "M.CONST"

        class Inst:
            CONST = "Inst.CONST"
            def __init__(self):
                self.v = 1

        class NoDict:
            __slots__ = ()
            CONST = "NoDict.CONST"

        def class_const(k):
            return k.CONST

        def class_call(k):
            return k.f(1)

        def meta_const(m):
            return m.CONST

        def inst_const(o):
            return o.CONST

        def nodict_const(o):
            return o.CONST

        for i in range(20):
            class_const(K); class_call(K); meta_const(M); inst_const(Inst()); nodict_const(NoDict())
        print(class_const(K), class_call(K), meta_const(M), inst_const(Inst()), nodict_const(NoDict()))

        K.CONST = "K.CONST rebound"
        print(class_const(K), class_const(M))
        original_f = K.f
        K.f = staticmethod(lambda x: ("static", x))
        print(class_call(K))
        # The metaclass grows a data descriptor of the same name: it wins.
        Meta.CONST = property(lambda cls: "Meta property")
        print(meta_const(M))
        # An instance attribute shadowing the class attribute.
        o = Inst()
        o.CONST = "instance CONST"
        print(inst_const(o), inst_const(Inst()))
        Inst.CONST = "Inst.CONST rebound"
        print(inst_const(Inst()))
        NoDict.CONST = "NoDict.CONST rebound"
        print(nodict_const(NoDict()), nodict_const(Inst()))
        del K.CONST
        try:
            class_const(K)
        except AttributeError as e:
            print("AttributeError:", e)
    """, {"class_const": {"LOAD_ATTR_CLASS"}, "class_call": {"LOAD_ATTR_CLASS__NULL"},
          "meta_const": {"LOAD_ATTR_CLASS_WITH_METACLASS_CHECK"},
          "inst_const": {"LOAD_ATTR_NONDESCRIPTOR_WITH_VALUES"},
          "nodict_const": {"LOAD_ATTR_NONDESCRIPTOR_NO_DICT"}})
    assert "K.CONST ('K.f', 1) M.CONST Inst.CONST NoDict.CONST" in out.stdout
    assert "Meta property" in out.stdout and "instance CONST Inst.CONST\n" in out.stdout
    assert "AttributeError: type object 'K' has no attribute 'CONST'" in out.stdout


def test_load_attr_module():
    out = check("""
        import types
        mod = types.ModuleType("mod")
        mod.value = "first"
        mod.other = 0

        def get(m):
            return m.value

        def call(m):
            return m.func("arg")

        mod.func = lambda a: ("func", a)
        for i in range(20):
            get(mod); call(mod)
        print(get(mod), call(mod))
        mod.value = "rebound"          # same keys: the new value
        print(get(mod))
        mod.added = 1                  # the keys change
        print(get(mod))
        del mod.value
        try:
            get(mod)
        except AttributeError as e:
            print("AttributeError:", e)
        class Sub(types.ModuleType):
            @property
            def value(self):
                return "module subclass property"
        print(get(Sub("sub")))
        class NotModule:
            value = "not a module"
        print(get(NotModule()))
        import math
        print(get(types.SimpleNamespace(value=math.pi)))
    """, {"get": {"LOAD_ATTR_MODULE"}, "call": {"LOAD_ATTR_MODULE__NULL"}})
    assert "first ('func', 'arg')\nrebound\nrebound\n" in out.stdout
    assert "AttributeError: module 'mod' has no attribute 'value'" in out.stdout
    assert "module subclass property\nnot a module\n3.14159" in out.stdout


def test_store_attr_with_hint():
    # Instances whose attributes live in a real dict (assigned __dict__).
    # (3.14 quickens the store, not the load, for these.)
    out = check("""
        class H:
            def __init__(self, **kw):
                self.__dict__ = dict(kw)

        class P:
            def __init__(self):
                self.x = "inline x"

        def get(o):
            return o.x

        def put(o, v):
            o.x = v

        for i in range(20):
            h = H(x=i, y=0); put(h, get(h) + 1)
        h = H(x=1, y=2)
        put(h, "stored")
        print(get(h), vars(h))
        # Another position in the dict, values inline, the key missing.
        h2 = H(y=1, x=2)
        put(h2, "other slot")
        print(get(h2), vars(h2))
        p = P()
        put(p, "inline")
        print(get(p))
        h3 = H(y=3)
        put(h3, "added")
        print(get(h3), vars(h3))
        class Key(str):
            pass
        h4 = H()
        h4.__dict__[Key("x")] = "str subclass key"
        print(get(h4))
        put(h4, "replaced")
        print(vars(h4))
        try:
            get(H(y=0))
        except AttributeError as e:
            print("AttributeError:", e)
    """, {"put": {"STORE_ATTR_WITH_HINT"}})
    assert "stored {'x': 'stored', 'y': 2}\nother slot {'y': 1, 'x': 'other slot'}\ninline\n" in out.stdout
    assert "AttributeError: 'H' object has no attribute 'x'" in out.stdout


# ---- Globals ----------------------------------------------------------


def test_load_global_module_and_builtin():
    out = check("""
        import builtins
        G = "global G"

        def read_g():
            return G

        def call_len(x):
            return len(x)

        def read_abs():
            return abs

        for i in range(20):
            read_g(); call_len("ab"); read_abs()
        print(read_g(), call_len("abc"), read_abs() is abs)
        G = "rebound G"
        print(read_g())
        # A global shadows the builtin, then goes away again.
        def len(x):
            return "shadowing len"
        print(call_len("abc"))
        del len
        print(call_len("abcd"))
        # The builtin itself rebound, then deleted.
        saved = builtins.abs
        builtins.abs = "rebound builtin"
        print(read_abs())
        del builtins.abs
        try:
            read_abs()
        except NameError as e:
            print("NameError:", e)
        builtins.abs = saved
        print(read_abs() is abs)
        del G
        read_g()
    """, {"read_g": {"LOAD_GLOBAL_MODULE"}, "call_len": {"LOAD_GLOBAL_BUILTIN__NULL"},
          "read_abs": {"LOAD_GLOBAL_BUILTIN"}}, returncode=1)
    assert "global G 3 True\nrebound G\nshadowing len\n4\nrebound builtin\n" in out.stdout
    assert "NameError: name 'abs' is not defined\nTrue\n" in out.stdout
    assert "NameError: name 'G' is not defined" in out.stderr


def test_load_global_other_globals():
    # The same code object run with other globals: the cached keys version
    # does not match them.
    out = check("""
        X = "module X"

        def read_x():
            return X

        for i in range(20):
            read_x()
        print(read_x())
        other = type(read_x)(read_x.__code__, {"X": "other X", "__builtins__": __builtins__})
        print(other())
        empty = type(read_x)(read_x.__code__, {"__builtins__": {}})
        try:
            empty()
        except NameError as e:
            print("NameError:", e)
    """, {"read_x": {"LOAD_GLOBAL_MODULE"}})
    assert out.stdout == "module X\nother X\nNameError: name 'X' is not defined\n"


def test_load_global_miss_in_generator_and_handler():
    # A global added after compilation: the guards of every LOAD_GLOBAL_*
    # fail from then on, in the middle of a loop, a generator, an exception
    # handler; each miss runs the generic lookup, and the frame goes to the
    # interpreter when the adaptive counter triggers.
    out = check("""
        import sys
        SCALE = 2

        def gen(n):
            for i in range(n):
                yield i * SCALE + len("ab")

        def guarded(xs):
            total = 0
            for x in xs:
                try:
                    total += 10 // x
                except ZeroDivisionError:
                    total += SCALE * len("abc")
                    if x == 0 and total > 100:
                        raise ValueError(f"line {sys._getframe().f_lineno} total {total}")
            return total

        for i in range(20):
            list(gen(3)); guarded([1, 0, 2])
        g = gen(4)
        print(next(g), next(g))
        NEW_GLOBAL = 1            # the globals' keys change
        print(list(g), list(gen(2)), guarded([5, 0, 1]))
        SCALE = 3                 # rebinding: same keys
        print(list(gen(2)), guarded([0, 0]))
        import builtins
        builtins.EXTRA = 1        # the builtins' keys change
        print(list(gen(2)), guarded([2, 0]))
        guarded([0] * 30)
    """, {"gen": {"LOAD_GLOBAL_MODULE", "LOAD_GLOBAL_BUILTIN__NULL"},
          "guarded": {"LOAD_GLOBAL_MODULE", "LOAD_GLOBAL_BUILTIN__NULL"}}, returncode=1)
    assert out.stdout.startswith("2 4\n[6, 8] [2, 4] 18\n[2, 5] 18\n[2, 5] 14\n")
    assert "ValueError: line 20 total 108" in out.stderr


def test_specialised_names_after_extended_arg():
    # Name indices above 255: EXTENDED_ARG before the specialised loads and
    # stores, their caches after the instruction itself.
    out = check("""
        names = [f"n{i}" for i in range(300)]
        for i, n in enumerate(names):
            globals()[n] = i
        src = "def far(o):\\n"
        src += "    " + " + ".join(names) + "\\n"
        src += "    o.a299 = o.a298 + len(names)\\n"
        src += "    return o.a299 + n299 + o.a0\\n"
        exec(src)

        class O:
            pass

        def make():
            o = O()
            for i in range(300):
                setattr(o, f"a{i}", i)
            return o

        for i in range(20):
            far(make())
        print(far(make()))
        o = make()
        del o.a298
        try:
            far(o)
        except AttributeError as e:
            print("AttributeError:", e)
        n299 = "rebound "
        try:
            far(make())
        except TypeError as e:
            print("TypeError:", e)
    """, {"far": {"LOAD_GLOBAL_MODULE", "LOAD_GLOBAL_BUILTIN__NULL", "STORE_ATTR_WITH_HINT"}})
    assert out.stdout.startswith("897\nAttributeError: 'O' object has no attribute 'a298'\nTypeError:")


# ---- Attribute stores -------------------------------------------------


def test_store_attr_instance_value_and_slot():
    out = check("""
        class P:
            def __init__(self):
                self.a = 0

        class S:
            __slots__ = ("a", "b")

        def set_b(o, v):
            o.b = v

        def set_a(o, v):
            o.a = v

        for i in range(20):
            p = P(); set_b(p, i); set_b(p, i + 1)
            s = S(); set_a(s, i)
        p = P()
        set_b(p, "new")                      # adds the attribute
        print(vars(p), list(vars(p)))
        set_b(p, "again")
        print(vars(p))
        s = S()
        set_a(s, "slot")
        print(s.a)
        # A materialised __dict__, another class, a __setattr__ added later.
        q = P()
        d = q.__dict__
        set_b(q, "via dict")
        print(d)
        class Other:
            pass
        o = Other()
        set_b(o, "other")
        print(vars(o))
        P.__setattr__ = lambda self, k, v: print("setattr", k, v)
        set_b(P(), "hooked")
        S.__setattr__ = lambda self, k, v: print("slot setattr", k, v)
        set_a(S(), "hooked")
        try:
            set_b(S(), 1)
        except AttributeError as e:
            print("AttributeError:", e)
        set_a(1, 2)
    """, {"set_b": {"STORE_ATTR_INSTANCE_VALUE"}, "set_a": {"STORE_ATTR_SLOT"}}, returncode=1)
    assert "{'a': 0, 'b': 'new'} ['a', 'b']\n{'a': 0, 'b': 'again'}\nslot\n" in out.stdout
    assert "{'a': 0, 'b': 'via dict'}" in out.stdout and "setattr b hooked" in out.stdout
    assert "AttributeError: 'int' object has no attribute 'a'" in out.stderr


def test_store_attr_finaliser_order():
    # The specialised stores release the owner before the old value.
    out = check("""
        class D:
            def __init__(self, n):
                self.n = n
            def __del__(self):
                print("del", self.n)

        class C:
            def __init__(self, tag):
                self.x = D(tag)
            def __del__(self):
                print("del owner")

        class S:
            __slots__ = ("a",)
            def __init__(self, tag):
                self.a = D(tag)
            def __del__(self):
                print("del slots owner")

        def store(tag):
            C(tag).x = 5

        def store_slot(tag):
            S(tag).a = 5

        for i in range(15):
            store(i)
            store_slot(i)
    """, {"store": {"STORE_ATTR_INSTANCE_VALUE"}, "store_slot": {"STORE_ATTR_SLOT"}}, eager=False)
    assert "del owner\ndel 14\ndel slots owner\ndel 14\n" in out.stdout


# ---- Iteration --------------------------------------------------------


def test_for_iter_range_list_tuple():
    out = check("""
        def total(it):
            t = 0
            for v in it:
                t += v
            return t

        def over_range(a, b, step):
            out = []
            for i in range(a, b, step):
                out.append(i)
            return out

        def over_list(xs):
            out = []
            for x in xs:
                out.append(x)
            return out

        def mutate(xs):
            out = []
            for x in xs:
                out.append(x)
                if x == 2:
                    xs.append(99)
                if x == 99:
                    xs.append(100)
                if x == 100:
                    del xs[:]
            return out

        def over_tuple(t):
            out = 0
            for x in t:
                out = out * 10 + x
            return out

        for i in range(20):
            over_range(0, 5, 1); over_list([1, 5]); over_tuple((1, 2)); total([1, 2]); mutate([0])
        print(over_range(250, 270, 3), over_range(10, -10, -7), over_range(2**40, 2**40 + 3, 1))
        print(over_range(0, 0, 1), over_range(-8, -3, 1))
        print(over_list([1, 2, 3, 4]), over_list([]), mutate([1, 2, 3]), mutate([2, 5]))
        print(over_tuple((1, 2, 3)), over_tuple(()))
        # Other iterables at the same sites.
        print(over_list((7, 8)), over_list(x for x in [1, 2, 3, 4]), over_tuple([4, 5]))
        print(total(range(5)), total({1: 0, 2: 0}), total(iter([1, 2])))
        class Broken:
            def __iter__(self):
                return self
            def __next__(self):
                raise ValueError("broken iterator")
        try:
            total(Broken())
        except ValueError as e:
            print("ValueError:", e)
        total(5)
    """, {"over_range": {"FOR_ITER_RANGE"}, "over_list": {"FOR_ITER_LIST"}, "mutate": {"FOR_ITER_LIST"},
          "over_tuple": {"FOR_ITER_TUPLE"}, "total": {"FOR_ITER_LIST"}}, returncode=1)
    assert "[250, 253, 256, 259, 262, 265, 268] [10, 3, -4]" in out.stdout
    assert "[1, 2, 3, 4] [] [1, 2, 3, 99, 100] [2, 5, 99, 100]" in out.stdout
    assert "[7, 8] [1, 2, 3, 4] 45" in out.stdout and "ValueError: broken iterator" in out.stdout
    assert "TypeError: 'int' object is not iterable" in out.stderr


def test_for_iter_iterator_replaced_in_generator():
    # A generator expression iterates `.0` without GET_ITER; replacing it
    # through f_locals after the loop specialised leaves a non-iterator
    # (found by CPython's test_generators under tier1-warm).
    out = check("""
        def squares(it):
            return (x * x for x in it)

        def consume(g):
            return list(g)

        for i in range(20):
            consume(squares(range(i)))
        for obj in (range(3), [1, 2], (5,), None, 42, iter([7]), iter((8, 9)), iter(range(2))):
            g = squares(range(10))
            g.gi_frame.f_locals[".0"] = obj
            try:
                print(consume(g))
            except TypeError as e:
                print("TypeError:", e)
    """, {"squares.<genexpr>": {"FOR_ITER_RANGE"}})
    assert out.stdout == ("TypeError: 'range' object is not an iterator\n"
                          "TypeError: 'list' object is not an iterator\n"
                          "TypeError: 'tuple' object is not an iterator\n"
                          "TypeError: 'NoneType' object is not an iterator\n"
                          "TypeError: 'int' object is not an iterator\n"
                          "[49]\n[64, 81]\n[0, 1]\n")


def test_for_iter_list_break_and_reuse():
    out = check("""
        import gc
        def first_big(xs, limit):
            for x in xs:
                if x > limit:
                    return x
            return None

        def drain(it):
            n = 0
            for x in it:
                n += 1
            for x in it:
                n += 100
            return n

        for i in range(20):
            first_big([1, 5, 9], 4); drain(iter([1, 2]))
        print(first_big([1, 5, 9], 8), first_big([1, 2], 5), drain(iter([1, 2, 3])), drain(iter((1,))))
        it = iter([1, 2, 3])
        print(next(it), drain(it), list(it))
    """, {"first_big": {"FOR_ITER_LIST"}, "drain": {"FOR_ITER_LIST"}})
    assert out.stdout == "9 None 3 1\n1 2 []\n"


# ---- Comparisons and membership ---------------------------------------


def test_float_arithmetic_with_an_int_operand():
    # The float stencils compute a float and a small exact int themselves
    # (a sum that starts at 0): the same float as the generic path, signed
    # zeros included. Large ints, bools and int subclasses take the generic
    # path; two ints must stay ints.
    out = check("""
        def arith(a, b):
            return a + b, a - b, a * b

        def total(values):
            t = 0
            for v in values:
                t += v * 0.5
            return t

        for i in range(20):
            arith(1.5, 2.5); total([1.5, 2.5])
        print(arith(3, 0.5), arith(0.5, 3), arith(0, -0.0), arith(-0.0, 0))
        print(arith(2 ** 29, 1.5), arith(-(2 ** 30) + 1, 0.1), arith(2 ** 40, 1.5), arith(1.5, 10 ** 30))
        print(arith(True, 1.5), arith(1.5, False), arith(3, 4), arith(2 ** 62, 1.0))
        class I(int):
            def __add__(self, other):
                return "I.__add__"
        print(arith(I(3), 0.5), arith(0.5, I(3)))
        print(total([1, 2.5, 3]), total(range(10)), total([0.1] * 10))
        try:
            arith(1.5, 10 ** 400)
        except OverflowError as e:
            print("OverflowError:", e)
    """, {"arith": {"BINARY_OP_ADD_FLOAT", "BINARY_OP_SUBTRACT_FLOAT", "BINARY_OP_MULTIPLY_FLOAT"},
          "total": {"BINARY_OP_ADD_FLOAT", "BINARY_OP_MULTIPLY_FLOAT"}})
    assert "(3.5, 2.5, 1.5) (3.5, -2.5, 1.5) (0.0, 0.0, -0.0) (0.0, -0.0, -0.0)" in out.stdout
    assert "I.__add__" in out.stdout and "OverflowError" in out.stdout


def test_rare_paths_out_of_line():
    # A specialised stencil's rare path (a failed guard, then the generic
    # operation; an int result outside the cached small ints) is a helper
    # copied after it, tail-called (MISS_HELPER in ember_stencil.h). Each
    # is taken here after the stencil has run its common path, with errors
    # raised from inside the helpers: the values, the exceptions and their
    # tracebacks' lines must be the interpreter's.
    out = check("""
        import traceback

        def ints(a, b):
            return a + b, a - b, a * b, a < b

        def items(seq, i):
            return seq[i]

        def put(seq, i, v):
            seq[i] = v
            return seq

        def pairs(seq):
            a, b = seq
            return b, a

        def loop(seq):
            n = 0
            for x in seq:
                if x:
                    n += 1
            return n

        def size(x):
            return len(x)

        def same(x):
            return isinstance(x, int)

        for i in range(20):
            ints(i, 3); items([1, 2, 3], 1); put([0, 0], 1, i); pairs((1, 2)); loop([1, 0, 2])
            size("ab"); same(3)
        print(ints(200, 100), ints(-5, -2), ints(2 ** 40, 3), ints(3, 2 ** 70))
        print(ints(1.5, 2), ints(True, 2), ints(2 ** 30, -(2 ** 30)))
        print(items({1: "one"}, 1), items("xyz", 2), items([1, 2, 3], -1))
        print(put({}, "k", 1), put([1, 2], -1, 9), pairs([3, 4]), pairs("ab"), pairs(iter((5, 6))))
        print(loop((1, 0)), loop(x for x in [0, 1, 1]), loop(["", "a", None, 0.0]), loop(range(3)))
        print(size([1, 2, 3]), size({1: 2}), same("s"), same(2.5))
        len = lambda x: "shadowed"
        print(size("abc"))
        for bad in (lambda: ints(None, 1), lambda: ints("a", "b"), lambda: items([1], 5), lambda: put([1], 3, 0),
                    lambda: pairs((1, 2, 3)), lambda: pairs(None), lambda: loop(7), lambda: ints(1, []) < 0):
            try:
                bad()
            except Exception as e:
                tb = traceback.extract_tb(e.__traceback__)[-1]
                print(type(e).__name__, e, tb.name, tb.lineno, tb.line)
    """, {"ints": {"BINARY_OP_ADD_INT", "BINARY_OP_SUBTRACT_INT", "BINARY_OP_MULTIPLY_INT", "COMPARE_OP_INT"},
          "items": {"BINARY_OP_SUBSCR_LIST_INT"}, "put": {"STORE_SUBSCR_LIST_INT"},
          "pairs": {"UNPACK_SEQUENCE_TWO_TUPLE"}, "loop": {"FOR_ITER_LIST", "TO_BOOL_INT"},
          "size": {"CALL_LEN"}, "same": {"CALL_ISINSTANCE"}})
    assert "(300, 100, 20000, False)" in out.stdout and "IndexError list index out of range items" in out.stdout


def test_float_arithmetic_reuses_only_temporaries():
    # A float operand whose only reference is the stack's holds the result
    # (no float freed and made again). One referenced from anywhere else --
    # a local, a list, a global, a closure, the other operand -- must stay
    # unchanged and distinct from the result.
    out = check("""
        def ops(a, b, c, d):
            t = (a * b) + (c * d)        # two temporaries
            u = (a - b) * (a - b)        # a temporary, then both operands temporaries
            v = a + 0.0                  # `a` is a local: not reused
            w = v * 1.0                  # `v` is a local
            return t, u, v, w, v is w, v is a, a, b

        def in_list(l):
            x = l[0] * 2.0               # the list holds l[0]
            l[0] += 1.0
            return x, l

        g = 1.25
        def with_global():
            h = g * 2.0
            return h, g

        def closure():
            k = 3.5
            def inner():
                return k * 2.0
            return inner(), k

        for _ in range(20):
            ops(1.5, 2.5, 3.5, 4.5); in_list([1.5]); with_global(); closure()
        print(ops(1.5, 2.5, 3.5, 4.5), ops(-0.0, 0.0, 1e308, 10.0))
        l = [0.5]
        keep = l[0]
        print(in_list(l), keep, l[0] is keep)
        print(with_global(), closure(), g)
        same = 2.5
        print(same * same, same + same, same)
    """, {"ops": {"BINARY_OP_ADD_FLOAT", "BINARY_OP_SUBTRACT_FLOAT", "BINARY_OP_MULTIPLY_FLOAT"},
          "in_list": {"BINARY_OP_MULTIPLY_FLOAT", "BINARY_OP_ADD_FLOAT"}})
    assert "(1.5, 2.5, 3.5, 4.5)" not in out.stdout
    assert "False, False, 1.5, 2.5)" in out.stdout and "inf" in out.stdout


def test_int_arithmetic_small_and_large_results():
    # BINARY_OP_{ADD,SUBTRACT,MULTIPLY}_INT combine compact ints themselves:
    # a result from -5 to 256 is CPython's cached object (the same one the
    # interpreter gives), any other a new int of the same value; operands
    # that are not compact (2**30 and beyond) or not exact take the calls.
    out = check("""
        def add(a, b): return a + b
        def sub(a, b): return a - b
        def mul(a, b): return a * b

        for i in range(20):
            add(i, 1); sub(i, 1); mul(i, 2)
        small = [-5, 0, 1, 255, 256]
        cases = [(250, 6), (250, 7), (-3, -2), (-3, -3), (0, 0), (2 ** 29, 2 ** 29), (2 ** 30 - 1, 1),
                 (-(2 ** 30) + 1, -(2 ** 30) + 1), (2 ** 30, 1), (2 ** 62, 2 ** 62), (True, 2), (3, False)]
        for a, b in cases:
            r = [add(a, b), sub(a, b), mul(a, b)]
            print(a, b, r, [type(x).__name__ for x in r], [any(x is s for s in small) for x in r])
        big = 2 ** 29
        print(mul(big, big), mul(-big, big), sub(-big, big), add(-big, -big))
        x = 300
        y = add(x, 0)
        print(y == x, y is x)
    """, {"add": {"BINARY_OP_ADD_INT"}, "sub": {"BINARY_OP_SUBTRACT_INT"}, "mul": {"BINARY_OP_MULTIPLY_INT"}})
    assert "250 6 [256, 244, 1500]" in out.stdout and "[True, False, False]" in out.stdout


def test_overwritten_locals_free_floats_ints_and_others():
    # A local overwritten in a loop frees its old value: an exact float or
    # int through its type's own deallocator, anything else (a subclass
    # with a finaliser included) the generic way, with the frame state the
    # finaliser may look at.
    out = check("""
        import sys

        class F(float):
            def __del__(self):
                print("del F", float(self), sys._getframe(1).f_code.co_name)
        class I(int):
            def __del__(self):
                print("del I", int(self))

        def churn(n, make):
            total = 0.0
            for i in range(n):
                x = make(i)          # the previous x is freed here
                total += float(x)
                y = i * 1000003      # a large int, freed at the next store
            x = None
            return total, y

        for _ in range(12):
            churn(20, float)
        print(churn(50, lambda i: i * 0.5), churn(50, lambda i: 10 ** 12 + i))
        print(churn(3, F), churn(3, I))
    """, {"churn": {"STORE_FAST"}})
    assert "del F 0.0 churn" in out.stdout and "del I 2" in out.stdout


def test_unpacking_into_locals_done_out_of_line():
    # An unpacking of an exact tuple or list followed by the stores of its
    # items into locals, on one line, is done by one out-of-line helper
    # (UNPACK_SEQUENCE_*__STORES; __LOAD_STORES where the sequence is a
    # local's, read there rather than pushed by the LOAD_FAST_BORROW before
    # it). The old values the stores free run finalisers that look at the
    # frame: where it is (f_lasti: the store's own instruction), its line
    # and which locals already hold new values, including two locals that
    # held the same object (freed at the second store) and the local the
    # sequence was read from. Other sequences, wrong lengths, locals from
    # the 17th on and targets on several lines take the stores' own code.
    out = check("""
        import sys

        class Noisy:
            def __init__(self, name):
                self.name = name
            def __del__(self):
                f = sys._getframe(1)
                seen = {k: v for k, v in f.f_locals.items() if len(k) == 1 and not isinstance(v, Noisy)}
                print("del", self.name, "in", f.f_code.co_name, "at", f.f_lasti, "line", f.f_lineno, seen)

        def three(seq):
            a, b, c = seq
            return a, b, c

        def five(seq, make):
            a, b, c, d, e = make()
            a, b, c, d, e = seq
            return a, b, c, d, e

        def from_lists(seq):
            a, b, c, d = seq
            return d, c, b, a

        def shared(seq):
            x = Noisy("shared")
            a = x
            b = x
            del x
            a, b, c = seq
            return a, b, c

        def fifteen(seq):
            a, b, c, d, e, f, g, h, i, j, k, l, m, n, o = seq
            return a + o

        def scrambled(seq):
            # The locals' numbers in another order than the items'.
            e = None; b = None; d = None; a = None; c = None
            c, a, e, b, d = seq
            return a, b, c, d, e

        def sixteen(seq):
            a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p = seq
            return a + p

        def late_locals(p0, p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11, p12, p13, p14, p15, seq):
            a, b, c = seq
            return a, b, c

        def multiline(seq):
            (a,
             b,
             c) = seq
            return a, b, c

        def overwrites_its_sequence(seq):
            seq, b, c = seq
            return seq, b, c

        def from_a_call(make):
            a, b, c = make()
            return a, b, c

        for i in range(12):
            three((i, 2, 3)); five((1, 2, 3, 4, i), lambda: (0, 0, 0, 0, 0)); from_lists([1, 2, 3, i])
            shared((1, 2, 3)); fifteen(tuple(range(15))); sixteen(tuple(range(16))); late_locals(*range(16), (1, 2, 3))
            multiline((1, 2, 3)); scrambled((i, 1, 2, 3, 4)); overwrites_its_sequence((i, 1, 2))
            from_a_call(lambda: (1, 2, i))
        print(overwrites_its_sequence((Noisy("own"), 1, 2))[1:], overwrites_its_sequence([Noisy("listed"), 3, 4])[1:])
        print(overwrites_its_sequence(x for x in "pqr"), from_a_call(lambda: [Noisy("made"), 5, 6])[1:])
        print(from_a_call(lambda: "stu"))
        print(scrambled((10, 11, 12, 13, 14)), scrambled([5, 6, 7, 8, 9]))
        print(three((1, 2, 3)), three([4, 5, 6]), from_lists([1, 2, 3, 4]), from_lists((5, 6, 7, 8)))
        print(five((1, 2, 3, 4, 5), lambda: [Noisy("a"), 0, Noisy("c"), 0, Noisy("e")]))
        print(five(range(5), lambda: (Noisy("x"), 1, 2, 3, 4)))
        print(shared((7, 8, 9)))
        print(fifteen(list(range(100, 115))), sixteen(list(range(100, 116))), late_locals(*range(16), (7, 8, 9)), multiline([1, 2, 3]))
        print(three(x for x in "xyz"), three("abc"), three({1: 1, 2: 2, 3: 3}))
        for bad in [(1, 2), [1, 2, 3, 4], 7]:
            try:
                three(bad)
            except (ValueError, TypeError) as e:
                print(type(e).__name__, e)
        try:
            five((1, 2, 3, 4, 5, 6), lambda: (Noisy("kept"), 0, 0, 0, 0))
        except ValueError as e:
            print("ValueError", e, e.__traceback__.tb_next.tb_lineno)
    """, {"three": {"UNPACK_SEQUENCE_TUPLE__LOAD_STORES"},
          "five": {"UNPACK_SEQUENCE_TUPLE__STORES", "UNPACK_SEQUENCE_TUPLE__LOAD_STORES"},
          "from_lists": {"UNPACK_SEQUENCE_LIST__LOAD_STORES"}, "shared": {"UNPACK_SEQUENCE_TUPLE__LOAD_STORES"},
          "fifteen": {"UNPACK_SEQUENCE_TUPLE__LOAD_STORES"}, "scrambled": {"UNPACK_SEQUENCE_TUPLE__LOAD_STORES"},
          "overwrites_its_sequence": {"UNPACK_SEQUENCE_TUPLE__LOAD_STORES"},
          "from_a_call": {"UNPACK_SEQUENCE_TUPLE__STORES"}})
    assert "del shared in shared at" in out.stdout and "del e in five" in out.stdout and "del x in five" in out.stdout
    assert "ValueError too many values to unpack" in out.stdout


def test_tracing_switched_on_before_a_folded_unpacking():
    # The LOAD_FAST_BORROW folded into the unpacking after it has no code
    # of its own: the line check before it hands the frame over at the
    # load, with the stack as the load found it, and the tracer sees the
    # unpacking's line and those after it, with their locals.
    out = check("""
        import sys

        events = []

        def tracer(frame, event, arg):
            if frame.f_code.co_name == "unpacks":
                events.append((event, frame.f_lineno - frame.f_code.co_firstlineno, frame.f_locals.get("a")))
            return tracer

        def start():
            sys._getframe(1).f_trace = tracer
            sys.settrace(tracer)

        def unpacks(seq, switch):
            if switch:
                start()
            a, b, c = seq
            a, b, c = seq
            return a + b + c

        for i in range(30):
            unpacks((1, 2, i), False)
        print(unpacks((5, 2, 3), True))
        sys.settrace(None)
        print(events)
    """, {"unpacks": {"UNPACK_SEQUENCE_TUPLE__LOAD_STORES"}})
    assert "('line', 3, None)" in out.stdout and "('line', 4, 5)" in out.stdout


def test_subscript_frees_its_container_with_the_frame_state_set():
    # list[int] and tuple[int] on a temporary container: the subscript's
    # result is the container's last reference to an item, and the
    # container itself is freed there, running finalisers of its other
    # items, which look at the frame (line, locals) and the stack.
    out = check("""
        import sys

        class Dying:
            def __del__(self):
                try:
                    f = sys._getframe(1)
                except ValueError:
                    print("del with no caller")
                    return
                print("del in", f.f_code.co_name, "line", f.f_lineno, sorted(f.f_locals))

        def first_of_list(make):
            x = 1
            return make()[0] + x

        def first_of_tuple(make):
            y = 2
            return make()[0] + y

        for _ in range(12):
            first_of_list(lambda: [1, 2]); first_of_tuple(lambda: (1, 2))
        print(first_of_list(lambda: [5, Dying()]))
        print(first_of_tuple(lambda: (7, Dying())))
        keep = [3, Dying()]
        print(first_of_list(lambda: keep), "kept")
        try:
            first_of_list(lambda: [])
        except IndexError as e:
            print("IndexError:", e)
    """, {"first_of_list": {"BINARY_OP_SUBSCR_LIST_INT"}, "first_of_tuple": {"BINARY_OP_SUBSCR_TUPLE_INT"}})
    assert "del in first_of_list line" in out.stdout and "del in first_of_tuple line" in out.stdout


def test_compare_int_every_comparison():
    # COMPARE_OP_INT takes the comparison from a mask tier 1 computes from
    # the oparg: each of the six, on values less than, equal to and greater
    # than each other, negative and zero included, as a value and as a
    # branch; large ints and bools (not compact, not exact) take the
    # generic path.
    out = check("""
        def lt(a, b): return a < b
        def le(a, b): return a <= b
        def eq(a, b): return a == b
        def ne(a, b): return a != b
        def gt(a, b): return a > b
        def ge(a, b): return a >= b
        def branch(a, b):
            r = []
            if a < b: r.append("<")
            if a <= b: r.append("<=")
            if a == b: r.append("==")
            if a != b: r.append("!=")
            if a > b: r.append(">")
            if a >= b: r.append(">=")
            return " ".join(r)

        funcs = [lt, le, eq, ne, gt, ge]
        for _ in range(20):
            for f in funcs:
                f(1, 2)
            branch(1, 2)
        pairs = [(1, 2), (2, 1), (3, 3), (-5, 4), (4, -5), (0, 0), (-7, -7), (-(2 ** 30) + 1, 2 ** 30 - 1),
                 (2 ** 40, 1), (1, 2 ** 40), (True, 1), (2, False)]
        for a, b in pairs:
            print(a, b, [f(a, b) for f in funcs], branch(a, b))
    """, {name: {"COMPARE_OP_INT"} for name in ("lt", "le", "eq", "ne", "gt", "ge", "branch")})
    assert "3 3 [False, True, True, False, False, True] <= == >=" in out.stdout


def test_compare_float_and_str():
    out = check("""
        def cmp_all(a, b):
            return (a < b, a <= b, a == b, a != b, a > b, a >= b)

        def lt(a, b):
            if a < b:
                return "lt"
            return "not lt"

        def eq(a, b):
            return a == b, a != b

        nan = float("nan")
        for i in range(20):
            cmp_all(1.5, 2.5); lt(1.0, 2.0); eq("a", "b")
        print(cmp_all(1.5, 2.5), cmp_all(2.5, 2.5), cmp_all(3.5, 2.5))
        print(cmp_all(nan, 1.0), cmp_all(nan, nan), cmp_all(-0.0, 0.0))
        print(lt(1.0, 2.0), lt(float("inf"), 1e308))
        print(eq("abc", "abc"), eq("abc", "abd"), eq("é", "é"), eq("", ""))
        # Other types at the same sites.
        print(cmp_all(1, 2.5), cmp_all(2.5, 2), cmp_all("a", "b"), lt(1, 2))
        print(eq(1, 1.0), eq(b"x", b"x"), eq("x", b"x"))
        class Weird(str):
            def __eq__(self, other):
                return "weird eq"
            def __ne__(self, other):
                return 0
            __hash__ = str.__hash__
        print(eq(Weird("a"), "a"))
        class Bad:
            def __lt__(self, other):
                raise RuntimeError("no order")
        try:
            lt(Bad(), 1.0)
        except RuntimeError as e:
            print("RuntimeError:", e)
        lt(1.0, "x")
    """, {"cmp_all": {"COMPARE_OP_FLOAT"}, "lt": {"COMPARE_OP_FLOAT"}, "eq": {"COMPARE_OP_STR"}},
        returncode=1)
    assert "(False, False, False, True, False, False)" in out.stdout
    assert "('weird eq', 0)" in out.stdout and "RuntimeError: no order" in out.stdout
    assert "TypeError: '<' not supported between instances of 'float' and 'str'" in out.stderr


def test_contains_set_and_dict():
    out = check("""
        def in_set(x, s):
            return x in s, x not in s

        def in_dict(x, d):
            return x in d, x not in d

        for i in range(20):
            in_set(i, {1, 2}); in_dict(i, {1: 2})
        print(in_set(1, {1, 2}), in_set(3, frozenset({1})), in_set(frozenset({1}), {frozenset({1})}))
        print(in_set({1}, {frozenset({1})}))
        print(in_dict(1, {1: 2}), in_dict("k", {}), in_dict(1.0, {1: 0}))
        class MySet(set):
            def __contains__(self, x):
                return "custom"
        print(in_set(1, MySet()), in_set(1, [1]), in_dict("a", "abc"), in_dict(1, [2]))
        class BadHash:
            def __hash__(self):
                raise KeyError("bad hash")
        for f in (in_set, in_dict):
            try:
                f(BadHash(), {1: 1} if f is in_dict else {1})
            except KeyError as e:
                print("KeyError:", e)
            try:
                f([], {1: 1} if f is in_dict else {1})
            except TypeError as e:
                print("TypeError:", e)
        in_set(1, 5)
    """, {"in_set": {"CONTAINS_OP_SET"}, "in_dict": {"CONTAINS_OP_DICT"}}, returncode=1)
    assert "(True, False) (False, True) (True, False)\n(True, False)\n" in out.stdout
    assert "TypeError: cannot use 'list' as a set element (unhashable type: 'list')" in out.stdout
    assert "TypeError: argument of type 'int' is not a container or iterable" in out.stderr \
        or "TypeError: argument of type 'int' is not iterable" in out.stderr


# ---- Subscript stores -------------------------------------------------


def test_store_subscr_list_and_dict():
    out = check("""
        def set_item(c, k, v):
            c[k] = v
            return c

        def set_key(d, k, v):
            d[k] = v
            return d

        for i in range(20):
            set_item([0, 0], 1, i); set_key({}, i, i)
        print(set_item([1, 2, 3], 0, "a"), set_key({"a": 1}, "b", 2))
        # Negative, out of range, a bool, a big int; other containers.
        print(set_item([1, 2, 3], -1, "neg"), set_item([1, 2], True, "bool"))
        for k in (5, 2**70):
            try:
                set_item([1, 2], k, 0)
            except IndexError as e:
                print("IndexError:", e)
        print(set_item({}, 0, "dict"), set_key([0], 0, "list"))
        class L(list):
            def __setitem__(self, k, v):
                print("L.__setitem__", k, v)
        class Dd(dict):
            def __setitem__(self, k, v):
                print("Dd.__setitem__", k, v)
        set_item(L([1]), 0, 1); set_key(Dd(), 1, 2)
        try:
            set_key({}, [], 1)
        except TypeError as e:
            print("TypeError:", e)
        set_item((1,), 0, 2)
    """, {"set_item": {"STORE_SUBSCR_LIST_INT"}, "set_key": {"STORE_SUBSCR_DICT"}}, returncode=1)
    assert "['a', 2, 3] {'a': 1, 'b': 2}\n[1, 2, 'neg'] [1, 'bool']\n" in out.stdout
    assert "IndexError: list assignment index out of range\nIndexError: cannot fit 'int'" in out.stdout
    assert "L.__setitem__ 0 1\nDd.__setitem__ 1 2\nTypeError: cannot use 'list' as a dict key" in out.stdout
    assert "TypeError: 'tuple' object does not support item assignment" in out.stderr


def test_store_subscr_list_finaliser_order():
    out = check("""
        class D:
            def __init__(self, n):
                self.n = n
            def __del__(self):
                print("del", self.n)

        def replace(tag):
            [D(tag), D("other")][0] = 5

        for i in range(15):
            replace(i)
    """, {"replace": {"STORE_SUBSCR_LIST_INT"}}, eager=False)
    assert out.stdout.endswith("del other\ndel 14\n")


# ---- Calls ------------------------------------------------------------


def test_call_len_isinstance_type_str_tuple():
    out = check("""
        def size(x):
            return len(x)

        def check_type(x, cls):
            return isinstance(x, cls)

        def kinds(x):
            return type(x), str(x), tuple(x)

        for i in range(20):
            size([1]); check_type(i, int); kinds([i])
        print(size([1, 2]), size("abc"), size({}), check_type(1, int), check_type(1, (str, bytes)))
        print(kinds([1, 2]), kinds("ab"))
        class Meta(type):
            def __instancecheck__(cls, obj):
                return obj == "magic"
        class Magic(metaclass=Meta):
            pass
        print(check_type("magic", Magic), check_type("plain", Magic))
        class Sized:
            def __len__(self):
                return -1
        for bad in (5, Sized()):
            try:
                size(bad)
            except (TypeError, ValueError) as e:
                print(type(e).__name__ + ":", e)
        try:
            check_type(1, 2)
        except TypeError as e:
            print("TypeError:", e)
        class Bad:
            def __str__(self):
                raise RuntimeError("no str")
            def __iter__(self):
                raise RuntimeError("no iter")
        for f in (str, tuple):
            try:
                f(Bad())
            except RuntimeError as e:
                print("RuntimeError:", e)
        try:
            kinds(Bad())
        except RuntimeError as e:
            print("RuntimeError:", e)
        # Shadowed at the call sites.
        len = lambda x: "shadow len"
        isinstance = lambda x, c: "shadow isinstance"
        type = lambda x: "shadow type"
        print(size([]), check_type(1, int), kinds((1,)))
        del len, isinstance, type
        import builtins
        saved, builtins.str = builtins.str, lambda x: "patched str"
        print(kinds((1,)))
        builtins.str = saved
    """, {"size": {"CALL_LEN"}, "check_type": {"CALL_ISINSTANCE"},
          "kinds": {"CALL_TYPE_1", "CALL_STR_1", "CALL_TUPLE_1"}})
    assert "2 3 0 True False\n" in out.stdout and "True False\n" in out.stdout
    assert "TypeError: object of type 'int' has no len()\nValueError: __len__() should return >= 0" in out.stdout
    assert "TypeError: isinstance() arg 2 must be a type, a tuple of types, or a union" in out.stdout
    assert "shadow len shadow isinstance ('shadow type', '(1,)', (1,))" in out.stdout
    assert "(<class 'tuple'>, 'patched str', (1,))" in out.stdout


def test_call_list_append():
    out = check("""
        def add(xs, v):
            xs.append(v)
            return xs

        for i in range(20):
            add([], i)
        print(add([1], 2))
        class L(list):
            pass
        print(add(L([1]), "sub"))
        class Appender:
            def append(self, v):
                print("Appender.append", v)
                return "ignored"
        add(Appender(), 3)
        class L2(list):
            def append(self, v):
                print("L2.append", v)
        print(add(L2(), 4))
        try:
            add((1,), 5)
        except AttributeError as e:
            print("AttributeError:", e)
        class D:
            def __del__(self):
                print("list died")
        add([D()], 1)
        print("after")
    """, {"add": {"CALL_LIST_APPEND"}})
    assert "[1, 2]\n[1, 'sub']\nAppender.append 3\nL2.append 4\n[]\n" in out.stdout
    assert out.stdout.endswith("list died\nafter\n")


def test_call_builtins_and_method_descriptors():
    out = check("""
        def absolute(x):
            return abs(x)

        def quot(a, b):
            return divmod(a, b)

        def strip_upper(s):
            return s.upper(), ",".join([s, s]), s.startswith("ab"), s.count("a")

        def lookup(d, k):
            return d.get(k), d.get(k, "default")

        for i in range(20):
            absolute(-i); quot(7, 2); strip_upper("a,b"); lookup({1: 2}, 1)
        print(absolute(-3), absolute(2.5), quot(7, 2), strip_upper("ab,ca"), lookup({1: 2}, 3))
        try:
            absolute("x")
        except TypeError as e:
            print("TypeError:", e)
        try:
            quot(1, 0)
        except ZeroDivisionError as e:
            print("ZeroDivisionError:", e)
        try:
            lookup({}, [])
        except TypeError as e:
            print("TypeError:", e)
        # Another self type for the method descriptors, another callable.
        class S(str):
            def upper(self):
                return "S.upper"
        print(strip_upper(S("a,a")), strip_upper(S("x")))
        print(lookup(type("G", (), {"get": lambda self, *a: ("G.get", a)})(), 1))
        abs = lambda x: ("shadow abs", x)
        divmod = max
        print(absolute(-1), quot(3, 4))
        try:
            strip_upper(None)
        except AttributeError as e:
            print("AttributeError:", e)
    """, {"absolute": {"CALL_BUILTIN_O"}, "quot": {"CALL_BUILTIN_FAST"},
          "strip_upper": {"CALL_METHOD_DESCRIPTOR_NOARGS", "CALL_METHOD_DESCRIPTOR_O",
                          "CALL_METHOD_DESCRIPTOR_FAST"},
          "lookup": {"CALL_METHOD_DESCRIPTOR_FAST"}})
    assert "3 2.5 (3, 1) ('AB,CA', 'ab,ca,ab,ca', True, 2) (None, 'default')" in out.stdout
    assert "TypeError: bad operand type for abs(): 'str'" in out.stdout
    assert "ZeroDivisionError: division by zero" in out.stdout
    assert "('S.upper', 'a,a,a,a', False, 2)" in out.stdout and "('G.get', (1,))" in out.stdout
    assert "('shadow abs', -1) 4\n" in out.stdout


def test_call_builtin_classes_and_keyword_functions():
    out = check("""
        def build(n, x):
            return list(range(n)), float(x), frozenset((n, n))

        def order(xs):
            return sorted(xs), max(xs[0], xs[-1])

        def words(s):
            return s.split(","), s.rsplit(",", 1)

        for i in range(20):
            build(i, i); order([i, 1]); words("a,b")
        print(build(3, "2.5"), order([3, 1, 2]), words("x,y,z"))
        for bad in ((1.5, 0), (2, "nan?")):
            try:
                build(*bad)
            except (TypeError, ValueError) as e:
                print(type(e).__name__ + ":", e)
        try:
            order([1, "a"])
        except TypeError as e:
            print("TypeError:", e)
        try:
            words(b"a,b")
        except TypeError as e:
            print("TypeError:", e)
        class R:
            def split(self, sep, maxsplit=-1):
                return ("R.split", sep, maxsplit)
            rsplit = split
        print(words(R()))
        class Str(str):
            pass
        print(words(Str("p,q")))
        range = lambda n: ("shadow range", n)
        sorted = reversed
        print(build(2, 1), list(order([1, 2])[0]))
    """, {"build": {"CALL_BUILTIN_CLASS"}, "order": {"CALL_BUILTIN_FAST_WITH_KEYWORDS"},
          "words": {"CALL_METHOD_DESCRIPTOR_FAST_WITH_KEYWORDS"}})
    assert "([0, 1, 2], 2.5, frozenset({3})) ([1, 2, 3], 3) (['x', 'y', 'z'], ['x,y', 'z'])" in out.stdout
    assert "TypeError: 'float' object cannot be interpreted as an integer" in out.stdout
    assert "(('R.split', ',', -1), ('R.split', ',', 1))" in out.stdout
    assert "(['p', 'q'], ['p', 'q'])\n(['shadow range', 2], 1.0, frozenset({2})) [2, 1]\n" in out.stdout


def test_call_enables_monitoring():
    # A call at a specialised site switches line events on: the rest of the
    # function reports its lines, as under the interpreter.
    out = check("""
        import sys
        mon = sys.monitoring
        TOOL = 3
        lines = []

        class Switch:
            def __init__(self, on):
                self.on = on
            def __len__(self):
                if self.on:
                    mon.use_tool_id(TOOL, "test")
                    mon.register_callback(TOOL, mon.events.LINE,
                                          lambda code, line: lines.append((code.co_name, line)))
                    mon.set_events(TOOL, mon.events.LINE)
                return 1

        def work(s):
            n = len(s)
            n += 1
            return n

        for i in range(20):
            work(Switch(False))
        work(Switch(True))
        mon.set_events(TOOL, 0)
        mon.free_tool_id(TOOL)
        print([l for l in lines if l[0] == "work"])
    """, {"work": {"CALL_LEN"}})
    assert "('work'," in out.stdout


# ---- In-process: the specialised stencils are the ones compiled -------


class _P:
    def __init__(self):
        self.x = 1

    def meth(self):
        return self.x


class _S:
    __slots__ = ("a",)

    def __init__(self):
        self.a = 2


_G = 3


def _attrs(p, s):
    p.x = p.x + s.a
    s.a = p.meth()
    return p.x + s.a + _G + len("ab")


def _loops(xs, t, d, st):
    total = 0.0
    for i in range(3):
        for x in xs:
            total += x
        for y in t:
            total += y
    if total > 1.5 and "a" != "b" and 1 in st and 2 in d:
        d[2] = total
        xs[0] = 1.0
    xs.append(2.0)
    xs.pop()
    return total, isinstance(total, float), abs(-1), type(total), str(1), tuple(t)


def _stencils(ember, func):
    out = io.StringIO()
    ember.dis(func, file=out)
    return set(re.findall(r"\[stencil (\w+)\]", out.getvalue()))


@pytest.mark.parametrize("func,args,expected", [
    (_attrs, lambda: (_P(), _S()),
     {"LOAD_ATTR_INSTANCE_VALUE", "STORE_ATTR_INSTANCE_VALUE", "LOAD_ATTR_SLOT", "STORE_ATTR_SLOT",
      "LOAD_ATTR_METHOD_WITH_VALUES", "LOAD_GLOBAL_MODULE", "LOAD_GLOBAL_BUILTIN__NULL", "CALL_LEN"}),
    (_loops, lambda: ([1.0, 2.0], (1.0,), {2: 0}, {1}),
     {"FOR_ITER_RANGE", "FOR_ITER_LIST", "FOR_ITER_TUPLE", "COMPARE_OP_FLOAT", "COMPARE_OP_STR",
      "CONTAINS_OP_SET", "CONTAINS_OP_DICT", "STORE_SUBSCR_DICT", "STORE_SUBSCR_LIST_INT",
      "LOAD_ATTR_METHOD_NO_DICT", "CALL_LIST_APPEND", "CALL_METHOD_DESCRIPTOR_FAST", "CALL_ISINSTANCE",
      "CALL_BUILTIN_O", "CALL_TYPE_1", "CALL_STR_1", "CALL_TUPLE_1"}),
], ids=["attributes", "loops-and-calls"])
def test_specialised_stencils_compiled_after_warmup(ember_on, func, args, expected):
    ember = ember_on
    ember.pin(func, 0)
    expect = [func(*args()) for _ in range(5)]
    assert not ember.is_compiled(func)
    ember.pin(func, 1)
    try:
        got = [func(*args()) for _ in range(5)]
        assert ember.is_compiled(func)
        used = _stencils(ember, func)
        assert expected <= used, f"missing {sorted(expected - used)}"
        assert got == expect
    finally:
        ember.unpin(func)


def test_generic_stencils_without_warmup(tmp_path):
    # Compiled at the first call, before the interpreter specialised
    # anything: the generic stencils, none of the specialised ones (a fresh
    # process: in this one, monitoring used by other tests makes the
    # interpreter run a code object once before it compiles).
    script = tmp_path / "fresh.py"
    script.write_text(textwrap.dedent("""
        import ember, io, re
        class P:
            def __init__(self):
                self.x = 1
        def fresh(p):
            a, b, c = "abc"
            return p.x + len(a + b + c)
        p = P()
        print(fresh(p), fresh(p), ember.is_compiled(fresh))
        out = io.StringIO()
        ember.dis(fresh, file=out)
        print(sorted(set(re.findall(r"\\[stencil (\\w+)\\]", out.getvalue()))))
    """))
    env = difftest.clean_environ({"EMBER": "1", "EMBER_TIER1_THRESHOLD": "0"})
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    first, used = proc.stdout.splitlines()
    assert first == "4 4 True"
    used = set(ast.literal_eval(used))
    assert {"LOAD_ATTR", "LOAD_GLOBAL", "CALL", "UNPACK_SEQUENCE__STORES"} <= used
    assert not used & {"LOAD_ATTR_INSTANCE_VALUE", "LOAD_ATTR_INSTANCE_VALUE__NULL", "LOAD_GLOBAL_BUILTIN",
                       "LOAD_GLOBAL_BUILTIN__NULL", "CALL_LEN"}


def test_polymorphic_sites_in_phases():
    # Instances of classes whose attributes sit at different offsets, seen
    # in phases: the interpreter re-specialises each site for the phase's
    # class (on hand-offs), and compiled code then uses the live cache's
    # type version, offset and method, which must match the object's own.
    check("""
        class A:
            def __init__(self, i):
                self.x = i
                self.y = -i
            def m(self):
                return ("A", self.x)
        class B:
            def __init__(self, i):
                self.y = 2 * i
                self.z = 0
                self.x = 3 * i
            def m(self):
                return ("B", self.y)
        class C(A):
            def m(self):
                return ("C", self.x, self.y)

        def load(o):
            return o.x + o.y

        def store(o, v):
            o.x = v
            o.y = v + 1

        def call(o):
            return o.m()

        kinds = [A, B, C]
        out = []
        for phase in range(40):
            cls = kinds[phase % 3]
            objs = [cls(i) for i in range(60)]
            acc = 0
            for o in objs:
                acc += load(o)
                store(o, acc % 97)
                acc += load(o)
                r = call(o)
                acc += r[1]
            out.append((cls.__name__, acc, vars(objs[-1])))
        print(out)
    """, {"load": {"LOAD_ATTR_INSTANCE_VALUE"}, "store": {"STORE_ATTR_INSTANCE_VALUE"},
          "call": {"LOAD_ATTR_METHOD_WITH_VALUES"}})


def test_true_divide_and_power_of_floats():
    # `/` and `**`, which CPython 3.14 never specialises for floats: tier 1
    # computes a float with a float or small int itself (float_div's and
    # float_pow's double operation) and leaves the rest to the interpreter's
    # functions, in-place ones for `/=` and `**=`. Every case float_pow sorts
    # out before calling pow(), and every error, must come out the same.
    out = check("""
        import math

        def div(a, b):
            return a / b

        def power(a, b):
            return a ** b

        def inplace(a, b):
            a /= b
            c = a
            c **= 2
            return a, c

        def attempt(f, *args):
            try:
                r = f(*args)
            except Exception as e:
                return type(e).__name__ + ": " + str(e)
            return repr(r) if not isinstance(r, float) else (r.hex(), math.copysign(1.0, r))

        for i in range(20):
            div(1.5, 2.5); power(1.5, 2.5); inplace(3.0, 1.5)
        values = [0.0, -0.0, 1.0, -1.0, 2.0, 0.5, -2.5, 3, -3, 0, 7, 2 ** 29, -(2 ** 30) + 1, 2 ** 30,
                  2 ** 62, 10 ** 30, True, False, 1e308, -1e308, 5e-324, 1e-300, math.inf, -math.inf,
                  math.nan, 1.5, -1.5, 0.1, 2.0 ** 0.5]
        for a in values:
            for b in values:
                # An int to a large int power would take forever.
                huge = isinstance(a, int) and isinstance(b, int) and abs(b) > 64
                print(attempt(div, a, b), None if huge else attempt(power, a, b),
                      None if huge else attempt(inplace, a, b))
        print(attempt(power, 10.0, 400), attempt(power, 10.0, -400), attempt(power, 2.0, -1074),
              attempt(power, -8.0, 1 / 3), attempt(power, 2.0, 1024), attempt(power, 0.5, -1075))

        class F(float):
            def __truediv__(self, other):
                return "F.__truediv__"
            def __rtruediv__(self, other):
                return "F.__rtruediv__"
            def __pow__(self, other):
                return "F.__pow__"
            def __rpow__(self, other):
                return "F.__rpow__"

        class Acc:
            def __init__(self):
                self.log = []
            def __itruediv__(self, other):
                self.log.append(("/=", other))
                return self
            def __ipow__(self, other):
                self.log.append(("**=", other))
                return self
            def __truediv__(self, other):
                return "Acc.__truediv__"
            def __pow__(self, other):
                return "Acc.__pow__"

        print(div(F(1.0), 2.0), div(2.0, F(1.0)), power(F(2.0), 2.0), power(2.0, F(2.0)))
        acc = Acc()
        print(inplace(acc, 2.0)[0] is acc, acc.log, div(acc, 2.0), power(acc, 2))
        from fractions import Fraction
        from decimal import Decimal
        print(div(1.5, Fraction(1, 3)), div(Fraction(1, 3), 1.5), power(2.0, Fraction(1, 2)),
              attempt(div, 1.5, Decimal(2)), div(7, 2), div(2 ** 70, 3), power(2, 0.5), power(2, -1))
    """, {"div": set(), "power": {"BINARY_OP"}, "inplace": set()})
    # (`/` with a small int is BINARY_OP_EXTEND once the interpreter has
    # seen one, and its generic path is the same function.)
    assert "OverflowError" in out.stdout and "ZeroDivisionError" in out.stdout
    assert "F.__rtruediv__" in out.stdout and "('/=', 2.0), ('**=', 2)" in out.stdout
