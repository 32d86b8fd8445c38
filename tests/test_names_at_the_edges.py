"""Names join only at the edges: between notebook and library, the run or the prediction itself.

A run's name, a prediction's and a step's number belong in the notebooks and in the saved files
(the bundle, claims.csv, predictions.csv). The library is handed the objects: a perf.Run or a
loadgen table that the notebook holds, the claims.Prediction that claims.predict returned, and the
step's number as an argument (verdicts.queue_grows_with_load("6.1", c8, c16, ...)). Read from the
code (its syntax tree), so a lookup by name that comes back fails here, with where it is.

- No servelab module reads a run out of a collection by a name (`runs["6.1 c8"]`, `runs[name]`,
  `runs.get(label)`), nor hands compare_prediction a prediction's name.
- No servelab string begins with a step's number (a claim's head "6.1: ...", a prediction's or a
  run's name "6.1 c8"), docstrings aside: the notebook passes the step. The step table itself
  (exercises/steps.py and the answer key it is sealed from) is the one place keyed by the
  notebooks' step names, as the answer key in docs/ is.
- No notebook looks a run up by a name either: each holds the run a measurement returned and
  passes it on (notebook 6's way); a collection of runs is only iterated (the summary).
"""

import ast
import re
from pathlib import Path

import pytest

from labstack import editions
from servelab import claims
from servelab.paths import REPO_ROOT

SERVELAB = REPO_ROOT / "servelab"
MODULES = sorted(SERVELAB.rglob("*.py"))
# the step table: the notebooks call a check by its step's name, and the table finds it
STEP_TABLE = {SERVELAB / "exercises" / "steps.py", SERVELAB / "exercises" / "answer_key.py"}
# a string that begins with a step's number: "6.1: ...", "6.3a", "7.2 start", "9.5's ..."
STEP_HEADED = re.compile(r"^\s*[3-9]\.[1-9]\d?[a-z]?(?=$|[\s:'])")


def _docstrings(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, kinds)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def _text_parts(node: ast.AST) -> list[str]:
    """The literal text of a string expression: a constant, or an f-string's first piece."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr) and node.values:
        first = node.values[0]
        return [first.value] if isinstance(first, ast.Constant) else [""]
    return []


def _is_name_like(node: ast.AST) -> bool:
    """A key that is a name: a string, an f-string, or a variable (not a number or a slice)."""
    return bool(_text_parts(node)) or isinstance(node, (ast.Name, ast.Attribute, ast.BinOp))


def _collection(node: ast.AST) -> str:
    return node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")


def runs_looked_up_by_name(tree: ast.AST) -> list[int]:
    """Lines that read a run out of a collection of runs (a variable named like `runs`) by a
    name-like key: a subscript that loads, or .get(...)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            if "runs" in _collection(node.value) and _is_name_like(node.slice):
                found.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "get" and "runs" in _collection(node.func.value):
                found.append(node.lineno)
    return sorted(found)


def predictions_passed_by_name(tree: ast.AST) -> list[int]:
    """Lines that hand compare_prediction a name instead of the prediction."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and _collection(node.func) == "compare_prediction"
        and node.args
        and _text_parts(node.args[0])
    ]


def step_headed_strings(tree: ast.AST) -> list[tuple[int, str]]:
    """Strings (an f-string as one, by its first piece) that begin with a step's number."""
    skip = _docstrings(tree) | {
        id(part)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        for part in node.values
    }
    return [
        (node.lineno, text)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Constant, ast.JoinedStr)) and id(node) not in skip
        for text in _text_parts(node)
        if STEP_HEADED.match(text)
    ]


def _name(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT))


@pytest.mark.parametrize("module", MODULES, ids=_name)
def test_no_servelab_module_looks_a_run_or_a_prediction_up_by_name(module):
    tree = ast.parse(module.read_text())
    assert runs_looked_up_by_name(tree) == [], f"{_name(module)}: a run read out by its name"
    assert predictions_passed_by_name(tree) == [], f"{_name(module)}: a prediction by its name"
    if module not in STEP_TABLE:
        assert step_headed_strings(tree) == [], f"{_name(module)}: a step's number, not passed"


@pytest.mark.parametrize("source", editions.sources(), ids=lambda p: p.stem)
def test_no_notebook_looks_a_run_up_by_name(source):
    """Each notebook holds the runs its measurements returned and hands them on."""
    code = "\n".join(c.source for c in editions.solved(source).cells if c.cell_type == "code")
    code = re.sub(r"^\s*[%!].*$", "", code, flags=re.M)  # IPython magics and shell lines
    assert runs_looked_up_by_name(ast.parse(code)) == [], source.name


def test_the_checks_find_what_they_look_for():
    """Each check finds the lookups the lab had before names moved to the edges."""
    before = ast.parse(
        'x = runs["7.2 start"].throughput\n'
        "y = [df for label, df in runs.items()]\n"
        "z = self.runs.get(label)\n"
        'claims.compare_prediction("6.1 queue at c16 (ms)", q16)\n'
        'claims.between("6.1: queue delay grows", q16 / q8, 1.4, 3.2)\n'
        'claims.at_least(f"8.2: at {rate} requests/s", 1, 1)\n'
    )
    assert runs_looked_up_by_name(before) == [1, 3]
    assert predictions_passed_by_name(before) == [4]
    assert sorted(line for line, _ in step_headed_strings(before)) == [1, 4, 5, 6]
    after = ast.parse(
        "runs[name] = run\n"
        "rows = [summarize(run) for run in runs.values()]\n"
        "claims.compare_prediction(predicted, q16)\n"
        'claims.between(f"{step}: queue delay grows", q16 / q8, 1.4, 3.2)\n'
        'label = "Triton, ONNX Runtime (9.5\'s)"\n'
    )
    assert runs_looked_up_by_name(after) == predictions_passed_by_name(after) == []
    assert step_headed_strings(after) == []


def test_a_prediction_is_handed_over_not_named():
    with pytest.raises(TypeError, match="the prediction predict\\(\\) returned"):
        claims.compare_prediction("6.1 queue at c16 (ms)", 3.0)
