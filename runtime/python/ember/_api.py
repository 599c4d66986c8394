"""Ember's per-function calls: pin, unpin, tier_of, is_compiled and dis.

Imported at the first use of one of them (``ember.__getattr__``), not with
the package: every EMBER=1 process imports the package at start-up, and
most never ask about a function.
"""

import sys

from . import _ember
from . import MAX_AVAILABLE_TIER


def _code_of(func, what: str):
    # Imported here: `types` is a module many programs never import.
    import types

    if isinstance(func, types.CodeType):
        return func
    if isinstance(func, (staticmethod, classmethod, types.MethodType)):
        func = func.__func__
    if isinstance(func, types.FunctionType):
        return func.__code__
    kind = type(func).__name__
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None)
    shown = f"{kind} {name!r}" if name else kind
    if isinstance(func, (types.BuiltinFunctionType, types.WrapperDescriptorType,
                         types.MethodDescriptorType, types.MethodWrapperType)):
        raise TypeError(f"{what} needs a Python function; {shown} is implemented in C "
                        "and is never compiled")
    raise TypeError(f"{what} needs a Python function, method or code object, not {shown}")


def _check_tier(tier, what: str) -> int:
    if isinstance(tier, bool) or not isinstance(tier, int):
        raise TypeError(f"{what}: tier must be an int (0, 1 or 2), not {type(tier).__name__}")
    if tier not in (0, 1, 2):
        raise ValueError(f"{what}: tier must be 0 (interpreter), 1 (baseline) or 2 "
                         f"(optimising), not {tier}")
    if tier > MAX_AVAILABLE_TIER:
        raise ValueError(f"{what}: tier {tier} is not available in this build of Ember "
                         f"(highest available: {MAX_AVAILABLE_TIER})")
    return tier


_MISSING = object()


def pin(func=_MISSING, tier=_MISSING):
    """Pin a function to a tier: ``pin(func, 0)`` keeps it in the interpreter.

    As a decorator: ``@ember.pin(tier=0)`` or ``@ember.pin(0)``. Accepts
    functions, methods, static/class methods and code objects; returns the
    function. The pin holds until ``unpin(func)``.
    """
    if func is _MISSING and tier is _MISSING:
        raise TypeError("pin() needs a tier: pin(func, tier) or @pin(tier=...)")
    if tier is _MISSING and isinstance(func, int) and not isinstance(func, bool):
        func, tier = _MISSING, func
    if func is _MISSING:
        _check_tier(tier, "pin()")

        def decorator(f):
            return pin(f, tier)

        return decorator
    if tier is _MISSING:
        raise TypeError("pin() needs a tier: pin(func, tier)")
    code = _code_of(func, "pin()")
    _ember._pin(code, _check_tier(tier, "pin()"))
    return func


def unpin(func) -> None:
    """Remove a pin set by pin(); the function follows the automatic policy again."""
    _ember._unpin(_code_of(func, "unpin()"))


def tier_of(func) -> int:
    """The tier the function's code runs at now (0: the interpreter)."""
    return _ember._code_info(_code_of(func, "tier_of()"))[0]


def is_compiled(func) -> bool:
    """True when the function's code has compiled code it runs in (tier 1 or 2)."""
    return _ember._code_info(_code_of(func, "is_compiled()"))[0] > 0


def dis(func, file=None) -> None:
    """Print the function's tier-1 machine code, each stencil under the
    bytecode instruction it implements (offsets as the `dis` module shows),
    then the stencils' rarely taken paths, each under its instruction."""
    import dis as _dis

    code = _code_of(func, "dis()")
    out = sys.stdout if file is None else file
    blocks = _ember._tier1_disassemble(code)
    if blocks is None:
        print(f"{code.co_qualname} has no compiled code (tier {tier_of(code)})", file=out)
        return
    instrs = {i.offset: i for i in _dis.get_instructions(code, adaptive=True)}
    size = sum(len(raw) for _, _, lines in blocks for _, raw, _ in lines)
    print(f"tier-1 code of {code.co_qualname} ({code.co_filename}:{code.co_firstlineno}), "
          f"{size} bytes", file=out)
    def what(index):
        ins = instrs.get(2 * index)
        return f"{ins.opname} {ins.argrepr}".rstrip() if ins else "?"

    for index, stencil, lines in blocks:
        if isinstance(index, tuple):
            at = index[1]
            if at is None:
                print(f"\n        shared exit    [cold part of {stencil}]", file=out)
            else:
                print(f"\n  {2 * at:>5} {what(at)}    [cold part of {stencil}]", file=out)
        elif index == "exits":
            print(f"\n  shared exits: {stencil}", file=out)
        elif index == "cold":
            print(f"\n  cold paths: {stencil}", file=out)
        else:
            print(f"\n  {2 * index:>5} {what(index)}    [stencil {stencil}]", file=out)
        for addr, raw, text in lines:
            print(f"    {addr:#x}  {raw.hex(' '):<30} {text}", file=out)

