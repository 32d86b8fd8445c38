"""Notebooks 1 and 2, executed cell by cell against a fake Chameleon (tests/fake_chameleon/).

Each scenario runs once (module fixtures) in a private network namespace, where the floating IP
and the node's SSH port exist; the tests read what it recorded: every cell's output, every API
request with its body, the commands the node ran, and the final state of leases, servers and IPs.
  class_day       a student's whole lab, every notebook run twice ("Run All" again), then the
                  clean-up cells; an ended lease of the student's and another student's lease exist
  bad_day         no node free, then a server that ends in ERROR, then a failing `make artifacts`
  old_python_chi  an older python-chi in the Jupyter environment
"""
from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
HARNESS = REPO / "tests" / "fake_chameleon" / "harness.py"


def _unshare_works() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    return subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(not _unshare_works(), reason="needs `unshare -rn` (a private network namespace)")
pytestmark = [pytestmark, pytest.mark.slow]


def scenario(name: str, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp(name) / "result.json"
    proc = subprocess.run(["unshare", "-rn", sys.executable, str(HARNESS), name, str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and out.exists(), proc.stdout + proc.stderr[-5000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def class_day(tmp_path_factory):
    return scenario("class_day", tmp_path_factory)


@pytest.fixture(scope="module")
def bad_day(tmp_path_factory):
    return scenario("bad_day", tmp_path_factory)


def runs(result, notebook, label=None):
    return [r for r in result["runs"] if r["notebook"] == notebook and (label is None or r["label"] == label)]


def requests(result, method, path_pattern):
    return [e for e in result["api"] if e["method"] == method and re.fullmatch(path_pattern, e["path"])]


def text(run) -> str:
    return "".join(c["text"] for c in run["cells"])


def code_cells(notebook: str) -> int:
    import nbformat

    return sum(c.cell_type == "code" for c in nbformat.read(REPO / "notebooks" / f"{notebook}.ipynb", 4).cells)


# ------------------------------------------------------------------ a normal day, twice over

def test_both_notebooks_run_top_to_bottom_twice(class_day):
    for notebook in ("01_reserve", "02_provision"):
        for label in ("first", "again"):
            (run,) = runs(class_day, notebook, label)
            assert run["error"] is None, run["error"]
            assert len(run["cells"]) == code_cells(notebook)


def test_a_new_lease_never_takes_an_old_name_and_notebook_2_uses_it(class_day):
    """The student's ended leases (one with the old fixed name) stay; the new lease has its own
    name; notebook 2 puts the server on the new lease's host reservation."""
    (create,) = requests(class_day, "POST", r"/tacc/blazar/v1/leases")
    body = create["body"]
    assert re.fullmatch(r"serve_system_student_\d{8}-\d{4}", body["name"]), body["name"]
    hosts = [r for r in body["reservations"] if r["resource_type"] == "physical:host"]
    fips = [r for r in body["reservations"] if r["resource_type"] == "virtual:floatingip"]
    assert [(json.loads(r["resource_properties"]), r["min"], r["max"]) for r in hosts] == \
        [(["==", "$node_type", "gpu_p100"], 1, 1)]
    assert [(r["amount"], r["network_id"]) for r in fips] == [(1, "net-public")]
    assert body["start_date"] == "now"
    host_reservation = next(r["id"] for r in create["reply"]["lease"]["reservations"]
                            if r["resource_type"] == "physical:host")
    (post_server,) = requests(class_day, "POST", r"/tacc/nova/v2\.1/servers")
    assert post_server["body"]["OS-SCH-HNT:scheduler_hints"] == {"reservation": host_reservation}
    # the clean-up cell deleted the new lease; the others are as they were
    leases_left = {x["name"]: x["status"] for x in class_day["leases"]}
    assert leases_left == {"serve_system_student": "TERMINATED", "serve_system_student_20250101-1200": "TERMINATED",
                           "serve_system_bob_20250101-1200": "ACTIVE"}


def test_the_server_boots_on_the_leases_reservation_with_the_cuda_image(class_day):
    (post,) = requests(class_day, "POST", r"/tacc/nova/v2\.1/servers")
    server = post["body"]["server"]
    assert server["name"] == "node-serve-system-student"
    assert server["imageRef"] == "img-cuda" and server["flavorRef"] == "flv-bm"
    assert server["key_name"] == "student-jupyter" and class_day["keypairs"] == ["student-jupyter"]
    assert server["networks"] == [{"uuid": "net-shared"}]


def test_running_everything_again_creates_nothing(class_day):
    again = [e for e in class_day["api"] if e["method"] in ("POST", "PUT", "DELETE")
             and "/auth" not in e["path"] and "os-keypairs" not in e["path"]]
    kinds = [(e["method"], re.sub(r"/[0-9a-f-]{36}", "/ID", e["path"])) for e in again]
    assert kinds == [("POST", "/tacc/blazar/v1/leases"), ("POST", "/tacc/nova/v2.1/servers"),
                     ("PUT", "/tacc/neutron/v2.0/floatingips/ID"),          # round 1 only
                     ("DELETE", "/tacc/nova/v2.1/servers/ID"), ("DELETE", "/tacc/nova/v2.1/servers/ID"),
                     ("DELETE", "/tacc/blazar/v1/leases/ID")], kinds
    (second,) = runs(class_day, "02_provision", "again")
    assert "exists (ACTIVE): it will be reused" in text(second)
    assert "Nothing to do: this host was already set up (0 changes)" in text(second)


def test_the_floating_ip_is_the_one_reserved_with_the_lease(class_day):
    (put,) = requests(class_day, "PUT", r"/tacc/neutron/v2\.0/floatingips/.*")
    fip = next(f for f in class_day["fips"] if put["path"].endswith(f["id"]))
    assert fip["floating_ip_address"] == class_day["fip"] and any(t.startswith("reservation:") for t in fip["tags"])
    assert requests(class_day, "POST", r"/tacc/neutron/v2\.0/floatingips") == [], "took an IP from the shared pool"
    assert f"cc@{class_day['fip']}" in text(runs(class_day, "02_provision", "first")[0])


def test_the_project_named_in_the_settings_is_used(class_day):
    scopes = [e["body"]["auth"]["scope"]["project"] for e in requests(class_day, "POST", r"/tacc:5000/v3/auth/tokens")
              if "scope" in e["body"]["auth"]]
    assert scopes and all(s["name"] == "CHI-231138" for s in scopes), scopes


def test_the_node_gets_the_taught_tag_not_the_newest_commit(class_day):
    assert class_day["clone_head"] == class_day["tags"]["v1"] != class_day["tags"]["main"]
    clones = [c for c in class_day["node_commands"] if "git" in c["command"]]
    assert len(clones) == 2 and all(c["rc"] == 0 for c in clones)


def test_setup_waits_for_first_boot_then_installs(class_day):
    calls = class_day["node_calls"]
    assert calls.index("cloud-init status --wait") < next(i for i, c in enumerate(calls) if c.startswith("apt-get"))
    setup = [c for c in class_day["node_commands"] if "setup_host.sh" in c["command"]]
    assert [c["rc"] for c in setup] == [0, 0]


def test_the_jupyter_token_stays_on_the_node(class_day):
    token = class_day["jupyter_token"]
    assert token and len(token) == 32
    assert all(token not in c["text"] for r in class_day["runs"] for c in r["cells"])


def test_clean_up_cells_work_and_can_be_run_again(class_day):
    deletes = runs(class_day, "02_provision")[-3:]
    assert [r["error"] for r in deletes] == [None, None, None]
    assert "server node-serve-system-student deleted" in text(deletes[0])
    assert "nothing to delete" in text(deletes[-1])
    assert class_day["servers"] == []
    (lease_delete,) = runs(class_day, "01_reserve", "delete lease")
    assert lease_delete["error"] is None and re.search(r"lease serve_system_student_\d{8}-\d{4} deleted",
                                                       text(lease_delete))


# ------------------------------------------------------------------ a bad day

def test_no_free_node_gives_the_alternatives_and_no_lease(bad_day):
    (run,) = runs(bad_day, "01_reserve", "no node free")
    out = text(run)
    assert run["error"]["ename"] == "RuntimeError" and "START_IN_HOURS, NODE_TYPE or SITE" in run["error"]["evalue"]
    assert "GPU node types free now at CHI@TACC: gpu_v100" in out
    # host 2 is booked until +2 h and again from +6 h: the first 3-hour gap starts at +2 h
    slot = dt.datetime.strptime(re.search(r"free for 3 h from \(UTC\): (\S+ \S+)", out).group(1), "%Y-%m-%d %H:%M")
    booked_until = min(dt.datetime.fromisoformat(a["end_date"]) for a in bad_day["allocations"] if a["host"] == "2")
    assert slot == booked_until.replace(second=0, microsecond=0)
    refused = requests(bad_day, "POST", r"/tacc/blazar/v1/leases")
    assert [e["status"] for e in refused] == [409, 201]


def test_a_server_in_error_is_deleted_and_made_again(bad_day):
    first, retry = runs(bad_day, "02_provision")[:2]
    err = first["error"]
    assert err["ename"] == "RuntimeError" and "ERROR: Build of instance aborted" in err["evalue"]
    assert "run the cell above" in err["evalue"]
    assert "deleting node-serve-system-student, which is in ERROR" in text(retry)
    posts = requests(bad_day, "POST", r"/tacc/nova/v2\.1/servers")
    deletes = requests(bad_day, "DELETE", r"/tacc/nova/v2\.1/servers/.*")
    assert len(posts) == 2 and len(deletes) == 1
    # the new server was asked for only once the failed one had gone from the list
    log = bad_day["api"]
    i_delete, i_post = log.index(deletes[0]), log.index(posts[1])
    lists = [e for e in log[i_delete:i_post] if e["path"] == "/tacc/nova/v2.1/servers/detail"]
    assert len(lists) >= 2
    assert [s["status"] for s in bad_day["servers"]] == ["ACTIVE"]


def test_a_failed_make_artifacts_fails_its_cell(bad_day):
    _, retry, fixed = runs(bad_day, "02_provision")
    err = retry["error"]
    assert err["ename"] == "RuntimeError" and "`make artifacts` failed on the node (exit code 2" in err["evalue"]
    assert "No matching distribution found" in retry["cells"][-1]["text"]
    assert "init_env" not in retry["cells"][-1]["first_line"]
    assert fixed["error"] is None and "init_env.sh" in fixed["cells"][1]["first_line"]


def test_an_old_python_chi_is_named_before_anything_runs(tmp_path_factory):
    result = scenario("old_python_chi", tmp_path_factory)
    for run in result["runs"]:
        assert len(run["cells"]) == 1
        assert "python-chi 0.17.12 is too old" in run["error"]["evalue"]
        assert "%pip install python-chi==1.2.10" in run["error"]["evalue"]
    assert result["api"] == []


# ------------------------------------------------------------------ settings and versions

def test_notebooks_name_the_pinned_python_chi():
    pin = re.search(r"^python-chi==(\S+)", (REPO / "requirements/constraints.txt").read_text(), re.M).group(1)
    for name in ("01_reserve", "02_provision"):
        src = (REPO / "notebook_sources" / f"{name}.py").read_text()
        assert f"python-chi=={pin}" in src and 'context.version = "1.0"' in src


def test_settings_default_to_the_checkout_they_came_from(tmp_path):
    """Empty REPO_URL/REPO_REF: the origin and commit of the clone the notebooks sit in."""
    origin = tmp_path / "origin"
    origin.mkdir()
    env = {"GIT_AUTHOR_NAME": "i", "GIT_AUTHOR_EMAIL": "i@x", "GIT_COMMITTER_NAME": "i", "GIT_COMMITTER_EMAIL": "i@x",
           "HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1"}
    shutil.copytree(REPO / "notebooks", origin / "notebooks", ignore=shutil.ignore_patterns("*.ipynb", "__pycache__"))
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "x"]):
        subprocess.run(["git", *args], cwd=origin, check=True, env=env)
    subprocess.run(["git", "clone", "-q", str(origin), str(tmp_path / "clone")], check=True, env=env)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=origin, capture_output=True, text=True).stdout.strip()
    read = [sys.executable, "-c", "import lab_settings as s; print(s.REPO_URL, s.REPO_REF)"]
    out = subprocess.run(read, cwd=tmp_path / "clone" / "notebooks", capture_output=True, text=True, env=env)
    assert out.stdout.split() == [str(origin), head]
    plain = tmp_path / "plain"
    shutil.copytree(origin / "notebooks", plain)
    out = subprocess.run(read, cwd=plain, capture_output=True, text=True, env=env)
    assert out.returncode == 0 and out.stdout.strip() == ""
