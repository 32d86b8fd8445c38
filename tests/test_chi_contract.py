"""Notebooks 0-2: valid, in sync with their .py sources, compilable, and every python-chi call
they make (and their helpers in notebooks/chi_*.py make) exists with those keywords in the
pinned python-chi (what the calls do is checked by running notebooks 1-2 against a fake
Chameleon: tests/test_chameleon_notebooks.py, tests/test_chameleon_trouble.py)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import types
from pathlib import Path

import chi_contract
import jupytext
import nbformat
import pytest

REPO = Path(__file__).resolve().parent.parent
NB = REPO / "notebooks"  # the student edition
SOURCES = REPO / "notebook_sources"  # its jupytext sources (labstack/editions.py)
NOTEBOOKS = ["00_how_to_use_this_lab", "01_reserve", "02_provision"]
# minimum python-chi calls each makes (the helpers module is checked as the notebooks are)
CHAMELEON_NOTEBOOKS = {
    "01_reserve.ipynb": 9,
    "02_provision.ipynb": 18,
    "chi_helpers.py": 8,
    "chi_ips.py": 8,
    "chi_servers.py": 5,
}


def code_cells(nb) -> list[str]:
    return [c.source for c in nb.cells if c.cell_type == "code"]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_valid_empty_and_in_sync(name):
    ipynb, py = NB / f"{name}.ipynb", SOURCES / f"{name}.py"
    assert ipynb.is_file() and py.is_file()
    nb = nbformat.read(ipynb, as_version=4)
    nbformat.validate(nb)
    assert "jupytext" not in nb.metadata, "regenerate with --update-metadata '{\"jupytext\": null}'"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, (
                "commit notebooks without outputs"
            )
    assert code_cells(nb) == code_cells(jupytext.read(py)), (
        f"{name}.ipynb is stale: run `make notebooks`"
    )
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith(
        f"# {int(name[:2])}."
    )


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_code_compiles(name):
    nb = nbformat.read(NB / f"{name}.ipynb", as_version=4)
    for i, src in enumerate(code_cells(nb)):
        compile(chi_contract._strip_magics(src), f"{name}.ipynb cell {i}", "exec")


def test_pinned_python_chi_is_installed():
    pins = (REPO / "requirements" / "constraints.txt").read_text()
    pinned = re.search(r"^python-chi==(\S+)", pins, flags=re.M).group(1)
    assert importlib.metadata.version("python-chi") == pinned == "1.2.10"


@pytest.mark.parametrize("name,min_calls", sorted(CHAMELEON_NOTEBOOKS.items()))
def test_python_chi_calls_match_pinned_signatures(name, min_calls):
    report = chi_contract.check_notebook(NB / name)
    assert report.problems == [], "\n".join(map(str, report.problems))
    assert report.checked_calls >= min_calls, "the checker no longer sees the notebook's calls"


def test_provision_notebook_is_idempotent_by_construction():
    """The re-run guards the issue asks for are in the code, not only in the prose."""
    src = "\n".join(code_cells(nbformat.read(NB / "02_provision.ipynb", as_version=4)))
    tree = ast.parse(chi_contract._strip_magics(src))
    calls = {
        (c.func.attr, kw.arg, ast.unparse(kw.value))
        for c in ast.walk(tree)
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
        for kw in c.keywords
    }
    assert ("submit", "idempotent", "True") in calls
    assert "lab.IMAGE" in src and "setup_host.sh" in src
    assert "if FLOATING_IP is None:" in src
    assert "ssh -i" in src and ":8888/lab?token=" in src
    # what they do when run is checked against a fake Chameleon: tests/test_chameleon_notebooks.py


def test_python_chis_harmful_delete_default_is_avoided_in_each_place():
    """Notebook 2 deletes its servers in three places: the two cells that clear a failed (or
    stale) server away (the first node's, and section 5's second node's), through python-chi's
    Server.delete, which must pass delete_ips=False, and the clean-up cell, by id
    (server.delete_server), which touches no IP. Notebook 1 and the helpers delete no server.
    What each sends is checked against the fake: test_chameleon_*.py."""
    provision = chi_contract.check_notebook(NB / "02_provision.ipynb")
    assert provision.guarded_calls == ["Server.delete", "Server.delete"]
    assert [p for p in provision.problems if "must pass" in p.message] == []
    src = "\n".join(code_cells(nbformat.read(NB / "02_provision.ipynb", as_version=4)))
    assert src.count(".delete(") == 2
    assert "old.delete(delete_ips=False)" in src and "old2.delete(delete_ips=False)" in src
    assert src.count("server.delete_server(") == 1
    for name in ("01_reserve.ipynb", "chi_helpers.py", "chi_ips.py", "chi_servers.py"):
        assert chi_contract.check_notebook(NB / name).guarded_calls == [], name


def test_checker_flags_a_call_that_keeps_the_harmful_default():
    snippet = (
        "from chi import server\n"
        "old = server.get_server('n') if server.get_server_id('n') else None\n"
        "old.delete()\n"  # the default: delete_ips=True
        "old.delete(delete_ips=True)\n"
        "old.delete(idempotent=True, delete_ips=False)\n"  # fine
        "old.detach_floating_ip('1.2.3.4')\n"  # the default: delete=True
    )
    report = chi_contract.check_source(snippet)
    assert [p.message.split(":")[0] for p in report.problems] == [
        "Server.delete() must pass delete_ips=False",
        "Server.delete() must pass delete_ips=False",
        "Server.detach_floating_ip() must pass delete=False",
    ]
    assert len(report.guarded_calls) == 4


# ------------------------------------------------------------------ the checker can fail


def test_checker_flags_unknown_keyword_function_and_arity():
    snippet = (
        "import chi\n"
        "from chi import lease, server as srv\n"
        "chi.use_site(site='CHI@TACC')\n"  # keyword is site_name
        "l = lease.get_lease('x')\n"
        "l.submit(idempotent=True, wait=True)\n"  # no 'wait' keyword
        "lease.no_such_helper()\n"  # no such function
        "s = srv.Server('n', image_name='img')\n"
        "s.check_connectivity(True, None, 22, 10, 'text', 'extra')\n"  # one positional too many
        "s.execute('ls')\n"  # fine
    )
    report = chi_contract.check_source(snippet)
    text = "\n".join(map(str, report.problems))
    assert "use_site() has no keyword 'site'" in text
    assert "Lease.submit() has no keyword 'wait'" in text
    assert "no attribute 'no_such_helper'" in text
    assert "check_connectivity" in text and "too many positional" in text
    assert len(report.problems) == 4, text


def test_checker_fails_when_pinned_api_drops_a_keyword(monkeypatch):
    """Simulate an upgrade that removes `idempotent` from Server.submit and renames node_type."""
    import chi.lease
    import chi.server

    def submit(self, wait_for_active: bool = True, show: str = "widget"):
        raise AssertionError("never called")

    def add_node_reservation(self, amount: int = None, resource_type: str = None):
        raise AssertionError("never called")

    monkeypatch.setattr(chi.server.Server, "submit", submit)
    monkeypatch.setattr(chi.lease.Lease, "add_node_reservation", add_node_reservation)
    provision = chi_contract.check_notebook(NB / "02_provision.ipynb")
    assert any("Server.submit() has no keyword 'idempotent'" in str(p) for p in provision.problems)
    reserve = chi_contract.check_notebook(NB / "01_reserve.ipynb")
    assert any(
        "add_node_reservation() has no keyword 'node_type'" in str(p) for p in reserve.problems
    )


def test_checker_against_a_fake_package():
    """A stand-in `chi` package whose only function lost its `count` keyword."""
    fake = types.ModuleType("chi")
    fake.__path__ = []
    tools = types.ModuleType("chi.tools")

    def reserve(name, *, hours=1):
        return None

    tools.reserve = reserve
    fake.tools = tools
    ok = chi_contract.check_source(
        "import chi\nchi.tools.reserve('a', hours=2)\n", root_module=fake
    )
    assert ok.problems == [] and ok.checked_calls == 1
    bad = chi_contract.check_source(
        "import chi\nchi.tools.reserve('a', count=2)\n", root_module=fake
    )
    assert [p.message.split(" (")[0] for p in bad.problems] == [
        "chi.tools.reserve() has no keyword 'count'"
    ]


# ------------------------------------------------------------------ the long waits, as told


def test_each_wait_that_can_run_out_says_its_limit_and_what_to_do_then():
    """Every cell of notebook 2 that waits on Chameleon (chi_waits.py holds the limits) follows
    prose that gives the limit and, in one sentence, what to do when it runs out; the limits in
    the prose are chi_waits' own (a changed limit fails here until the prose says it)."""
    import sys

    sys.path.insert(0, str(NB))
    import chi_waits

    limits = {
        "chi_helpers.wait_for_start(": chi_waits.LEASE_START_MINUTES,
        "chi_servers.wait_until_gone(": chi_waits.DELETE_MINUTES,
        "chi_servers.wait_for_boot(": chi_waits.BOOT_MINUTES,
        "chi_servers.wait_for_ssh(": chi_waits.SSH_MINUTES,
    }
    nb = nbformat.read(NB / "02_provision.ipynb", as_version=4)
    seen = []
    prose = ""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            prose = cell.source
            continue
        for call, minutes in limits.items():
            if call in cell.source:
                seen.append(call)
                told = " ".join(prose.split())
                assert f"up to {minutes} minutes" in told, (call, told)
                sentence = told.split(f"up to {minutes} minutes", 1)[1].split(". ")[0]
                assert "runs out, run" in sentence, (call, sentence)
    assert sorted(set(seen)) == sorted(limits) and len(seen) == 7, seen
