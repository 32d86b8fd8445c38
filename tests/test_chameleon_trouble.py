"""Notebooks 1 and 2 when things go wrong for one student of a class (see
tests/test_chameleon_notebooks.py for how the scenarios run):
  classmate_ip_unbound  a lease without a reserved IP, a classmate's reserved IP unbound nearby
  reserved_ip_taken     the student's reserved IP attached to a classmate's server
  refusals              the project's allocation used up; no reservable IP left; an empty pool
  bad_day               no node free for the whole lease; a server in ERROR; a failing build
  bad_host              the lease's one node fails every boot
Each ends in the right state or stops with a message that names the fix; the values sent to
the APIs are checked.
"""

from __future__ import annotations

import datetime as dt
import re
import sys
from pathlib import Path

import pytest
from fake_chameleon.results import needs_namespace, requests, run, runs, scenario, text

REPO = Path(__file__).resolve().parent.parent
pytestmark = [needs_namespace, pytest.mark.slow]
FIPS = r"/tacc/neutron/v2\.0/floatingips"


def fip_puts(result, during=None):
    return requests(result, "PUT", FIPS + r"/.*", during)


def fip_id(entry) -> str:
    return entry["path"].rsplit("/", 1)[1]


# ------------------------------------------------------------- floating IPs stay with their owner


@pytest.fixture(scope="module")
def classmate_ip(tmp_path_factory):
    return scenario("classmate_ip_unbound", tmp_path_factory)


def test_without_a_reserved_ip_a_fresh_one_is_taken_never_a_classmates(classmate_ip):
    first = run(classmate_ip, "02_provision", "first")
    assert first["error"] is None, first["error"]
    (post,) = requests(classmate_ip, "POST", FIPS)
    assert post["body"]["floatingip"] == {
        "floating_network_id": "net-public",
        "description": "public IP of node-serve-system-student, allocated by notebook 2",
    }
    (put,) = fip_puts(classmate_ip)
    assert fip_id(put) == post["reply"]["floatingip"]["id"]
    booting = classmate_ip["classmates"]["classmate01"]
    assert booting["role"] == "booting"
    assert all(fip_id(p) != booting["ip_id"] for p in fip_puts(classmate_ip))
    assert next(f for f in classmate_ip["fips"] if f["id"] == booting["ip_id"])["port_id"] is None
    address = post["reply"]["floatingip"]["floating_ip_address"]
    assert {c["via"] for c in classmate_ip["node_commands"]} == {address}


def test_the_fresh_ip_is_found_again_then_given_back_at_clean_up(classmate_ip):
    (post,) = requests(classmate_ip, "POST", FIPS)
    again = run(classmate_ip, "02_provision", "again")
    assert again[
        "error"
    ] is None and f"floating IP: {post['reply']['floatingip']['floating_ip_address']}" in text(
        again
    )
    cleanup = run(classmate_ip, "02_provision", "delete server")
    assert [fip_id(e) for e in requests(classmate_ip, "DELETE", FIPS + r"/.*")] == [
        post["reply"]["floatingip"]["id"]
    ]
    assert "given back to the site's pool" in text(cleanup)
    assert post["reply"]["floatingip"]["floating_ip_address"] in classmate_ip["pool"]


@pytest.fixture(scope="module")
def ip_taken(tmp_path_factory):
    return scenario("reserved_ip_taken", tmp_path_factory)


def test_a_reserved_ip_held_by_a_classmate_is_named_and_left_alone(ip_taken):
    taken = run(ip_taken, "02_provision", "taken")
    thief = ip_taken["classmates"]["classmate01"]
    assert taken["error"]["evalue"].startswith("The IP ")
    assert (
        f"is attached to server node-serve-system-classmate01 of user {thief['user_id']}, not to "
        "node-serve-system-student: ask that student (or your instructor) to detach it"
        in taken["error"]["evalue"]
    )
    assert fip_puts(ip_taken, taken) == [] and requests(ip_taken, "POST", FIPS) == []


def test_once_detached_the_reserved_ip_is_attached_and_ssh_answers(ip_taken):
    back = run(ip_taken, "02_provision", "given back")
    assert back["error"] is None, back["error"]
    (put,) = fip_puts(ip_taken, back)
    student_server = requests(ip_taken, "POST", r"/tacc/nova/v2\.1/servers")[0]["reply"]["server"][
        "id"
    ]
    assert ip_taken["port_owner"][put["body"]["floatingip"]["port_id"]] == student_server
    assert ip_taken["fip_history"][fip_id(put)]["tags"][0] == "blazar"


# ------------------------------------------------------------------ Blazar and Neutron say no


@pytest.fixture(scope="module")
def refusals(tmp_path_factory):
    return scenario("refusals", tmp_path_factory)


def test_a_used_up_allocation_is_named_with_who_can_fix_it(refusals):
    quota = run(refusals, "01_reserve", "quota")
    assert quota["error"]["evalue"] == (
        "Project CHI-231138 has not enough allocation left for a 3 h lease: ask "
        "your instructor to extend the project's allocation, then run this "
        "notebook again."
    )
    # as python-chi logs it; a lease starting "now" ends on a whole minute: 3 h less < 1 minute
    spent = re.search(r"would spend ([\d.]+) sus, only 1\.000000 left", text(quota))
    assert spent and 3 - 1 / 60 <= float(spent.group(1)) <= 3, text(quota)
    posts = requests(refusals, "POST", r"/tacc/blazar/v1/leases", quota)
    assert [e["status"] for e in posts] == [403]


def test_no_reservable_ip_is_diagnosed_as_such_not_as_no_free_node(refusals):
    no_ip = run(refusals, "01_reserve", "no floating IP")
    assert no_ip["error"]["evalue"] == (
        "CHI@TACC has no reservable public IP left for your hours: set "
        "RESERVE_FLOATING_IP = False in the second cell of notebook 1 and run it "
        "again (notebook 2 then takes an IP from the site's pool)."
    )
    assert "START_IN_HOURS" not in text(no_ip) and "not enough floating ips available" in text(
        no_ip
    )
    assert [e["status"] for e in requests(refusals, "POST", r"/tacc/blazar/v1/leases", no_ip)] == [
        409
    ]


def test_without_a_reserved_ip_the_lease_asks_for_the_node_only(refusals):
    made = run(refusals, "01_reserve", "without floating IP")
    assert made["error"] is None
    (post,) = requests(refusals, "POST", r"/tacc/blazar/v1/leases", made)
    assert post["status"] == 201
    assert [r["resource_type"] for r in post["body"]["reservations"]] == ["physical:host"]


def test_a_reached_floating_ip_quota_is_named_with_who_can_fix_it(refusals):
    quota = run(refusals, "02_provision", "quota reached")
    assert quota["error"]["evalue"].startswith("The project has as many floating IPs as its quota ")
    assert "ask your instructor to raise the quota" in quota["error"]["evalue"]
    assert fip_puts(refusals, quota) == []


def test_an_empty_pool_is_named_then_the_cell_works_once_an_ip_is_back(refusals):
    empty, back = (
        run(refusals, "02_provision", "pool empty"),
        run(refusals, "02_provision", "pool has one"),
    )
    assert empty["error"]["evalue"].startswith("The site has no public IP free right now (")
    assert "run this cell again in a few minutes" in empty["error"]["evalue"]
    assert fip_puts(refusals, empty) == []
    assert back["error"] is None, back["error"]
    (put,) = fip_puts(refusals, back)
    assert refusals["fip_history"][fip_id(put)]["address"] == "127.20.1.77"
    assert {c["via"] for c in refusals["node_commands"]} == {"127.20.1.77"}


# ------------------------------------------------------------------ no node, failing servers


@pytest.fixture(scope="module")
def bad_day(tmp_path_factory):
    return scenario("bad_day", tmp_path_factory)


def test_no_free_node_names_the_next_start_and_nvidia_types_free_for_the_whole_lease(bad_day):
    refused = run(bad_day, "01_reserve", "no node free")
    out = text(refused)
    # the V100s are free for 1 h only, the MI100s are AMD: neither can hold a 3 h lab lease
    assert "NVIDIA GPU node types free now at CHI@TACC for 3 h: gpu_rtx_6000\n" in out
    # every gpu_p100 is booked until +2 h at the earliest (the last two again from +6 h)
    next_free = dt.datetime.strptime(
        out.split("next gpu_p100 free for 3 h from (UTC): ")[1][:16], "%Y-%m-%d %H:%M"
    )
    asked = requests(bad_day, "POST", r"/tacc/blazar/v1/leases", refused)[0]
    assert (
        dt.timedelta(hours=1, minutes=55)
        <= next_free - dt.datetime.fromisoformat(asked["at"])
        <= dt.timedelta(hours=2)
    )
    assert refused["error"]["evalue"] == (
        "No gpu_p100 node at CHI@TACC is free for 3 h at the start you asked "
        "for: set START_IN_HOURS = 2 in the second cell of notebook 1 (or "
        "NODE_TYPE in notebooks/lab_settings.py to a type above)."
    )
    assert [e["status"] for e in requests(bad_day, "POST", r"/tacc/blazar/v1/leases")] == [409, 201]


def test_a_server_in_error_is_deleted_and_made_again(bad_day):
    first, retry = runs(bad_day, "02_provision")[:2]
    err = first["error"]
    assert err["ename"] == "RuntimeError" and "ERROR: Build of instance aborted" in err["evalue"]
    assert (
        "run the cell above (it deletes the failed server), then this cell again" in err["evalue"]
    )
    assert "deleting node-serve-system-student, which is in ERROR" in text(
        retry
    ) and "deleted" in text(retry)
    posts = requests(bad_day, "POST", r"/tacc/nova/v2\.1/servers")
    deletes = requests(bad_day, "DELETE", r"/tacc/nova/v2\.1/servers/.*")
    assert [e["path"].rsplit("/", 1)[1] for e in deletes] == [posts[0]["reply"]["server"]["id"]]
    assert (
        posts[0]["body"]["OS-SCH-HNT:scheduler_hints"]
        == posts[1]["body"]["OS-SCH-HNT:scheduler_hints"]
    )
    # the new server was asked for only once the failed one had gone from the list
    log = bad_day["api"]
    i_delete, i_post = log.index(deletes[0]), log.index(posts[1])
    assert (
        len([e for e in log[i_delete:i_post] if e["path"] == "/tacc/nova/v2.1/servers/detail"]) >= 2
    )
    assert [s["status"] for s in bad_day["servers"] if s["user_id"] == bad_day["user_id"]] == [
        "ACTIVE"
    ]


def test_a_failed_make_artifacts_fails_its_cell(bad_day):
    _, retry, fixed = runs(bad_day, "02_provision")
    err = retry["error"]
    assert (
        err["ename"] == "RuntimeError"
        and "`make artifacts-only` failed on the node (exit code 2" in err["evalue"]
    )
    assert "No matching distribution found" in retry["cells"][-1]["text"]
    assert "init_env" not in retry["cells"][-1]["first_line"]
    assert fixed["error"] is None and "init_env.sh" in fixed["cells"][1]["first_line"]


@pytest.fixture(scope="module")
def bad_host(tmp_path_factory):
    return scenario("bad_host", tmp_path_factory)


def test_a_second_failure_on_the_same_node_points_to_a_new_lease(bad_host):
    first, second = (
        run(bad_host, "02_provision", "first failure"),
        run(bad_host, "02_provision", "second failure"),
    )
    assert (
        "then this cell again" in first["error"]["evalue"]
        and "new lease" not in first["error"]["evalue"]
    )
    assert second["error"]["evalue"].startswith(
        "node-serve-system-student failed to start on this lease's node "
        "again (ERROR: Build of instance aborted"
    )
    assert (
        "delete the server (cell above) and this lease (notebook 1, last cell), then make a new "
        "lease in notebook 1, which most likely gets another node." in second["error"]["evalue"]
    )
    posts = requests(bad_host, "POST", r"/tacc/nova/v2\.1/servers")
    ((lease_id, failed),) = bad_host["failed_boots"].items()
    assert sorted(failed) == sorted(p["reply"]["server"]["id"] for p in posts) and len(posts) == 2


def test_a_delete_that_does_not_finish_says_so_instead_of_deleted(bad_host):
    stuck = run(bad_host, "02_provision", "delete never ends")
    assert stuck["error"]["evalue"] == (
        "node-serve-system-student is still being deleted after 5 minutes: run "
        "this cell again later."
    )
    assert "deleting node-serve-system-student, which is in ERROR" in text(stuck)
    assert "deleted\n" not in text(stuck)
    server_id = requests(bad_host, "POST", r"/tacc/nova/v2\.1/servers")[-1]["reply"]["server"]["id"]
    assert [
        e["path"] for e in requests(bad_host, "DELETE", r"/tacc/nova/v2\.1/servers/.*", stuck)
    ] == [f"/tacc/nova/v2.1/servers/{server_id}"]


# ------------------------------------------------------------------ Blazar's words, one by one


def test_refusal_kinds_follow_blazars_words():
    sys.path.insert(0, str(REPO / "notebooks"))
    import chi_helpers

    said = {  # as python-chi logs them (it lowercases Blazar's message)
        "error: not enough hosts available": "hosts",
        "error: not enough floating ips available": "floating_ips",
        "error: reservation for project chi-231138 would spend 3.000000 sus, "
        "only 1.000000 left": "quota",
        "error: lease duration of 10800 seconds must be less than or equal to the maximum lease "
        "duration of 3600 seconds.": "duration",
        "error: external service enforcement filter denied the request.": "other",
    }
    assert {m: chi_helpers.refusal_kind(m) for m in said} == said
