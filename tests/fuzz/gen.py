"""A deterministic random Python program generator for differential fuzzing.

``generate(seed)`` returns ``(source, meta)``: the text of a small,
self-contained, terminating and deterministic module-level script (for a
given seed, always the same text: it depends only on ``random.Random(seed)``
and on GEN_VERSION) and a dict describing it (``meta["units"]`` lists the
kinds of unit it is made of).

A program is a prologue of helpers (``_fmt`` prints values deterministically,
``_show`` calls a function and prints its result or its exception: type,
message, and the traceback's frames as name:line:column, plus the cause or
context), a few typed module globals, then 4 to 8 *units*. A unit is a
feature-oriented piece (plain functions with random typed bodies, closures,
generators, classes, context managers, exceptions, ``except*``, ``match``,
``async``, recursion, ``*args``/``**kwargs``, comprehensions, globals,
module-level code, cache invalidation, tracing, frame introspection...)
followed by its driver: calls of its functions, in loops so that they get
hot and the interpreter quickens and specialises them, some with arguments
of other types so that specialisations fail.

Random statements and expressions are typed (int, float, str, bool, list
of int, tuple, dict of str to int, set of int) so that most code runs
without error; a per-program "chaos" rate puts ill-typed operands and
unguarded divisions, indexes and conversions in on purpose so that error
paths are covered too. Everything is bounded: loops have small literal
bounds, ints are reduced modulo a constant (often a big one) when stored,
strs and lists are truncated when stored, recursion is shallow, so every
program terminates quickly.

Run ``python gen.py SEED`` to print one program.
"""

from __future__ import annotations

import random
import sys
import warnings
from contextlib import contextmanager

GEN_VERSION = 1

I, F, S, B, L, T, D, Z = "I", "F", "S", "B", "L", "T", "D", "Z"
VALUE_TYPES = (I, F, S, L, T, D, Z)
ALL_TYPES = (I, F, S, B, L, T, D, Z)

SMALL_INTS = ["0", "1", "-1", "2", "3", "5", "7", "10", "-7", "42", "100", "255", "256",
              "-256", "1000", "13", "-3", "64"]
BIG_INTS = ["(2**31 - 1)", "(2**31)", "(-2**31)", "(2**63 - 1)", "(2**63)", "(-2**63)",
            "(2**64)", "(10**18)", "(10**30)", "(-(10**25))", "0x7fffffffffffffff",
            "123456789012345678901234567890", "((1 << 100) + 7)", "(2**62)", "(-(2**64) + 1)",
            "1_000_000_007", "0b1011", "0o777"]
FLOATS = ["0.0", "-0.0", "1.5", "-2.25", "0.1", "3.141592653589793", "1e308", "-1e308",
          "1e-308", "5e-324", "2.5e10", "float('inf')", "float('-inf')", "float('nan')",
          "1e16", "0.3", "7.0", "-1.0", "2.0", "1e-05"]
SAFE_FLOATS = ["0.0", "1.5", "-2.25", "0.1", "3.141592653589793", "2.5e10", "0.3", "7.0",
               "-1.0", "2.0", "100.25", "-0.5"]
STRS = ["''", "'a'", "'abc'", "'Hello, World'", "'\u00e9'", "'na\u00efve \u00fcn\u00efcode'",
        "'\u2202x/\u2202y'", "'\U0001f600!'", "'  pad  '", "'a,b,,c'", "'123'", "'-42'",
        "('xyz' * 2)", "'tab\\tnew\\nline'", "'MiXeD CaSe'", "('ab' 'cd')", "'\\u00df'",
        "'the quick brown fox'", "'1.5'", "'q'"]
SHORT_STRS = ["''", "'a'", "'b'", "','", "' '", "'ab'", "'\u00e9'", "'x'", "'1'", "'-'"]
KEYS = ["'a'", "'b'", "'k1'", "'key'", "'z'", "'\u00e9'", "''", "'n'"]
MODULI = ["97", "1000003", "(2**31 - 1)", "(2**61 - 1)", "(2**64)", "(10**20)",
          "(2**127 - 1)", "(-(2**40))", "65536", "(10**40 + 3)", "251", "(-1000)"]
EXC_TYPES = ["ValueError", "TypeError", "KeyError", "IndexError", "RuntimeError",
             "ZeroDivisionError", "LookupError", "ArithmeticError", "AttributeError"]

STR_LIMIT = 40
LIST_LIMIT = 12


PROLOGUE = r'''import traceback as _tb
import re as _re
import sys
import math
import contextlib

_LOG = []


def _safe_repr(v):
    try:
        r = repr(v)
    except Exception as e:
        return '<repr failed: ' + type(e).__name__ + '>'
    return _re.sub(r' at 0x[0-9a-fA-F]+', ' at 0x?', r)


def _safe_str(v):
    try:
        r = str(v)
    except Exception as e:
        return '<str failed: ' + type(e).__name__ + '>'
    return _re.sub(r' at 0x[0-9a-fA-F]+', ' at 0x?', r)[:300]


def _fmt(v, d=0):
    t = type(v)
    if d > 4:
        return '...'
    if t is int:
        if v.bit_length() > 600:
            return 'int<%d bits, %d>' % (v.bit_length(), v % 1000000007)
        return repr(v)
    if t is str:
        if len(v) > 120:
            return repr(v[:120]) + '...<len %d>' % len(v)
        return repr(v)
    if v is None or t is bool or t is float or t is bytes or t is complex:
        return repr(v)
    if t is list or t is tuple:
        items = [_fmt(x, d + 1) for x in v[:30]]
        if len(v) > 30:
            items.append('...<len %d>' % len(v))
        if t is list:
            return '[' + ', '.join(items) + ']'
        return '(' + ', '.join(items) + (',)' if len(v) == 1 else ')')
    if t is dict:
        return '{' + ', '.join([_fmt(k, d + 1) + ': ' + _fmt(x, d + 1) for k, x in list(v.items())[:30]]) + '}'
    if t is set or t is frozenset:
        return t.__name__ + '{' + ', '.join(sorted([_fmt(x, d + 1) for x in v])[:30]) + '}'
    if isinstance(v, BaseException):
        return type(v).__name__ + _fmt(v.args, d + 1)
    return _safe_repr(v)[:200]


def _exc(e):
    frames = ['%s:%s:%s' % (f.name, f.lineno, f.colno) for f in _tb.extract_tb(e.__traceback__)]
    s = type(e).__name__ + ': ' + _safe_str(e) + ' @' + ','.join(frames)
    if e.__cause__ is not None:
        s += ' cause=' + type(e.__cause__).__name__
    elif e.__context__ is not None and not e.__suppress_context__:
        s += ' context=' + type(e.__context__).__name__
    notes = getattr(e, '__notes__', None)
    if notes:
        s += ' notes=' + _safe_str(notes)
    if isinstance(e, BaseExceptionGroup):
        s += ' group=' + _safe_str([_exc(x) for x in e.exceptions])
    return s


def _show(label, fn, *a, **k):
    try:
        r = fn(*a, **k)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:
        print(label, '!', _exc(e))
    else:
        print(label, '=', _fmt(r))


def _stack():
    f = sys._getframe(1)
    out = []
    while f is not None:
        if f.f_code.co_filename.startswith('<fuzz'):
            out.append('%s:%d' % (f.f_code.co_name, f.f_lineno))
        f = f.f_back
    return out


def _tb_locals(e):
    tb = e.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    return [(k, _fmt(v)) for k, v in sorted(tb.tb_frame.f_locals.items())
            if type(v) in (int, str, float, bool, tuple, list)]


class _Yield:
    def __init__(self, v=None):
        self.v = v

    def __await__(self):
        got = yield self.v
        return got


def _run(coro, limit=500):
    steps = 0
    try:
        while True:
            coro.send(None)
            steps += 1
            if steps > limit:
                coro.close()
                return ('gave up', steps)
    except StopIteration as e:
        return ('done', steps, _fmt(e.value))


class _CM:
    def __init__(self, tag, swallow=False):
        self.tag = tag
        self.swallow = swallow

    def __enter__(self):
        _LOG.append(('enter', self.tag))
        return self.tag

    def __exit__(self, et, ev, tb):
        _LOG.append(('exit', self.tag, et.__name__ if et is not None else None))
        return self.swallow
'''


class Sig:
    def __init__(self, name, params, ret, leaf=True):
        self.name = name
        self.params = params  # list of (name, type, kind, default-or-None); kind: pos, posonly, kwonly
        self.ret = ret
        self.leaf = leaf


class Ctx:
    def __init__(self, kind, parent=None):
        self.kind = kind          # func, gen, async, module, method, lambda
        self.vars = {}            # assignable locals: name -> type
        self.ro = {}              # readable, not assignable: name -> type
        self.bounded = set()      # assignments to these are always reduced/truncated
        self.frozen = set()       # being iterated over: no in-place mutation
        self.loop = 0
        self.globals_decl = {}    # names declared global here, writable: name -> type
        self.leaf = True          # no call of another generated function
        self.await_fn = None      # name of a coroutine function returning int (async only)
        self.in_finally = False
        self.in_except = False
        self.parent = parent
        self.allow_calls = True


class Writer:
    def __init__(self):
        self.lines = []
        self.ind = 0

    def __call__(self, s=""):
        self.lines.append(("    " * self.ind + s) if s else "")

    @contextmanager
    def block(self, header):
        self(header)
        self.ind += 1
        n = len(self.lines)
        try:
            yield
        finally:
            if len(self.lines) == n:
                self("pass")
            self.ind -= 1

    def text(self):
        return "\n".join(self.lines) + "\n"


class Gen:
    def __init__(self, seed):
        self.seed = seed
        self.r = random.Random(seed)
        self.w = Writer()
        self.drv = Writer()
        self.n = 0
        self.sigs = []            # leaf plain functions callable from expressions
        self.globals = {}         # module globals: name -> type (immutable types only)
        self.ctx = Ctx("module")
        self.chaos = self.r.choice([0.0, 0.003, 0.01, 0.02, 0.04])
        self.raw_rate = self.r.choice([0.05, 0.1, 0.2])
        self.no_walrus = 0
        self.no_await = 0
        self.units = []
        self.cls_names = []

    # ------------------------------------------------------------------ helpers
    def fresh(self, prefix="v"):
        self.n += 1
        return f"{prefix}{self.n}"

    def chance(self, p):
        return self.r.random() < p

    def pick(self, seq):
        return self.r.choice(seq)

    def wpick(self, pairs):
        total = sum(w for _, w in pairs)
        x = self.r.random() * total
        for item, w in pairs:
            x -= w
            if x < 0:
                return item
        return pairs[-1][0]

    @contextmanager
    def using(self, ctx):
        old = self.ctx
        self.ctx = ctx
        try:
            yield ctx
        finally:
            self.ctx = old

    @contextmanager
    def flag(self, name):
        setattr(self, name, getattr(self, name) + 1)
        try:
            yield
        finally:
            setattr(self, name, getattr(self, name) - 1)

    @contextmanager
    def ro_vars(self, pairs):
        saved = {}
        for name, t in pairs:
            saved[name] = self.ctx.ro.get(name)
            self.ctx.ro[name] = t
        try:
            yield
        finally:
            for name, _ in pairs:
                if saved[name] is None:
                    self.ctx.ro.pop(name, None)
                else:
                    self.ctx.ro[name] = saved[name]

    def readable(self, t):
        c = self.ctx
        names = [n for n, tt in c.vars.items() if tt == t]
        names += [n for n, tt in c.ro.items() if tt == t]
        names += [n for n, tt in c.globals_decl.items() if tt == t]
        if c.kind != "lambda-isolated":
            names += [n for n, tt in self.globals.items() if tt == t and n not in c.vars]
        return names

    def assignable(self, t=None):
        c = self.ctx
        out = [(n, tt) for n, tt in c.vars.items() if (t is None or tt == t)]
        out += [(n, tt) for n, tt in c.globals_decl.items() if (t is None or tt == t)]
        return out

    # ---------------------------------------------------------------- literals
    def lit(self, t):
        r = self.r
        if t == I:
            return self.pick(BIG_INTS) if self.chance(0.2) else self.pick(SMALL_INTS)
        if t == F:
            return self.pick(FLOATS) if self.chance(0.3) else self.pick(SAFE_FLOATS)
        if t == S:
            return self.pick(STRS)
        if t == B:
            return self.pick(["True", "False"])
        if t == L:
            return "[" + ", ".join(self.lit(I) for _ in range(r.randrange(0, 5))) + "]"
        if t == T:
            n = r.randrange(0, 4)
            items = [self.lit(I) for _ in range(n)]
            return "(" + ", ".join(items) + ("," if n == 1 else "") + ")"
        if t == D:
            keys = r.sample(KEYS, r.randrange(0, 4))
            return "{" + ", ".join(f"{k}: {self.lit(I)}" for k in keys) + "}"
        if t == Z:
            n = r.randrange(0, 4)
            if n == 0:
                return "set()"
            return "{" + ", ".join(self.lit(I) for _ in range(n)) + "}"
        raise ValueError(t)

    def atom(self, t):
        names = self.readable(t)
        if names and self.chance(0.7):
            return self.pick(names)
        return self.lit(t)

    def var_atom(self, t):
        """A readable name of type t, or a literal."""
        names = self.readable(t)
        return self.pick(names) if names else self.lit(t)

    # ------------------------------------------------------------- expressions
    def e(self, t, d=2):
        if self.chaos and self.chance(self.chaos):
            t = self.pick([x for x in ALL_TYPES if x != t])
        return getattr(self, "e_" + t)(d)

    def guard(self, expr, fallback):
        if self.chance(self.raw_rate):
            return expr
        return f"({expr} or {fallback})"

    def e_I(self, d):
        r = self.r
        if d <= 0 or self.chance(0.22):
            return self.atom(I)
        a = lambda: self.e_I(d - 1)
        k = r.randrange(100)
        if k < 28:
            op = self.pick(["+", "-", "*", "+", "-", "&", "|", "^", "*"])
            return f"({a()} {op} {a()})"
        if k < 36:
            op = self.pick(["//", "%"])
            return f"({a()} {op} {self.guard(a(), self.pick(['1', '3', '7', '-5', '(2**65)']))})"
        if k < 40:
            return f"({a()} {self.pick(['<<', '>>'])} {r.randrange(0, 70)})"
        if k < 42:
            return f"({a()} ** {r.randrange(0, 4)})"
        if k < 45:
            return f"({self.pick(['-', '~', '+'])}{a()})"
        if k < 48:
            return f"abs({a()})"
        if k < 52:
            extra = f", {a()}" if self.chance(0.4) else ""
            return f"{self.pick(['min', 'max'])}({a()}, {a()}{extra})"
        if k < 56:
            return f"len({self.e(self.pick([S, L, T, D, Z]), d - 1)})"
        if k < 59:
            return f"sum({self.e_L(d - 1)})"
        if k < 62:
            return f"({a()} if {self.e_B(d - 1)} else {a()})"
        if k < 65:
            lst = self.var_atom(L)
            idx = a() if self.chance(self.raw_rate) else f"{a()} % len({lst})"
            if self.chance(self.raw_rate):
                return f"{lst}[{idx}]"
            return f"({lst}[{idx}] if {lst} else -1)"
        if k < 67:
            return f"{self.e_D(d - 1)}.get({self.pick(KEYS)}, {a()})"
        if k < 69:
            return f"divmod({a()}, {self.guard(a(), '3')})[{r.randrange(2)}]"
        if k < 71:
            return f"pow({a()}, {r.randrange(0, 40)}, {self.guard(a(), '97')})"
        if k < 73:
            f = self.e_F(d - 1)
            if self.chance(self.raw_rate):
                return f"int({f})"
            return f"int(max(-1e18, min(1e18, {f})) if {f} == {f} else 0)"
        if k < 75:
            return f"round({self.pick(SAFE_FLOATS)} * {a()} if abs({a()}) < 10**300 else 1)"
        if k < 77:
            return f"{self.e_S(d - 1)}.count({self.pick(SHORT_STRS)})"
        if k < 79:
            return f"{self.e_S(d - 1)}.find({self.pick(SHORT_STRS)})"
        if k < 81:
            return f"int(str({a()}))"
        if k < 83:
            return f"({self.e_B(d - 1)} + {a()})"
        if k < 86:
            return f"sum({self.genexp(I, d - 1)})"
        if k < 89 and self.ctx.allow_calls:
            call = self.call_expr(I, d - 1)
            if call:
                return call
        if k < 91 and not self.no_walrus and self.ctx.kind not in ("class", "lambda"):
            targets = [n for n, tt in self.assignable(I) if n not in self.ctx.frozen
                       and n not in self.ctx.bounded and n not in self.ctx.ro]
            if targets:
                return f"({self.pick(targets)} := {a()} % {self.pick(MODULI)})"
        if k < 94 and self.ctx.kind == "async" and not self.no_await and self.ctx.await_fn:
            return f"(await {self.ctx.await_fn}({a()}))"
        if k < 96:
            s = self.e_S(d - 1)
            return f"ord(({s} or 'a')[0])"
        if k < 98:
            return f"hash({a()})"
        return f"int({self.pick(['True', 'False'])}) * {a()}"

    def e_F(self, d):
        if d <= 0 or self.chance(0.25):
            return self.atom(F)
        a = lambda: self.e_F(d - 1)
        k = self.r.randrange(100)
        if k < 25:
            return f"({a()} {self.pick(['+', '-', '*'])} {a()})"
        if k < 35:
            return f"({a()} {self.pick(['+', '-', '*'])} {self.e_I(d - 1)})"
        if k < 43:
            return f"({a()} / {self.guard(a(), '1.0')})"
        if k < 49:
            return f"({self.e_I(d - 1)} / {self.guard(self.e_I(d - 1), '2')})"
        if k < 53:
            return f"({a()} {self.pick(['//', '%'])} {self.guard(a(), '2.5')})"
        if k < 56:
            return f"({a()} ** {self.pick(['0', '1', '2', '3', '-1', '0.5'])})" if self.chance(0.3) \
                else f"(abs({a()}) ** {self.pick(['0.5', '2', '1.5'])})"
        if k < 60:
            return f"float({self.e_I(d - 1)})"
        if k < 63:
            return f"abs({a()})"
        if k < 66:
            return f"(-{a()})"
        if k < 70:
            return f"round({a()}, {self.r.randrange(0, 4)})"
        if k < 74:
            return f"{self.pick(['min', 'max'])}({a()}, {a()})"
        if k < 77:
            return f"math.sqrt(abs({a()}))"
        if k < 79:
            return f"math.fsum([{a()}, {a()}, {a()}])"
        if k < 81:
            return f"math.hypot({a()}, {a()})"
        if k < 83:
            return f"math.copysign({a()}, {a()})"
        if k < 87:
            return f"({a()} if {self.e_B(d - 1)} else {a()})"
        if k < 89:
            return f"float({self.pick([repr(x) for x in ['1.5', '-inf', '1e3', ' 7 ', '-0', 'nan', '2.5e-3']])})"
        if k < 92:
            return f"sum([{a()}, {a()}], {a()})"
        if k < 94 and self.ctx.allow_calls:
            call = self.call_expr(F, d - 1)
            if call:
                return call
        return f"({a()} * 0.5 + {self.e_I(d - 1)} % 7)"

    def slice_text(self):
        r = self.r
        def bound():
            return self.pick(["", "", str(r.randrange(-6, 8)), str(r.randrange(-6, 8))])
        k = r.randrange(6)
        if k == 0:
            return "::-1"
        if k == 1:
            return f"{bound()}:{bound()}"
        if k == 2:
            step = self.pick(["2", "-1", "3", "-2"]) if not self.chance(self.chaos) else "0"
            return f"{bound()}:{bound()}:{step}"
        if k == 3:
            return f"{r.randrange(0, 4)}:"
        if k == 4:
            return f":{r.randrange(-3, 6)}"
        return f"{self.e_I(0)} % 5:"

    def fspec(self, t):
        if t == I:
            return self.pick(["", ":d", ":05d", ":x", ":#x", ":b", ":,", ":+", ":>8", ":^7", ":_", ":o", ":X", ":e"])
        if t == F:
            return self.pick(["", ":.2f", ":e", ":.3g", ":%", ":10.4f", ":,.1f", ":+.1e", ":g", ":08.3f"])
        if t == S:
            return self.pick(["", ":>6", ":<4", ":^5", ":*^9", ":.3", "!r", "!a", "!s:>3"])
        return self.pick(["", "!r"])

    def e_S(self, d):
        if d <= 0 or self.chance(0.2):
            return self.atom(S)
        a = lambda: self.e_S(d - 1)
        k = self.r.randrange(100)
        if k < 14:
            return f"({a()} + {a()})"
        if k < 18:
            return f"({a()} * {self.r.randrange(0, 4)})"
        if k < 26:
            return f"{a()}[{self.slice_text()}]"
        if k < 33:
            m = self.pick(["upper", "lower", "strip", "title", "swapcase", "casefold", "lstrip",
                           "capitalize", "rstrip"])
            return f"{a()}.{m}()"
        if k < 36:
            return f"{a()}.replace({self.pick(SHORT_STRS[1:])}, {self.pick(SHORT_STRS)})"
        if k < 41:
            return f"str({self.e(self.pick([I, F, I]), d - 1)})"
        if k < 44:
            return f"repr({self.e(self.pick([I, F, S, L, T, B]), d - 1)})"
        if k < 54:
            parts = []
            for _ in range(self.r.randrange(1, 4)):
                t = self.pick([I, F, S, I, B])
                inner = self.e(t, d - 1)
                spec = self.fspec(t)
                if self.chance(0.1) and t in (I, S):
                    parts.append(f"{{ {inner}=}}")
                else:
                    parts.append(f"{{ {inner}{spec}}}")
                parts.append(self.pick(["-", " ", "|", "", "x"]))
            return 'f"' + "".join(parts) + '"'
        if k < 58:
            return f"'%s|%d|%.2f' % ({a()}, {self.e_I(d - 1)}, {self.e_F(d - 1)})"
        if k < 63:
            sep = self.pick(["','", "''", "' '", "'-'"])
            k2 = self.r.randrange(3)
            if k2 == 0:
                return f"{sep}.join([{a()}, {a()}])"
            if k2 == 1:
                return f"{sep}.join(map(str, {self.e_L(d - 1)}))"
            return f"{sep}.join(sorted({self.e_D(d - 1)}))"
        if k < 67:
            return f"({a()} if {self.e_B(d - 1)} else {a()})"
        if k < 70:
            return f"{a()}.{self.pick(['center', 'ljust', 'rjust', 'zfill'])}({self.r.randrange(0, 12)})"
        if k < 72:
            return f"chr(65 + {self.e_I(d - 1)} % 26)"
        if k < 74:
            return f"format({self.e_I(d - 1)}, {self.pick([repr(x) for x in ['x', 'b', '>5', ',']])})"
        if k < 77:
            return f"({a()}.split({self.pick(['', repr(','), repr(' ')])}) + ['?'])[0]"
        if k < 79:
            return f"type({self.e(self.pick(VALUE_TYPES), d - 1)}).__name__"
        if k < 82:
            return f"str({self.e(self.pick([L, T]), d - 1)})"
        if k < 84:
            return f"str(sorted({self.e_Z(d - 1)}))"
        if k < 87:
            s = self.var_atom(S)
            return f"({s}[{self.e_I(d - 1)} % len({s})] if {s} else '?')"
        if k < 89:
            return f"{a()}.encode('utf-8')[:{self.r.randrange(0, 6)}].decode('utf-8', 'replace')"
        if k < 92 and self.ctx.allow_calls:
            call = self.call_expr(S, d - 1)
            if call:
                return call
        if k < 95:
            return f"{a()}.{self.pick(['partition', 'rpartition'])}({self.pick(SHORT_STRS[1:])})[{self.r.randrange(3)}]"
        return f"''.join(reversed({a()}))"

    def e_B(self, d):
        if d <= 0 or self.chance(0.12):
            names = self.readable(B)
            if names and self.chance(0.5):
                return self.pick(names)
            t = self.pick([I, F, S])
            return f"({self.atom(t)} {self.pick(['<', '<=', '>', '>=', '==', '!='])} {self.atom(t)})"
        k = self.r.randrange(100)
        if k < 30:
            t = self.pick([I, I, F, S, L, T, I])
            op = self.pick(["<", "<=", ">", ">=", "==", "!="]) if t != Z else self.pick(["==", "!=", "<=", "<"])
            if self.chance(0.2):
                op2 = self.pick(["<", "<=", "==", "!="])
                return f"({self.e(t, d - 1)} {op} {self.e(t, d - 1)} {op2} {self.e(t, d - 1)})"
            return f"({self.e(t, d - 1)} {op} {self.e(t, d - 1)})"
        if k < 34:
            return f"({self.e_I(d - 1)} {self.pick(['<', '==', '>='])} {self.e_F(d - 1)})"
        if k < 40:
            return f"(not {self.e_B(d - 1)})"
        if k < 50:
            return f"({self.e_B(d - 1)} {self.pick(['and', 'or'])} {self.e_B(d - 1)})"
        if k < 60:
            c = self.pick([(I, L), (S, S), (I, T), (I, Z)])
            if self.chance(0.3):
                return f"({self.pick(KEYS)} {self.pick(['in', 'not in'])} {self.e_D(d - 1)})"
            return f"({self.e(c[0], d - 1)} {self.pick(['in', 'not in'])} {self.e(c[1], d - 1)})"
        if k < 66:
            cls = self.pick(["int", "str", "(int, float)", "list", "tuple", "dict", "set",
                             "bool", "object", "float"])
            return f"isinstance({self.e(self.pick(VALUE_TYPES), d - 1)}, {cls})"
        if k < 70:
            return f"bool({self.e(self.pick(VALUE_TYPES), d - 1)})"
        if k < 76:
            return f"{self.pick(['any', 'all'])}({self.genexp(B, d - 1)})"
        if k < 80:
            m = self.pick(["startswith", "endswith"])
            return f"{self.e_S(d - 1)}.{m}({self.pick(SHORT_STRS)})"
        if k < 83:
            return f"{self.e_S(d - 1)}.{self.pick(['isdigit', 'isalpha', 'isspace', 'isupper', 'isidentifier'])}()"
        if k < 86:
            return f"({self.var_atom(self.pick(VALUE_TYPES))} is {self.pick(['None', 'not None'])})"
        if k < 89:
            return f"({self.e_Z(d - 1)} {self.pick(['<=', '>=', '<', '=='])} {self.e_Z(d - 1)})"
        if k < 92:
            return f"({self.e_I(d - 1)} % {self.pick(['2', '3', '5'])} == 0)"
        if k < 94 and self.ctx.allow_calls:
            call = self.call_expr(B, d - 1)
            if call:
                return call
        return f"({self.e_I(d - 1)} > {self.e_I(d - 1)})"

    def comp_var(self, t):
        """A comprehension/lambda variable name: sometimes shadows a local of that type."""
        names = [n for n, tt in self.ctx.vars.items() if tt == t and "." not in n]
        if names and self.chance(0.2) and self.ctx.kind not in ("class",):
            return self.pick(names)
        return self.fresh("c")

    def iterable(self, d, elem=I):
        """An expression iterating over elements of type `elem` (I or S), bounded."""
        if elem == S:
            k = self.r.randrange(3)
            if k == 0:
                return f"{self.e_S(d)}.split()"
            if k == 1:
                return f"sorted({self.e_D(d)})"
            return f"list({self.var_atom(S)}[:8])"
        k = self.r.randrange(6)
        if k == 0:
            return f"range({self.e_I(d)} % {self.r.randrange(2, 9)})"
        if k == 1:
            return f"range({self.r.randrange(0, 7)})"
        if k == 2:
            return self.e_L(d)
        if k == 3:
            return self.e_T(d)
        if k == 4:
            return f"sorted({self.e_Z(d)})"
        return f"{self.e_D(d)}.values()"

    def genexp(self, t, d):
        v = self.fresh("c")
        with self.flag("no_walrus"):
            it = self.iterable(d)
        with self.ro_vars([(v, I)]), self.flag("no_await"):
            el = self.e(t, d)
            cond = f" if {self.e_B(d)}" if self.chance(0.4) else ""
        return f"({el} for {v} in {it}{cond})"

    def lambda_expr(self, nparams=1, ret=I, d=1):
        names = [self.fresh("p") for _ in range(nparams)]
        saved_kind = self.ctx.kind
        with self.ro_vars([(n, I) for n in names]), self.flag("no_walrus"), self.flag("no_await"):
            body = self.e(ret, d)
        params = ", ".join(names)
        if self.chance(0.2):
            params += f", {self.fresh('p')}={self.lit(I)}"
        return f"lambda {params}: {body}"

    def e_L(self, d):
        if d <= 0 or self.chance(0.2):
            return self.atom(L)
        a = lambda: self.e_L(d - 1)
        r = self.r
        k = r.randrange(100)
        if k < 14:
            return "[" + ", ".join(self.e_I(d - 1) for _ in range(r.randrange(0, 5))) + "]"
        if k < 20:
            return f"({a()} + {a()})"
        if k < 23:
            return f"({a()} * {r.randrange(0, 3)})"
        if k < 30:
            return f"{a()}[{self.slice_text()}]"
        if k < 35:
            return f"sorted({a()})"
        if k < 38:
            return f"sorted({a()}, reverse=True)"
        if k < 42:
            return f"sorted({a()}, key={self.lambda_expr(1, I, d - 1)})"
        if k < 45:
            return f"list(range({self.e_I(d - 1)} % 7, {r.randrange(-3, 12)}, {self.pick(['1', '2', '-1', '3'])}))"
        if k < 58:
            v = self.comp_var(I)
            with self.flag("no_walrus"):
                it = self.iterable(d - 1)
            with self.ro_vars([(v, I)]):
                el = self.e_I(d - 1)
                cond = f" if {self.e_B(d - 1)}" if self.chance(0.5) else ""
            if self.chance(0.2):
                v2 = self.fresh("c")
                with self.ro_vars([(v, I), (v2, I)]):
                    el = self.e_I(d - 1)
                return f"[{el} for {v} in {it} for {v2} in range({r.randrange(1, 4)}){cond}]"
            return f"[{el} for {v} in {it}{cond}]"
        if k < 62:
            return f"[*{a()}, *{self.e_T(d - 1)}]"
        if k < 65:
            return f"list(reversed({a()}))"
        if k < 69:
            return f"list(map({self.lambda_expr(1, I, d - 1)}, {a()}))"
        if k < 72:
            return f"list(filter({self.lambda_expr(1, B, d - 1)}, {a()}))"
        if k < 75:
            return f"list({self.e_Z(d - 1)})"
        if k < 78:
            return f"list({self.e_T(d - 1)})"
        if k < 81:
            return f"sorted({self.e_D(d - 1)}.values())"
        if k < 84:
            with self.flag("no_walrus"):
                return f"[len(w) for w in {self.e_S(d - 1)}.split()]"
        if k < 87:
            return f"([{self.e_I(d - 1)}] * {r.randrange(0, 4)})"
        if k < 89:
            return f"{a()}.copy()"
        if k < 92:
            return f"list({self.genexp(I, d - 1)})"
        if k < 94 and self.ctx.allow_calls:
            call = self.call_expr(L, d - 1)
            if call:
                return call
        with self.flag("no_walrus"):
            return f"[x for x in {a()} if x % 2][:{r.randrange(0, 6)}]"

    def e_T(self, d):
        if d <= 0 or self.chance(0.25):
            return self.atom(T)
        k = self.r.randrange(100)
        if k < 20:
            n = self.r.randrange(0, 4)
            items = [self.e_I(d - 1) for _ in range(n)]
            return "(" + ", ".join(items) + ("," if n == 1 else "") + ")"
        if k < 32:
            return f"tuple({self.e_L(d - 1)})"
        if k < 42:
            return f"({self.e_T(d - 1)} + {self.e_T(d - 1)})"
        if k < 52:
            return f"{self.e_T(d - 1)}[{self.slice_text()}]"
        if k < 62:
            return f"divmod({self.e_I(d - 1)}, {self.guard(self.e_I(d - 1), '2')})"
        if k < 70:
            return f"tuple(sorted({self.e_Z(d - 1)}))"
        if k < 80:
            return f"(*{self.e_L(d - 1)}, {self.e_I(d - 1)})"
        if k < 90:
            return f"tuple({self.genexp(I, d - 1)})"
        return f"(({self.e_I(d - 1)},) * {self.r.randrange(0, 3)})"

    def e_D(self, d):
        if d <= 0 or self.chance(0.25):
            return self.atom(D)
        k = self.r.randrange(100)
        if k < 15:
            keys = self.r.sample(KEYS, self.r.randrange(0, 4))
            return "{" + ", ".join(f"{key}: {self.e_I(d - 1)}" for key in keys) + "}"
        if k < 28:
            return f"{{**{self.e_D(d - 1)}, {self.pick(KEYS)}: {self.e_I(d - 1)}}}"
        if k < 38:
            return f"({self.e_D(d - 1)} | {self.e_D(d - 1)})"
        if k < 52:
            kv, vv = self.fresh("c"), self.fresh("c")
            with self.flag("no_walrus"):
                src = self.e_D(d - 1)
            with self.ro_vars([(kv, S), (vv, I)]), self.flag("no_walrus"):
                val = self.e_I(d - 1)
                cond = f" if {self.e_B(d - 1)}" if self.chance(0.5) else ""
            return f"{{{kv}: {val} for {kv}, {vv} in {src}.items(){cond}}}"
        if k < 62:
            with self.flag("no_walrus"):
                return f"{{w: len(w) for w in {self.e_S(d - 1)}.split()}}"
        if k < 72:
            keys = self.r.sample(KEYS, self.r.randrange(0, 4))
            return f"dict(zip([{', '.join(keys)}], {self.e_L(d - 1)}))"
        if k < 80:
            keys = self.r.sample(KEYS, self.r.randrange(0, 3))
            return f"dict.fromkeys([{', '.join(keys)}], {self.e_I(d - 1)})"
        if k < 88:
            return f"dict({self.e_D(d - 1)})"
        with self.flag("no_walrus"):
            return f"{{str(x): x for x in {self.e_L(d - 1)}}}"

    def e_Z(self, d):
        if d <= 0 or self.chance(0.25):
            return self.atom(Z)
        a = lambda: self.e_Z(d - 1)
        k = self.r.randrange(100)
        if k < 15:
            n = self.r.randrange(1, 4)
            return "{" + ", ".join(self.e_I(d - 1) for _ in range(n)) + "}"
        if k < 20:
            return "set()"
        if k < 32:
            return f"set({self.e_L(d - 1)})"
        if k < 55:
            return f"({a()} {self.pick(['|', '&', '-', '^'])} {a()})"
        if k < 72:
            v = self.fresh("c")
            with self.flag("no_walrus"):
                it = self.iterable(d - 1)
            with self.ro_vars([(v, I)]), self.flag("no_walrus"):
                el = self.e_I(d - 1)
            return f"{{{el} % {self.r.randrange(2, 9)} for {v} in {it}}}"
        if k < 82:
            return f"set(range({self.e_I(d - 1)} % 10))"
        if k < 90:
            return f"set({self.e_D(d - 1)}.values())"
        return f"{a()}.{self.pick(['union', 'intersection', 'difference', 'symmetric_difference'])}({self.e_L(d - 1)})"

    def call_expr(self, t, d):
        cands = [s for s in self.sigs if s.ret == t]
        if not cands or self.ctx.loop > 1:
            return None
        sig = self.pick(cands)
        self.ctx.leaf = False
        return f"{sig.name}({self.call_args(sig, lambda tt: self.e(tt, max(d - 1, 0)))})"

    def call_args(self, sig, val):
        parts = []
        kw_mode = False
        for name, t, kind, default in sig.params:
            if default is not None and (self.chance(0.4) or (kw_mode and kind == "posonly")):
                kw_mode = True  # skip it: later positional args must then be keywords
                continue
            if kind == "kwonly" or (kind == "pos" and (kw_mode or self.chance(0.15))):
                kw_mode = True
                parts.append(f"{name}={val(t)}")
            else:
                parts.append(val(t))
        return ", ".join(parts)

    # ------------------------------------------------------------- statements
    def bounded_value(self, name, t, expr):
        """expr, reduced so that the stored value stays small enough."""
        if t == I:
            return f"({expr}) % {self.pick(MODULI)}"
        if t == S:
            return f"({expr})[:{self.r.randrange(8, STR_LIMIT)}]"
        if t in (L, T):
            return f"({expr})[:{self.r.randrange(3, LIST_LIMIT)}]"
        return expr

    def block(self, n, depth):
        for _ in range(n):
            self.stmt(depth)

    def stmt(self, depth):
        c = self.ctx
        opts = [("assign", 22), ("aug", 10), ("print", 3 if c.loop else 7), ("mutate", 9),
                ("unpack", 3), ("assert", 1), ("raise", 2), ("frame", 1)]
        if depth > 0:
            opts += [("if", 9), ("try", 6), ("with", 3), ("match", 2)]
            if c.loop < 2:
                opts += [("for", 7), ("while", 3)]
            if c.kind in ("func", "gen", "async", "method"):
                opts += [("closure", 2), ("del", 1)]
        if c.loop and not c.in_finally:
            opts += [("brk", 4)]
        if c.kind == "gen":
            opts += [("yield", 7)]
        if c.kind == "async":
            opts += [("await", 6)]
        if c.globals_decl:
            opts += [("global", 3)]
        kind = self.wpick(opts)
        getattr(self, "s_" + kind)(depth)

    def s_assign(self, depth):
        targets = [(n, t) for n, t in self.assignable() if n not in self.ctx.frozen]
        if not targets:
            return self.s_print(depth)
        name, t = self.pick(targets)
        self.w(f"{name} = {self.bounded_value(name, t, self.e(t, self.r.randrange(1, 4)))}")

    def s_aug(self, depth):
        targets = [(n, t) for n, t in self.assignable() if n not in self.ctx.frozen and t in (I, F, S, L, Z, D)]
        if not targets:
            return self.s_assign(depth)
        name, t = self.pick(targets)
        w = self.w
        if t == I:
            op = self.pick(["+=", "-=", "*=", "&=", "|=", "^=", "//=", "%=", "<<=", ">>="])
            if op in ("//=", "%="):
                w(f"{name} {op} {self.guard(self.e_I(2), '7')}")
            elif op in ("<<=", ">>="):
                w(f"{name} {op} {self.r.randrange(0, 66)}")
            else:
                w(f"{name} {op} {self.e_I(2)}")
            w(f"{name} %= {self.pick(MODULI)}")
        elif t == F:
            op = self.pick(["+=", "-=", "*=", "/="])
            rhs = self.guard(self.e_F(2), "1.0") if op == "/=" else self.e_F(2)
            w(f"{name} {op} {rhs}")
        elif t == S:
            w(f"{name} += {self.e_S(2)}")
            w(f"{name} = {name}[:{STR_LIMIT}]")
        elif t == L:
            if self.chance(0.5):
                w(f"{name} += {self.e_L(2)}")
            else:
                w(f"{name} *= {self.r.randrange(0, 3)}")
            w(f"del {name}[{LIST_LIMIT}:]")
        elif t == Z:
            w(f"{name} {self.pick(['|=', '&=', '-=', '^='])} {self.e_Z(2)}")
        elif t == D:
            w(f"{name} |= {self.e_D(2)}")

    def s_print(self, depth):
        t = self.pick(VALUE_TYPES + (B,))
        self.w(f"print({self.fresh('p')!r}, _fmt({self.e(t, 2)}))")

    def s_mutate(self, depth):
        cands = [(n, t) for n, t in self.assignable() if t in (L, D, Z) and n not in self.ctx.frozen]
        if not cands:
            return self.s_assign(depth)
        name, t = self.pick(cands)
        w = self.w
        k = self.r.randrange(10)
        if t == L:
            if k == 0:
                w(f"{name}.append({self.e_I(2)})")
            elif k == 1:
                w(f"{name}.insert({self.e_I(1)} % 4, {self.e_I(2)})")
            elif k == 2:
                with w.block(f"if {name}:"):
                    w(f"{self.pick(['print(' + repr(self.fresh('pop')) + ', ', '_LOG.append('])}{name}.pop())")
            elif k == 3:
                with w.block(f"if {name}:"):
                    if self.chance(0.5):
                        w(f"{name}[{self.e_I(2)} % len({name})] = {self.e_I(2)}")
                    else:
                        op = self.pick(['+=', '-=', '*=', '|=', '//='])
                        rhs = self.guard(self.e_I(1), '3') if op == '//=' else self.e_I(1)
                        w(f"{name}[{self.e_I(1)} % len({name})] {op} {rhs}")
                        w(f"{name}[:] = [x % {self.pick(MODULI)} for x in {name}]")
            elif k == 4:
                if self.chance(self.raw_rate):
                    w(f"del {name}[{self.e_I(1)}]")
                else:
                    with w.block(f"if {name}:"):
                        w(f"del {name}[{self.e_I(1)} % len({name})]")
            elif k == 5:
                w(f"{name}[{self.slice_text() if self.chance(0.3) else '1:3'}] = {self.e_L(1)}")
            elif k == 6:
                w(f"{name}.sort({self.pick(['', 'reverse=True', 'key=abs', 'key=' + self.lambda_expr(1, I, 1)])})")
            elif k == 7:
                w(f"{name}.extend({self.e_L(2)})")
            elif k == 8:
                w(f"{name}.reverse()")
            else:
                w(f"{name}.remove({self.e_I(1)})" if self.chance(self.raw_rate) else
                  f"{name}[:] = [x for x in {name} if x != {self.e_I(1)}]")
            w(f"del {name}[{LIST_LIMIT}:]")
        elif t == D:
            if k < 4:
                w(f"{name}[{self.pick(KEYS)}] = {self.e_I(2)}")
            elif k < 5:
                if self.chance(self.raw_rate):
                    w(f"del {name}[{self.pick(KEYS)}]")
                else:
                    w(f"{name}.pop({self.pick(KEYS)}, None)")
            elif k < 6:
                w(f"{name}.setdefault({self.pick(KEYS)}, {self.e_I(1)})")
            elif k < 7:
                w(f"{name}.update({self.e_D(2)})")
            elif k < 8:
                key = self.pick(KEYS)
                w(f"{name}[{key}] = {name}.get({key}, 0) + {self.e_I(1)}")
            elif k < 9:
                w(f"{name}[{self.pick(KEYS)}] += 1" if self.chance(self.raw_rate) else f"{name}.clear()")
            else:
                with w.block(f"if {name}:"):
                    w(f"print({self.fresh('pi')!r}, _fmt({name}.popitem()))")
        else:
            if k < 4:
                w(f"{name}.add({self.e_I(2)})")
            elif k < 6:
                w(f"{name}.discard({self.e_I(1)})")
            elif k < 7:
                w(f"{name}.remove({self.e_I(1)})" if self.chance(self.raw_rate) else f"{name}.update({self.e_L(1)})")
            elif k < 8:
                w(f"{name}.intersection_update({self.e_Z(1)})")
            else:
                w(f"{name}.difference_update({self.e_L(1)})")

    def s_unpack(self, depth):
        w = self.w
        ints = [n for n, t in self.assignable(I) if n not in self.ctx.frozen]
        lists = [n for n, t in self.assignable(L) if n not in self.ctx.frozen]
        k = self.r.randrange(4)
        if k == 0 and len(ints) >= 2:
            a, b = self.r.sample(ints, 2)
            w(f"{a}, {b} = {b}, {a}")
        elif k == 1 and ints and lists:
            a, rest = self.pick(ints), self.pick(lists)
            src = self.e_L(2) if self.chance(self.raw_rate) else f"[{self.e_I(1)}, *{self.e_L(1)}]"
            if self.chance(0.5):
                w(f"{a}, *{rest} = {src}")
            else:
                w(f"*{rest}, {a} = {src}")
            w(f"del {rest}[{LIST_LIMIT}:]")
        elif k == 2 and len(ints) >= 2:
            a, b = self.r.sample(ints, 2)
            if self.chance(self.raw_rate):
                w(f"{a}, {b} = {self.e_L(1)}")
            else:
                w(f"({a}, {b}), _u = ({self.e_I(1)}, {self.e_I(1)}), None")
        elif k == 3 and ints:
            a = self.pick(ints)
            w(f"{a} = {self.e_I(1)} % 1000")
            w(f"_t0, *_t1 = str({a})")
            w(f"print({self.fresh('u')!r}, _t0, _t1)")
        else:
            self.s_assign(depth)

    def s_assert(self, depth):
        self.w(f"assert {self.e_B(1)}, {self.e_S(1)}")

    def s_raise(self, depth):
        exc = self.pick(EXC_TYPES)
        cond = self.e_B(1)
        with self.w.block(f"if {cond}:"):
            if self.ctx.in_except and self.chance(0.4):
                self.w("raise")
            elif self.chance(0.2):
                self.w(f"raise {exc}({self.e_S(1)}) from {self.pick(['None', 'ValueError(0)'])}")
            else:
                self.w(f"raise {exc}({self.e(self.pick([I, S]), 1)})")

    def s_frame(self, depth):
        c = self.ctx
        w = self.w
        k = self.r.randrange(5)
        if k == 4:
            w(f"print({self.fresh('st')!r}, _stack())")
        elif k == 0 or c.kind in ("module", "class"):
            if self.chance(0.3):
                w(f"print({self.fresh('la')!r}, sys._getframe().f_lasti)")
            else:
                w(f"print({self.fresh('ln')!r}, sys._getframe().f_lineno, sys._getframe().f_code.co_name)")
        elif k == 1:
            w(f"print({self.fresh('lc')!r}, sorted(locals()))")
        elif k == 2:
            w(f"print({self.fresh('lv')!r}, [(k, _fmt(v)) for k, v in sorted(locals().items()) if not callable(v)])")
        else:
            ints = [n for n, t in c.vars.items() if t == I and n not in c.frozen and "." not in n]
            if ints:
                n = self.pick(ints)
                w(f"sys._getframe().f_locals[{n!r}] = {self.lit(I)}")
                w(f"print({self.fresh('fl')!r}, {n})")
            else:
                w(f"print({self.fresh('fb')!r}, sys._getframe(1).f_code.co_name)")

    def s_if(self, depth):
        w = self.w
        with w.block(f"if {self.e_B(2)}:"):
            self.block(self.r.randrange(1, 4), depth - 1)
        for _ in range(self.r.randrange(0, 3)):
            with w.block(f"elif {self.e_B(2)}:"):
                self.block(self.r.randrange(1, 3), depth - 1)
        if self.chance(0.5):
            with w.block("else:"):
                self.block(self.r.randrange(1, 3), depth - 1)

    def loop_body(self, depth, frozen=()):
        c = self.ctx
        c.loop += 1
        added = [f for f in frozen if f not in c.frozen]
        c.frozen.update(added)
        try:
            self.block(self.r.randrange(1, 5), depth - 1)
        finally:
            c.loop -= 1
            c.frozen.difference_update(added)

    def s_for(self, depth):
        w = self.w
        r = self.r
        c = self.ctx
        k = r.randrange(9)
        v = self.fresh("i")
        bound = 8 if c.loop == 0 else 4
        frozen = []
        if k <= 1:
            header = f"for {v} in range({r.randrange(0, bound + 1)}):" if k == 0 else \
                f"for {v} in range({self.e_I(1)} % {bound}, {r.randrange(-2, bound + 2)}, {self.pick(['1', '2', '-1'])}):"
            pairs = [(v, I)]
        elif k == 2:
            lst = self.var_atom(L)
            frozen.append(lst)
            header = f"for {v} in {lst}:"
            pairs = [(v, I)]
        elif k == 3:
            j = self.fresh("j")
            lst = self.var_atom(L)
            frozen.append(lst)
            header = f"for {j}, {v} in enumerate({lst}{', 1' if self.chance(0.5) else ''}):"
            pairs = [(v, I), (j, I)]
        elif k == 4:
            kv = self.fresh("k")
            dct = self.var_atom(D)
            frozen.append(dct)
            header = f"for {kv}, {v} in {dct}.items():"
            pairs = [(v, I), (kv, S)]
        elif k == 5:
            j = self.fresh("j")
            header = f"for {v}, {j} in zip({self.e_L(1)}, {self.e_T(1)}):"
            pairs = [(v, I), (j, I)]
        elif k == 6:
            s = self.var_atom(S)
            header = f"for {v} in {s}[:{bound + 2}]:"
            pairs = [(v, S)]
        elif k == 7:
            zs = self.var_atom(Z)
            header = f"for {v} in sorted({zs})[:{bound}]:"
            pairs = [(v, I)]
        else:
            header = f"for {v} in reversed({self.e_L(1)}):"
            pairs = [(v, I)]
        with w.block(header):
            with self.ro_vars(pairs):
                self.loop_body(depth, frozen)
        if self.chance(0.25):
            with w.block("else:"):
                w(f"print({self.fresh('fe')!r}, 'no break')")

    def s_while(self, depth):
        w = self.w
        g = self.fresh("w")
        w(f"{g} = 0")
        cond = self.e_B(1)
        if self.chance(0.3):
            header = "while True:"
            with w.block(header):
                w(f"{g} += 1")
                with w.block(f"if {g} > {self.r.randrange(1, 7)}:"):
                    w("break")
                self.loop_body(depth)
        else:
            with w.block(f"while {cond} and {g} < {self.r.randrange(1, 7)}:"):
                w(f"{g} += 1")
                self.loop_body(depth)
            if self.chance(0.25):
                with w.block("else:"):
                    w(f"print({self.fresh('we')!r}, {g})")

    def s_brk(self, depth):
        with self.w.block(f"if {self.e_B(1)}:"):
            self.w(self.pick(["break", "continue", "continue"]))

    def risky(self):
        """A statement that raises fairly often."""
        w = self.w
        k = self.r.randrange(10)
        ints = [n for n, t in self.assignable(I) if n not in self.ctx.frozen]
        tgt = self.pick(ints) if ints else "_r"
        if k == 0:
            w(f"{tgt} = {self.e_I(1)} // {self.e_I(1)}")
        elif k == 1:
            w(f"{tgt} = {self.var_atom(L)}[{self.e_I(1)}]")
        elif k == 2:
            w(f"{tgt} = {self.e_D(1)}[{self.pick(KEYS)}]")
        elif k == 3:
            w(f"{tgt} = int({self.e_S(1)})")
        elif k == 4:
            with w.block(f"if {self.e_B(1)}:"):
                w(f"raise {self.pick(EXC_TYPES)}({self.e_S(1)})")
        elif k == 5:
            w(f"{tgt} = next(iter({self.e_L(1)}))")
        elif k == 6:
            w(f"{tgt} = {self.e_I(1)} + {self.e(self.pick([S, F, L]), 1)}")
        elif k == 7:
            w(f"{tgt} = math.factorial({self.e_I(1)} % 30 - 3)")
        elif k == 8:
            w(f"{tgt} = float({self.e_S(1)}).__round__()")
        else:
            w(f"{tgt} = len({self.e(self.pick(VALUE_TYPES), 1)}) // ({self.e_I(1)} % 3)")
        if tgt != "_r" and self.ctx.vars.get(tgt) == I:
            w(f"{tgt} %= {self.pick(MODULI)}")

    def s_try(self, depth):
        w = self.w
        c = self.ctx
        with w.block("try:"):
            if self.chance(0.6):
                self.risky()
            self.block(self.r.randrange(1, 3), depth - 1)
            if self.chance(0.3):
                self.risky()
        nexc = self.r.randrange(0 if self.chance(0.3) else 1, 3)
        had_handler = False
        for _ in range(nexc):
            ev = self.fresh("e")
            choice = self.pick(["(ZeroDivisionError, ValueError)", "ArithmeticError", "LookupError",
                                "TypeError", "Exception", "(KeyError, IndexError)", "StopIteration",
                                "RuntimeError"])
            with w.block(f"except {choice} as {ev}:"):
                had_handler = True
                w(f"print({self.fresh('x')!r}, _exc({ev}))")
                if self.chance(0.2):
                    w(f"print({self.fresh('tl')!r}, _tb_locals({ev}))")
                old = c.in_except
                c.in_except = True
                try:
                    if self.chance(0.06):
                        w(f"raise RuntimeError({self.e_S(1)}) from {ev}")
                    elif self.chance(0.05):
                        w("raise")
                    elif self.chance(0.05):
                        w(f"{ev}.add_note({self.e_S(1)})")
                        w("raise")
                    else:
                        self.block(self.r.randrange(0, 2), depth - 1)
                finally:
                    c.in_except = old
        if not had_handler or self.chance(0.3):
            if had_handler and self.chance(0.5):
                with w.block("else:"):
                    self.block(1, depth - 1)
            with w.block("finally:"):
                w(f"_LOG.append({self.fresh('fin')!r})")
                if self.chance(0.3):
                    old = c.in_finally
                    c.in_finally = True
                    try:
                        self.block(1, 0)
                    finally:
                        c.in_finally = old

    def s_with(self, depth):
        w = self.w
        v = self.fresh("cm")
        tag = self.pick(KEYS)
        k = self.r.randrange(3)
        if k == 0:
            header = f"with _CM({tag}, {self.pick(['True', 'False'])}) as {v}:"
            pairs = [(v, S)]
        elif k == 1:
            v2 = self.fresh("cm")
            header = f"with _CM({tag}) as {v}, _CM({self.pick(KEYS)}, {self.pick(['True', 'False'])}) as {v2}:"
            pairs = [(v, S), (v2, S)]
        else:
            header = f"with contextlib.suppress({self.pick(EXC_TYPES)}):"
            pairs = []
        with w.block(header):
            with self.ro_vars(pairs):
                if self.chance(0.4):
                    self.risky()
                self.block(self.r.randrange(1, 3), depth - 1)
        w(f"print({self.fresh('wl')!r}, _LOG[-2:])")

    def s_match(self, depth):
        w = self.w
        t = self.pick([I, S, L, T, D, F])
        subj = self.e(t, 2)
        cases = []
        with w.block(f"match {subj}:"):
            n = self.r.randrange(1, 5)
            for _ in range(n):
                pat, binds = self.pattern(t)
                guard = ""
                if self.chance(0.25):
                    with self.ro_vars(binds):
                        guard = f" if {self.e_B(1)}"
                with w.block(f"case {pat}{guard}:"):
                    with self.ro_vars(binds):
                        if binds:
                            w(f"print({self.fresh('m')!r}, _fmt({self.pick([b for b, _ in binds])}))")
                        else:
                            w(f"print({self.fresh('m')!r})")
                        self.block(self.r.randrange(0, 2), depth - 1)
            if self.chance(0.6):
                with w.block("case _:"):
                    w(f"print({self.fresh('m')!r}, 'default')")

    def pattern(self, t):
        r = self.r
        if t == I:
            k = r.randrange(4)
            if k == 0:
                return " | ".join(self.pick(["0", "1", "-1", "2", "7", "42", "100"]) for _ in range(r.randrange(1, 4))), []
            if k == 1:
                n = self.fresh("m")
                return f"int({n})", [(n, I)]
            if k == 2:
                n = self.fresh("m")
                return f"({self.pick(['0', '1', '3'])} | {self.pick(['5', '8'])}) as {n}", [(n, I)]
            return "bool()", []
        if t == F:
            n = self.fresh("m")
            k = r.randrange(5)
            if k < 2:
                return self.pick(["0.0", "1.5", "-0.0 | 2.0"]), []
            return self.pick([f"float({n})", f"float() as {n}", f"(int() | float()) as {n}"]), [(n, F)]
        if t == S:
            k = r.randrange(3)
            if k == 0:
                return " | ".join(self.pick(STRS[:6]) for _ in range(r.randrange(1, 3))), []
            n = self.fresh("m")
            return self.pick([f"str({n})", f"str() as {n}"]), [(n, S)]
        if t in (L, T):
            k = r.randrange(4)
            a, b = self.fresh("m"), self.fresh("m")
            if k == 0:
                return "[]" if t == L else "()", []
            if k == 1:
                return f"[{a}]", [(a, I)]
            if k == 2:
                return f"[{a}, *{b}]", [(a, I)]
            return f"({a}, {b}, *_)", [(a, I), (b, I)]
        # D
        a, rest = self.fresh("m"), self.fresh("m")
        key = self.pick(KEYS)
        k = r.randrange(3)
        if k == 0:
            return f"{{{key}: {a}}}", [(a, I)]
        if k == 1:
            return f"{{{key}: {a}, **{rest}}}", [(a, I), (rest, D)]
        return "{}", []

    def s_closure(self, depth):
        c = self.ctx
        w = self.w
        name = self.fresh("inner")
        p = self.fresh("p")
        nl = [n for n, t in c.vars.items() if t == I and n not in c.frozen and n not in c.bounded]
        inner = Ctx("func", c)
        # free variables: everything the outer can read
        for n, t in list(c.vars.items()) + list(c.ro.items()):
            inner.ro[n] = t
        inner.globals_decl = {}
        inner.vars[p] = I
        with w.block(f"def {name}({p}, {self.fresh('q')}={self.lit(I)}):"):
            if nl and self.chance(0.7):
                target = self.pick(nl)
                w(f"nonlocal {target}")
                inner.ro.pop(target, None)
                inner.vars[target] = I
                inner.bounded.add(target)
                w(f"{target} = ({target} + {p}) % {self.pick(MODULI)}")
            with self.using(inner):
                loc = self.fresh("l")
                inner.vars[loc] = self.pick([I, S, L])
                w(f"{loc} = {self.lit(inner.vars[loc])}")
                self.block(self.r.randrange(1, 3), min(depth - 1, 1))
                w(f"return {self.e_I(2)}")
        targets = [n for n, t in c.vars.items() if t == I and n not in c.frozen]
        if targets and self.chance(0.6):
            tgt = self.pick(targets)
            w(f"{tgt} = ({name}({self.e_I(1)}) + {tgt}) % {self.pick(MODULI)}")
        else:
            w(f"print({self.fresh('cl')!r}, _fmt([{name}(x) for x in range({self.r.randrange(1, 4)})]))")

    def s_del(self, depth):
        c = self.ctx
        cands = [(n, t) for n, t in c.vars.items() if n not in c.frozen and n not in c.bounded]
        if not cands:
            return self.s_assign(depth)
        n, t = self.pick(cands)
        self.w(f"del {n}")
        if self.chance(0.2):
            self.w(f"print({self.fresh('dl')!r}, {'locals().get(' + repr(n) + ')' if self.chance(0.5) else n})")
        self.w(f"{n} = {self.lit(t)}")

    def s_yield(self, depth):
        w = self.w
        k = self.r.randrange(5)
        ints = [n for n, t in self.assignable(I) if n not in self.ctx.frozen]
        if k <= 1:
            w(f"yield {self.e(self.pick([I, S, T]), 2)}")
        elif k == 2 and ints:
            s = self.fresh("sent")
            w(f"{s} = yield {self.e_I(2)}")
            tgt = self.pick(ints)
            with w.block(f"if isinstance({s}, int):"):
                w(f"{tgt} = ({tgt} + {s}) % {self.pick(MODULI)}")
        elif k == 3:
            w(f"yield from {self.pick([self.e_L(1) + '[:3]', 'range(' + str(self.r.randrange(0, 4)) + ')', self.genexp(I, 1)])}")
        else:
            w(f"yield ({self.pick(KEYS)}, {self.e_I(1)})")

    def s_await(self, depth):
        w = self.w
        c = self.ctx
        ints = [n for n, t in self.assignable(I) if n not in c.frozen]
        if ints and c.await_fn and self.chance(0.6):
            tgt = self.pick(ints)
            w(f"{tgt} = ({tgt} + await {c.await_fn}({self.e_I(1)})) % {self.pick(MODULI)}")
        else:
            w(f"_LOG.append(await _Yield({self.e(self.pick([I, S]), 1)}))")

    def s_global(self, depth):
        c = self.ctx
        name, t = self.pick(list(c.globals_decl.items()))
        self.w(f"{name} = {self.bounded_value(name, t, self.e(t, 2))}")

    # ---------------------------------------------------------------- bodies
    def init_locals(self, n):
        c = self.ctx
        for _ in range(n):
            t = self.pick([I, I, I, F, S, S, L, L, D, Z, T, B])
            name = self.fresh("x")
            if t == B:
                self.w(f"{name} = {self.e_B(1)}")
                c.ro[name] = B
                continue
            if self.chance(0.5):
                self.w(f"{name} = {self.bounded_value(name, t, self.e(t, 1))}")
            else:
                self.w(f"{name} = {self.lit(t)}")
            c.vars[name] = t

    def params(self, n, allow_kinds=True):
        ps = []
        for idx in range(n):
            t = self.pick([I, I, F, S, L, I, T, D, Z])
            name = self.fresh("a")
            default = None
            if t in (I, F, S, T) and self.chance(0.3):
                default = self.lit(t)
            ps.append([name, t, "pos", default])
        # defaults only at the end for positional params
        seen_default = False
        for p in ps:
            if p[3] is not None:
                seen_default = True
            elif seen_default:
                p[2] = "kwonly"
        if allow_kinds and ps:
            if self.chance(0.2):
                ps[-1][2] = "kwonly"
            if self.chance(0.15) and ps[0][2] == "pos" and ps[0][3] is None:
                ps[0][2] = "posonly"
        # Order: posonly, pos, kwonly (kwonly may have no default anywhere)
        ps.sort(key=lambda p: {"posonly": 0, "pos": 1, "kwonly": 2}[p[2]])
        # a non-default positional after a default positional is invalid: demote
        seen_default = False
        for p in ps:
            if p[2] in ("posonly", "pos"):
                if p[3] is not None:
                    seen_default = True
                elif seen_default:
                    p[3] = self.lit(p[1]) if p[1] in (I, F, S, T) else None
                    if p[3] is None:
                        p[2] = "kwonly"
        ps.sort(key=lambda p: {"posonly": 0, "pos": 1, "kwonly": 2}[p[2]])
        return [tuple(p) for p in ps]

    def param_text(self, ps):
        out = []
        posonly_done = False
        star_done = False
        for i, (name, t, kind, default) in enumerate(ps):
            if kind != "posonly" and not posonly_done and any(p[2] == "posonly" for p in ps):
                out.append("/")
                posonly_done = True
            if kind == "kwonly" and not star_done:
                out.append("*")
                star_done = True
            out.append(f"{name}={default}" if default is not None else name)
        if any(p[2] == "posonly" for p in ps) and not posonly_done:
            out.append("/")
        return ", ".join(out)

    def arg_value_module(self, t, idx="_i"):
        """An argument for a call from the driver (module level, `idx` in scope)."""
        r = self.r
        k = r.randrange(4)
        if t == I:
            return self.pick([idx, f"{idx} * {r.randrange(2, 9)} - {r.randrange(0, 20)}", f"({idx} << {r.randrange(30, 90)})",
                              f"-{idx}", self.lit(I), f"{idx} % 3", f"{idx} ** {r.randrange(2, 12)}"])
        if t == F:
            return self.pick([f"{idx} / 4", f"{idx} * 1e300", f"float({idx})", self.lit(F), f"{idx} - 0.5"])
        if t == S:
            return self.pick([f"'ab' * ({idx} % 4)", f"str({idx})", self.lit(S), f"chr(97 + {idx} % 26) * 3"])
        if t == L:
            return self.pick([f"list(range({idx} % 6))", f"[{idx}, {self.lit(I)}, {self.lit(I)}]", self.lit(L)])
        if t == T:
            return self.pick([f"tuple(range({idx} % 5))", f"({idx}, {idx} + 1)", self.lit(T)])
        if t == D:
            return self.pick([f"{{'a': {idx}, 'b': {idx} * 2}}", self.lit(D), f"dict.fromkeys('xyz'[:{idx} % 4], {idx})"])
        if t == Z:
            return self.pick([f"set(range({idx} % 6))", self.lit(Z), f"{{{idx}, -{idx}, 3}}"])
        if t == B:
            return self.pick([f"{idx} % 2 == 0", "True", "False"])
        raise ValueError(t)

    def other_type(self, t):
        return self.pick([x for x in VALUE_TYPES if x != t])

    def driver_calls(self, label, fname, sig_params, loops=None, poly=True):
        """Driver lines calling fname many times."""
        d = self.drv
        r = self.r
        n = loops if loops is not None else r.randrange(3, 14)
        with d.block(f"for _i in range({n}):"):
            args = self.call_args(Sig(fname, sig_params, None), lambda t: self.arg_value_module(t))
            d(f"_show({label!r}, {fname}{', ' if args else ''}{args})")
        if poly and sig_params and self.chance(0.5):
            # a call with an argument of another type, after the function got hot
            ps = list(sig_params)
            j = r.randrange(len(ps))
            name, t, kind, default = ps[j]
            ps[j] = (name, self.other_type(t), kind, None)
            args = self.call_args(Sig(fname, ps, None), lambda t: self.arg_value_module(t, str(r.randrange(0, 9))))
            d(f"_show({label + '/poly'!r}, {fname}{', ' if args else ''}{args})")
            if self.chance(0.5):
                with d.block(f"for _i in range({r.randrange(2, 6)}):"):
                    args = self.call_args(Sig(fname, sig_params, None), lambda t: self.arg_value_module(t))
                    d(f"_show({label + '/again'!r}, {fname}{', ' if args else ''}{args})")

    # ------------------------------------------------------------------ units
    def unit_plain(self):
        w = self.w
        name = self.fresh("f")
        ps = self.params(self.r.randrange(0, 5))
        ret = self.pick([I, I, F, S, L, T, D, Z, B])
        c = Ctx("func")
        for pname, t, kind, default in ps:
            c.vars[pname] = t
        gdecl = {}
        if self.globals and self.chance(0.3):
            g = self.pick(sorted(self.globals))
            gdecl[g] = self.globals[g]
        c.globals_decl = gdecl
        for g in gdecl:
            c.bounded.add(g)
        with w.block(f"def {name}({self.param_text(ps)}):"):
            if gdecl:
                w(f"global {', '.join(gdecl)}")
            with self.using(c):
                self.init_locals(self.r.randrange(1, 5))
                self.block(self.r.randrange(2, 9), 2)
                w(f"return {self.e(ret, 2)}")
        w()
        sig = Sig(name, ps, ret, leaf=c.leaf and not gdecl)
        if sig.leaf:
            self.sigs.append(sig)
        self.driver_calls(name, name, ps)

    def unit_closure(self):
        w = self.w
        name = self.fresh("make")
        state = self.fresh("st")
        hist = self.fresh("hist")
        step = self.fresh("step")
        c = Ctx("func")
        c.ro[step] = I
        with w.block(f"def {name}({step}, start=0):"):
            w(f"{state} = start")
            w(f"{hist} = []")
            bump = self.fresh("bump")
            p = self.fresh("n")
            with w.block(f"def {bump}({p}=1):"):
                w(f"nonlocal {state}")
                inner = Ctx("func")
                inner.ro.update({step: I, p: I})
                inner.vars[state] = I
                inner.bounded.add(state)
                with self.using(inner):
                    w(f"{state} = ({state} + {p} * {step}) % {self.pick(MODULI)}")
                    self.init_locals(self.r.randrange(0, 3))
                    self.block(self.r.randrange(1, 4), 1)
                    w(f"{hist}.append({state})")
                    w(f"del {hist}[:-5]")
                    w(f"return {self.e_I(2)}")
            peek = self.fresh("peek")
            with w.block(f"def {peek}():"):
                w(f"return {state}, len({hist}), {hist}[-3:]")
            late = self.fresh("late")
            w(f"{late} = [lambda k=k: k * {step} for k in range(3)] + [lambda: {state}]")
            w(f"return {bump}, {peek}, {late}")
        w()
        d = self.drv
        b, pk, lt = self.fresh("_b"), self.fresh("_p"), self.fresh("_l")
        d(f"{b}, {pk}, {lt} = {name}({self.r.randrange(-3, 9)}, {self.lit(I)})")
        with d.block(f"for _i in range({self.r.randrange(3, 15)}):"):
            d(f"_show({name!r}, {b}, _i)")
        d(f"_show({name + '/peek'!r}, {pk})")
        d(f"print({name + '/late'!r}, [f() for f in {lt}])")
        d(f"print({name + '/free'!r}, {b}.__code__.co_freevars, {name}.__code__.co_cellvars)")

    def unit_generator(self):
        w = self.w
        sub = self.fresh("sub")
        gname = self.fresh("gen")
        with w.block(f"def {sub}(m):"):
            with w.block(f"for j in range(m % {self.r.randrange(2, 5)}):"):
                w(f"yield {self.pick(['j', 'j * m', '(j, m)', 'str(j)'])}")
            w(f"return m * {self.r.randrange(1, 4)}")
        w()
        c = Ctx("gen")
        c.vars["acc"] = I
        c.ro["n"] = I
        c.ro["k"] = I
        with w.block(f"def {gname}(n, k=3):"):
            w("acc = 0")
            with self.using(c):
                self.init_locals(self.r.randrange(0, 3))
                with w.block("try:"):
                    with w.block("for i in range(n % 8):"):
                        c.loop += 1
                        with self.ro_vars([("i", I)]):
                            if self.chance(0.3):
                                with w.block(f"if {self.e_B(1)}:"):
                                    w("continue")
                            w(f"x = yield {self.e(self.pick([I, I, S, T]), 2)}")
                            with w.block("if x is not None:"):
                                w(f"acc = (acc + x) % {self.pick(MODULI)}")
                            self.block(self.r.randrange(0, 3), 1)
                            if self.chance(0.3):
                                with w.block(f"if {self.e_B(1)}:"):
                                    w("break")
                        c.loop -= 1
                    w(f"y = yield from {sub}(acc + n)")
                    w("yield ('sub', y)")
                    if self.chance(0.5):
                        self.block(self.r.randrange(1, 3), 1)
                with w.block(f"except {self.pick(['ValueError', 'Exception', '(KeyError, ValueError)'])} as e:"):
                    w("yield ('caught', str(e))")
                    if self.chance(0.3):
                        w("raise")
                with w.block("finally:"):
                    w(f"_LOG.append(({gname!r}, acc))")
                w(f"return {self.e_I(1)}")
        w()
        drive = self.fresh("drive")
        with w.block(f"def {drive}(mode, n):"):
            w(f"g = {gname}(n)")
            w("out = []")
            with w.block("try:"):
                w("out.append(next(g))")
                w(f"out.append((g.gi_frame.f_lineno - {gname}.__code__.co_firstlineno, g.gi_suspended, g.gi_running))")
                w("out.append([(k, _fmt(v)) for k, v in sorted(g.gi_frame.f_locals.items()) if type(v) in (int, str)])")
                with w.block("if mode == 0:"):
                    w("out.extend(g)")
                with w.block("elif mode == 1:"):
                    w(f"out.append(g.send({self.r.randrange(1, 9)}))")
                    w(f"out.append(g.send({self.r.randrange(1, 9)}))")
                    w("out.extend(g)")
                with w.block("elif mode == 2:"):
                    w("out.append(g.throw(ValueError('boom')))")
                    w("out.extend(g)")
                with w.block("elif mode == 3:"):
                    w("g.close()")
                    w("out.append(('closed', g.gi_frame is None))")
                with w.block("elif mode == 4:"):
                    w("out.append(g.throw(KeyError('k')))")
                with w.block("else:"):
                    w(f"out.append(sum(1 for _ in g))")
            with w.block("except StopIteration as e:"):
                w("out.append(('stop', _fmt(e.value)))")
            w("out.append(_LOG[-1:])")
            w("return out")
        w()
        with self.drv.block(f"for _i in range({self.r.randrange(6, 14)}):"):
            self.drv(f"_show({drive!r}, {drive}, _i % 6, _i + {self.r.randrange(0, 5)})")
        self.drv(f"print({gname + '/list'!r}, _fmt(list({gname}({self.r.randrange(0, 8)}))))")
        self.drv(f"print({gname + '/genexp'!r}, _fmt(list(x for x in {sub}({self.r.randrange(0, 9)}) if x)))")

    def unit_class(self):
        w = self.w
        base = self.fresh("Base")
        sub = self.fresh("Sub")
        slots = self.fresh("Slot")
        self.cls_names.append(base)
        c = Ctx("method")
        c.ro["self.x"] = I
        c.ro["self.y"] = I
        with w.block(f"class {base}:"):
            w(f"kind = {self.lit(S)}")
            w(f"count = {self.lit(I)}")
            w(f"table = [i * {self.r.randrange(1, 5)} for i in range({self.r.randrange(0, 5)})]")
            w(f"names = {{k: len(k) for k in (kind, 'x', 'yy')}}")
            w("total_len = sum(len(k) for k in names)")
            with w.block("def __init__(self, x, y=0):"):
                w("self.x = x")
                w("self.y = y")
            with w.block("def total(self):"):
                c2 = Ctx("method")
                c2.vars.update({"self.x": I, "self.y": I})
                c2.bounded.update({"self.x", "self.y"})
                with self.using(c2):
                    self.init_locals(self.r.randrange(0, 3))
                    self.block(self.r.randrange(0, 3), 1)
                    w(f"return {self.e_I(2)}")
            with w.block("def __repr__(self):"):
                w("return f'{type(self).__name__}({self.x!r}, {self.y!r})'")
            with w.block("def __eq__(self, other):"):
                w(f"return isinstance(other, {base}) and (self.x, self.y) == (other.x, other.y)")
            w("__hash__ = None" if self.chance(0.5) else "def __hash__(self): return hash((self.x, self.y))")
            with w.block("def __lt__(self, other):"):
                w("return (self.x, self.y) < (other.x, other.y)")
            with w.block("def __add__(self, other):"):
                w(f"return type(self)(self.x + other.x, self.y + getattr(other, 'y', 0))")
            with w.block("def __radd__(self, other):"):
                with w.block("if isinstance(other, int):"):
                    w("return type(self)(self.x + other, self.y)")
                w("return NotImplemented")
            with w.block("def __mul__(self, other):"):
                with w.block("if not isinstance(other, int):"):
                    w("return NotImplemented")
                w("return type(self)(self.x * other, self.y * other)")
            with w.block("def __iadd__(self, other):"):
                w("self.x += other")
                w("return self")
            with w.block("def __len__(self):"):
                w("return abs(self.x) % 10")
            with w.block("def __iter__(self):"):
                w("yield self.x")
                w("yield self.y")
            with w.block("def __getitem__(self, i):"):
                w("return (self.x, self.y, self.kind)[i]")
            with w.block("def __contains__(self, v):"):
                w("return v == self.x or v == self.y")
            with w.block("def __bool__(self):"):
                w(f"return {self.pick(['self.x != 0', 'bool(self.y)', 'self.x > self.y'])}")
            w("@classmethod")
            with w.block("def make(cls, n):"):
                w("return cls(n, n + 1)")
            w("@staticmethod")
            with w.block("def helper(a, b):"):
                w(f"return {self.pick(['a - b', 'a * b', '(a, b)', 'str(a) + str(b)'])}")
        w()
        with w.block(f"class {sub}({base}):"):
            w(f"kind = {self.lit(S)}")
            with w.block("def __init__(self, x, y=0, z=1):"):
                w("super().__init__(x, y)")
                w("self.z = z")
            with w.block("def total(self):"):
                w(f"return super().total() * self.z + {self.pick(['0', '1', 'self.count', 'len(self.kind)'])}")
            w("@property")
            with w.block("def double(self):"):
                w("return self.total() * 2")
            w("@double.setter")
            with w.block("def double(self, v):"):
                w("self.z = v // 2")
            w("@double.deleter")
            with w.block("def double(self):"):
                w("del self.z")
            with w.block("def __repr__(self):"):
                w("return f'{super().__repr__()}+{self.z!r}'")
        w()
        with w.block(f"class {slots}:"):
            w("__slots__ = ('a', 'b')")
            with w.block("def __init__(self, a):"):
                w("self.a = a")
            with w.block("def get(self):"):
                w("return self.a, getattr(self, 'b', 'unset')")
        w()
        fn = self.fresh("use")
        c3 = Ctx("func")
        c3.vars.update({"o": "O", "n": I})
        with w.block(f"def {fn}(n):"):
            w(f"o = {sub}(n, n % 3, {self.r.randrange(1, 4)})")
            w(f"p = {base}.make(n)")
            w("out = [o.total(), p.total(), o.double, len(o), list(o), o[2], o[-1], n in o, bool(o)]")
            k = self.r.randrange(6)
            if k == 0:
                w("o.double = n * 4")
                w("out.append(o.z)")
                w("del o.double")
                w("out.append(hasattr(o, 'z'))")
                w("out.append(o.total())")
            elif k == 1:
                w("o.extra = n")
                w("out.append(o.extra)")
                w("del o.extra")
                w("out.append(getattr(o, 'extra', 'gone'))")
                w("out.append(sorted(vars(o)))")
            elif k == 2:
                w(f"s = {slots}(n)")
                w("out.append(s.get())")
                w("s.b = n * 2")
                w("out.append(s.get())")
                w("del s.a")
                w("out.append(getattr(s, 'a', 'none'))")
                with w.block("if n % 3 == 0:"):
                    w("s.c = 1")
            elif k == 3:
                w("out.append(sorted([o, p, o + p, p + o]))")
                w("q = p")
                w("q += n")
                w("out.append((q is p, 5 + o, o * 2, sum([o, p], 0)))")
                with w.block(f"if n % {self.r.randrange(2, 5)} == 0:"):
                    w(f"out.append({self.pick(['o * 1.5', '1.5 + o', 'o - p', 'o < 3'])})")
                w("out.append(o == p)")
                w(f"out.append((type(o + p).__name__, isinstance(o, {base}), issubclass({sub}, {base})))")
            elif k == 4:
                w(f"out.append(({sub}.helper(n, 2), o.helper(1, n), {sub}.kind, o.kind, {base}.kind))")
                w(f"out.append({sub}.__mro__[1].__name__)")
                w("setattr(o, 'y', n * 3)")
                w("out.append(o.total())")
            else:
                w("x, y = p")
                w("out.append(x + y)")
                w(f"out.append({self.pick(['o.missing', 'p.z', 'o[5]', 'o.total(1)'])})")
            w("return out")
        w()
        self.driver_calls(fn, fn, [("n", I, "pos", None)], poly=False)
        # change a class attribute after the methods got hot
        if self.chance(0.5):
            self.drv(f"{base}.count = {self.lit(I)}")
            self.drv(f"{sub}.kind = {self.lit(S)}")
            self.drv(f"{base}.total = lambda self: -1")
            with self.drv.block(f"for _i in range(3):"):
                self.drv(f"_show({fn + '/changed'!r}, {fn}, _i)")

    def unit_cm(self):
        w = self.w
        fn = self.fresh("ctx")
        gcm = self.fresh("gcm")
        w("@contextlib.contextmanager")
        with w.block(f"def {gcm}(tag):"):
            w("_LOG.append(('gcm in', tag))")
            with w.block("try:"):
                w("yield tag * 2")
            with w.block(f"except {self.pick(['ValueError', 'KeyError', 'LookupError'])} as e:"):
                w("_LOG.append(('gcm caught', type(e).__name__))")
                if self.chance(0.5):
                    w("raise")
            with w.block("finally:"):
                w("_LOG.append(('gcm out', tag))")
        w()
        c = Ctx("func")
        c.ro["n"] = I
        with w.block(f"def {fn}(n):"):
            w("out = []")
            with self.using(c):
                c.vars["out"] = L
                self.init_locals(self.r.randrange(1, 3))
                with w.block(f"with _CM('a') as a, _CM('b', {self.pick(['True', 'False', 'n % 2 == 0'])}) as b:"):
                    w("out.append(len(a + b))")
                    with w.block(f"if n % {self.r.randrange(2, 4)} == 0:"):
                        w(f"raise {self.pick(['ValueError', 'KeyError', 'TypeError'])}(n)")
                    self.block(self.r.randrange(0, 3), 1)
                with w.block(f"with {gcm}(str(n)) as t:"):
                    w("out.append(len(t))")
                    with w.block(f"if n % {self.r.randrange(2, 5)} == 1:"):
                        w(f"raise {self.pick(['ValueError', 'KeyError', 'IndexError'])}('in gcm')")
                with w.block(f"for i in range(n % 4):"):
                    with w.block(f"with _CM(i):"):
                        with w.block("if i == 2:"):
                            w(self.pick(["break", "continue", "return out, _LOG[-3:]"]))
                        w("out.append(i)")
            w("return out, _LOG[-4:]")
        w()
        self.driver_calls(fn, fn, [("n", I, "pos", None)], poly=False)

    def unit_exceptions(self):
        w = self.w
        e1 = self.fresh("Err")
        e2 = self.fresh("Err")
        with w.block(f"class {e1}(Exception):"):
            w("pass")
        with w.block(f"class {e2}({e1}):"):
            with w.block("def __init__(self, code):"):
                w("super().__init__(f'code {code}')")
                w("self.code = code")
        w()
        fn = self.fresh("exc")
        c = Ctx("func")
        with w.block(f"def {fn}(n):"):
            w("log = []")
            with self.using(c):
                c.vars["log"] = L  # (list of anything: not used as list of int in expressions)
                c.frozen.add("log")
                c.ro["n"] = I
                self.init_locals(self.r.randrange(1, 3))
                with w.block(f"for i in range(n % {self.r.randrange(3, 9)}):"):
                    c.loop += 1
                    with self.ro_vars([("i", I)]):
                        with w.block("try:"):
                            with w.block("try:"):
                                with w.block(f"if i % 3 == 0:"):
                                    w(f"raise {e2}(i)")
                                with w.block("elif i % 3 == 1:"):
                                    w(f"log.append({self.e_I(1)} // (i - 1))")
                                with w.block("else:"):
                                    self.risky()
                                    self.block(self.r.randrange(0, 2), 0)
                            with w.block(f"except {e1} as e:"):
                                w("log.append(('E', e.code, str(e)))")
                                with w.block(f"if i > {self.r.randrange(1, 6)}:"):
                                    w(f"raise ValueError('wrapped') from {self.pick(['e', 'None', 'KeyError(i)'])}")
                            with w.block("except ZeroDivisionError:"):
                                w("log.append('zde')")
                                if self.chance(0.5):
                                    w("raise")
                            with w.block("else:"):
                                w("log.append('else')")
                            with w.block("finally:"):
                                w("log.append(('fin', i))")
                                if self.chance(0.2):
                                    with w.block("if i == 4:"):
                                        w("log.append(sys.exc_info()[0].__name__ if sys.exc_info()[0] else None)")
                        with w.block("except (ValueError, ZeroDivisionError) as e2:"):
                            w("log.append((type(e2).__name__, type(e2.__cause__).__name__, type(e2.__context__).__name__))")
                            w("log.append([f.lineno for f in _tb.extract_tb(e2.__traceback__)])")
                        with w.block("except Exception as e3:"):
                            w("log.append(_exc(e3))")
                            with w.block(f"if i > {self.r.randrange(3, 7)}:"):
                                w("raise")
                    c.loop -= 1
            w("return log")
        w()
        self.driver_calls(fn, fn, [("n", I, "pos", None)], poly=False)

    def unit_except_star(self):
        w = self.w
        fn = self.fresh("eg")
        with w.block(f"def {fn}(k):"):
            w("log = []")
            with w.block("try:"):
                with w.block("try:"):
                    items = ["ValueError(k)", "TypeError(str(k))", "KeyError(k)", "OSError(k, 'os')",
                             "ExceptionGroup('inner', [ValueError(-k)])"]
                    self.r.shuffle(items)
                    w(f"excs = [{', '.join(items)}][:k % {len(items)} + 1]")
                    with w.block(f"if k % {self.r.randrange(4, 8)} == 0:"):
                        w("raise ValueError('plain')")
                    w("raise ExceptionGroup('grp', excs)")
                handlers = self.r.sample(["ValueError", "TypeError", "KeyError", "(OSError, KeyError)"], self.r.randrange(1, 4))
                for h in handlers:
                    with w.block(f"except* {h} as g:"):
                        w(f"log.append(({h!r}, [_fmt(e) for e in g.exceptions], str(g)))")
                        if self.chance(0.2):
                            w("raise RuntimeError('from handler')")
            with w.block("except* TypeError as g2:"):
                w("log.append(('outer T', len(g2.exceptions)))")
            with w.block("except* Exception as g3:"):
                w("log.append(('outer', sorted(type(e).__name__ for e in g3.exceptions)))")
            w("return log")
        w()
        self.driver_calls(fn, fn, [("k", I, "pos", None)], loops=self.r.randrange(6, 14), poly=False)

    def unit_match(self):
        w = self.w
        pt = self.fresh("Pt")
        fn = self.fresh("match")
        with w.block(f"class {pt}:"):
            w("__match_args__ = ('x', 'y')")
            with w.block("def __init__(self, x, y):"):
                w("self.x = x")
                w("self.y = y")
        w()
        cases = [
            ("0 | 1 | 2", "'small'"),
            (f"int(n) if n > {self.r.randrange(3, 200)}", "('big', n)"),
            ("int(n)", "('int', n % 7)"),
            ("float() as f", "('float', f)"),
            ("str() as s if len(s) > 2", "s.upper()"),
            ("str(s)", "('str', s)"),
            ("[a, b, *rest]", "('seq', a, b, len(rest))"),
            ("(x,)", "('one', x)"),
            ("[]", "'empty'"),
            ("{'k': kv, **others}", "('map', kv, sorted(others))"),
            ("{'a': 1 | 2 as av}", "('a', av)"),
            (f"{pt}(x=0, y=yy)", "('yaxis', yy)"),
            (f"{pt}(xx, yy) if xx == yy", "('diag', xx)"),
            (f"{pt}(xx, yy)", "('pt', xx, yy)"),
            ("None", "'none'"),
            ("True", "'true'"),
            ("(1 | 2, str() as s2)", "('pair', s2)"),
            ("{'k': [_, *_]}", "'k-seq'"),
        ]
        chosen = self.r.sample(cases, self.r.randrange(4, len(cases)))
        with w.block(f"def {fn}(v):"):
            with w.block("match v:"):
                for pat, res in chosen:
                    with w.block(f"case {pat}:"):
                        w(f"return {res}")
                if self.chance(0.7):
                    with w.block("case _:"):
                        w("return 'other'")
            w("return 'fell through'")
        w()
        vals = ["0", "2", "7", "1000", "-4", "2.5", "'ab'", "'abcdef'", "[1, 2, 3, 4]", "[9]", "(5,)", "[]",
                "{'k': 3, 'z': 4}", "{'a': 2}", "{'a': 3}", f"{pt}(0, 5)", f"{pt}(3, 3)", f"{pt}(1, 2)", "None",
                "True", "(2, 'x')", "{'k': [1, 2]}", "{'k': 'ab'}", "'x'", "b'bytes'", "{1, 2}"]
        self.r.shuffle(vals)
        self.drv(f"_vals = [{', '.join(vals)}]")
        with self.drv.block(f"for _i in range({self.r.randrange(1, 4)}):"):
            with self.drv.block("for _v in _vals:"):
                self.drv(f"_show({fn!r}, {fn}, _v)")

    def unit_async(self):
        w = self.w
        leaf = self.fresh("leaf")
        agen = self.fresh("agen")
        acm = self.fresh("ACM")
        mid = self.fresh("amid")
        with w.block(f"async def {leaf}(x):"):
            w("got = await _Yield(x)")
            with w.block(f"if x % {self.r.randrange(5, 13)} == 3:"):
                w("raise ValueError(x)")
            w(f"return (x * {self.r.randrange(2, 5)} + {self.r.randrange(0, 9)}) % 1000")
        w()
        with w.block(f"async def {agen}(n):"):
            with w.block("for i in range(n % 5):"):
                w("await _Yield(i)")
                w("yield i * i")
        w()
        with w.block(f"class {acm}:"):
            with w.block("async def __aenter__(self):"):
                w("await _Yield('enter')")
                w("_LOG.append('aenter')")
                w("return 7")
            with w.block("async def __aexit__(self, et, ev, tb):"):
                w("_LOG.append(('aexit', et.__name__ if et else None))")
                w(f"return {self.pick(['True', 'False'])}")
        w()
        c = Ctx("async")
        c.await_fn = leaf
        c.ro["n"] = I
        with w.block(f"async def {mid}(n):"):
            w("total = 0")
            with self.using(c):
                c.vars["total"] = I
                self.init_locals(self.r.randrange(1, 3))
                with w.block("for i in range(n % 6):"):
                    c.loop += 1
                    with self.ro_vars([("i", I)]):
                        with w.block("try:"):
                            w(f"total = (total + await {leaf}(i + n)) % 100003")
                        with w.block("except ValueError as e:"):
                            w("total -= 1")
                            w("_LOG.append(_exc(e))")
                        self.block(self.r.randrange(0, 3), 1)
                    c.loop -= 1
                with w.block(f"async with {acm}() as v:"):
                    w("total += v")
                    with w.block(f"if n % {self.r.randrange(2, 6)} == 0:"):
                        w("raise KeyError('in async with')")
                with w.block(f"async for x in {agen}(n):"):
                    w("total += x")
                    self.block(self.r.randrange(0, 2), 0)
                w(f"vals = [x async for x in {agen}(n + 1) if x % 2 == 0]")
                w("total += sum(vals)")
                self.block(self.r.randrange(1, 4), 1)
            w("return total, _LOG[-2:]")
        w()
        drive = self.fresh("adrive")
        with w.block(f"def {drive}(n):"):
            w(f"return _run({mid}(n))")
        w()
        self.driver_calls(drive, drive, [("n", I, "pos", None)], poly=False)
        self.drv(f"_co = {leaf}(3)")
        self.drv("print('send', _fmt(_co.send(None)), _co.cr_frame.f_lineno - _co.cr_code.co_firstlineno, _co.cr_suspended)")
        self.drv("_show('throw', _co.throw, TypeError('t'))")
        self.drv("_co.close()")

    def unit_recursion(self):
        w = self.w
        k = self.r.randrange(4)
        fn = self.fresh("rec")
        if k == 0:
            with w.block(f"def {fn}(n, acc=0):"):
                with w.block(f"if n <= 0:"):
                    w("return acc")
                c = Ctx("func")
                c.ro.update({"n": I, "acc": I})
                with self.using(c):
                    c.allow_calls = False
                    w(f"return {fn}(n - 1, (acc + {self.e_I(1)}) % {self.pick(MODULI)})")
        elif k == 1:
            with w.block(f"def {fn}(n):"):
                w(f"return n if n < 2 else {fn}(n - 1) + {fn}(n - 2)")
        elif k == 2:
            other = self.fresh("rec")
            with w.block(f"def {fn}(n):"):
                w(f"return True if n == 0 else {other}(n - 1)")
            with w.block(f"def {other}(n):"):
                w(f"return False if n == 0 else {fn}(n - 1)")
        else:
            with w.block(f"def {fn}(n):"):
                with w.block("if n <= 0:"):
                    w("yield 0")
                    w("return")
                w("yield n")
                w(f"yield from {fn}(n - 1)")
                w(f"yield from {fn}(n // 2)")
        w()
        if k == 3:
            with self.drv.block(f"for _i in range({self.r.randrange(3, 9)}):"):
                self.drv(f"_show({fn!r}, lambda n: list({fn}(n)), _i)")
        else:
            with self.drv.block(f"for _i in range({self.r.randrange(5, 15)}):"):
                self.drv(f"_show({fn!r}, {fn}, _i)")

    def unit_varargs(self):
        w = self.w
        fn = self.fresh("va")
        with w.block(f"def {fn}(a, /, b=2, *args, key=None, **kw):"):
            w("total = a + b + sum(args)")
            with w.block("for k in sorted(kw):"):
                w(f"total = total * {self.r.randrange(2, 5)} + kw[k]")
            w("return total, len(args), sorted(kw.items()), key")
        w()
        helper = self.fresh("fwd")
        with w.block(f"def {helper}(*args, **kwargs):"):
            w(f"return {fn}(*args, **kwargs)")
        w()
        d = self.drv
        calls = [f"{fn}, 1", f"{fn}, 1, 2, 3, 4", f"{fn}, 1, key='k', z=5", f"{fn}, *[1, 2, 3], **{{'q': 4}}",
                 f"{fn}, 1, a=2", f"{fn}, b=3", f"{fn}, 1, 2, 3, key=1, b=4", f"{helper}, 5, 6, w=1, v=2",
                 f"{helper}, *range(5), key=None", f"{fn}, *(), **{{}}", f"{fn}, 1, **{{'key': 9, 'x': 1}}",
                 f"{helper}, 'a', 'b'", f"{fn}, 1.5, 2, 3.5"]
        self.r.shuffle(calls)
        with d.block(f"for _i in range({self.r.randrange(2, 6)}):"):
            for cl in calls[: self.r.randrange(4, len(calls))]:
                d(f"_show({fn!r}, {cl})")

    def unit_hof(self):
        """Comprehensions, lambdas, higher-order builtins, in a function body."""
        w = self.w
        fn = self.fresh("hof")
        c = Ctx("func")
        c.vars.update({"n": I})
        with w.block(f"def {fn}(n):"):
            with self.using(c):
                self.init_locals(self.r.randrange(2, 5))
                xs = self.fresh("xs")
                c.vars[xs] = L
                w(f"{xs} = [{self.e_I(1)} for {self.fresh('c')} in range(n % 7)]")
                w(f"print({self.fresh('h')!r}, sorted({xs}, key=lambda v: (v % 3, -v)))")
                w(f"print({self.fresh('h')!r}, _fmt({{v: v * v for v in {xs} if v % 2}}))")
                w(f"print({self.fresh('h')!r}, _fmt({{v % 5 for v in {xs}}}))")
                w(f"print({self.fresh('h')!r}, sum(v for v in {xs} if v > n), any(v < 0 for v in {xs}), all({xs}))")
                w(f"print({self.fresh('h')!r}, list(map(lambda a, b: a - b, {xs}, reversed({xs}))))")
                w(f"print({self.fresh('h')!r}, [[i * j for j in range(i)] for i in range(n % 4)])")
                w(f"print({self.fresh('h')!r}, min({xs}, default=None), max({xs} or [0], key=abs))")
                w(f"print({self.fresh('h')!r}, list(zip({xs}, 'abcdef', range(3))), list(enumerate({xs}[:3], 5)))")
                w(f"fs = [lambda v, k=k: v + k for k in range(3)]")
                w(f"print({self.fresh('h')!r}, [f(n) for f in fs])")
                if self.chance(0.5):
                    w("from math import gcd as _gcd")
                    w("import operator")
                    w(f"print({self.fresh('h')!r}, _gcd(n, 12), operator.add(n, 1), operator.itemgetter(0)(({self.e_I(1)},)))")
                if self.chance(0.5):
                    with w.block("class Local:"):
                        w("scale = n")
                        with w.block("def m(self, v):"):
                            w("return v * n + self.scale")
                        with w.block("def __repr__(self):"):
                            w("return f'Local({self.scale})'")
                    w(f"print({self.fresh('h')!r}, Local().m(3), Local(), type(Local()).__qualname__)")
                w(f"y = 5")
                w(f"g = [y for y in range(2)]")
                w(f"print({self.fresh('h')!r}, y, g)")
                self.block(self.r.randrange(2, 6), 2)
                w(f"return {self.e(self.pick([I, L, D, Z]), 2)}")
        w()
        self.driver_calls(fn, fn, [("n", I, "pos", None)])

    def unit_globals(self):
        w = self.w
        g = self.fresh("G")
        self.drv  # noqa
        w(f"{g} = {self.r.randrange(0, 10)}")
        fn = self.fresh("gl")
        with w.block(f"def {fn}(n):"):
            w(f"global {g}")
            with w.block("for i in range(n % 6):"):
                w(f"{g} = ({g} + i * {self.r.randrange(1, 9)}) % {self.pick(MODULI)}")
            w(f"return {g}, 'x' in globals(), {self.pick(['len', 'abs'])}(-{g})")
        w()
        self.driver_calls(fn, fn, [("n", I, "pos", None)], poly=False)
        d = self.drv
        d(f"print({g!r}, {g})")
        d(f"del {g}")
        d(f"_show({fn + '/deleted'!r}, {fn}, 0)")
        d(f"_show({fn + '/deleted2'!r}, {fn}, 3)")
        d(f"print('name', _fmt({g}))")

    def unit_invalidate(self):
        """Specialisations invalidated after the code got hot: builtins shadowed,
        globals rebound, class attributes and methods changed."""
        w = self.w
        fn = self.fresh("inv")
        cls = self.fresh("K")
        helper = self.fresh("hlp")
        with w.block(f"def {helper}(v):"):
            w("return v + 1")
        with w.block(f"class {cls}:"):
            w("attr = 1")
            with w.block("def meth(self, v):"):
                w("return v * 2")
        w()
        with w.block(f"def {fn}(v, o):"):
            w("return (abs(v), len([v, v]), " + helper + "(v), o.attr, o.meth(v), " + cls + ".attr)")
        w()
        d = self.drv
        d(f"_o = {cls}()")
        with d.block(f"for _i in range({self.r.randrange(4, 10)}):"):
            d(f"_show({fn!r}, {fn}, -_i, _o)")
        steps = [
            ("abs = lambda v: 'shadowed'", "del abs"),
            (f"{helper} = lambda v: 'rebound'", None),
            (f"{cls}.attr = 'changed'", None),
            (f"{cls}.meth = lambda self, v: 'patched'", None),
            ("_o.attr = 'instance'", "del _o.attr"),
            ("_o.meth = lambda v: 'inst meth'", "del _o.meth"),
            ("len = lambda x: -1", "del len"),
            (f"_o.__class__ = type('{cls}2', ({cls},), {{'attr': 'sub'}})", None),
        ]
        self.r.shuffle(steps)
        for change, undo in steps[: self.r.randrange(2, 6)]:
            d(change)
            with d.block(f"for _i in range(3):"):
                d(f"_show({fn + '/after'!r}, {fn}, _i, _o)")
            if undo and self.chance(0.5):
                d(undo)
                d(f"_show({fn + '/undone'!r}, {fn}, 2, _o)")

    def unit_module(self):
        """Statements at module level (names are globals there)."""
        c = Ctx("module")
        saved_w = self.w
        self.w = self.drv
        with self.using(c):
            with self.w.block("try:"):
                for _ in range(self.r.randrange(2, 5)):
                    t = self.pick([I, F, S, L, D, Z, T])
                    name = self.fresh("m")
                    self.w(f"{name} = {self.lit(t)}")
                    c.vars[name] = t
                self.block(self.r.randrange(2, 7), 2)
                names = sorted(c.vars)
                self.w(f"print('module', [_fmt(x) for x in ({', '.join(names)},)])")
            with self.w.block("except Exception as _e:"):
                self.w("print('module!', _exc(_e))")
        self.w = saved_w

    def unit_attrs(self):
        """Dynamic attributes, descriptors, __getattr__, __setattr__, __call__, item protocol."""
        w = self.w
        desc = self.fresh("Desc")
        cls = self.fresh("Dyn")
        with w.block(f"class {desc}:"):
            with w.block("def __set_name__(self, owner, name):"):
                w("self.name = '_' + name")
            with w.block("def __get__(self, obj, objtype=None):"):
                with w.block("if obj is None:"):
                    w("return self")
                w("return getattr(obj, self.name, 0) * 10")
            with w.block("def __set__(self, obj, value):"):
                with w.block("if value < 0:"):
                    w("raise ValueError('negative')")
                w("setattr(obj, self.name, value)")
        w()
        with w.block(f"class {cls}:"):
            w(f"d = {desc}()")
            with w.block("def __init__(self):"):
                w("object.__setattr__(self, 'store', {})")
            with w.block("def __getattr__(self, name):"):
                with w.block("if name.startswith('auto'):"):
                    w("return name.upper()")
                w("raise AttributeError(name)")
            with w.block("def __setattr__(self, name, value):"):
                w("_LOG.append(('set', name))")
                w("object.__setattr__(self, name, value)")
            with w.block("def __getitem__(self, k):"):
                w("return ('item', _fmt(k))")
            with w.block("def __setitem__(self, k, v):"):
                w("self.store[repr(k)] = v")
            with w.block("def __delitem__(self, k):"):
                w("del self.store[repr(k)]")
            with w.block("def __call__(self, *a, **k):"):
                w("return len(a), sorted(k)")
        w()
        fn = self.fresh("dyn")
        with w.block(f"def {fn}(n):"):
            w(f"o = {cls}()")
            w("out = [o.auto_x, o[1:n:2], o[n, ...], o(1, 2, z=n)]")
            w("o.d = n")
            w("out.append(o.d)")
            w("o[n] = 'v'")
            w("o[1:2] = 'w'")
            w("out.append(sorted(o.store))")
            w("del o[n]")
            w("out.append(sorted(o.store))")
            w(f"out.append(getattr(o, {self.pick(['\"zzz\"', '\"auto1\"'])}, 'dflt'))")
            w("out.append(hasattr(o, 'nothere'))")
            with w.block(f"if n % {self.r.randrange(2, 5)} == 0:"):
                w("o.d = -1")
            with w.block(f"if n % {self.r.randrange(3, 6)} == 1:"):
                w("out.append(o.nothere)")
            w("out.append(_LOG[-2:])")
            w("return out")
        w()
        self.driver_calls(fn, fn, [("n", I, "pos", None)], poly=False)

    def unit_trace(self):
        """sys.settrace around calls of a small function: the events must agree."""
        w = self.w
        fn = self.fresh("traced")
        c = Ctx("func")
        c.vars["n"] = I
        with w.block(f"def {fn}(n):"):
            with self.using(c):
                self.init_locals(1)
                self.block(self.r.randrange(1, 4), 1)
                w(f"return {self.e_I(1)}")
        w()
        tr = self.fresh("tracer")
        with w.block(f"def {tr}(n):"):
            w("events = []")
            with w.block("def t(frame, event, arg):"):
                with w.block(f"if frame.f_code.co_name == {fn!r} or frame.f_code.co_name.startswith('<'):"):
                    w("events.append((event, frame.f_lineno - frame.f_code.co_firstlineno))")
                w("return t")
            w("sys.settrace(t)")
            with w.block("try:"):
                w(f"r = {fn}(n)")
            with w.block("except Exception as e:"):
                w("r = _exc(e)")
            with w.block("finally:"):
                w("sys.settrace(None)")
            w("return r, events[:60]")
        w()
        with self.drv.block(f"for _i in range({self.r.randrange(2, 5)}):"):
            self.drv(f"_show({fn!r}, {fn}, _i)")
        with self.drv.block(f"for _i in range({self.r.randrange(1, 4)}):"):
            self.drv(f"_show({tr!r}, {tr}, _i)")
        with self.drv.block(f"for _i in range({self.r.randrange(1, 4)}):"):
            self.drv(f"_show({fn + '/after'!r}, {fn}, _i)")

    def unit_finalizers(self):
        """__del__ timing (reference counting) and generator finalisation."""
        w = self.w
        cls = self.fresh("Fin")
        with w.block(f"class {cls}:"):
            with w.block("def __init__(self, tag):"):
                w("self.tag = tag")
            with w.block("def __del__(self):"):
                w("_LOG.append(('del', self.tag))")
        w()
        fn = self.fresh("fin")
        with w.block(f"def {fn}(n):"):
            w("start = len(_LOG)")
            w(f"a = {cls}('a')")
            w(f"b = [{cls}(i) for i in range(n % 3)]")
            w("a = None")
            w("_LOG.append('after a')")
            w("del b")
            w("_LOG.append('after b')")
            w(f"g = (x for x in [{cls}('g')])")
            w("del g")
            with w.block("try:"):
                w(f"t = {cls}('t')")
                w("raise ValueError(t.tag)")
            with w.block("except ValueError:"):
                w("pass")
            w("del t")
            w("return _LOG[start:]")
        w()
        self.driver_calls(fn, fn, [("n", I, "pos", None)], poly=False)

    def unit_strings(self):
        """Formatting: f-strings, format specs, %-formatting, str methods."""
        w = self.w
        fn = self.fresh("fmt")
        c = Ctx("func")
        c.vars.update({"n": I, "s": S, "f": F})
        with w.block(f"def {fn}(n, s, f):"):
            with self.using(c):
                w("out = []")
                for _ in range(self.r.randrange(3, 8)):
                    w(f"out.append({self.e_S(3)})")
                w(f"out.append(f'{{n:>{self.r.randrange(1, 9)}}}|{{s!r:^{self.r.randrange(1, 12)}}}|{{f:.{self.r.randrange(0, 5)}f}}|{{n:#0{self.r.randrange(1, 12)}x}}')")
                w("out.append(f'{n=}, {s=!s}, {f=:.1e}')")
                w("out.append('{0}-{1!r}-{k}'.format(n, s, k=f))")
                w("out.append('%(a)s %(b)05d' % {'a': s, 'b': n})")
                w("out.append(f\"{'nested ' + f'{n:{3}}'}\")")
                w("out.append(s.split(',') + s.rsplit(' ', 1) + s.splitlines())")
                w("return [o[:80] if isinstance(o, str) else o for o in out]")
        w()
        self.driver_calls(fn, fn, [("n", I, "pos", None), ("s", S, "pos", None), ("f", F, "pos", None)])

    def unit_big(self):
        """Functions big enough for EXTENDED_ARG: hundreds of constants and
        locals, long jumps, wide calls and displays."""
        w = self.w
        fn = self.fresh("big")
        nloc = self.r.randrange(150, 300)
        names = [f"b{i}" for i in range(nloc)]
        with w.block(f"def {fn}(n):"):
            for i, name in enumerate(names):
                w(f"{name} = n * {i + 1000} + {self.r.randrange(-10**6, 10**6)}")
            with w.block(f"if n % {self.r.randrange(2, 5)} == 0:"):
                for name in self.r.sample(names, 40):
                    w(f"{name} = ({name} * 3 + {self.r.randrange(1, 10**9)}) % {self.pick(MODULI)}")
            with w.block("else:"):
                w(f"{self.pick(names)} = {len(names)}.5")
            w(f"total = [{', '.join(self.r.sample(names, 45))}]")
            w(f"d = {{{', '.join(repr(x) + ': ' + x for x in self.r.sample(names, 20))}}}")
            w(f"return sum(total) % 1000003, len(d), {names[-1]}, {names[0]}")
        w()
        wide = self.fresh("wide")
        nargs = self.r.randrange(20, 40)
        params = [f"q{i}" for i in range(nargs)]
        with w.block(f"def {wide}({', '.join(params)}, *rest, **kw):"):
            w(f"return ({' + '.join(params)}) % 100003, len(rest), sorted(kw)")
        w()
        self.driver_calls(fn, fn, [("n", I, "pos", None)], poly=False)
        args = ", ".join(str(self.r.randrange(-100, 100)) for _ in range(nargs + self.r.randrange(0, 4)))
        with self.drv.block(f"for _i in range({self.r.randrange(2, 6)}):"):
            self.drv(f"_show({wide!r}, {wide}, {args}, k1=_i, k2=2)")

    def unit_decorator(self):
        """Decorators, closures over the wrapped function, functools.wraps."""
        w = self.w
        deco = self.fresh("deco")
        target = self.fresh("tgt")
        with w.block(f"def {deco}(tag):"):
            with w.block("def wrap(fn):"):
                w("calls = []")
                w("import functools")
                w("@functools.wraps(fn)")
                with w.block("def wrapper(*a, **k):"):
                    w("calls.append(len(a))")
                    with w.block("try:"):
                        w("return (tag, fn(*a, **k), len(calls))")
                    with w.block("finally:"):
                        w("_LOG.append(('wrapped', fn.__name__))")
                w("wrapper.calls = calls")
                w("return wrapper")
            w("return wrap")
        w()
        ps = self.params(self.r.randrange(1, 4))
        c = Ctx("func")
        for pname, t, kind, default in ps:
            c.vars[pname] = t
        w(f"@{deco}({self.lit(S)})")
        with w.block(f"def {target}({self.param_text(ps)}):"):
            with self.using(c):
                self.init_locals(self.r.randrange(1, 3))
                self.block(self.r.randrange(1, 5), 2)
                w(f"return {self.e(self.pick([I, S, L, F]), 2)}")
        w()
        self.driver_calls(target, target, ps)
        self.drv(f"print({target + '/meta'!r}, {target}.__name__, {target}.__wrapped__.__name__, len({target}.calls))")

    POLY_OPS = ["v + v", "v * 2", "v == v", "str(v)[:10]", "bool(v)", "v < v", "-v", "v[0]", "v[-1:]",
                "len(v)", "abs(v)", "v % 3", "v // 2", "v / 2", "hash(v) % 7 if isinstance(v, (int, str)) else 0",
                "v in (1, 'a')", "[v, v][1]", "(v,) * 2", "f'{v}'", "v.real", "v + 1", "1 - v", "v ** 2",
                "v & 1", "v.x", "v.upper()", "not v", "v is None", "{v: 1}", "v << 1"]

    def unit_poly(self):
        """One site, many types: specialisations that fail half-way through a
        hot loop, attribute loads on objects of different shapes."""
        w = self.w
        fn = self.fresh("poly")
        ops = self.r.sample(self.POLY_OPS, self.r.randrange(3, 8))
        classes = []
        for i in range(3):
            cname = self.fresh("Shape")
            classes.append(cname)
            with w.block(f"class {cname}:"):
                if i == 1:
                    w("__slots__ = ('x', 'y')")
                if i == 2:
                    w(f"x = {self.lit(I)}")
                with w.block("def __init__(self, v):"):
                    if i != 2:
                        w("self.x = v")
                    w("self.y = -v")
                with w.block("def __repr__(self):"):
                    w(f"return '{cname}'")
        with w.block(f"def {fn}(items):"):
            w("out = []")
            with w.block("for v in items:"):
                for op in ops:
                    if self.chance(0.8):
                        with w.block("try:"):
                            w(f"out.append({op})")
                        with w.block("except (TypeError, IndexError, KeyError, AttributeError, ZeroDivisionError, OverflowError, ValueError) as e:"):
                            w("out.append(type(e).__name__ + ': ' + _safe_str(e)[:60])")
                    else:
                        w(f"out.append({op})")
            w("return out")
        w()
        homo = self.pick(["[1, 2, 3, _i]", "[1.5, -2.0, _i / 3]", "['ab', 'c', str(_i)]",
                          f"[{classes[0]}(_i), {classes[0]}(2)]", "[(1, 2), (_i,)]"])
        mixed = ["1", "2.5", "'a'", "[1]", "(2,)", "True", "10**30", "-0.0", "None", "{'k': 1}",
                 f"{classes[0]}(1)", f"{classes[1]}(2)", f"{classes[2]}(3)", "b'xy'", "3j", "float('nan')"]
        self.r.shuffle(mixed)
        d = self.drv
        with d.block(f"for _i in range({self.r.randrange(4, 12)}):"):
            d(f"_show({fn!r}, {fn}, {homo})")
        d(f"_show({fn + '/mixed'!r}, {fn}, [{', '.join(mixed[:self.r.randrange(4, len(mixed))])}])")
        with d.block(f"for _i in range({self.r.randrange(1, 5)}):"):
            d(f"_show({fn + '/again'!r}, {fn}, {homo})")
        d(f"_show({fn + '/shapes'!r}, {fn}, [{', '.join(c + '(' + str(k) + ')' for k, c in enumerate(classes * 2))}])")

    UNITS = [("poly", 5), 
        ("plain", 30), ("closure", 6), ("generator", 8), ("class", 7), ("cm", 5), ("exceptions", 7),
        ("except_star", 4), ("match", 5), ("async", 6), ("recursion", 5), ("varargs", 4),
        ("hof", 6), ("globals", 4), ("invalidate", 5), ("module", 7), ("attrs", 4), ("trace", 2),
        ("finalizers", 3), ("strings", 5), ("big", 3), ("decorator", 4),
    ]

    def program(self):
        r = self.r
        # typed module globals, immutable types only (functions may read them)
        gw = Writer()
        for _ in range(r.randrange(1, 5)):
            t = self.pick([I, F, S, T, I])
            name = self.fresh("G")
            gw(f"{name} = {self.lit(t)}")
            self.globals[name] = t
        n_units = r.randrange(4, 9)
        for _ in range(n_units):
            kind = self.wpick(self.UNITS)
            self.units.append(kind)
            getattr(self, "unit_" + kind)()
            if self.chance(0.4):
                # run this unit's driver right away, interleaved with definitions
                self.flush_driver()
        self.flush_driver()
        head = [f"# ember fuzz program: seed={self.seed} gen_version={GEN_VERSION} "
                f"units={','.join(self.units)} chaos={self.chaos}", PROLOGUE, ""]
        tail = ["print('log', len(_LOG), _fmt(_LOG[-5:]))",
                "print('globals', [_fmt(v) for k, v in sorted(globals().items()) if k[:1] == 'G'])"]
        return "\n".join(head) + gw.text() + "\n" + self.w.text() + "\n".join(tail) + "\n"

    def flush_driver(self):
        if self.drv.lines:
            self.w.lines.extend(self.drv.lines)
            self.w()
            self.drv.lines = []


def generate(seed: int) -> tuple[str, dict]:
    g = Gen(seed)
    src = g.program()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compile(src, f"<fuzz {seed}>", "exec")  # a SyntaxError here is a bug in the generator
    return src, {"seed": seed, "units": g.units, "chaos": g.chaos, "gen_version": GEN_VERSION}


if __name__ == "__main__":
    for arg in sys.argv[1:] or ["0"]:
        sys.stdout.write(generate(int(arg))[0])
