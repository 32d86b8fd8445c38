"""servelab/__init__.py's index is true: it lists every module once, under the notebook that the
module's own docstring says introduces it."""

import re

import servelab
from servelab.paths import REPO_ROOT


def index_entries(doc: str) -> dict[str, str]:
    """{module: section} read from the index's two columns ("notebook 4", "(all)")."""
    entries, section = {}, None
    for line in doc.splitlines():
        found = re.match(r"    (notebook \d+|\(all\))?\s+([a-z_0-9]+)\s{2,}\S", line)
        if found:
            section = found.group(1) or section
            entries[found.group(2)] = section
    return entries


def test_the_index_lists_every_module_under_its_notebook():
    entries = index_entries(servelab.__doc__)
    modules = {p.stem for p in (REPO_ROOT / "servelab").glob("*.py") if p.stem != "__init__"}
    assert set(entries) == modules, (
        f"missing: {sorted(modules - set(entries))}; gone: {sorted(set(entries) - modules)}"
    )
    wrong = []
    for name in sorted(modules):
        said = re.search(
            r"Introduced in notebook (\d+)", (REPO_ROOT / "servelab" / f"{name}.py").read_text()
        )
        if said and entries[name] != f"notebook {said.group(1)}":
            wrong.append(f"{name}: index {entries[name]}, module notebook {said.group(1)}")
    assert not wrong, wrong


def test_the_index_reader_reads_both_columns():
    doc = (
        "    notebook 3   labenv   urls\n"
        "                 answers   blank\n"
        "    (all)   paths   where\n"
    )
    assert index_entries(doc) == {"labenv": "notebook 3", "answers": "notebook 3", "paths": "(all)"}
