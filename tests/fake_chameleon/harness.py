"""Run notebooks 1 and 2 against the fake Chameleon, as a student would, and record what happened.

    unshare -rn python tests/fake_chameleon/harness.py SCENARIO OUT.json

Inside its own network namespace (no other process sees the floating IP or port 22), the harness
starts the fake APIs and the fake node, prepares what Chameleon's Jupyter has (the environment
python-chi reads, the student's key pair), a copy of the notebooks with the instructor's
lab_settings.py, and a small git repository standing in for the lab's repository (the files the
node runs, tag v1 = the version taught, and a later commit on main). Then it runs the scenario's
steps through a Jupyter kernel (nbclient), cell by cell, and writes every cell's output, the API
requests, the node's commands and the final state to OUT.json.
"""
from __future__ import annotations

import json
import logging
import os
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

from fake_chameleon.api import FakeChameleon  # noqa: E402
from fake_chameleon.node import FakeNode  # noqa: E402

# FAKE_CHAMELEON_NOTEBOOKS=DIR runs other copies of the notebooks (e.g. an older version's).
NOTEBOOKS = Path(os.environ.get("FAKE_CHAMELEON_NOTEBOOKS", REPO / "notebooks"))
FIP = "127.20.0.10"  # the floating IP reserved with the lease (a loopback address in this namespace)

# What Chameleon's Jupyter has that this venv has not, set up at kernel start (IPython startup):
# python-chi 1.2.10 asks for ChameleonCloud's fork of python-blazarclient, which adds two host
# allocation calls upstream's 4.6.0 lacks; these send the same requests as the fork does.
# OLD_CONTEXT_VERSION: python-chi 1.0.x-1.1 ship context.version = "0.17.12" (1.2 ships "1.1").
FORK_CALLS = '''
from blazarclient.v1 import hosts as _hosts

def _get_allocation(self, host_id):
    return self.request_manager.get("/os-hosts/%s/allocation" % host_id)[1]["allocation"]

def _list_allocations(self, sort_by=None):
    return self.request_manager.get("/os-hosts/allocations")[1]["allocations"]

_hosts.ComputeHostClientManager.get_allocation = _get_allocation
_hosts.ComputeHostClientManager.list_allocations = _list_allocations
'''
OLD_CONTEXT_VERSION = 'import chi.context\nchi.context.version = "0.17.12"\n'


def git(*args, cwd):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "i", "GIT_AUTHOR_EMAIL": "i@x", "GIT_COMMITTER_NAME": "i",
                        "GIT_COMMITTER_EMAIL": "i@x", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd)})
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True).stdout.strip()


class World:
    def __init__(self, base: Path, old_context_version: bool = True, python_chi_dist: str | None = None):
        self.base = base
        self.fake = FakeChameleon().start()
        self.key = paramiko.RSAKey.generate(2048)
        home = base / "jupyter_home"
        (home / "work").mkdir(parents=True)
        self.private_key = home / "work" / "id_rsa"
        self.key.write_private_key_file(str(self.private_key))
        self.public_key = home / "work" / "id_rsa.pub"
        self.public_key.write_text(f"ssh-rsa {self.key.get_base64()} student@jupyter\n")
        self.node = FakeNode(base / "node", FIP, self.key).start()
        self.lab_repo, self.tags = self._lab_repository(base / "lab.git")
        self.artifact = base / "artifact" / "notebooks"
        self.artifact.mkdir(parents=True)
        settings = (REPO / "notebooks" / "lab_settings.py").read_text()
        settings = settings.replace('REPO_URL = ""', f'REPO_URL = "{self.lab_repo}"', 1)
        settings = settings.replace('REPO_REF = ""', 'REPO_REF = "v1"', 1)
        settings = settings.replace('PROJECT = ""', 'PROJECT = "CHI-231138"', 1)
        (self.artifact / "lab_settings.py").write_text(settings)
        startup = base / "ipython" / "profile_default" / "startup"
        startup.mkdir(parents=True)
        startup_code = FORK_CALLS + (OLD_CONTEXT_VERSION if old_context_version else "")
        (startup / "00-chameleon-jupyter.py").write_text(startup_code)
        self.env = {**self.fake.env(), "HOME": str(home), "IPYTHONDIR": str(base / "ipython"),
                    "OS_KEYPAIR_PRIVATE_KEY": str(self.private_key), "OS_KEYPAIR_PUBLIC_KEY": str(self.public_key),
                    "PYTHONPATH": ""}
        if python_chi_dist:  # an older python-chi's metadata, found before the installed one
            meta = base / "old_chi" / f"python_chi-{python_chi_dist}.dist-info"
            meta.mkdir(parents=True)
            (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: python-chi\nVersion: {python_chi_dist}\n")
            self.env["PYTHONPATH"] = str(base / "old_chi")
        self.runs: list[dict] = []

    def _lab_repository(self, path: Path):
        """The lab's repository as the class sees it: v1 is taught; main moved on afterwards."""
        for rel in ("docker/setup_host.sh", "docker/init_env.sh", "docker/.env.example"):
            (path / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO / rel, path / rel)
        (path / "VERSION").write_text("v1\n")
        git("init", "-q", "-b", "main", cwd=path)
        git("add", "-A", cwd=path)
        v1 = git("commit", "-q", "-m", "the version taught", cwd=path)
        git("tag", "v1", cwd=path)
        (path / "VERSION").write_text("after v1\n")
        later = git("commit", "-q", "-am", "a later change", cwd=path)
        return path, {"v1": v1, "main": later}

    # ------------------------------------------------------------------ running notebooks
    def session(self, name: str, edits: dict | None = None) -> "Session":
        nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
        for cell in nb.cells:
            for old, new in (edits or {}).items():
                if old in cell.source:
                    cell.source = cell.source.replace(old, new)
        path = self.artifact / f"{name}.ipynb"
        nbformat.write(nb, path)
        return Session(self, name, path)

    def result(self) -> dict:
        f = self.fake
        clone = self.node.home / "serve-system-lab"
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True).stdout.strip() \
            if clone.exists() else None
        env_file = clone / "docker" / ".env"
        return {
            "runs": self.runs, "api": f.log, "node_commands": self.node.commands,
            "node_calls": self.node.calls.read_text().splitlines() if self.node.calls.exists() else [],
            "leases": list(f.leases.values()),
            "servers": [{k: str(v) for k, v in s.items()} for s in f.servers.values()],
            "fips": list(f.fips.values()), "keypairs": list(f.keypairs), "user_id": f.user_id, "fip": FIP,
            "tags": self.tags, "clone_head": head,
            "allocations": [dict(r, host=h) for h, rs in f.allocations.items() for r in rs],
            "jupyter_token": next((line.split("=", 1)[1] for line in env_file.read_text().splitlines()
                                   if line.startswith("JUPYTER_TOKEN=")), None) if env_file.exists() else None,
        }


class Session:
    """One kernel on one notebook: run cells as a student does, recording their outputs."""

    def __init__(self, world: World, name: str, path: Path):
        self.world, self.name, self.path = world, name, path
        self.nb = nbformat.read(path, as_version=4)
        self.code = [i for i, c in enumerate(self.nb.cells) if c.cell_type == "code"]
        self.client = NotebookClient(self.nb, timeout=180, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})

    def __enter__(self):
        self._ctx = self.client.setup_kernel(env={**os.environ, **self.world.env})
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        self._ctx.__exit__(*exc)

    def index_of(self, text: str) -> int:
        """Position (among code cells) of the first code cell containing text."""
        return next(n for n, i in enumerate(self.code) if text in self.nb.cells[i].source)

    def run(self, cells=None, label: str = "") -> dict:
        """Run code cells (positions among code cells; default all) in order, stopping at an error."""
        record = {"notebook": self.name, "label": label, "cells": [], "error": None}
        self.world.runs.append(record)
        for n in (range(len(self.code)) if cells is None else cells):
            cell = self.nb.cells[self.code[n]]
            entry = {"n": n, "first_line": cell.source.splitlines()[0] if cell.source else "", "text": ""}
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
        return record


# ---------------------------------------------------------------------- scenarios
def class_day(world: World):
    """A student's lab from start to end, every notebook run twice, then the clean-up cells.
    Before it: the student's ended lease from an earlier try (once named without a date, as this
    lab used to) and another student's lease, both with this lab's prefix."""
    f = world.fake
    f.add_lease("serve_system_student", "TERMINATED")
    f.add_lease("serve_system_student_20250101-1200", "TERMINATED")
    f.add_lease("serve_system_bob_20250101-1200", "ACTIVE", hours_ago=1, user_id="u-bob")
    for round_ in ("first", "again"):
        with world.session("01_reserve") as s:
            s.run(label=round_)
        with world.session("02_provision") as s:
            s.run(label=round_)
    with world.session("02_provision", {"DELETE_SERVER = False": "DELETE_SERVER = True"}) as s:
        first = list(range(s.index_of("if lab.PROJECT") + 1))
        s.run(first + [s.index_of("DELETE_SERVER")], label="delete server")
        s.run([s.index_of("DELETE_SERVER")], label="delete server again")  # still being deleted
        s.run([s.index_of("DELETE_SERVER")], label="delete server, none left")
    with world.session("01_reserve", {"DELETE_LEASE = False": "DELETE_LEASE = True"}) as s:
        s.run(list(range(s.index_of("def my_lab_leases") + 1)) + [s.index_of("DELETE_LEASE")], label="delete lease")


def bad_day(world: World):
    """No node free at first; then the server fails to boot; then `make artifacts` fails."""
    f = world.fake
    f.free_hosts = 0
    p100 = [h["id"] for h in f.hosts if h["node_type"] == "gpu_p100"]
    f.book(p100[0], -1, 5)
    f.book(p100[1], -1, 2)
    f.book(p100[1], 6, 8)
    with world.session("01_reserve") as s:
        s.run(label="no node free")
    f.free_hosts = 1
    with world.session("01_reserve") as s:
        s.run(label="a node is free")
    f.servers_fail = 1
    (world.node.state / "make_rc").write_text("2")
    with world.session("02_provision") as s:
        failed = s.run(label="server in ERROR")["error"]["n"]
        failed = s.run(range(failed - 1, len(s.code)), label="cell above, then again")["error"]["n"]
        (world.node.state / "make_rc").write_text("0")
        s.run(range(failed, len(s.code)), label="make fixed, cell again")


def old_python_chi(world: World):
    for name in ("01_reserve", "02_provision"):
        with world.session(name) as s:
            s.run(label="python-chi 0.17.12")


SCENARIOS = {"class_day": ({}, class_day), "bad_day": ({}, bad_day),
             "old_python_chi": ({"python_chi_dist": "0.17.12"}, old_python_chi)}


def main(scenario: str, out: str) -> int:
    logging.getLogger("paramiko").setLevel(logging.CRITICAL)  # check_connectivity's bare TCP probes
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    kwargs, steps = SCENARIOS[scenario]
    with tempfile.TemporaryDirectory() as tmp:
        world = World(Path(tmp), **kwargs)
        try:
            steps(world)
        finally:
            Path(out).write_text(json.dumps(world.result(), default=str, indent=1))
            world.node.stop()
            world.fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
