"""Names, closures, functions, imports, classes, special calls, except* and
pattern matching under tier 1 (stencils/c/names.c, tier1/csrc/names.c).

Differential tests (difftest.check: stock CPython, Ember tier 0, Ember with
every function and module body compiled at its first call), some also with
a warm-up threshold so that tier 1 sees the interpreter's specialised forms;
then in-process checks that tier 1 really compiled code objects using every
opcode of the family, ran them, and picked the stencils expected.
"""

import os
import subprocess
import sys
import textwrap

import pytest

from difftest import EMBER_CONFIGS, Config, check

#: Each snippet also with tier 1 compiling after the interpreter has warmed
#: the inline caches (specialised instructions, e.g. LOAD_SUPER_ATTR_METHOD).
WARM = EMBER_CONFIGS + [Config("tier1-warm", {"EMBER": "1", "EMBER_TIER1_THRESHOLD": "40"})]


# --- cells and free variables ------------------------------------------------

def test_closures_cells_and_free_variables():
    out = check("""
        def counter(start, step=1):
            count = start                 # MAKE_CELL of a plain local
            def bump():
                nonlocal count            # COPY_FREE_VARS, LOAD/STORE_DEREF
                count += step
                return count
            def peek():
                return count
            return bump, peek

        bump, peek = counter(10, 5)
        print(bump(), bump(), peek())

        def arg_cell(x):                  # MAKE_CELL of an argument
            def get():
                return x
            x = x * 2
            return get

        print(arg_cell(21)())

        def makers():
            fs = []
            for i in range(3):
                def f(i=i):
                    return i * 10
                fs.append(f)
                fs.append(lambda: i)
            return [f() for f in fs]

        print(makers())

        def deleted():
            v = "here"
            def read():
                return v
            print(read())
            del v                         # DELETE_DEREF
            return read

        r = deleted()
        try:
            r()
        except NameError as e:
            print(type(e).__name__, e)

        def unbound_cell():
            def inner():
                return w
            try:
                print(w)
            except UnboundLocalError as e:
                print(type(e).__name__, e)
            try:
                del w
            except UnboundLocalError as e:
                print(type(e).__name__, e)
            w = 1
            return inner()

        print(unbound_cell())

        def replace_with_finaliser():
            import sys
            class Noisy:
                def __del__(self):
                    f = sys._getframe(1)
                    print("finalised during", f.f_code.co_name, "line", f.f_lineno)
            cell = Noisy()
            def keep():
                return cell
            cell = None                   # STORE_DEREF frees the old value
            print("after store")
            return keep()

        print(replace_with_finaliser())

        def free_var_error():
            def inner():
                return late
            inner()
            late = 1

        free_var_error()
    """, returncode=1)
    assert "15 20 20" in out.stdout and "\n42\n" in out.stdout
    assert "[0, 2, 10, 2, 20, 2]" in out.stdout
    assert "NameError cannot access free variable 'v' where it is not associated with a value" \
        in out.stdout
    assert "UnboundLocalError cannot access local variable 'w'" in out.stdout
    assert "finalised during replace_with_finaliser line 73\nafter store" in out.stdout
    assert "line 82, in free_var_error" in out.stderr and "line 81, in inner" in out.stderr
    assert "NameError: cannot access free variable 'late'" in out.stderr


def test_class_bodies_see_enclosing_cells():
    out = check("""
        def make(kind):
            label = kind.upper()
            shadow = "from function"
            class K:
                shadow = "from class"
                seen = shadow            # LOAD_NAME: the class namespace
                tag = label              # LOAD_FROM_DICT_OR_DEREF: the cell
                def show(self):
                    return label, __class__.__name__
            return K

        K = make("a")
        print(K.seen, K.tag, K().show())

        def missing():
            class Q:
                x = later                # the cell is still empty
            later = 1

        try:
            missing()
        except NameError as e:
            print(type(e).__name__, e)

        class Mapping(dict):
            def __getitem__(self, key):
                print("lookup", key)
                return super().__getitem__(key)

        class Meta(type):
            @classmethod
            def __prepare__(mcls, name, bases):
                return Mapping()

        def with_meta():
            val = 7
            class M(metaclass=Meta):
                got = val
            return M.got

        print(with_meta())

        class Broken(dict):
            def __getitem__(self, key):
                if key == "val":
                    raise RuntimeError("namespace broke on " + key)
                return super().__getitem__(key)

        class BMeta(type):
            @classmethod
            def __prepare__(mcls, name, bases):
                return Broken()

        def broken():
            val = 7
            class B(metaclass=BMeta):
                got = val
        broken()
    """, returncode=1)
    assert "from class A ('A', 'K')" in out.stdout
    assert "NameError cannot access free variable 'later'" in out.stdout
    assert "lookup val" in out.stdout and "\n7\n" in out.stdout
    assert "RuntimeError: namespace broke on val" in out.stderr
    assert "line 58, in B" in out.stderr


# --- module and class namespaces --------------------------------------------

def test_module_level_names_and_globals():
    out = check("""
        import builtins
        a = 1
        b = a + 1
        print(a, b, len("xyz"))          # LOAD_NAME: module, then builtins
        del a                            # DELETE_NAME
        try:
            a
        except NameError as e:
            print(e)
        try:
            del a
        except NameError as e:
            print(e)

        def set_global(v):
            global g
            g = v                        # STORE_GLOBAL

        def drop_global():
            global g
            del g                        # DELETE_GLOBAL

        set_global(3)
        print(g)
        drop_global()
        try:
            drop_global()
        except NameError as e:
            print(e)

        class Ns:
            x = 1
            y = x + 1
            del x
            try:
                x
            except NameError as e:
                print("class body:", e)
            print(sorted(k for k in locals() if not k.startswith("__")))

        ns = {}
        exec("p = 1\\nq = p + len('ab')\\ndel p", {}, ns)
        print(ns)

        class Logged(dict):
            def __setitem__(self, k, v):
                print("set", k, v)
                super().__setitem__(k, v)
            def __delitem__(self, k):
                print("del", k)
                super().__delitem__(k)

        exec("m = 5\\ndel m", {}, Logged())

        class NoDelete(dict):
            def __delitem__(self, k):
                raise KeyError(k)

        try:
            exec("del zz", {}, NoDelete())
        except NameError as e:
            print(type(e).__name__, e)

        class NoSet:
            def __getitem__(self, k):
                raise KeyError(k)
            def __setitem__(self, k, v):
                raise TypeError("read-only namespace")

        try:
            exec("w = 1", {}, NoSet())
        except TypeError as e:
            print(e)
        try:
            NoSet()["k"]
        except KeyError as e:
            print("KeyError", e)

        def lookup_global():
            return undefined_name_here

        print(b)
        lookup_global()
    """, returncode=1)
    assert "1 2 3" in out.stdout and "name 'a' is not defined\nname 'a' is not defined" in out.stdout
    assert "\n3\nname 'g' is not defined" in out.stdout
    assert "class body: name 'x' is not defined" in out.stdout and "['y']" in out.stdout
    assert "{'q': 3}" in out.stdout and "set m 5\ndel m" in out.stdout
    assert "NameError name 'zz' is not defined" in out.stdout and "read-only namespace" in out.stdout
    assert "line 84, in <module>" in out.stderr and "line 81, in lookup_global" in out.stderr


def test_module_level_name_error_traceback():
    out = check("""
        x = 1
        y = x + 2
        print(y)
        print(not_defined_anywhere)
    """, returncode=1)
    assert out.stdout == "3\n"
    assert 'line 5, in <module>' in out.stderr
    assert "NameError: name 'not_defined_anywhere' is not defined" in out.stderr


def test_build_class_locals_annotations_and_common_constants():
    out = check("""
        class Base:
            pass

        class Child(Base):
            attr = 1
            def method(self):
                return type(self).__name__

        print(Child().method(), Child.__mro__[1].__name__, Child.__qualname__)

        def local_locals():
            class L:
                a = 1
                snapshot = sorted(locals())
            return L.snapshot

        print(local_locals())

        try:
            exec("class X: pass", {"__builtins__": {}})
        except NameError as e:
            print(type(e).__name__, e)

        src = "from __future__ import annotations\\nv: int = 1\\nclass C:\\n    w: undefined_type\\n"
        ns = {}
        exec(src, ns)
        print(ns["__annotations__"], ns["C"].__annotations__)

        some_global = "module level"

        class Ann:
            first: int = 1
            second: first                # the class namespace
            third: some_global           # then globals
            fourth: len                  # then builtins
        print(Ann.__annotations__)

        class AnnBad:
            fifth: undefined_in_class
        try:
            AnnBad.__annotations__
        except NameError as e:
            print(type(e).__name__, e)

        def checks(xs):
            assert all(x > 0 for x in xs), "not all positive"
            return any(x > 2 for x in xs), tuple(x * 2 for x in xs)

        print(checks([1, 2, 3]))
        try:
            checks([1, -1])
        except AssertionError as e:
            print("AssertionError", e)

        def not_impl():
            raise NotImplementedError("later")

        try:
            not_impl()
        except NotImplementedError as e:
            print("NotImplementedError", e)

        def shadowed(all=lambda it: "shadowed"):
            return all(x for x in [0])

        print(shadowed())
        checks([5, 0])
    """, returncode=1)
    assert "Child Base Child" in out.stdout
    assert "['__firstlineno__', '__module__', '__qualname__', 'a']" in out.stdout
    assert "NameError __build_class__ not found" in out.stdout
    assert "{'v': 'int'} {'w': 'undefined_type'}" in out.stdout
    assert "{'first': <class 'int'>, 'second': 1, 'third': 'module level', " \
        "'fourth': <built-in function len>}" in out.stdout
    assert "NameError name 'undefined_in_class' is not defined" in out.stdout
    assert "(True, (2, 4, 6))" in out.stdout and "AssertionError not all positive" in out.stdout
    assert "NotImplementedError later" in out.stdout and "shadowed" in out.stdout
    assert "AssertionError: not all positive" in out.stderr and "line 47, in checks" in out.stderr


# --- functions ---------------------------------------------------------------

def test_make_function_and_attributes():
    out = check("""
        def deco(f):
            f.decorated = True
            return f

        def factory(k):
            @deco
            def f(a, b=k, *args, c=k * 2, **kw) -> "ret":
                return a, b, args, c, kw
            return f

        f = factory(3)
        print(f(1), f(1, 2, 9, c=0, z=1))
        print(f.__defaults__, f.__kwdefaults__, f.__annotations__, f.decorated)
        print(f.__name__, f.__qualname__, f.__closure__ is None)

        def with_closure():
            seen = []
            def add(x, *, twice=False):
                seen.append(x)
                if twice:
                    seen.append(x)
                return len(seen)
            return add, seen

        add, seen = with_closure()
        print(add(1), add(2, twice=True), seen, len(add.__closure__))

        g = lambda x, y=[]: (y.append(x), y)[1]
        print(g(1), g(2), g.__defaults__)

        def annotated(x: int, y: "str" = "s") -> list[int]:
            return [x]
        print(annotated.__annotations__, annotated(1))

        def fresh_each_time():
            return lambda: None
        print(fresh_each_time() is not fresh_each_time())

        def outer_ann() -> None:
            def nested_ann(x: int) -> None:
                pass
            return nested_ann

        class Holder:
            field: int
            def method(self, x: "Holder") -> None:
                pass

        for fn in (outer_ann, outer_ann(), Holder.method, Holder):
            print("annotate", fn.__annotate__.__qualname__, fn.__annotate__.__name__)
        outer_ann()(1)
        Holder().method(None)

        def bad_default():
            return lambda x=undefined_default: x

        bad_default()
    """, returncode=1)
    assert "(1, 3, (), 6, {}) (1, 2, (9,), 0, {'z': 1})" in out.stdout
    assert "(3,) {'c': 6} {'return': 'ret'} True" in out.stdout
    assert "1 3 [1, 2, 2] 1" in out.stdout and "[1, 2] [1, 2] ([1, 2],)" in out.stdout
    assert "{'x': <class 'int'>, 'y': 'str', 'return': list[int]} [1]" in out.stdout
    assert "annotate outer_ann.__annotate__ __annotate__\n" \
        "annotate outer_ann.<locals>.nested_ann.__annotate__ __annotate__\n" \
        "annotate Holder.method.__annotate__ __annotate__\n" \
        "annotate Holder.__annotate__ __annotate__\n" in out.stdout
    assert "line 56, in bad_default" in out.stderr


def test_call_function_ex():
    out = check("""
        def target(*args, **kwargs):
            return args, kwargs

        class Seq:
            def __init__(self, n):
                self.n = n
            def __iter__(self):
                return iter(range(self.n))

        def calls():
            a = [1, 2]
            k = {"x": 1}
            print(target(*a), target(*a, **k), target(**k), target(*(), **{}))
            print(target(*Seq(3)), target(*(i * i for i in range(3))), target(0, *a, 3, *a))
            print(max(*a), "-".join(*[["p", "q"]]), dict(**k, y=2))
            print(target(*"ab", sep="."))
            obj = Seq(2)
            print(obj.__init__(*[4]), obj.n)

        calls()

        def errors():
            for bad in (lambda: target(*5),
                        lambda: target(**[1]),
                        lambda: target(*a_missing_name),
                        lambda: target(**{"x": 1}, x=2),
                        lambda: (lambda p: p)(*[1, 2]),
                        lambda: len(*[1, 2])):
                try:
                    bad()
                except (TypeError, NameError) as e:
                    print(type(e).__name__, e)

        errors()

        class Broken:
            def __iter__(self):
                raise ValueError("iteration broke")

        def raises_inside(*args):
            raise KeyError(args)

        def outer():
            try:
                target(*Broken())
            except ValueError as e:
                print("ValueError", e)
            return raises_inside(*[1, 2])

        outer()
    """, returncode=1)
    assert "((1, 2), {}) ((1, 2), {'x': 1}) ((), {'x': 1}) ((), {})" in out.stdout
    assert "((0, 1, 2), {}) ((0, 1, 4), {}) ((0, 1, 2, 3, 1, 2), {})" in out.stdout
    assert "2 p-q {'x': 1, 'y': 2}" in out.stdout
    assert "argument after * must be an iterable, not int" in out.stdout
    assert "argument after ** must be a mapping, not list" in out.stdout
    assert "NameError name 'a_missing_name' is not defined" in out.stdout
    assert "got multiple values for keyword argument 'x'" in out.stdout
    assert "ValueError iteration broke" in out.stdout
    assert "line 49, in outer" in out.stderr and "line 42, in raises_inside" in out.stderr


def test_call_function_ex_switching_tracing_on():
    """A call made by CALL_FUNCTION_EX turns tracing on: the caller goes on
    in the interpreter and its next lines are traced, as under CPython."""
    out = check("""
        import sys

        def tracer(frame, event, arg):
            if frame.f_code.co_name == "caller":
                print("trace", event, frame.f_lineno)
            return tracer

        def turn_on(*args, **kwargs):
            sys._getframe(1).f_trace = tracer
            sys.settrace(tracer)
            return len(args) + len(kwargs)

        def caller():
            n = turn_on(*[1, 2], **{"k": 3})
            m = n + 1
            return m

        print(caller())
        sys.settrace(None)
    """)
    assert out.stdout == "trace line 16\ntrace line 17\ntrace return 17\n4\n"


# --- imports -----------------------------------------------------------------

def test_imports():
    out = check("""
        import os, sys, tempfile, textwrap

        # The snippet's folder: the same path in every run (it is in messages).
        sys.dont_write_bytecode = True
        root = os.path.dirname(os.path.abspath(__file__))
        pkg = os.path.join(root, "pkg_names")
        os.makedirs(os.path.join(pkg, "sub"), exist_ok=True)
        files = {
            "__init__.py": "from .a import value\\nfrom . import sub\\n__all__ = ['value', 'extra']\\nextra = 'x'\\n",
            "a.py": "value = 41 + 1\\n",
            "sub/__init__.py": "from ..a import value as v\\nfrom .. import a\\n",
            "circ1.py": "from pkg_names import circ2\\nname = 'c1'\\n",
            "circ2.py": "from pkg_names.circ1 import name\\n",
            "boom.py": "x = 1\\nraise RuntimeError('import failed here')\\n",
        }
        for rel, text in files.items():
            with open(os.path.join(pkg, rel), "w") as f:
                f.write(text)
        sys.path.insert(0, root)

        def in_function():
            import pkg_names
            from pkg_names import value, sub
            from pkg_names.sub import v
            import pkg_names.sub as s2
            import os.path as osp
            return pkg_names.value, value, sub.v, v, s2 is sub, osp is os.path

        print(in_function())
        exec("from pkg_names import *\\nprint(value, extra)", {})

        for stmt in ("import pkg_names.nope", "from pkg_names import nope",
                     "from pkg_names import circ1", "import pkg_names.boom",
                     "from os import nothing_here", "import no_such_module_x"):
            try:
                exec(stmt, {})
            except ImportError as e:
                print(type(e).__name__, str(e).replace(root, "ROOT"))
            except RuntimeError as e:
                print("RuntimeError", e)

        import builtins
        real_import = builtins.__import__
        def spy(name, globals=None, locals=None, fromlist=(), level=0):
            print("import", name, fromlist, level, sys._getframe(1).f_lineno)
            return real_import(name, globals, locals, fromlist, level)
        builtins.__import__ = spy
        def uses_spy():
            import textwrap
            from textwrap import dedent
            return dedent("  x")
        print(uses_spy())
        builtins.__import__ = real_import

        def import_error_traceback():
            from pkg_names import missing_name

        import_error_traceback()
    """, returncode=1)
    assert "(42, 42, 42, 42, True, True)" in out.stdout and "42 x" in out.stdout
    assert "ModuleNotFoundError No module named 'pkg_names.nope'" in out.stdout
    assert "ImportError cannot import name 'nope' from 'pkg_names'" in out.stdout
    assert "partially initialized module 'pkg_names.circ1'" in out.stdout
    assert "RuntimeError import failed here" in out.stdout
    assert "ModuleNotFoundError No module named 'no_such_module_x'" in out.stdout
    assert "import textwrap None 0 50\nimport textwrap ('dedent',) 0 51\nx\n" in out.stdout
    assert "line 57, in import_error_traceback" in out.stderr
    assert "ImportError: cannot import name 'missing_name' from 'pkg_names'" in out.stderr


# --- with-statements (LOAD_SPECIAL, WITH_EXCEPT_START) -----------------------

def test_with_statements():
    out = check("""
        import sys, contextlib

        class CM:
            def __init__(self, name, swallow=False):
                self.name, self.swallow = name, swallow
            def __enter__(self):
                print("enter", self.name, sys._getframe(1).f_lineno)
                return self
            def __exit__(self, typ, val, tb):
                print("exit", self.name, typ.__name__ if typ else None, val,
                      tb.tb_lineno if tb else None, sys._getframe(1).f_lineno)
                return self.swallow

        def plain():
            with CM("a") as a, CM("b") as b:
                print("body", a.name, b.name)
            with CM("c", swallow=True):
                raise ValueError("swallowed")
            try:
                with CM("d"):
                    raise KeyError("passes")
            except KeyError as e:
                print("caught", e)
            return "done"

        print(plain())

        @contextlib.contextmanager
        def managed(tag):
            print("setup", tag)
            try:
                yield tag
            except ZeroDivisionError:
                print("handled in generator")
            finally:
                print("teardown", tag)

        def gen_cm():
            with managed("x") as t:
                print("using", t)
            with managed("y"):
                1 / 0
            return "ok"

        print(gen_cm())

        class Odd:
            # Not functions: no self is passed, or a descriptor binds them.
            __enter__ = staticmethod(lambda: "static enter")
            __exit__ = classmethod(lambda cls, *a: print("classmethod exit", cls.__name__, a[0]))

        with Odd() as v:
            print(v)

        class ExitRaises:
            def __enter__(self):
                return self
            def __exit__(self, *a):
                raise RuntimeError("from __exit__")

        try:
            with ExitRaises():
                raise ValueError("original")
        except RuntimeError as e:
            print("RuntimeError", e, "context:", repr(e.__context__))

        class EnterRaises:
            def __enter__(self):
                raise LookupError("enter failed")
            __exit__ = lambda self, *a: print("never")

        try:
            with EnterRaises():
                print("never")
        except LookupError as e:
            print("LookupError", e)

        class OnlyEnter:
            __enter__ = lambda self: self

        class OnlyExit:
            __exit__ = lambda self, *a: None

        class AsyncOnly:
            __aenter__ = lambda self: None
            __aexit__ = lambda self, *a: None

        for obj in (5, OnlyEnter(), OnlyExit(), AsyncOnly()):
            try:
                with obj:
                    pass
            except TypeError as e:
                print("TypeError", e)

        def nested_traceback():
            with CM("outer"):
                with CM("inner"):
                    {}["missing"]

        nested_traceback()
    """, returncode=1)
    assert "enter a 16\nenter b 16\nbody a b\nexit b None None None 16\nexit a None None None 16" \
        in out.stdout
    assert "exit c ValueError swallowed 19 18" in out.stdout
    assert "exit d KeyError 'passes' 22 21\ncaught 'passes'" in out.stdout
    assert "handled in generator\nteardown y\nok" in out.stdout
    assert "static enter\nclassmethod exit Odd None" in out.stdout
    assert "RuntimeError from __exit__ context: ValueError('original')" in out.stdout
    assert "LookupError enter failed" in out.stdout
    assert "TypeError 'int' object does not support the context manager protocol" in out.stdout
    assert "(missed __exit__ method)" in out.stdout and "(missed __enter__ method)" in out.stdout
    assert "Did you mean to use 'async with'?" in out.stdout
    assert "line 99, in nested_traceback" in out.stderr and "KeyError: 'missing'" in out.stderr


@pytest.mark.skipif(hasattr(sys, "gettotalrefcount"),
                    reason="CPython 3.14's debug build aborts on this by itself, without Ember "
                           "(PyStackRef_CLOSE: Assertion '!PyStackRef_IsNull(ref)')")
def test_with_exit_a_callable_instance_that_swallows():
    # __exit__ is not a function (no self is passed) and returns True.
    out = check("""
        class CallableAttr:
            class _Exit:
                def __call__(self, *a):
                    print("callable exit", a[0])
                    return True
            def __enter__(self):
                return 1
            __exit__ = _Exit()

        def f():
            with CallableAttr():
                raise OSError("eaten")
            return "after"

        print(f())
        with CallableAttr():
            raise OSError("eaten at module level")
        print("done")
    """)
    assert out.stdout == "callable exit <class 'OSError'>\nafter\ncallable exit <class 'OSError'>\ndone\n"


def test_async_with_and_special_lookups():
    out = check("""
        import asyncio

        class ACM:
            def __init__(self, swallow):
                self.swallow = swallow
            async def __aenter__(self):
                print("aenter")
                return "resource"
            async def __aexit__(self, typ, val, tb):
                print("aexit", typ.__name__ if typ else None)
                return self.swallow

        async def main():
            async with ACM(False) as r:
                print("got", r)
            async with ACM(True):
                raise ValueError("swallowed")
            try:
                async with 5:
                    pass
            except TypeError as e:
                print("TypeError", e)
            class SyncOnly:
                __enter__ = lambda self: self
                __exit__ = lambda self, *a: None
            try:
                async with SyncOnly():
                    pass
            except TypeError as e:
                print("TypeError", e)
            return "end"

        print(asyncio.run(main()))
    """)
    assert "aenter\ngot resource\naexit None\naenter\naexit ValueError\n" in out.stdout
    assert "does not support the asynchronous context manager protocol" in out.stdout
    assert "Did you mean to use 'with'?" in out.stdout


# --- super() -------------------------------------------------------------------

def test_super_attribute_and_method_loads():
    out = check("""
        class A:
            value = "A.value"
            def hello(self, x):
                return f"A.hello({x})"
            @classmethod
            def make(cls):
                return f"A.make for {cls.__name__}"
            @property
            def prop(self):
                return "A.prop"

        class B(A):
            def hello(self, x):
                return "B>" + super().hello(x)          # LOAD_SUPER_ATTR method
            def get_value(self):
                return super().value                   # attribute
            @classmethod
            def make(cls):
                return "B>" + super().make()
            @property
            def prop(self):
                return "B>" + super().prop
            def two_arg(self):
                return super(B, self).hello("two")

        class C(B):
            def hello(self, x):
                return "C>" + super().hello(x)

        def run():
            c = C()
            for i in range(60):                         # warm the caches
                r = (c.hello(i), c.get_value(), C.make(), c.prop, c.two_arg())
            return r

        print(run())

        class Slots:
            __slots__ = ("a",)
            def __getattribute__(self, name):
                return object.__getattribute__(self, name)
        class SlotsChild(Slots):
            def show(self):
                return super().__class__.__name__, super().__repr__()[:10]
        for i in range(50):
            r = SlotsChild().show()
        print(r)

        class Shadow(A):
            def hello(self, x):
                return super().hello(x)

        def super(*args):                       # a global shadowing the built-in
            print("fake super called with", len(args), "args")
            return A()

        print(Shadow().hello(1))
        del super

        class Err(A):
            def missing(self):
                return super().no_such_attribute
            def missing_method(self):
                return super().no_such_method()
            def wrong(self):
                return super(int, self).hello(1)

        for name in ("missing", "missing_method", "wrong"):
            for i in range(45):
                try:
                    getattr(Err(), name)()
                except (AttributeError, TypeError) as e:
                    msg = f"{type(e).__name__} {e}"
            print(msg)

        def not_in_method():
            return super().x

        not_in_method()
    """, returncode=1, configs=WARM)
    assert "('C>B>A.hello(59)', 'A.value', 'B>A.make for C', 'B>A.prop', 'A.hello(two)')" \
        in out.stdout
    assert "fake super called with 0 args" in out.stdout
    assert "AttributeError 'super' object has no attribute 'no_such_attribute'" in out.stdout
    assert "AttributeError 'super' object has no attribute 'no_such_method'" in out.stdout
    assert "super(type, obj): obj (instance of Err) is not an instance or subtype of type (int)" \
        in out.stdout
    assert "RuntimeError: super(): no arguments" in out.stderr and "line 78, in not_in_method" in out.stderr


# --- attributes -----------------------------------------------------------------

def test_delete_attr():
    out = check("""
        class Obj:
            pass

        class Guarded:
            def __delattr__(self, name):
                if name == "locked":
                    raise PermissionError("cannot delete " + name)
                print("deleting", name)
                object.__delattr__(self, name)

        class Slotted:
            __slots__ = ("s",)

        def run():
            o = Obj()
            o.a = 1
            o.b = 2
            del o.a
            print(vars(o))
            g = Guarded()
            g.x = 1
            del g.x
            try:
                del g.locked
            except PermissionError as e:
                print("PermissionError", e)
            s = Slotted()
            s.s = 5
            del s.s
            try:
                del s.s
            except AttributeError as e:
                print("AttributeError", e)
            try:
                del o.never_set
            except AttributeError as e:
                print("AttributeError", e)
            del (5).real

        run()
    """, returncode=1)
    assert "{'b': 2}\ndeleting x\nPermissionError cannot delete locked" in out.stdout
    assert "AttributeError s\n" in out.stdout
    assert "AttributeError 'Obj' object has no attribute 'never_set'" in out.stdout
    assert "line 39, in run" in out.stderr


# --- except* (CHECK_EG_MATCH, CALL_INTRINSIC_2 PREP_RERAISE_STAR) ------------

def test_except_star():
    out = check("""
        def groups():
            try:
                raise ExceptionGroup("many", [ValueError(1), TypeError(2), ValueError(3)])
            except* ValueError as e:
                print("values", repr(e))
            except* TypeError as e:
                print("types", repr(e))

            try:
                raise KeyError("naked")
            except* KeyError as e:
                print("wrapped", repr(e), repr(e.exceptions[0]))

            try:
                try:
                    raise ExceptionGroup("mixed", [OSError("io"), ValueError("v")])
                except* OSError:
                    print("handled io")
            except ExceptionGroup as rest:
                print("rest", repr(rest))

            try:
                try:
                    raise ExceptionGroup("x", [ValueError("a")])
                except* ValueError:
                    raise RuntimeError("in handler")
            except RuntimeError as e:
                print("raised in handler", repr(e), repr(e.__context__))

            for bad in (ExceptionGroup, (ValueError, BaseExceptionGroup), 42):
                try:
                    try:
                        raise ValueError("v")
                    except* bad:
                        pass
                except TypeError as e:
                    print("TypeError", e)

            import sys
            try:
                raise ExceptionGroup("h", [ValueError("inner")])
            except* ValueError:
                print("handled now:", repr(sys.exception()))

        groups()

        def unhandled():
            try:
                raise ExceptionGroup("top", [ValueError("left"), ZeroDivisionError("right")])
            except* ValueError:
                pass

        unhandled()
    """, returncode=1)
    assert "values ExceptionGroup('many', [ValueError(1), ValueError(3)])" in out.stdout
    assert "types ExceptionGroup('many', [TypeError(2)])" in out.stdout
    assert "wrapped ExceptionGroup('', (KeyError('naked'),)) KeyError('naked')" in out.stdout
    assert "handled io\nrest ExceptionGroup('mixed', [ValueError('v')])" in out.stdout
    assert "raised in handler RuntimeError('in handler') ExceptionGroup('x', [ValueError('a')])" \
        in out.stdout
    assert "catching ExceptionGroup with except* is not allowed" in out.stdout
    assert "catching classes that do not inherit from BaseException is not allowed" in out.stdout
    assert "handled now: ExceptionGroup('h', [ValueError('inner')])" in out.stdout
    assert "ZeroDivisionError: right" in out.stderr and "line 50, in unhandled" in out.stderr


# --- type parameters, annotation scopes (intrinsics, LOAD_FROM_DICT_OR_*) -----

def test_type_parameters_and_annotation_scopes():
    out = check("""
        def first[T](xs: list[T]) -> T:
            return xs[0]

        class Box[T: (int, str), *Ts, **P]:
            item: T
            other: Ts
            def get(self) -> T:
                return self.item

        class Bounded[B: float = int]:
            pass

        type Pair[K] = tuple[K, K]
        type Later = undefined_alias_target

        def describe(tp):
            return tp.__name__, getattr(tp, "__bound__", None), getattr(tp, "__constraints__", None)

        print(first([3, 4]), first.__type_params__[0].__name__)
        print([describe(t) for t in Box.__type_params__])
        tb = Bounded.__type_params__[0]
        print(tb.__bound__, tb.__default__, Bounded[int].__origin__.__name__)
        print(Pair.__value__, Pair[int], Later.__name__)
        box = Box()
        box.item = "boxed"
        print(Box.__annotations__["item"].__name__, first.__annotations__, box.get())
        try:
            Later.__value__
        except NameError as e:
            print("NameError", e)

        class Outer:
            level = "class level"
            class Inner[X]:
                seen: level
        try:
            print(Outer.Inner.__annotations__)   # class scopes do not nest
        except NameError as e:
            print("NameError", e)

        def scoped():
            local_t = "function local"
            class WithAnn[Y]:
                a: local_t
                b: Y
            return WithAnn.__annotations__
        print(scoped())
    """)
    assert "3 T" in out.stdout
    assert "[('T', None, (<class 'int'>, <class 'str'>)), ('Ts', None, None), ('P', None, None)]" \
        in out.stdout
    assert "<class 'float'> <class 'int'> Bounded" in out.stdout
    assert "tuple[K, K] Pair[int] Later" in out.stdout
    assert "NameError name 'undefined_alias_target' is not defined" in out.stdout
    assert "NameError name 'level' is not defined" in out.stdout
    assert "{'a': 'function local', 'b': Y}" in out.stdout


# --- pattern matching (MATCH_*, GET_LEN) --------------------------------------

def test_match_statements():
    out = check("""
        from dataclasses import dataclass

        @dataclass
        class Point:
            x: int
            y: int

        class NoArgs:
            pass

        def classify(s):
            match s:
                case {"kind": "circle", "r": r, **rest}:
                    return f"circle {r} {rest}"
                case {"kind": kind}:
                    return f"mapping {kind}"
                case [1, *middle, 9]:
                    return f"seq {middle}"
                case [a, b]:
                    return f"pair {a} {b}"
                case Point(0, y=yy):
                    return f"on axis {yy}"
                case Point(x=px) if px > 10:
                    return f"far {px}"
                case str() | bytes():
                    return "text"
                case int(n) if n < 0:
                    return "negative"
                case _:
                    return "other"

        for s in ({"kind": "circle", "r": 2, "c": 1}, {"kind": "sq"}, [1, 2, 3, 9], (5, 6),
                  Point(0, 7), Point(11, 0), "abc", -4, 3.5, {"r": 1}, range(2)):
            print(classify(s))

        class BadLen(list):
            def __len__(self):
                raise RuntimeError("len failed")

        class BadKeys(dict):
            def get(self, key, default=None):
                raise LookupError("get failed")

        for subject, body in ((NoArgs(), "case NoArgs(1): pass"),
                              (Point(1, 2), "case Point(1, 2, 3): pass"),
                              (5, "case classify(): pass"),
                              (BadLen([1]), "case [x]: pass"),
                              (BadKeys(a=1), "case {'a': 1}: pass")):
            try:
                exec(f"match subject:\\n    {body}\\n", {"subject": subject, "NoArgs": NoArgs,
                                                    "Point": Point, "classify": classify})
            except Exception as e:
                print(type(e).__name__, e)

        def dup_keys(k):
            match {"a": 1, "b": 2}:
                case {k.first: 1, k.second: 2}:
                    pass

        class Keys:
            first = second = "a"
        dup_keys(Keys)
    """, returncode=1)
    stdout = out.stdout
    assert "circle 2 {'c': 1}\nmapping sq\nseq [2, 3]\npair 5 6\non axis 7\nfar 11\ntext\nnegative\n" \
        "other\nother\npair 0 1\n" in stdout
    assert "TypeError NoArgs() accepts 0 positional sub-patterns (1 given)" in stdout
    assert "TypeError Point() accepts 2 positional sub-patterns (3 given)" in stdout
    assert "TypeError called match pattern must be a class" in stdout
    assert "RuntimeError len failed" in stdout and "LookupError get failed" in stdout
    assert "ValueError: mapping pattern checks duplicate key ('a')" in out.stderr


def test_init_returning_a_value():
    out = check("""
        class Bad:
            def __init__(self):
                return 42

        class Good:
            def __init__(self, v):
                self.v = v

        def make():
            objs = [Good(i) for i in range(40)]
            print(sum(o.v for o in objs))
            for i in range(40):
                try:
                    Bad()
                except TypeError as e:
                    msg = str(e)
            print(msg)
            Bad()

        make()
    """, returncode=1, configs=WARM)
    assert "780\n__init__() should return None, not 'int'" in out.stdout
    assert "line 19, in make" in out.stderr


# --- tier 1 compiles and runs every opcode of the family ---------------------
#
# In a fresh process with Ember enabled: in the pytest process, monitoring
# used by other tests can leave a new code object waiting for the
# interpreter to instrument it before tier 1 may compile it.

def _run_script(tmp_path, source):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(source))
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER")}
    env["EMBER"] = "1"
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


_FAMILY_SOURCE = """
import contextlib
from os import path as _osp

def closures(n):
    total = n
    def add(k):
        nonlocal total
        total += k
        return total
    add(1)
    del_me = 5
    def read():
        return del_me
    r = read()
    del del_me
    return add(2), r

class Base:
    def meth(self):
        return "base"
    attr = "base-attr"

class Derived(Base):
    def meth(self):
        return "derived+" + super().meth()
    def attr_of_super(self):
        return super().attr

def specials(items):
    with contextlib.nullcontext(items) as got:
        pass
    try:
        with contextlib.suppress(KeyError):
            raise KeyError(1)
    finally:
        pass
    return got

def calls(*a, **k):
    return max(*a, **k)

def imports():
    import json
    from json import dumps
    return dumps(json.loads("[1]"))

def globals_and_attrs(o):
    global _tmp_global
    _tmp_global = 1
    del _tmp_global
    del o.x
    return vars(o)

def star():
    try:
        raise ExceptionGroup("g", [ValueError(1)])
    except* ValueError as e:
        got = repr(e.exceptions)
    return got

def generic[T](x: T) -> T:
    assert x is not None
    return x

def matcher(s):
    match s:
        case {"a": v}:
            return v
        case [x, y]:
            return x + y
        case Base():
            return "base"
    return None

class WithClassCell:
    value = 1
    def f(self):
        return __class__.value

module_value = closures(1), Derived().meth(), Derived().attr_of_super()
"""

#: Opcodes of the family the source above uses, by generic name.
_FAMILY_OPCODES = {
    "MAKE_CELL", "COPY_FREE_VARS", "LOAD_DEREF", "STORE_DEREF", "DELETE_DEREF", "MAKE_FUNCTION",
    "SET_FUNCTION_ATTRIBUTE", "LOAD_NAME", "STORE_NAME", "STORE_GLOBAL", "DELETE_GLOBAL",
    "IMPORT_NAME", "IMPORT_FROM", "LOAD_BUILD_CLASS", "LOAD_LOCALS", "LOAD_COMMON_CONSTANT",
    "LOAD_SUPER_ATTR", "DELETE_ATTR", "CALL_FUNCTION_EX", "CALL_INTRINSIC_1", "CALL_INTRINSIC_2",
    "LOAD_SPECIAL", "WITH_EXCEPT_START", "CHECK_EG_MATCH", "GET_LEN", "MATCH_CLASS", "MATCH_KEYS",
    "MATCH_MAPPING", "MATCH_SEQUENCE",
}


def test_family_compiles_and_runs_at_tier1(tmp_path):
    out = _run_script(tmp_path, f"""
        import dis, ember
        SOURCE = {_FAMILY_SOURCE!r}
        code = compile(SOURCE, "<names-family>", "exec")
        todo, used, compiled = [code], set(), []
        while todo:
            c = todo.pop()
            todo.extend(x for x in c.co_consts if hasattr(x, "co_code"))
            used |= {{i.opname for i in dis.get_instructions(c)}}
            reason = ember._ember._compile(c)
            assert reason is None, (c.co_qualname, reason)
            assert ember._ember._tier1_code(c) is not None, c.co_qualname
            compiled.append(c.co_qualname)
        missing = {sorted(_FAMILY_OPCODES)!r}
        assert set(missing) <= used, sorted(set(missing) - used)

        ns = {{"__name__": "names_family"}}
        exec(code, ns)  # the module body runs in its compiled code
        assert ns["module_value"] == ((4, 5), "derived+base", "base-attr"), ns["module_value"]
        assert ns["specials"]([1]) == [1]
        assert ns["calls"](*[[3, 9]], **{{"default": 0}}) == 9 and ns["calls"](*[3, 9]) == 9
        assert ns["imports"]() == "[1]"
        o = type("O", (), {{}})()
        o.x, o.y = 1, 2
        assert ns["globals_and_attrs"](o) == {{"y": 2}} and "_tmp_global" not in ns
        assert ns["star"]() == "(ValueError(1),)"
        assert ns["generic"](5) == 5
        assert [ns["matcher"](s) for s in ({{"a": 1}}, [2, 3], ns["Base"](), 7)] == [1, 5, "base", None]
        assert ns["WithClassCell"]().f() == 1
        try:
            ns["generic"](None)
        except AssertionError:
            pass
        else:
            raise SystemExit("no AssertionError")

        ran = {{f["qualname"]: f for f in ember.stats()["functions"] if f["filename"] == "<names-family>"}}
        for q in ("<module>", "closures", "closures.<locals>.add", "Derived.meth", "Base", "specials",
                  "calls", "imports", "globals_and_attrs", "star", "generic", "matcher"):
            rec = ran[q]
            assert rec["tier"] == 1 and rec["interpreter_reason"] is None and rec["calls"] >= 1, rec
        print("compiled", len(compiled), "ran", len(ran))
    """)
    assert out.startswith("compiled ") and int(out.split()[1]) >= 20, out


def test_specialised_super_stencils_are_used(tmp_path):
    """After the interpreter specialised LOAD_SUPER_ATTR, tier 1 selects the
    LOAD_SUPER_ATTR_ATTR / LOAD_SUPER_ATTR_METHOD stencils; their guard takes
    the generic path when `super` is not the built-in."""
    out = _run_script(tmp_path, """
        import ember

        class A:
            x = "A.x"
            def m(self):
                return "A.m"

        class B(A):
            def m(self):
                return "B>" + super().m()
            def getx(self):
                return super().x

        for fn in (B.m, B.getx):
            ember.pin(fn, 0)
        b = B()
        for _ in range(100):
            b.m(), b.getx()
        for fn in (B.m, B.getx):
            ember.unpin(fn)
            assert ember._ember._compile(fn.__code__) is None
            assert ember.is_compiled(fn)
        stencils = {name for fn in (B.m, B.getx) for _, _, name in ember._ember._tier1_code(fn.__code__)[2]}
        print(sorted(s for s in stencils if "SUPER" in s))
        print(b.m(), b.getx())

        class Fake:
            x = "fake.x"
            def m(self):
                return "fake.m"

        # A global shadowing the built-in (not an assignment the compiler
        # sees: that would make it compile super() without LOAD_SUPER_ATTR).
        globals()["super"] = lambda *args: Fake()
        print(b.m(), b.getx())
        del globals()["super"]
        print(b.m(), b.getx())
        print(ember.tier_of(B.m), ember.tier_of(B.getx))
    """)
    assert out == ("['LOAD_SUPER_ATTR_ATTR', 'LOAD_SUPER_ATTR_METHOD']\n"
                   "B>A.m A.x\nB>fake.m fake.x\nB>A.m A.x\n1 1\n"), out
