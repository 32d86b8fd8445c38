"""The linter ([tool.ruff]) and the layers contract ([tool.importlinter]) of pyproject.toml hold,
and the notebooks keep the contracts' rule that import-linter cannot see: a notebook imports
nothing from the lab's machinery (labstack), as the student library does not."""

import ast
import subprocess
import sys
from pathlib import Path

from IPython.core.inputtransformer2 import TransformerManager

from labstack import editions
from servelab.paths import REPO_ROOT


def test_ruff_passes():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "."],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_layers_contract_holds():
    lint_imports = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint_imports)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


MACHINERY = ("labstack", "maintainers")


def machinery_imports(source: str) -> list[str]:
    """The imports of the lab's machinery in a notebook's code (IPython syntax turned to Python)."""
    found = []
    for node in ast.walk(ast.parse(TransformerManager().transform_cell(source))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        found += [n for n in names if n.split(".")[0] in MACHINERY]
    return found


def test_notebooks_import_nothing_from_the_machinery():
    """What runs the lab (labstack, maintainers) is started as a command of its own where a
    notebook needs it (servelab.services), never imported: the notebooks sit with the student
    library, below the machinery (pyproject.toml's first contract)."""
    assert machinery_imports("import labstack.launcher\nfrom labstack import x\n") == [
        "labstack.launcher",
        "labstack",
    ]
    found = {
        f"{source.name}: {name}"
        for source in editions.sources()
        for kind, body in editions_cells(source)
        if kind == "code"
        for name in machinery_imports(body)
    }
    assert not found, f"notebooks import the lab's machinery: {sorted(found)}"


def editions_cells(source: Path) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source) for c in editions.solved(source).cells]


def underscored_launcher_uses(source: str) -> list[str]:
    """`launcher._name` attributes read in Python source (the launcher's private parts)."""
    return [
        node.attr
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and isinstance(node.value, ast.Name)
        and node.value.id == "launcher"
    ]


def test_only_labstack_uses_the_launchers_private_parts():
    """What other packages need of labstack.launcher has a public name (issue 34): a caller
    outside labstack/ reading `launcher._name` is refused, with its file."""
    assert underscored_launcher_uses("launcher._stop(1, 'x')\nlauncher.stop_process(1)\n") == [
        "_stop"
    ]
    tracked = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    found = [
        f"{name}: launcher.{attr}"
        for name in tracked
        if not name.startswith("labstack/")
        for attr in underscored_launcher_uses((REPO_ROOT / name).read_text())
    ]
    assert not found, f"private launcher names used outside labstack/: {found}"
