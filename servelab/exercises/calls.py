"""Checks of what a call or a function you wrote returns: a tritonclient call's result, a function
whose body you wrote (notebook 4's send_one, notebook 5's classify).

Introduced in notebook 4; the notebooks call these as exercises.result and exercises.function.

Both need the node to run what you wrote. Where it is not (the prepare and review passes), a
call comes as written (passes.OfflineCall) and a function's body is checked to be written; each
says that the measure pass sends it, and what the measure pass found is read back in review.
"""

from __future__ import annotations

import ast
import inspect
import textwrap

from servelab import passes
from servelab.exercises.answers import NotYet, blank, not_written
from servelab.exercises.step_needs import Wrong


def _judge(check, value, hint: str) -> tuple[bool, str]:
    """(does check(value) hold, the hint to give if not)."""
    try:
        return bool(check(value)), hint
    except Wrong as exc:
        return False, str(exc)
    except Exception as exc:  # the student's value, shaped otherwise than the step expects
        return False, hint or f"reading it failed with {type(exc).__name__}: {exc}"


def result(
    value,
    step: str,
    what: str,
    check=lambda value: True,
    hint: str = "",
    noun: str = "the call",
    where: str = "the text above it names the method",
):
    """The result of a call you wrote (e.g. a tritonclient call): stops while blank or while
    check(value) is false (or raises); returns the value."""
    if blank(value):
        raise not_written(step, noun, what, where)
    if isinstance(value, passes.OfflineCall):  # no node in this pass: the call as written
        print(f"{step}: your call `{value}` is written; the measure pass sends it ({what}).")
        return value
    ok, hint = _judge(check, value, hint)
    if not ok:
        shown = textwrap.shorten(repr(value), 120, placeholder=" …")
        raise NotYet(f"{step}: {what}: your answer is {shown}; {hint or 'see the text above'}.")
    return value


def _body_is_blank(fn) -> bool:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return False
    # the def itself: a script runner's cell source can put other statements first
    defs = [
        node
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.name == getattr(fn, "__name__", None)
    ]
    if not defs:
        return False
    body = defs[0].body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        if isinstance(body[0].value.value, str):
            body = body[1:]  # the docstring
    return (
        len(body) == 1
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and body[0].value.value is Ellipsis
    )


def function(
    fn,
    step: str,
    what: str,
    args: tuple = (),
    check=lambda returned: True,
    hint: str = "",
    where: str = "its docstring says what it returns",
):
    """A function whose body you wrote: stops while the body is `...`, when calling it with
    `args` raises, or while check(what it returned) is false; returns what it returned (None in
    the prepare pass, which checks the body only: calling it needs the node)."""
    name = getattr(fn, "__name__", "the function")
    if blank(fn) or _body_is_blank(fn):
        raise not_written(step, f"the body of {name}()", what, where)
    if passes.current() == passes.PREPARE:
        print(f"{step}: {name}() is written; the measure pass calls it and checks what it returns.")
        return None
    checked = lambda: _called(fn, name, step, what, args, check, hint, where)  # noqa: E731
    return passes.on_node(f"{step} {name}()", "value", checked)


def _called(fn, name: str, step: str, what: str, args: tuple, check, hint: str, where: str):
    """fn(*args), checked: what it returned, or NotYet saying what is wrong."""
    try:
        returned = fn(*args)
    except Exception as exc:
        raise NotYet(
            f"{step}: {name}() stopped with {type(exc).__name__}: {exc} (fix it in the cell above)."
        ) from None
    ok, hint = _judge(check, returned, hint)
    if not ok:
        shown = textwrap.shorten(repr(returned), 120, placeholder=" …")
        raise NotYet(f"{step}: {what}: {name}() returned {shown}; {hint or where}.")
    return returned
