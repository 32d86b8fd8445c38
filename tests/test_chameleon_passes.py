"""Nothing a student does is lost between the passes (notebook 0), though the passes run on two
machines: notebook 2 carries the notebooks prepared in Chameleon's Jupyter to the node's clone,
never overwriting work done on the node since, and its clean-up (and notebook 1's) brings the
node's result bundles back before any server is deleted. Asserted on the files, against the fake
Chameleon's scenarios (see tests/test_chameleon_notebooks.py):
  class_day              notebook 3 prepared, carried; then changed on the node and here too;
                         a bundle written on the node comes back before the delete, to where
                         the review pass reads it with no setting
  lease_error            the bundle where LAB_BUNDLE points on the node
  two_nodes_without_ips  notebook 1's DELETE_LEASE brings the bundle back before the lease goes
  two_nodes              the instructor moves the class's tag: both clones follow, the
                         student's notebook is kept with the fix merged into it
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re

import pytest
from fake_chameleon.results import (
    needs_namespace,
    requests,
    run,
    scenario_fixture,
    scenarios_ahead,  # noqa: F401 - autouse: the class's scenarios run side by side
    text,
)
from fake_chameleon.scenarios import PREPARED

pytestmark = [needs_namespace, pytest.mark.slow]
NB3 = "03_fastapi_setup.ipynb"
BUNDLE = "03_fastapi_setup/summary.csv"
CSV = "rate,p95_ms\n100,41.5\n"


def sha(text_: str) -> str:
    return hashlib.sha256(text_.encode()).hexdigest()


def when(entry) -> dt.datetime:
    return dt.datetime.fromisoformat(entry["at"])


class_day = scenario_fixture("class_day", "class_day")


def test_the_prepared_notebook_arrives_in_the_nodes_clone(class_day):
    notes = class_day["notes"]
    prepared = notes["prepared"][NB3]
    assert notes["carried"][NB3] == prepared  # as written in Chameleon's Jupyter
    first = run(class_day, "02_provision", "first")
    assert f"{NB3}: carried to the node" in text(first)
    puts = [t for t in class_day["node"]["transfers"] if t["path"].endswith(f"notebooks/{NB3}")]
    assert [t["op"] for t in puts] == ["put"]
    # with what its prepare pass kept, where the node's measure pass reads it
    assert class_day["node"]["prepared"] == {"03_fastapi_setup": PREPARED}
    assert "03_fastapi_setup: what its prepare pass kept (prepared.json) carried" in text(first)
    # notebooks 1 and 2 run in Chameleon's Jupyter only: never carried
    carried = {t["path"].rsplit("/", 1)[1] for t in class_day["node"]["transfers"]}
    assert not carried & {"01_reserve.ipynb", "02_provision.ipynb"}


def test_work_done_on_the_node_is_never_overwritten(class_day):
    """Between the rounds the measure pass changed notebook 3 on the node, and the student
    wrote more in it here: the node's copy stays, the one from here lands beside it."""
    notes = class_day["notes"]
    measured = notes["measured"][NB3]
    assert measured != notes["carried"][NB3]
    again = run(class_day, "02_provision", "again")
    assert (
        f"{NB3}: changed both here and on the node: the node's copy is kept, yours is beside it "
        "as 03_fastapi_setup.from_jupyter.ipynb" in text(again)
    )
    on_node = class_day["node"]["notebooks"]
    assert on_node[NB3] == measured
    assert on_node["03_fastapi_setup.from_jupyter.ipynb"] == notes["prepared again"][NB3]


def test_the_bundle_comes_back_before_the_server_is_deleted(class_day):
    # the measure pass's files, and prepared.json as it was carried there (the same text)
    prepared = "03_fastapi_setup/prepared.json"
    assert class_day["jupyter_bundles"] == {
        BUNDLE: sha(CSV),
        prepared: sha(json.dumps(PREPARED, indent=1)),
    }
    deleted = run(class_day, "02_provision", "delete server")
    assert "brought back 2 file(s) of 1 bundle(s) (03_fastapi_setup)" in text(deleted)
    # to the work folder's results/bundles/, which the review pass reads with no setting
    assert re.search(r"03_fastapi_setup\) from .* to /\S+/results/bundles$", text(deleted), re.M)
    (got,) = [t for t in class_day["node"]["transfers"] if t["path"].endswith(BUNDLE)]
    assert got["op"] == "get"
    (delete,) = requests(class_day, "DELETE", r"/tacc/nova/v2\.1/servers/.*", deleted)
    assert when(got) < when(delete)


lease_error = scenario_fixture("lease_error", "lease_error")


def test_the_bundle_comes_back_from_where_lab_bundle_points(lease_error):
    deleted = run(lease_error, "02_provision", "delete server")
    assert re.search(r"/home/cc/measured/bundles to /\S+/results/bundles$", text(deleted), re.M)
    assert lease_error["jupyter_bundles"] == {
        "04_fastapi_benchmarks/rows.csv": sha("rate,p50_ms\n50,12.0\n")
    }
    (got,) = [t for t in lease_error["node"]["transfers"] if t["op"] == "get"]
    (delete,) = requests(lease_error, "DELETE", r"/tacc/nova/v2\.1/servers/.*", deleted)
    assert got["path"] == "/home/cc/measured/bundles/04_fastapi_benchmarks/rows.csv"
    assert when(got) < when(delete)


two_without_ips = scenario_fixture("two_without_ips", "two_nodes_without_ips")


def test_deleting_the_lease_brings_the_bundle_back_first(two_without_ips):
    deleted = run(two_without_ips, "01_reserve", "delete lease")
    assert "brought back 1 file(s) of 1 bundle(s) (03_fastapi_setup)" in text(deleted)
    assert two_without_ips["jupyter_bundles"] == {BUNDLE: sha(CSV)}
    (got,) = [t for t in two_without_ips["node"]["transfers"] if t["path"].endswith(BUNDLE)]
    (delete,) = requests(two_without_ips, "DELETE", r"/tacc/blazar/v1/leases/.*", deleted)
    assert when(got) < when(delete)


two_nodes = scenario_fixture("two_nodes", "two_nodes")


def test_a_moved_tag_is_followed_by_every_clone(two_nodes):
    """The instructor fixed v1 and moved the tag after both nodes had cloned it."""
    fixed = two_nodes["notes"]["v1 moved"]
    assert fixed == two_nodes["tags"]["v1 moved"] != two_nodes["tags"]["v1"]
    again = run(two_nodes, "02_provision", "again")
    assert again["error"] is None, again["error"]
    assert two_nodes["node"]["clone_head"] == fixed
    assert two_nodes["second_node"]["clone_head"] == fixed
    assert text(again).count(f"lab version: {fixed[:7]}") == 2
    at_v1 = run(two_nodes, "02_provision", "two nodes")
    assert text(at_v1).count(f"lab version: {two_nodes['tags']['v1'][:7]}") == 2


def test_the_students_notebook_survives_the_move(two_nodes):
    """Carried at v1 (the student's lines in it), put aside while the clone moved, put back
    with the class's fix merged in: nothing left in the stash, nothing of the student's lost."""
    assert f"{NB3}: carried to the node" in text(run(two_nodes, "02_provision", "two nodes"))
    again = run(two_nodes, "02_provision", "again")
    assert f"{NB3}: kept the node's copy" in text(again)
    assert not re.search(r"^your changes on the node clash", text(again), re.M)
    assert two_nodes["node"]["stash"] == ""
    assert two_nodes["notes"]["on the node"] == {"the fix": True, "the student's lines": True}
