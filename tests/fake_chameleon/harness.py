"""Run notebooks 1 and 2 against the fake Chameleon, as a student would, and record what happened.

    unshare -rn python tests/fake_chameleon/harness.py SCENARIO OUT.json
    unshare -rn python tests/fake_chameleon/harness.py --worker FOLDER   (scenarios named on stdin)

Inside its own network namespace (no other process sees the floating IPs or port 22), the
harness starts the fake APIs, fills the project with the rest of a class of 40 (classroom.py),
and lays out what a student has after launching the lab from Trovi: the instructor's published
repository (this lab's notebooks with lab_settings.py filled in, and the files the node runs;
tag v1 = the version taught, a later commit on main, and a branch `class-2026` with a commit of
its own, to which a scenario may push more), unpacked from `git archive v1` into
the student's work folder, without .git, as Trovi's 10_workdir.sh does. Then it runs the
scenario's steps (scenarios.py) through Jupyter kernels (nbclient), cell by cell, and writes
every cell's output, the API requests, the node's commands and the final state to OUT.json. A
worker runs one scenario after another, each in a fresh World, with one HTTP server and one
kernels' zygote for all (`Worker`, kernels.py).

Time: the kernel's waits (the notebooks' chi_waits module) read the site's clock and move it on
instead of sleeping (common.py, set up at kernel start); after each move, and as real time
passes, each of the student's nodes answers SSH on its server's address once the fake's Nova
says sshd is up there.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

# jsonschema's optional IRI checker (rfc3987_syntax) builds a parser at import: 1.7 s of CPU in
# each harness and each zygote (nbformat, Glance's image schemas import jsonschema), for a check
# nothing here makes: left out.
sys.modules.setdefault("rfc3987_syntax", None)

import nbformat  # noqa: E402
import paramiko  # noqa: E402
from nbclient import NotebookClient  # noqa: E402
from nbclient.exceptions import CellExecutionError  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))

from fake_chameleon import classroom, common  # noqa: E402
from fake_chameleon.api import FakeChameleon, Front  # noqa: E402
from fake_chameleon.common import BRANCH  # noqa: E402
from fake_chameleon.kernels import Zygote  # noqa: E402
from fake_chameleon.node import FakeNode  # noqa: E402

# FAKE_CHAMELEON_NOTEBOOKS=DIR runs other copies of the notebooks (e.g. an older version's).
NOTEBOOKS = Path(os.environ.get("FAKE_CHAMELEON_NOTEBOOKS", REPO / "notebooks"))
PUBLISHED = [
    "01_reserve.ipynb",
    "02_provision.ipynb",
    "03_fastapi_setup.ipynb",  # a notebook the student prepares here and runs on the node
    "lab_settings.py",
    "chi_helpers.py",
    "chi_ips.py",
    "chi_servers.py",
    "chi_files.py",
    "chi_waits.py",
]
NODE_FILES = [
    ".gitignore",
    "docker/setup_host.sh",
    "docker/init_env.sh",
    "docker/.env.example",
    "docker/build_images.sh",
]
SERVER, SECOND = "node-serve-system-student", "node2-serve-system-student"
CLONE = "serve-system-lab"
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
# The notebooks' waits on the site's clock (common.py): chi_waits reads the fake's clock, and
# moves it on instead of sleeping.
SITE_CLOCK_WAITS = """
import os as _os, sys as _sys, json as _json, http.client as _http, types as _types
_sys.path.insert(0, _os.getcwd())


def _site_clock(body=None):
    conn = _http.HTTPConnection(*_os.environ["FAKE_CHAMELEON_CLOCK"].split(":"), timeout=30)
    conn.request("POST" if body else "GET", "/_clock", body and _json.dumps(body))
    return _json.loads(conn.getresponse().read())["now"]


try:
    import chi_waits as _waits
except ImportError:  # an older copy of the notebooks
    pass
else:
    _waits.time = _types.SimpleNamespace(
        monotonic=_site_clock, sleep=lambda s: _site_clock({"advance": s})
    )
"""
# python-chi's parser of Blazar's refusals as it would be if it matched (fixed in python-chi, or
# blazarclient without its "ERROR: " prefix): python-chi then logs its own sentence
PARSER_MATCHES = """
import re as _re, chi.lease as _lease
_lease.ErrorParsers.NOT_ENOUGH_RESOURCES = _re.compile(
    r"(?:error: )?not enough (?P<resource_type>([\\w\\s\\-\\._]+)) available"
)
"""


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


class Worker:
    """What the scenarios a process runs one after another share: the fake's HTTP server (one
    address for all) and the kernels' zygote, kept while the kernels' environment stays the
    same (for every scenario but the two with another python-chi); each World lives in `world`
    below the worker's folder, emptied for the next."""

    def __init__(self, folder: Path):
        self.folder, self.world = folder, folder / "world"
        self.front = Front()
        self._zygote: Zygote | None = None
        self._zygote_env: dict | None = None

    def kernels(self, env: dict) -> Zygote:
        if self._zygote is None or env != self._zygote_env:
            if self._zygote is not None:
                self._zygote.stop()
            self._zygote = Zygote(self.folder / "kernels.sock", env, self.folder)
            self._zygote_env = env
        return self._zygote

    def fresh_world_folder(self) -> Path:
        shutil.rmtree(self.world, ignore_errors=True)
        self.world.mkdir(parents=True)
        return self.world

    def stop(self) -> None:
        if self._zygote is not None:
            self._zygote.stop()
        self.front.stop()


class World:
    def __init__(
        self,
        worker: Worker,
        settings: dict | None = None,
        classmates: bool = True,
        old_context_version: bool = True,
        python_chi_dir: str | None = None,
        python_chi_dist: str | None = None,
        parser_matches: bool = False,
        class_site: str = "CHI@TACC",
    ):
        self.base = base = worker.fresh_world_folder()
        self.cloud = FakeChameleon().start(worker.front)  # every site, on one HTTP server
        self.fake = self.cloud.at(class_site)  # the site the class uses (SITE in lab_settings)
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
        self.second_node: FakeNode | None = None  # node2-serve-system-student's, made when up
        self.lab_repo, self.tags = self._published_lab(
            base / "lab.git", INSTRUCTOR if settings is None else settings
        )
        self._trovi_launch("v1")
        self.notebooks = self.work / "notebooks"
        self.pristine = {p.name: p.read_text() for p in self.notebooks.glob("*.ipynb")}
        startup = base / "ipython" / "profile_default" / "startup"
        startup.mkdir(parents=True)
        startup_code = FORK_CALLS + (OLD_CONTEXT_VERSION if old_context_version else "")
        startup_code += SITE_CLOCK_WAITS + (PARSER_MATCHES if parser_matches else "")
        (startup / "00-chameleon-jupyter.py").write_text(startup_code)
        self.env = {
            **self.cloud.env(),
            "HOME": str(home),
            "IPYTHONDIR": str(base / "ipython"),
            "OS_KEYPAIR_PRIVATE_KEY": str(self.private_key),
            "OS_KEYPAIR_PUBLIC_KEY": str(self.public_key),
            "PYTHONPATH": python_chi_dir or "",
            "FAKE_CHAMELEON_CLOCK": self.cloud.base.removeprefix("http://"),
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
        self.kernels = worker.kernels({**os.environ, **self.env})
        self._stop, self._tick_lock = threading.Event(), threading.Lock()
        common.on_advance.append(self.tick)  # a wait moved the clock on: who answers SSH now
        self._ticker = threading.Thread(target=self._ticks, daemon=True)
        self._ticker.start()

    def _ticks(self):
        while not self._stop.wait(0.1):  # and as real time passes (scenarios change things)
            self.tick()

    def tick(self):
        """The student's two servers are two nodes (notebook 2's, and notebook 9's second one);
        each answers SSH only on the address its server holds, once sshd is up there; a new
        server of that name is a fresh disk."""
        with self._tick_lock:
            with self.cloud.lock:
                ready = {
                    k: v for site in self.cloud.by_uid.values() for k, v in site.ssh_ready().items()
                }
            wanted: dict[int, set] = {}
            for address, (name, server_id, keys_ok) in ready.items():
                node = self.node_of(name)
                if node is None:
                    continue
                if node.server_id != server_id:
                    node.fresh_disk(server_id)
                node.keys_ok = keys_ok
                node.listen(address)
                wanted.setdefault(id(node), set()).add(address)
            for node in (self.node, self.second_node):
                for address in node.listening() - wanted.get(id(node), set()) if node else ():
                    node.unlisten(address)

    def node_of(self, server_name: str) -> FakeNode | None:
        if server_name == SECOND:
            if self.second_node is None:
                self.second_node = FakeNode(self.base / "node2", self.key)
                self.second_node.extra_env["RAY_HEAD_TOKEN"] = str(
                    self.node.home / CLONE / ".lab" / "ray_token"
                )
            return self.second_node
        return self.node if server_name == SERVER else None

    def stop(self):
        self._stop.set()
        self._ticker.join()
        common.on_advance.remove(self.tick)
        for node in (self.node, self.second_node):
            if node is not None:
                node.stop()
        self.cloud.stop()

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

    def prepare(self, notebook: str, answer: str) -> None:
        """The student writes in a notebook here, in Chameleon's Jupyter (the prepare pass)."""
        path = self.notebooks / f"{notebook}.ipynb"
        nb = nbformat.read(path, as_version=4)
        nb.cells.append(nbformat.v4.new_markdown_cell(answer))
        nbformat.write(nb, path)

    def prepared_json(self, notebook: str, kept: dict) -> Path:
        """What the prepare pass keeps beside a notebook here (results/bundles/NB/prepared.json
        of the clone in Chameleon's Jupyter)."""
        path = self.notebooks.parent / "results" / "bundles" / notebook / "prepared.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(kept, indent=1))
        return path

    def notebook_ids(self) -> dict:
        """The notebooks in Chameleon's Jupyter now: {name: sha256}."""
        return {k: v for k, v in files_in(self.notebooks).items() if k.endswith(".ipynb")}

    def node_notebook_ids(self, node: FakeNode | None = None) -> dict:
        """The notebooks in the node's clone now: {name: sha256}."""
        return files_in((node or self.node).home / CLONE / "notebooks")

    def on_node(self, rel: str, text: str, node: FakeNode | None = None) -> Path:
        """A file written on the node (by the measure pass), below the node's home."""
        path = (node or self.node).home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def retag(self) -> str:
        """The instructor fixes the taught version and moves its tag (git tag -f v1, pushed):
        a new commit on top of v1 that changes a notebook the student prepared."""
        git("checkout", "-q", "--detach", "v1", cwd=self.lab_repo)
        (self.lab_repo / "VERSION").write_text("v1, fixed\n")
        nb = self.lab_repo / "notebooks" / "03_fastapi_setup.ipynb"
        nb.write_text(nb.read_text().replace("FastAPI", "FastAPI (fixed)", 1))
        fixed = git("commit", "-q", "-am", "a fix, after the class started", cwd=self.lab_repo)
        git("tag", "-f", "v1", cwd=self.lab_repo)
        git("checkout", "-q", "main", cwd=self.lab_repo)
        self.tags["v1 moved"] = fixed
        return fixed

    def _clone_head(self, node: FakeNode | None = None) -> str | None:
        clone = (node or self.node).home / CLONE
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

    def node_state(self, node: FakeNode | None) -> dict | None:
        """What a node holds that the tests read: its notebooks and token, its transfers."""
        if node is None:
            return None
        clone = node.home / CLONE
        token = clone / ".lab" / "ray_token"
        ignored = (
            subprocess.run(
                ["git", "check-ignore", "-q", ".lab/ray_token"], cwd=clone, capture_output=True
            ).returncode
            == 0
            if clone.exists()
            else None
        )
        return {
            "home": str(node.home),  # the node shell's $HOME
            "commands": node.commands,
            "calls": node.call_lines(),
            "clone_head": self._clone_head(node),
            "notebooks": files_in(clone / "notebooks"),
            "prepared": {  # what the prepare pass kept, carried to the node's bundles
                p.parent.name: json.loads(p.read_text())
                for p in sorted((clone / "results" / "bundles").glob("*/prepared.json"))
            },
            "transfers": node.transfers,
            "ray_token": token.read_text() if token.exists() else None,
            "ray_token_mode": oct(token.stat().st_mode & 0o777) if token.exists() else None,
            "ray_token_ignored": ignored,
            "stash": subprocess.run(
                ["git", "stash", "list"], cwd=clone, capture_output=True, text=True
            ).stdout
            if clone.exists()
            else None,
            "disks": node.disks,
            # docker/build_images.sh's record of the background build notebook 2 started
            "images": {
                name: (clone / ".lab" / f"build_images.{name}").read_text()
                for name in ("status", "log")
                if (clone / ".lab" / f"build_images.{name}").exists()
            },
        }

    def result(self) -> dict:
        f = self.fake
        clone = self.node.home / CLONE
        head = self._clone_head()
        env_file = clone / "docker" / ".env"
        failed_boots = self.notebooks / ".serve_system_failed_boots.json"
        return {
            "runs": self.runs,
            "api": f.log,
            "node_commands": self.node.commands,
            "node_calls": self.node.call_lines(),
            "node": self.node_state(self.node),
            "second_node": self.node_state(self.second_node),
            "jupyter_notebooks": files_in(self.notebooks),
            # where notebook 2 brings the bundles back: the review pass's own default
            "jupyter_bundles": files_in(self.notebooks.parent / "results" / "bundles"),
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


def files_in(folder: Path) -> dict:
    """{path relative to folder: sha256 of the content} of every file below it."""
    if not folder.is_dir():
        return {}
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
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
            kernel_manager_class=world.kernels.manager,
            resources={"metadata": {"path": str(path.parent)}},
        )

    def __enter__(self):
        self._ctx = self.client.setup_kernel(env={**os.environ, **self.world.env})
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        self._ctx.__exit__(*exc)

    def edit(self, edits: dict) -> "Session":
        """The student edits cells (old text -> new) in the open notebook, same kernel."""
        for cell in self.nb.cells:
            for old, new in edits.items():
                cell.source = cell.source.replace(old, new)
        return self

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
        return self.extend(record, range(len(self.code)) if cells is None else cells)

    def extend(self, record: dict, cells) -> dict:
        """Run more cells as part of a run already recorded (a scenario acted in between)."""
        if record["error"] is not None:
            return record
        for n in cells:
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
                    entry["traceback"] = [
                        re.sub(r"\x1b\[[0-9;]*m", "", line) for line in out.traceback[-6:]
                    ]  # the last frames, colours off: what a failing test shows
            if "error" in entry:
                record["error"] = entry["error"]
                break
        record["api_to"] = len(self.world.fake.log)
        return record


def run(worker: Worker, scenario: str, out: str) -> None:
    """One scenario, its record written to `out` (JSON)."""
    from fake_chameleon.scenarios import SCENARIOS, NoStop

    kwargs, steps = SCENARIOS[scenario]
    world = World(worker, **kwargs())
    try:
        steps(world)
    except NoStop:
        pass  # a notebook went on where it should have stopped: recorded for the tests
    finally:
        world.stop()
        Path(out).write_text(json.dumps(world.result(), default=str, indent=1))


def _namespace_ready() -> None:
    logging.getLogger("paramiko").setLevel(logging.CRITICAL)  # check_connectivity's bare TCP probes
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)


def main(scenario: str, out: str) -> int:
    _namespace_ready()
    with tempfile.TemporaryDirectory() as tmp:
        worker = Worker(Path(tmp))
        try:
            run(worker, scenario, out)
        finally:
            worker.stop()
    return 0


def serve(folder: str) -> int:
    """A worker (fake_chameleon/results.py starts a few): the scenarios named on stdin, one a
    line ("NAME<TAB>OUT<TAB>ENV as JSON": environment variables for that scenario only), run one
    after another in this network namespace; "done NAME" or "failed NAME" on stdout after each
    (a failure's traceback on stderr)."""
    import traceback

    _namespace_ready()
    worker = Worker(Path(folder))
    try:
        for line in sys.stdin:
            name, out, env = line.rstrip("\n").split("\t")
            env = json.loads(env)
            before = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            try:
                run(worker, name, out)
                print(f"done {name}", flush=True)
            except Exception:
                traceback.print_exc()
                print(f"failed {name}", flush=True)
            finally:
                for k, v in before.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
    finally:
        worker.stop()
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "--worker":
        sys.exit(serve(sys.argv[2]))
    sys.exit(main(*sys.argv[1:]))
