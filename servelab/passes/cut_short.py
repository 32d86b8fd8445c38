"""The review of a bundle cut short: the lease ended in the middle of a notebook's measure pass,
so its bundle holds the steps measured before, and not the rest.

Introduced in notebook 3 (passes.start turns it on in the review pass when the bundle is cut).

Every step the bundle holds is reviewed as from a whole bundle: its tables, verdicts and
decisions. A cell that asks the bundle for a run it does not hold prints one line, "(not measured:
...)", and Run All goes on; from there on the cells that stand in for the node in the prepare pass
(`%%runs_in prepare`: the class's two GPUs, the rates) run too, so the checks of your later lines
still work, and a cell that needs a result of a step not measured says so in one line instead of
stopping. The first cell says that the bundle is cut short and where; the last one names every
step not measured, and why that matters: their verdicts and decisions are not in this review nor
in your hand-in.

How a cell goes on: while this is on, IPython runs each cell inside a guard (an AST transformer:
the cell's statements in `try`, its last expression still shown), which turns NotMeasured, and
after the first of them a NameError, into that one line.
"""

from __future__ import annotations

import ast
import re

from servelab.passes.choice import Stop

STEP = re.compile(r"(?<![\w.])(\d+\.\d+[a-z]?)(?![\w.])")  # 6.4, 6.3g: a step of the notebook
# while a cut-short bundle is reviewed: its notebook's number, the steps found not measured, in
# order, and the cell running
STATE: dict = {"on": False, "cut": False, "number": "", "steps": [], "cell": ""}


class NotMeasured(Stop):
    """A run or reading the bundle does not hold, in a review of a bundle cut short."""

    def __init__(self, key: str, why: str):
        super().__init__(f"(not measured: {key}: {why})")
        self.key = key


def begin(bundle, notebook: str) -> None:
    """The review of `bundle` starts, cut short: say so, and guard every cell from here on."""
    number = notebook.split("_", 1)[0].lstrip("0")
    STATE.update(on=True, cut=False, number=number, steps=[], cell="")
    entries = list(bundle.manifest.get("entries", {}))
    last = f"its last entry: {entries[-1]!r}" if entries else "it holds no run"
    when = bundle.manifest.get("updated", "")
    print(
        f"{notebook}: this bundle's measure pass stopped before the notebook's end ({last}"
        f"{', at ' + when if when else ''}). The review shows every step it holds; a cell that "
        "needs a step it does not hold says so in one line, and the last cell lists them."
    )
    for key in bundle.left_out:
        print(f"(left out: {key!r}: the manifest puts its files outside the bundle)")
    _install()


def end() -> None:
    STATE.update(on=False, cut=False, steps=[], cell="")
    _uninstall()


def after_cut() -> bool:
    """Has this review met a step the bundle does not hold (the prepare pass's stand-ins run)?"""
    return STATE["on"] and STATE["cut"]


def not_measured(key: str, why: str) -> NotMeasured:
    return NotMeasured(key, why)


def steps_not_measured() -> list[str]:
    return list(STATE["steps"])


def summary(notebook: str) -> str:
    """What the last cell says of a review cut short."""
    steps = steps_not_measured()
    named = ", ".join(steps) if steps else "the cells that said '(not measured'"
    return (
        f"{notebook}: not measured, so not reviewed here: {named}. Their verdicts and decisions "
        "are not in this review, and your hand-in lacks their rows: say so in it, or measure "
        "them in a new lease (the measure pass goes on in the same bundle, keeping what it has)."
    )


def seen(lines: list[str]) -> None:
    """The cell about to run (its steps are named if it is not measured)."""
    STATE["cell"] = "".join(lines)


# ---------------------------------------------------------------- what a guarded cell does


def said(exc: NotMeasured) -> None:
    """A cell asked for a run the bundle does not hold: one line, and the cell ends."""
    STATE["cut"] = True
    _note(exc.key + " " + STATE["cell"])
    print(str(exc))


def needs(exc: NameError) -> None:
    """A NameError: after the cut, a result of a step not measured (one line); before it, a real
    error of the notebook (raised again)."""
    if not STATE["cut"]:
        raise exc
    _note(STATE["cell"])
    print(f"(not measured: this cell needs `{exc.name}`, which a step not measured makes)")


def _note(text: str) -> None:
    for step in STEP.findall(text):
        if step.split(".")[0] == STATE["number"] and step not in STATE["steps"]:
            STATE["steps"].append(step)


# ---------------------------------------------------------------- the guard, as IPython runs it

_GUARD = """
try:
    pass
except __import__("servelab.passes.cut_short", fromlist=["_"]).NotMeasured as _not_measured:
    __import__("servelab.passes.cut_short", fromlist=["_"]).said(_not_measured)
except NameError as _not_measured:
    __import__("servelab.passes.cut_short", fromlist=["_"]).needs(_not_measured)
"""


class Guard(ast.NodeTransformer):
    """A cell's statements inside the guard; its last expression shown as IPython shows it."""

    def visit_Module(self, node: ast.Module) -> ast.Module:
        if not STATE["on"] or not node.body:
            return node
        body = list(node.body)
        if isinstance(body[-1], ast.Expr):
            shown = ast.parse("__import__('sys').displayhook(_)").body[0]
            shown.value.args = [body[-1].value]
            body[-1] = ast.copy_location(shown, body[-1])
        guard = ast.parse(_GUARD).body[0]
        guard.body = body
        node.body = [guard]
        return ast.fix_missing_locations(node)


def _shell():
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def _install() -> None:
    shell = _shell()
    if shell is not None and not any(isinstance(t, Guard) for t in shell.ast_transformers):
        shell.ast_transformers.append(Guard())


def _uninstall() -> None:
    shell = _shell()
    if shell is not None:
        shell.ast_transformers[:] = [t for t in shell.ast_transformers if not isinstance(t, Guard)]
