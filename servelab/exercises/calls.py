"""Checks of what a call or a function you wrote returns: a tritonclient call's result, a function
whose body you wrote (notebook 4's send_one, notebook 5's classify).

Introduced in notebook 4; the notebooks call these through the table of steps
(exercises.result(config, "5.1"), exercises.function(send_one, "4.4", payload),
servelab/exercises/steps.py), which hands each check what its step needs.

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
from servelab.exercises.key import Needs, Plain
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
    *evidence,
    what: str,
    check=lambda value, *evidence: True,
    hint: str = "",
    noun: str = "the call",
    where: str = "the text above it names the method",
    call: Needs | dict | None = None,
):
    """The result of a call you wrote (e.g. a tritonclient call): stops while blank or while
    check(value, *evidence) is false (or raises); returns the value. Where no node answers the
    call (prepare, review) it comes as written, and `call` (a key.Needs, or {"call.method": name,
    "call.args": [...], "call.keyword.<name>": True}) says what it must name."""
    if blank(value):
        raise not_written(step, noun, what, where)
    if isinstance(value, passes.OfflineCall):  # no node in this pass: the call as written
        if call:
            _written_as(value, call if isinstance(call, Needs) else Plain(step, call), step, what)
        print(f"{step}: your call `{value}` is written; the measure pass sends it ({what}).")
        return value
    ok, hint = _judge(lambda v: check(v, *evidence), value, hint)
    if not ok:
        shown = textwrap.shorten(repr(value), 120, placeholder=" …")
        raise NotYet(f"{step}: {what}: your answer is {shown}; {hint or 'see the text above'}.")
    return value


def call_words(field: str, value, n_gpus: int = 0) -> tuple:
    """A call's method, its arguments or a keyword's presence, in one spelling."""
    if isinstance(value, (list, tuple)):
        return tuple(repr(v) for v in value)
    return (str(value),)


def _written_as(call: passes.OfflineCall, needs: Needs, step: str, what: str) -> None:
    """A call as written (client.method('a model', keyword=...)) names the method,
    the arguments and the keywords the step needs."""
    try:
        node = ast.parse(str(call), mode="eval").body
    except SyntaxError:
        return  # an argument whose repr is no Python: the measure pass judges what it returns
    said = f"{step}: {what}: your call"
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        raise NotYet(f"{said} is `{call}`, not a method of the client called with arguments.")
    if not needs.meets("call.method", (node.func.attr,), call_words):
        raise NotYet(f"{said} uses `{node.func.attr}`; the text above names the method to use.")
    given = [ast.literal_eval(a) if isinstance(a, ast.Constant) else None for a in node.args]
    named = [k.arg for k in node.keywords if k.arg]
    if "model_name" in named:  # tritonclient's own name for the first argument
        given[:0] = [ast.literal_eval(k.value) for k in node.keywords if k.arg == "model_name"]
    if not needs.meets("call.args", call_words("call.args", given), call_words):
        raise NotYet(f"{said} asks for {given}, not for the model the step names.")
    keywords = [f"call.keyword.{k}" for k in named]
    if len(needs.fields(["call.method", "call.args", *keywords])) < needs.count:
        raise NotYet(f"{said} lacks a keyword the step needs: the text above says what it carries.")


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
    *evidence,
    what: str,
    run=None,
    where: str = "its docstring says what it returns",
    offline: bool = False,
    args: tuple = (),
    check=lambda returned: True,
    hint: str = "",
):
    """A function whose body you wrote: stops while the body is `...`, when calling it raises, or
    while what it returned is not what the step needs; returns what the step made of it (None in
    the prepare pass when calling it needs the node: that pass checks the body only). `run(fn,
    *evidence)`: how the step calls it and judges what came back (raising NotYet or Wrong);
    without one, fn(*args) judged by check. `offline`: the step needs no node to call it."""
    name = getattr(fn, "__name__", "the function")
    if run is None:
        run = lambda f, *_: check_returned(f(*args), check, hint)  # noqa: E731
    if blank(fn) or _body_is_blank(fn):
        raise not_written(step, f"the body of {name}()", what, where)
    called = lambda f: run(f, *evidence)  # noqa: E731
    if offline:  # it needs no node: called and checked in every pass
        made = _called(fn, name, step, what, called, where)
        print(f"{step}: {name}() gives what the step needs ({what}).")
        return made
    if passes.current() == passes.PREPARE:
        print(f"{step}: {name}() is written; the measure pass calls it and checks what it returns.")
        return None
    checked = lambda: _called(fn, name, step, what, called, where)  # noqa: E731
    return passes.on_node(f"{step} {name}()", "value", checked)


def check_returned(returned, check, hint: str):
    """What a function returned, if check(returned) holds; Wrong with the hint otherwise."""
    ok, said = _judge(check, returned, hint)
    if not ok:
        shown = textwrap.shorten(repr(returned), 120, placeholder=" …")
        raise Wrong(f"returned {shown}; {said}" if said else f"returned {shown}")
    return returned


def _called(fn, name: str, step: str, what: str, run, where: str):
    """run(fn): what the step made of your function, or NotYet saying what is wrong."""
    try:
        return run(fn)
    except NotYet:
        raise
    except Wrong as exc:
        raise NotYet(f"{step}: {what}: {name}() {exc}.") from None
    except Exception as exc:
        raise NotYet(
            f"{step}: {name}() stopped with {type(exc).__name__}: {exc} (fix it in the cell above)."
        ) from None
