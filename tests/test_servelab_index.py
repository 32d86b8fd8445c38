"""servelab's index is true and README.md says the same: servelab/__init__.py lists every entry of
the package's top level once (a module, or a package written `name/`), under the notebook that
introduces it (as its own docstring says), and README's table of the notebooks names the same
entries for each notebook."""

import re

import servelab
from servelab.paths import REPO_ROOT

SERVELAB = REPO_ROOT / "servelab"


def index_entries(doc: str) -> dict[str, str]:
    """{entry: section} read from the index's two columns ("notebook 4", "(all)")."""
    entries, section = {}, None
    for line in doc.splitlines():
        found = re.match(r"    (notebook \d+|\(all\))?\s+([a-z_0-9]+/?)\s{2,}\S", line)
        if found:
            section = found.group(1) or section
            entries[found.group(2)] = section
    return entries


def top_level() -> set[str]:
    """The package's entries: its modules, and its packages written `name/`."""
    modules = {p.stem for p in SERVELAB.glob("*.py") if p.stem != "__init__"}
    packages = {f"{p.name}/" for p in SERVELAB.iterdir() if (p / "__init__.py").is_file()}
    return modules | packages


def introduced_in(entry: str) -> str | None:
    """The notebook an entry's own docstring names ("Introduced in notebook 6", or a package's
    "(introduced in notebook 6)"), or None."""
    path = SERVELAB / (f"{entry}__init__.py" if entry.endswith("/") else f"{entry}.py")
    said = re.search(r"[Ii]ntroduced in notebook (\d+)", path.read_text())
    return f"notebook {said.group(1)}" if said else None


def readme_entries(text: str) -> dict[str, set[str]]:
    """{"notebook N": entries} from README's table of the notebooks: the last column's names in
    backticks, leaving out what it says in parentheses (other tools, commands)."""
    table = {}
    for number, introduced in re.findall(r"^\| (\d) \| `[^|]*\|[^|]*\| (.*) \|$", text, re.M):
        outside = re.sub(r"\([^)]*\)", "", introduced)
        table[f"notebook {number}"] = set(re.findall(r"`([a-z_0-9]+/?)`", outside))
    return table


def test_the_index_lists_every_entry_under_its_notebook():
    entries = index_entries(servelab.__doc__)
    assert set(entries) == top_level(), (
        f"missing: {sorted(top_level() - set(entries))}; gone: {sorted(set(entries) - top_level())}"
    )
    wrong = [
        f"{entry}: index {section}, its docstring {introduced_in(entry)}"
        for entry, section in sorted(entries.items())
        if introduced_in(entry) and introduced_in(entry) != section
    ]
    assert not wrong, wrong


def test_readme_names_the_entries_the_index_names():
    by_notebook: dict[str, set[str]] = {}
    for entry, section in index_entries(servelab.__doc__).items():
        if section.startswith("notebook"):
            by_notebook.setdefault(section, set()).add(entry)
    table = readme_entries((REPO_ROOT / "README.md").read_text())
    assert {n: e for n, e in table.items() if e} == by_notebook


def test_the_readers_read_both_columns():
    doc = (
        "    notebook 3   labenv   urls\n"
        "                 exercises/   checks\n"
        "    (all)   paths   where\n"
    )
    assert index_entries(doc) == {
        "labenv": "notebook 3",
        "exercises/": "notebook 3",
        "paths": "(all)",
    }
    row = "| 6 | `06_x` | lab Jupyter | `perf/`, `claims` (and Triton's own `tritonclient`) |\n"
    assert readme_entries(row) == {"notebook 6": {"perf/", "claims"}}
