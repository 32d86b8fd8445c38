"""A notebook run stopped between two cells and taken up again in another process (script_runner
--stop-after/--state): what the GPU reference needs where a notebook outlasts one device call
(10 minutes) but each of its cells fits one. The servers the notebook started keep running between
the calls (the launcher starts them in their own sessions); only the notebook's namespace must
cross over, through this file.

Saved: every value of the namespace that pickles and loads again by itself (checked at save time:
a value whose pickle does not load, such as a str subclass whose __new__ needs more than the
text, counts as not pickling), all of them in one pickle so that two names of one object (a run
in a dict and in its own variable) stay one object; every module it names, by its import name
(wherever the cells imported it); for the rest (a client, a process pool, an object of a class
the notebook defined, a lambda) the last top-level statement of the cells run so far that bound
the name, if a cell to come reads it (a value made for cells that are done, a shared-memory
region destroyed since, is not made twice). Restored in a new process: the imports, functions
and classes of those cells again (definitions only: no measurement runs twice), the modules,
then the pickled values, then the statements of the values that did not pickle, in the order the
notebook ran them, each reported.
The lab's own state, which its modules keep rather than the namespace (the claims and predictions
made so far, the values the exercise checks compare with, the open pass and bundle), is saved and
put back in place too (LAB_STATE), and so is every environment variable the cells set or removed
(labenv.load() puts the services' URLs and the node's secret there): the file is the user's only
(0600). tests/test_resume_state.py round-trips every servelab type a notebook holds and names
every module-level container of servelab as state or as a table.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import os
import pickle
import sys
import types
from pathlib import Path

DEFINITIONS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
# What servelab's modules keep for a notebook, by module: put back in place on resume (other
# modules hold the same objects: `from servelab.passes.node_calls import STATE`)
LAB_STATE = {
    "servelab.claims": ("RESULTS", "PREDICTIONS", "DECISIONS"),
    "servelab.exercises.given": ("GIVEN",),
    "servelab.passes.cut_short": ("STATE",),
    "servelab.passes.node_calls": ("STATE",),
    "servelab.ray_serving": ("_running",),  # Ray's deployments: kept where they pickle
}
BINDINGS = (ast.Assign, ast.AnnAssign)  # never a loop or a with: their bodies measure


def digest(cells: list[str]) -> str:
    return hashlib.sha256("\n# %%\n".join(cells).encode()).hexdigest()


def round_trips(value) -> bool:
    """Whether `value` pickles and its pickle loads again (a dump alone proves nothing: a class
    whose pickle calls its __new__ with too few arguments fails only when loaded)."""
    try:
        pickle.loads(pickle.dumps(value))
    except Exception:  # noqa: BLE001 - whatever the reason, it is re-made instead
        return False
    return True


def _bound(node: ast.stmt) -> set[str]:
    return {
        n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }


def _tree(cell: str) -> ast.Module:
    return compile(cell, "<cell>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def _statements(cells: list[str]):
    for number, cell in enumerate(cells, start=1):
        for node in _tree(cell).body:
            yield number, node, ast.get_source_segment(cell, node)


def _read(nodes) -> set[str]:
    """The names the statements read (a name read anywhere in them: the cells to come, or a
    statement that is run again, may need it)."""
    return {
        n.id
        for node in nodes
        for n in ast.walk(node)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }


def _defined(cells: list[str]) -> set[str]:
    """Names a top-level def or class of these cells binds (made again by running it)."""
    return {
        node.name
        for _, node, _ in _statements(cells)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }


def lab_state() -> dict:
    """LAB_STATE's values of the modules this process has imported, each that round-trips."""
    out = {}
    for module, names in LAB_STATE.items():
        if module in sys.modules:
            kept = {n: getattr(sys.modules[module], n) for n in names}
            out[module] = {n: v for n, v in kept.items() if round_trips(v)}
    return out


def _put_back(saved: dict) -> None:
    for module, values in saved.items():
        loaded = importlib.import_module(module)
        for name, value in values.items():
            target = getattr(loaded, name)
            if isinstance(target, dict):
                target.clear()
                target.update(value)
            elif isinstance(target, list):
                target[:] = value
            else:
                setattr(loaded, name, value)


def save(
    path: Path,
    cells: list[str],
    next_cell: int,
    namespace: dict,
    measured: list,
    environ_before: dict | None = None,
) -> dict:
    """Write the state after cells[: next_cell - 1] ran; returns what it holds, by kind.
    environ_before: os.environ as the run found it (what the cells changed is kept)."""
    done, defined = cells[: next_cell - 1], _defined(cells[: next_cell - 1])
    values, lost, modules = {}, {}, {}
    for name, value in namespace.items():
        if name.startswith("__"):
            continue
        if isinstance(value, types.ModuleType):  # imported anywhere: in a `with`, an `if`
            modules[name] = value.__name__
        elif name in defined and isinstance(value, (types.FunctionType, type)):
            continue  # its def or class runs again
        elif round_trips(value):
            values[name] = value
        else:  # re-made instead, by the statement that bound it, if anything still needs it
            lost[name] = None
    # the last top-level assignment that bound each lost name
    for number, node, source in _statements(done):
        if isinstance(node, BINDINGS) and _bound(node) & lost.keys():
            for name in _bound(node) & lost.keys():
                lost[name] = (number, node.lineno, source, node)
    # made again only what a cell to come reads, or a statement made again reads: a statement
    # that made a value no later cell uses (a shared-memory region, destroyed since) stays done
    needed = _read(node for _, node, _ in _statements(cells[next_cell - 1 :]))
    grew = True
    while grew:
        more = _read(lost[n][3] for n in lost.keys() & needed if lost[n])
        grew, needed = not more <= needed, needed | more
    remake = sorted({lost[n][:3] for n in lost.keys() & needed if lost[n]})
    before = os.environ if environ_before is None else environ_before
    state = {
        "digest": digest(cells),
        "next_cell": next_cell,
        # one pickle: objects the namespace and the lab's modules share stay shared
        "values": pickle.dumps({"namespace": values, "lab": lab_state()}),
        "modules": modules,
        "environ": {k: v for k, v in os.environ.items() if before.get(k) != v},
        "unset": sorted(set(before) - set(os.environ)),
        "remake": [source for _, _, source in remake],
        "not_remade": sorted(n for n in lost if n in needed and not lost[n]),
        "not_needed": sorted(n for n in lost if n not in needed),
        "measured": measured,
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it may hold a secret
    with os.fdopen(fd, "wb") as f:
        f.write(pickle.dumps(state))
    return {
        "pickled": sorted(values),
        "remade": sorted(n for n in lost if n in needed and lost[n]),
        "modules": sorted(modules),
    }


def load(path: Path, cells: list[str], namespace: dict, say=print) -> tuple[int, list]:
    """Rebuild `namespace` from the state at `path`: (the cell to run next, the cell times so
    far). Refuses a state written for other cells."""
    state = pickle.loads(path.read_bytes())
    if state["digest"] != digest(cells):
        raise RuntimeError(f"{path} was written for another version of this notebook: delete it")
    done = cells[: state["next_cell"] - 1]
    for number, node, _ in _statements(done):
        if isinstance(node, DEFINITIONS):
            exec(compile(ast.Module([node], []), f"[cell {number}]", "exec"), namespace)
    for name, module in state["modules"].items():
        try:
            namespace[name] = importlib.import_module(module)
        except ImportError as exc:  # a module made at run time: the cells that use it will say
            say(f"(resumed without {name}: {type(exc).__name__}: {exc})")
    os.environ.update(state["environ"])
    for name in state["unset"]:
        os.environ.pop(name, None)
    saved = pickle.loads(state["values"])
    _put_back(saved["lab"])
    namespace.update(saved["namespace"])
    for source in state["remake"]:
        say(f"(resumed: run again, its value did not pickle) {source.splitlines()[0][:100]}")
        exec(compile(source, "[resumed]", "exec", ast.PyCF_ALLOW_TOP_LEVEL_AWAIT), namespace)
    if state["not_remade"]:
        say(
            f"(resumed without {', '.join(state['not_remade'])}: no top-level assignment of the "
            "notebook made them)"
        )
    if state["not_needed"]:
        say(f"(resumed without {', '.join(state['not_needed'])}: no cell to come uses them)")
    return state["next_cell"], state["measured"]
