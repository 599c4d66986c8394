"""Differential tests: generators, coroutines, exceptions and tracebacks.

Each snippet runs under stock CPython and under every Ember configuration
(difftest.check); output, tracebacks and exit codes must be identical.
"""

from difftest import check


def test_generators_send_throw_close():
    out = check("""
        def counter(start):
            n = start
            while True:
                try:
                    got = yield n
                except ValueError as e:
                    print("counter caught", e)
                    got = -1
                except GeneratorExit:
                    print("counter closing at", n)
                    raise
                finally:
                    n += 1
                if got is not None:
                    n += got

        g = counter(10)
        print(next(g), g.send(5), g.throw(ValueError("bad")), next(g))
        g.close()
        print(g.gi_frame, g.gi_running)
        try:
            next(g)
        except StopIteration:
            print("exhausted")

        def leaky():
            try:
                yield 1
            except GeneratorExit:
                yield 2

        h = leaky()
        next(h)
        try:
            h.close()
        except RuntimeError as e:
            print("RuntimeError:", e)

        def returns():
            x = yield 1
            return x * 2

        r = returns()
        next(r)
        try:
            r.send(21)
        except StopIteration as e:
            print("returned", e.value)

        def boom():
            yield 1
            raise KeyError("inside generator")

        try:
            list(boom())
        except KeyError as e:
            import traceback
            traceback.print_exc()
    """)
    assert "10 16 16 17" in out.stdout and "counter caught bad" in out.stdout
    assert "returned 42" in out.stdout and "generator ignored GeneratorExit" in out.stdout
    assert "in boom" in out.stderr and "KeyError: 'inside generator'" in out.stderr


def test_yield_from_delegation():
    out = check("""
        def inner():
            total = 0
            while True:
                try:
                    x = yield total
                except ZeroDivisionError:
                    print("inner handles ZeroDivisionError")
                    continue
                if x is None:
                    return total
                total += x

        def outer():
            result = yield from inner()
            print("inner returned", result)
            yield from range(3)
            return "done"

        g = outer()
        next(g)
        for v in (1, 2, 3):
            print("sent", v, "->", g.send(v))
        print(g.throw(ZeroDivisionError))
        print(g.send(None), list(g))

        def chain(*its):
            for it in its:
                yield from it

        print(list(chain("ab", [1, 2], (x * x for x in range(4)))))

        def failing():
            yield from inner()

        f = failing()
        next(f)
        try:
            f.throw(OSError("from outside"))
        except OSError:
            import traceback
            traceback.print_exc()
    """)
    assert "inner returned 6" in out.stdout
    assert "['a', 'b', 1, 2, 0, 1, 4, 9]" in out.stdout
    assert "OSError: from outside" in out.stderr


def test_coroutines_and_async_generators():
    out = check("""
        import asyncio

        async def ticker(n):
            for i in range(n):
                await asyncio.sleep(0)
                yield i

        async def square(x):
            await asyncio.sleep(0)
            return x * x

        async def failing(x):
            await asyncio.sleep(0)
            raise ValueError(f"failing({x})")

        async def closer():
            try:
                yield 1
                yield 2
            finally:
                print("async generator finalised")

        async def main():
            print([i async for i in ticker(4)])
            print(await asyncio.gather(*(square(i) for i in range(5))))
            results = await asyncio.gather(square(3), failing(1), return_exceptions=True)
            print(results)
            agen = closer()
            print(await agen.__anext__())
            await agen.aclose()
            try:
                async with asyncio.TaskGroup() as tg:
                    tg.create_task(failing(2))
                    tg.create_task(square(2))
            except* ValueError as eg:
                print("task group:", [str(e) for e in eg.exceptions])
            task = asyncio.create_task(asyncio.sleep(10))
            await asyncio.sleep(0)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                print("cancelled", task.cancelled())
            await failing(3)

        def drive_by_hand():
            coro = square(7)
            try:
                coro.send(None)
                coro.send(None)
            except StopIteration as e:
                print("by hand", e.value)

        drive_by_hand()
        asyncio.run(main())
    """, returncode=1)
    assert "[0, 1, 4, 9, 16]" in out.stdout and "by hand 49" in out.stdout
    assert "task group: ['failing(2)']" in out.stdout
    assert "ValueError: failing(3)" in out.stderr


def test_nested_and_chained_exceptions():
    out = check("""
        import traceback

        class AppError(Exception):
            pass

        def parse(text):
            return int(text)

        def load(text):
            try:
                return parse(text)
            except ValueError as e:
                raise AppError(f"cannot load {text!r}") from e

        def implicit():
            try:
                {}["missing"]
            except KeyError:
                1 / 0

        def suppressed():
            try:
                parse("x")
            except ValueError:
                raise AppError("no context") from None

        for f, arg in ((load, "12"), (load, "x"), (implicit, None), (suppressed, None)):
            try:
                print(f(arg) if arg else f())
            except Exception:
                traceback.print_exc()

        def finally_order():
            log = []
            try:
                try:
                    log.append("body")
                    raise RuntimeError("r")
                finally:
                    log.append("inner finally")
            except RuntimeError:
                log.append("handler")
                return log
            finally:
                log.append("outer finally")

        print(finally_order())

        def finally_overrides():
            try:
                return "try"
            finally:
                return "finally"

        print(finally_overrides())

        class Resource:
            def __init__(self, name, swallow=False):
                self.name, self.swallow = name, swallow
            def __enter__(self):
                print("enter", self.name)
                return self
            def __exit__(self, tp, val, tb):
                print("exit", self.name, tp.__name__ if tp else None)
                return self.swallow

        with Resource("a"), Resource("b", swallow=True):
            raise LookupError("swallowed by b")
        try:
            with Resource("c"):
                parse("y")
        except ValueError as e:
            print("escaped with", e)

        def groups():
            try:
                raise ExceptionGroup("many", [ValueError(1), TypeError(2),
                                              ExceptionGroup("inner", [ValueError(3), OSError(4)])])
            except* ValueError as eg:
                print("values", eg.exceptions)
            except* TypeError as eg:
                print("types", eg.exceptions)

        try:
            groups()
        except ExceptionGroup:
            traceback.print_exc()

        print(load("x").__class__)
    """, returncode=1)
    assert "The above exception was the direct cause" in out.stderr
    assert "During handling of the above exception" in out.stderr
    assert "['body', 'inner finally', 'handler', 'outer finally']" in out.stdout
    assert "exit b LookupError" in out.stdout and "escaped with" in out.stdout
    assert "OSError(4)" in out.stderr
    assert out.stderr.rstrip().endswith("AppError: cannot load 'x'")


def test_uncaught_exception_traceback_and_exit_code():
    out = check("""
        def level3(x):
            return x["key"]

        def level2(x):
            return [level3(v) for v in x]

        def level1():
            return level2([{"key": 1}, {}])

        level1()
    """, returncode=1)
    assert "KeyError: 'key'" in out.stderr and "in level3" in out.stderr


def test_memory_error_while_unwinding_compiled_frame():
    # Making the frame object for the traceback fails too: CPython's
    # interpreter then raises that MemoryError; tier 1 must not lose it
    # (it once asserted on a NULL exception in ember_unwind).
    out = check("""
        import _testcapi

        def replace_oom(s1, s2, s3):
            try:
                _testcapi.set_nomemory(0, 0)
                try:
                    s1.replace(s2, s3)
                finally:
                    _testcapi.remove_mem_hooks()
            except MemoryError:
                return "MemoryError"
            return "no error"

        for i in range(3):
            print(replace_oom("\\u8f58" * 4, "&", "&amp;"))
    """)
    assert out.stdout.count("MemoryError") == 3


def test_handoff_at_instruction_with_extended_arg():
    # A loop so long that FOR_ITER's oparg needs an EXTENDED_ARG prefix.
    # When compiled code hands the frame to the interpreter at FOR_ITER (its
    # adaptive counter triggers on the second execution), the interpreter
    # must start at the prefix; from FOR_ITER itself it would read a
    # truncated oparg ("Fatal Python error: Executing a cache").
    body = "\n".join(f"        t = t + x * {i}" for i in range(120))
    out = check(f"""
import dis

def long_loop(xs):
    t = 0
    for x in xs:
{body}
    return t

ops = [i.opname for i in dis.get_instructions(long_loop)]
print("EXTENDED_ARG before FOR_ITER:", ops[ops.index("FOR_ITER") - 1] == "EXTENDED_ARG")
for n in range(4):
    print(long_loop(list(range(n))))
""")
    assert "EXTENDED_ARG before FOR_ITER: True" in out.stdout
