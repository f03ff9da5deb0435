"""Making a compiled student policy stoppable and as strict as Python: a rewrite of its source.

A numba-compiled function runs as machine code: Ctrl-C (SIGINT, Jupyter's "Interrupt kernel") only
sets a flag that Python reads between bytecodes, so ``while True: pass`` in a compiled policy would
run forever. Before compiling, :func:`instrument` rewrites the policy's source (``ast``):

* at the start of the function and of every ``for`` / ``while`` body it inserts a check of a stop
  flag (one atomic load of an int64, a few ns: nothing next to the ~1–4 µs a call costs). The
  simulator runs a compiled policy's kernel in a worker thread and waits for it in short,
  interruptible waits; on Ctrl-C it raises the flag, the policy raises :class:`PolicyInterrupted`
  at its next check, the kernel unwinds and the caller gets a ``KeyboardInterrupt`` naming the
  request (:meth:`.student_policy.StudentPolicy.run_kernel`). Nothing keeps spinning.
* ``int(x)``, ``round(x)``, ``math.floor / ceil / trunc(x)`` of a NaN or infinite float raise the
  ``ValueError`` / ``OverflowError`` Python raises (numba would silently return an arbitrary
  integer), so both engines reject the same returns with the same error.

A policy whose source cannot be read (defined by ``exec``, or a lambda sharing its line with another
lambda) is compiled unchanged only if its bytecode has no loop, calls no other compiled function
and converts nothing to int; else it runs as plain Python (interruptible, exact), with a warning.
"""
from __future__ import annotations

import ast
import dis
import inspect
import math
import textwrap
import types as pytypes

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core.dispatcher import Dispatcher
from numba.extending import intrinsic, overload

__all__ = ["PolicyInterrupted", "instrument", "uninstrumented_risk", "new_stop_flag"]


class PolicyInterrupted(Exception):
    """Raised inside a compiled policy when its stop flag is set (Ctrl-C during a run)."""


@intrinsic
def _load_acquire(typingctx, addr):
    """The int64 at address ``addr``, read atomically (never hoisted out of a loop by LLVM)."""
    if not isinstance(addr, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        ptr = builder.inttoptr(args[0], ir.IntType(64).as_pointer())
        return builder.load_atomic(ptr, "acquire", 8)

    return types.int64(addr), codegen


def new_stop_flag():
    """``(flag, check)``: a 1-element int64 array and a compiled ``check()`` that raises
    :class:`PolicyInterrupted` once ``flag[0] != 0`` (the array must outlive the policy)."""
    flag = np.zeros(1, dtype=np.int64)
    addr = flag.ctypes.data

    @njit(inline="always")
    def check():
        if _load_acquire(addr) != 0:
            raise PolicyInterrupted("stopped by its stop flag")

    return flag, check


# ---------------------------------------------------------------- conversions as strict as Python's
def _float_to_int_checks(x):
    """What Python raises converting a float with no integer value (numba returns garbage)."""
    if math.isnan(x):
        raise ValueError("cannot convert float NaN to integer")
    if math.isinf(x):
        raise OverflowError("cannot convert float infinity to integer")


def checked_int(x):
    return int(x)


def checked_round(x):
    return round(x)


def checked_floor(x):
    return math.floor(x)


def checked_ceil(x):
    return math.ceil(x)


def checked_trunc(x):
    return math.trunc(x)


_check_float = njit(inline="always")(_float_to_int_checks)


def _overload_conversion(stub, convert):
    @overload(stub)
    def _ov(x):
        if isinstance(x, types.Float):
            def impl(x):
                _check_float(x)
                return convert(x)
            return impl
        return lambda x: convert(x)


_overload_conversion(checked_int, njit(inline="always")(lambda x: int(x)))
_overload_conversion(checked_round, njit(inline="always")(lambda x: round(x)))
_overload_conversion(checked_floor, njit(inline="always")(lambda x: math.floor(x)))
_overload_conversion(checked_ceil, njit(inline="always")(lambda x: math.ceil(x)))
_overload_conversion(checked_trunc, njit(inline="always")(lambda x: math.trunc(x)))

_BUILTIN_CONVERSIONS = {"int": "checked_int", "round": "checked_round"}
_MATH_CONVERSIONS = {"floor": "checked_floor", "ceil": "checked_ceil", "trunc": "checked_trunc"}
_PREFIX = "__mooncake_guard_"


# ---------------------------------------------------------------- the rewrite
_INT64 = (-2**63, 2**63 - 1)
_FOLD = {ast.Pow: lambda a, b: a ** b if 0 <= b <= 4096 else None, ast.Mult: lambda a, b: a * b,
         ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
         ast.LShift: lambda a, b: a << b if 0 <= b <= 4096 else None}


def _int_constant(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _int_constant(node.operand)
        return None if v is None else -v
    if isinstance(node, ast.BinOp) and type(node.op) in _FOLD:
        a, b = _int_constant(node.left), _int_constant(node.right)
        return None if a is None or b is None else _FOLD[type(node.op)](a, b)
    return None


class _Rewrite(ast.NodeTransformer):
    def __init__(self, fn_globals):
        self.g = fn_globals
        self.big = None  # an integer expression of constants beyond int64 (numba would wrap it)

    def visit_BinOp(self, node):
        self.generic_visit(node)
        v = _int_constant(node)
        if v is not None and not _INT64[0] <= v <= _INT64[1] and self.big is None:
            self.big = v
        return node

    def _check(self):
        return ast.Expr(ast.Call(ast.Name(_PREFIX + "check", ast.Load()), [], []))

    def _loop(self, node):
        self.generic_visit(node)
        node.body.insert(0, self._check())
        return node

    visit_For = visit_While = _loop

    def visit_Call(self, node):
        self.generic_visit(node)
        if len(node.args) != 1 or node.keywords:
            return node
        f = node.func
        if isinstance(f, ast.Name) and f.id in _BUILTIN_CONVERSIONS and f.id not in self.g:
            node.func = ast.Name(_PREFIX + _BUILTIN_CONVERSIONS[f.id], ast.Load())
        elif (isinstance(f, ast.Attribute) and f.attr in _MATH_CONVERSIONS and isinstance(f.value, ast.Name)
              and self.g.get(f.value.id) is math):
            node.func = ast.Name(_PREFIX + _MATH_CONVERSIONS[f.attr], ast.Load())
        return node


def _function_node(py):
    """``(def node, first source line)`` of ``py`` from its source (a lambda becomes a ``def``), or None."""
    try:
        lines, start = inspect.getsourcelines(py)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    code = py.__code__
    first = code.co_firstlineno - start + 1  # line of the def (or its first decorator) in the source
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == py.__name__ and (
                node.decorator_list and node.decorator_list[0].lineno == first or node.lineno == first):
            found.append(node)
        elif isinstance(node, ast.Lambda) and py.__name__ == "<lambda>" and node.lineno == first:
            found.append(node)
    if len(found) != 1:
        return None
    node = found[0]
    if isinstance(node, ast.Lambda):
        node = ast.FunctionDef(name=_PREFIX + "lambda", args=node.args, body=[ast.Return(node.body)],
                               decorator_list=[], returns=None, type_comment=None, lineno=node.lineno,
                               col_offset=node.col_offset)
    node.decorator_list = []
    node.lineno = first
    if [a.arg for a in node.args.args] != list(code.co_varnames[:code.co_argcount]):
        return None
    return node, start


def instrument(py, check, _seen=None):
    """A copy of the plain function ``py`` with stop checks and strict conversions (module doc), or
    None when its source cannot be read. The ``@njit`` functions it calls are rewritten the same way
    (when their source can be read)."""
    found = _function_node(py)
    if found is None:
        return None
    node, start = found
    seen = {} if _seen is None else _seen
    seen[py] = None  # recursion: a function calling itself keeps its own (rewritten) name
    rw = _Rewrite(py.__globals__)
    node = rw.visit(node)
    doc = 1 if (node.body and isinstance(node.body[0], ast.Expr)
                and isinstance(getattr(node.body[0], "value", None), ast.Constant)
                and isinstance(node.body[0].value.value, str)) else 0
    node.body.insert(doc, rw._check())
    free = py.__code__.co_freevars
    if free:  # rebuild the closure: an outer function taking the cells' current values
        outer = ast.FunctionDef(name=_PREFIX + "outer", args=ast.arguments(
            posonlyargs=[], args=[ast.arg(v) for v in free], vararg=None, kwonlyargs=[], kw_defaults=[],
            kwarg=None, defaults=[]), body=[node, ast.Return(ast.Name(node.name, ast.Load()))],
            decorator_list=[], returns=None, type_comment=None, lineno=node.lineno, col_offset=0)
        module = ast.Module([outer], type_ignores=[])
    else:
        module = ast.Module([node], type_ignores=[])
    ast.fix_missing_locations(module)
    ast.increment_lineno(module, start - 1)
    g = dict(py.__globals__)  # numba freezes the globals it reads anyway: a snapshot is the same
    g[_PREFIX + "check"] = check
    for code in _codes(py.__code__):  # compiled helpers: their loops get the checks too
        for name in code.co_names:
            d = g.get(name)
            if isinstance(d, Dispatcher) and getattr(d, "py_func", None) is not None:
                if d.py_func not in seen:
                    helper = instrument(d.py_func, check, seen)
                    seen[d.py_func] = None if helper is None else njit(helper)
                if seen[d.py_func] is not None:
                    g[name] = seen[d.py_func]
    for name in (*_BUILTIN_CONVERSIONS.values(), *_MATH_CONVERSIONS.values()):
        g[_PREFIX + name] = globals()[name]
    try:
        code = compile(module, py.__code__.co_filename, "exec")
        exec(code, g)  # noqa: S102 - the student's own function, rewritten
    except Exception:  # noqa: BLE001 - a rewrite that does not compile: treat as unreadable
        return None
    if free:
        cells = []
        for cell in py.__closure__:
            try:
                cells.append(cell.cell_contents)
            except ValueError:  # an empty cell: numba could not use it either
                return None
        fn = g[_PREFIX + "outer"](*cells)
    else:
        fn = g[node.name]
    fn.__defaults__, fn.__kwdefaults__ = py.__defaults__, py.__kwdefaults__
    fn.__name__, fn.__qualname__, fn.__doc__ = py.__name__, py.__qualname__, py.__doc__
    fn._mooncake_big_integer = rw.big
    return fn


def _codes(code):
    yield code
    for c in code.co_consts:
        if isinstance(c, pytypes.CodeType):
            yield from _codes(c)


def uninstrumented_risk(py) -> str:
    """Why ``py`` cannot be compiled without the rewrite (it could loop forever, call compiled code
    that might, or convert a float to int); "" if it is straight-line code."""
    for code in _codes(py.__code__):
        if code is not py.__code__:
            return "it defines a nested function or comprehension"
        for ins in dis.get_instructions(code):
            if ins.opname.startswith("JUMP_BACKWARD") or (
                    ins.opname == "JUMP_ABSOLUTE" and ins.argval is not None and ins.argval < ins.offset):
                return "it has a loop"
        names = set(code.co_names)
        if names & {"int", "round", "floor", "ceil", "trunc"}:
            return "it converts numbers to int"
        for name in names:
            if isinstance(py.__globals__.get(name), Dispatcher):
                return f"it calls the compiled function {name!r}"
    return ""
