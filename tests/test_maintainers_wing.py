"""The maintainers' wing (maintainers/) and the lab's machinery (labstack/) kept apart.

- labstack/ runs the lab (the launcher and its parts, the editions, the artifacts, local Triton,
  the notebook runner, `make lab`, the class edition, notebook 8's Model Analyzer command): at
  most 4,000 lines of Python. The maintainers' tooling goes in maintainers/, one room per job.
- maintainers/__init__.py and maintainers/README.md name every room, so a maintainer who opens
  the wing finds each one. That nothing of the lab imports the wing is pyproject.toml's
  import-linter contracts (tests/test_lint.py runs them).
"""

import ast

from servelab.paths import REPO_ROOT

LABSTACK, WING = REPO_ROOT / "labstack", REPO_ROOT / "maintainers"
LABSTACK_LINES = 4000


def test_labstack_stays_what_runs_the_lab():
    lines = {
        str(p.relative_to(REPO_ROOT)): len(p.read_text().splitlines())
        for p in LABSTACK.rglob("*.py")
    }
    biggest = sorted(lines.items(), key=lambda kv: -kv[1])[:5]
    assert sum(lines.values()) <= LABSTACK_LINES, (
        f"labstack/ has {sum(lines.values())} lines (at most {LABSTACK_LINES}; the largest: "
        f"{biggest}): the maintainers' tooling goes in maintainers/"
    )


def test_the_wing_names_each_of_its_rooms():
    rooms = sorted(p.name for p in WING.iterdir() if (p / "__init__.py").is_file())
    assert rooms == ["experiments", "figures", "reference", "reliability", "timing"], rooms
    doc = ast.get_docstring(ast.parse((WING / "__init__.py").read_text())) or ""
    readme = (WING / "README.md").read_text()
    for room in rooms:
        assert f"{room}/" in doc and f"`{room}/`" in readme, room
