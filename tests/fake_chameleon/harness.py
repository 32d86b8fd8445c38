"""Run notebooks 1 and 2 against the fake Chameleon, as a student would, and record what happened.

    unshare -rn python tests/fake_chameleon/harness.py SCENARIO OUT.json

Inside its own network namespace (no other process sees the floating IPs or port 22), the
harness starts the fake APIs, fills the project with the rest of a class of 40 (classroom.py),
and lays out what a student has after launching the lab from Trovi: the instructor's published
repository (this lab's notebooks with lab_settings.py filled in, and the files the node runs;
tag v1 = the version taught, a later commit on main, and a branch `class-2026` with a commit of
its own, to which a scenario may push more), unpacked from `git archive v1` into
the student's work folder, without .git, as Trovi's 10_workdir.sh does. Then it runs the
scenario's steps (scenarios.py) through a Jupyter kernel (nbclient), cell by cell, and writes
every cell's output, the API requests, the node's commands and the final state to OUT.json.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import paramiko
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))

from fake_chameleon import classroom  # noqa: E402
from fake_chameleon.api import FakeChameleon  # noqa: E402
from fake_chameleon.common import BRANCH  # noqa: E402
from fake_chameleon.node import FakeNode  # noqa: E402

# FAKE_CHAMELEON_NOTEBOOKS=DIR runs other copies of the notebooks (e.g. an older version's).
NOTEBOOKS = Path(os.environ.get("FAKE_CHAMELEON_NOTEBOOKS", REPO / "notebooks"))
PUBLISHED = [
    "01_reserve.ipynb",
    "02_provision.ipynb",
    "lab_settings.py",
    "chi_helpers.py",
    "chi_ips.py",
]
NODE_FILES = ["docker/setup_host.sh", "docker/init_env.sh", "docker/.env.example"]
# What the instructor fills in before publishing ("{repo}": the published repository's URL).
INSTRUCTOR = {"REPO_URL": "{repo}", "REPO_REF": "v1", "PROJECT": "CHI-231138"}

# What Chameleon's Jupyter has that this venv has not, set up at kernel start (IPython startup):
# python-chi 1.2.10 asks for ChameleonCloud's fork of python-blazarclient, which adds two host
# allocation calls upstream's 4.6.0 lacks; these send the same requests as the fork does.
# OLD_CONTEXT_VERSION: python-chi 1.1 ships context.version = "0.17.12" (1.2 ships "1.1").
FORK_CALLS = """
from blazarclient.v1 import hosts as _hosts

def _get_allocation(self, host_id):
    return self.request_manager.get("/os-hosts/%s/allocation" % host_id)[1]["allocation"]

def _list_allocations(self, sort_by=None):
    return self.request_manager.get("/os-hosts/allocations")[1]["allocations"]

_hosts.ComputeHostClientManager.get_allocation = _get_allocation
_hosts.ComputeHostClientManager.list_allocations = _list_allocations
"""
OLD_CONTEXT_VERSION = 'import chi.context\nchi.context.version = "0.17.12"\n'


def git(*args, cwd):
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "i",
        "GIT_AUTHOR_EMAIL": "i@x",
        "GIT_COMMITTER_NAME": "i",
        "GIT_COMMITTER_EMAIL": "i@x",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(cwd),
    }
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=env)
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True
    ).stdout.strip()


def with_settings(text: str, values: dict) -> str:
    """lab_settings.py with NAME = value lines replaced, as an instructor edits them."""
    for name, value in values.items():
        text, n = re.subn(rf"^{name} = .*$", f"{name} = {value!r}", text, count=1, flags=re.M)
        assert n == 1, f"lab_settings.py has no line for {name}"
    return text


class World:
    def __init__(
        self,
        base: Path,
        settings: dict | None = None,
        classmates: bool = True,
        old_context_version: bool = True,
        python_chi_dir: str | None = None,
        python_chi_dist: str | None = None,
    ):
        self.base = base
        self.fake = FakeChameleon().start()
        self.classmates = classroom.populate(self.fake) if classmates else {}
        self.key = paramiko.RSAKey.generate(2048)
        home = base / "jupyter_home"
        self.work = home / "work"  # Trovi's /work, linked as ~/work
        (self.work / ".ssh").mkdir(parents=True)
        self.private_key = self.work / ".ssh" / "id_rsa"
        self.key.write_private_key_file(str(self.private_key))
        self.public_key = self.work / ".ssh" / "id_rsa.pub"
        self.public_key.write_text(f"ssh-rsa {self.key.get_base64()} student@jupyter\n")
        self.node = FakeNode(base / "node", self.key)
        self.second_node: FakeNode | None = None  # node-serve-system-student-2's, made when bound
        self.fake.on_bind = self._on_bind
        self.lab_repo, self.tags = self._published_lab(
            base / "lab.git", INSTRUCTOR if settings is None else settings
        )
        self._trovi_launch("v1")
        self.notebooks = self.work / "notebooks"
        self.pristine = {p.name: p.read_text() for p in self.notebooks.glob("*.ipynb")}
        startup = base / "ipython" / "profile_default" / "startup"
        startup.mkdir(parents=True)
        startup_code = FORK_CALLS + (OLD_CONTEXT_VERSION if old_context_version else "")
        (startup / "00-chameleon-jupyter.py").write_text(startup_code)
        self.env = {
            **self.fake.env(),
            "HOME": str(home),
            "IPYTHONDIR": str(base / "ipython"),
            "OS_KEYPAIR_PRIVATE_KEY": str(self.private_key),
            "OS_KEYPAIR_PUBLIC_KEY": str(self.public_key),
            "PYTHONPATH": python_chi_dir or "",
        }
        if python_chi_dist:  # an older python-chi's metadata, found before the installed one
            meta = base / "old_chi" / f"python_chi-{python_chi_dist}.dist-info"
            meta.mkdir(parents=True)
            (meta / "METADATA").write_text(
                f"Metadata-Version: 2.1\nName: python-chi\nVersion: {python_chi_dist}\n"
            )
            self.env["PYTHONPATH"] = str(base / "old_chi")
        self.runs: list[dict] = []
        self.clone_heads: dict[str, str | None] = {}
        self.notes: dict = {}  # what a scenario tells the tests (ids it made or changed)

    def _on_bind(self, address: str, owner: str | None, server_name: str | None):
        """The student's servers are two nodes: the one of notebook 2's server and, for a name
        ending in -2 (its optional section), a second node of its own; each answers SSH only on
        the address its server holds."""
        for node in (self.node, self.second_node):
            if node is not None:
                node.unlisten(address)
        if owner != self.fake.user_id:
            return
        if server_name.endswith("-2"):
            if self.second_node is None:
                self.second_node = FakeNode(self.base / "node2", self.key)
            self.second_node.listen(address)
        else:
            self.node.listen(address)

    def _published_lab(self, path: Path, settings: dict):
        """The instructor's repository: the notebooks with lab_settings.py filled in, the files the
        node runs; v1 is taught, main moved on afterwards."""
        for rel in NODE_FILES:
            (path / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO / rel, path / rel)
        (path / "notebooks").mkdir()
        for name in PUBLISHED:
            shutil.copy(NOTEBOOKS / name, path / "notebooks" / name)
        values = {k: v.format(repo=path) if isinstance(v, str) else v for k, v in settings.items()}
        settings_file = path / "notebooks" / "lab_settings.py"
        settings_file.write_text(with_settings(settings_file.read_text(), values))
        (path / "VERSION").write_text("v1\n")
        git("init", "-q", "-b", "main", cwd=path)
        git("add", "-A", cwd=path)
        v1 = git("commit", "-q", "-m", "the version taught", cwd=path)
        git("tag", "v1", cwd=path)
        (path / "VERSION").write_text("after v1\n")
        later = git("commit", "-q", "-am", "a later change", cwd=path)
        git("checkout", "-q", "-b", BRANCH, "v1", cwd=path)
        (path / "VERSION").write_text(f"{BRANCH}, first\n")
        branch = git("commit", "-q", "-am", "the class's branch", cwd=path)
        git("checkout", "-q", "main", cwd=path)
        return path, {"v1": v1, "main": later, BRANCH: branch}

    def push_to_branch(self) -> str:
        """The instructor pushes a fix to the class's branch (a non-default branch)."""
        git("checkout", "-q", BRANCH, cwd=self.lab_repo)
        (self.lab_repo / "VERSION").write_text(f"{BRANCH}, fixed\n")
        head = git("commit", "-q", "-am", "a fix for the class", cwd=self.lab_repo)
        git("checkout", "-q", "main", cwd=self.lab_repo)
        self.tags[f"{BRANCH} fixed"] = head
        return head

    def note_clone(self, label: str) -> None:
        """Record which commit the node's clone has checked out now."""
        self.clone_heads[label] = self._clone_head()

    def _clone_head(self, node: FakeNode | None = None) -> str | None:
        clone = (node or self.node).home / "serve-system-lab"
        if not clone.exists():
            return None
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True
        ).stdout.strip()

    def _trovi_launch(self, ref: str):
        archive = subprocess.run(
            ["git", "archive", "--format=tar", ref],
            cwd=self.lab_repo,
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "xf", "-", "-C", str(self.work)], input=archive, check=True)

    def settings(self, **values):
        """Edit lab_settings.py in the student's copy (as done in Jupyter's editor)."""
        path = self.notebooks / "lab_settings.py"
        path.write_text(with_settings(path.read_text(), values))

    # ------------------------------------------------------------------ running notebooks
    def session(self, name: str, edits: dict | None = None) -> "Session":
        nb = nbformat.reads(self.pristine[f"{name}.ipynb"], as_version=4)
        for cell in nb.cells:
            for old, new in (edits or {}).items():
                if old in cell.source:
                    cell.source = cell.source.replace(old, new)
        path = self.notebooks / f"{name}.ipynb"
        nbformat.write(nb, path)
        return Session(self, name, path)

    def result(self) -> dict:
        f = self.fake
        clone = self.node.home / "serve-system-lab"
        head = self._clone_head()
        env_file = clone / "docker" / ".env"
        failed_boots = self.notebooks / ".serve_system_failed_boots.json"
        return {
            "runs": self.runs,
            "api": f.log,
            "node_commands": self.node.commands,
            "node_calls": self.node.call_lines(),
            "second_node": None
            if self.second_node is None
            else {
                "commands": self.second_node.commands,
                "calls": self.second_node.call_lines(),
                "clone_head": self._clone_head(self.second_node),
            },
            "leases": list(f.leases.values()),
            "servers": [dict(s) for s in f.servers.values()],
            "fips": list(f.fips.values()),
            "keypairs": list(f.keypairs),
            "user_id": f.user_id,
            "classmates": self.classmates,
            "pool": f.pool,
            "port_owner": f.port_owner,
            "fixed_ips": f.fixed_ips,
            "fip_history": f.fip_history,
            "tags": self.tags,
            "clone_head": head,
            "clone_heads": self.clone_heads,
            "notes": self.notes,
            "hosts": {h["id"]: h["node_type"] for h in f.hosts},
            "allocations": [dict(r, host=h) for h, rs in f.allocations.items() for r in rs],
            "failed_boots": json.loads(failed_boots.read_text()) if failed_boots.exists() else {},
            "work_has_git": (self.work / ".git").exists(),
            "repo_url": str(self.lab_repo),
            "jupyter_token": next(
                (
                    line.split("=", 1)[1]
                    for line in env_file.read_text().splitlines()
                    if line.startswith("JUPYTER_TOKEN=")
                ),
                None,
            )
            if env_file.exists()
            else None,
        }


class Session:
    """One kernel on one notebook: run cells as a student does, recording their outputs."""

    def __init__(self, world: World, name: str, path: Path):
        self.world, self.name, self.path = world, name, path
        self.nb = nbformat.read(path, as_version=4)
        self.code = [i for i, c in enumerate(self.nb.cells) if c.cell_type == "code"]
        self.client = NotebookClient(
            self.nb,
            timeout=180,
            kernel_name="python3",
            resources={"metadata": {"path": str(path.parent)}},
        )

    def __enter__(self):
        self._ctx = self.client.setup_kernel(env={**os.environ, **self.world.env})
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        self._ctx.__exit__(*exc)

    def index_of(self, text: str) -> int:
        """Position (among code cells) of the first code cell containing text."""
        return next(n for n, i in enumerate(self.code) if text in self.nb.cells[i].source)

    def upto(self, text: str) -> list[int]:
        """Code cells from the first through the one containing text."""
        return list(range(self.index_of(text) + 1))

    def run(self, cells=None, label: str = "") -> dict:
        """Run code cells (positions among code cells; default all) in order; stop at an error."""
        record = {
            "notebook": self.name,
            "label": label,
            "cells": [],
            "error": None,
            "api_from": len(self.world.fake.log),
        }
        self.world.runs.append(record)
        for n in range(len(self.code)) if cells is None else cells:
            cell = self.nb.cells[self.code[n]]
            entry = {
                "n": n,
                "first_line": cell.source.splitlines()[0] if cell.source else "",
                "text": "",
            }
            record["cells"].append(entry)
            try:
                self.client.execute_cell(cell, self.code[n])
            except CellExecutionError:
                pass
            for out in cell.get("outputs", []):
                if out.output_type == "stream":
                    entry["text"] += out.text
                elif out.output_type in ("execute_result", "display_data"):
                    entry["text"] += out.get("data", {}).get("text/plain", "") + "\n"
                elif out.output_type == "error":
                    entry["error"] = {"ename": out.ename, "evalue": out.evalue, "n": n}
            if "error" in entry:
                record["error"] = entry["error"]
                break
        record["api_to"] = len(self.world.fake.log)
        return record


def main(scenario: str, out: str) -> int:
    from fake_chameleon.scenarios import SCENARIOS, NoStop

    logging.getLogger("paramiko").setLevel(logging.CRITICAL)  # check_connectivity's bare TCP probes
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    kwargs, steps = SCENARIOS[scenario]
    with tempfile.TemporaryDirectory() as tmp:
        world = World(Path(tmp), **kwargs())
        try:
            steps(world)
        except NoStop:
            pass  # a notebook went on where it should have stopped: recorded for the tests
        finally:
            Path(out).write_text(json.dumps(world.result(), default=str, indent=1))
            world.node.stop()
            if world.second_node is not None:
                world.second_node.stop()
            world.fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
