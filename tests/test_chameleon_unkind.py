"""Notebooks 1 and 2 against the fake Chameleon in the last ways the site is unkind (see
tests/test_chameleon_notebooks.py for how the scenarios run; the site's clock and its passing
faults: tests/fake_chameleon/common.py and api.py):
  flaky_site          Blazar and Nova answering 5xx or resetting connections during every wait
                      of notebook 2, then Nova down for good during a delete; lease names Blazar
                      refuses because the project has them already
  second_node         notebook 9's second node: the server quota, a classmate on its reserved IP,
                      a boot past the wait's limit, sshd 25 minutes after ACTIVE, a delete that
                      never ends; the key in section 4's ssh command
  lease_trouble       the lease ends before the server is made (Nova takes it, then fails it),
                      the project's server quota, a degraded lease healed, then one not
  two_nodes_pool_ips  both nodes' pool IPs given back by each clean-up that finds them (D1)
  second_site         the class at CHI@UC, whose node types, networks and addresses differ
Each asserts what the student sees (one line for a passing fault, one sentence at each stop)
and the values sent to the site, not only the calls.
"""

from __future__ import annotations

import re

import pytest
from fake_chameleon.results import (
    needs_namespace,
    neutron_deletes,
    requests,
    run,
    scenario_fixture,
    scenarios_ahead,  # noqa: F401 - autouse: the class's scenarios run side by side
    text,
    unrouted,
)

pytestmark = [needs_namespace, pytest.mark.slow]
STUDENT = "node-serve-system-student"
SECOND = "node2-serve-system-student"
FIPS = r"/tacc/neutron/v2\.0/floatingips"


def one_sentence(message: str) -> bool:
    """One sentence: a single full stop, at its end (abbreviations and numbers aside)."""
    body = re.sub(r"\d\.\d|e\.g\.|\.ipynb|\.lab|\.py|\.\d+|notebooks/\S+", "", message)
    return body.rstrip().endswith(".") and body.rstrip()[:-1].count(". ") == 0


def faults_in(result, a_run) -> list:
    """The faults the site answered during a run, in order: (method, path, what)."""
    log = result["api"][a_run["api_from"] : a_run["api_to"]]
    return [(e["method"], e["path"], e["fault"]) for e in log if "fault" in e]


def name_of(result, lease_id: str) -> str:
    return next(x["name"] for x in result["leases"] if x["id"] == lease_id)


def fault_lines(a_run, service: str) -> list[str]:
    return [
        line
        for line in text(a_run).splitlines()
        if line.startswith(f"{service}: ") and "a passing fault of the site" in line
    ]


# ------------------------------------------------------------------ passing faults


flaky = scenario_fixture("flaky", "flaky_site")


def test_blazars_passing_faults_during_the_lease_wait_are_said_and_waited_out(flaky):
    lease_id = flaky["notes"]["lease"]
    started = run(flaky, "02_provision", "lease starting")
    assert started["error"] is None, started["error"]
    assert [what for _, _, what in faults_in(flaky, started)] == [503, "reset", 502]
    assert {path for _, path, _ in faults_in(flaky, started)} == {
        f"/tacc/blazar/v1/leases/{lease_id}"
    }
    assert fault_lines(started, "Blazar") == [
        f"Blazar: {what}, a passing fault of the site; asking again every 30 s (a fault that "
        "lasts 5 minutes stops the wait)"
        for what in ("HTTP 503", "the connection was reset", "HTTP 502")
    ]
    assert f"your lease {name_of(flaky, lease_id)} is ACTIVE" in text(started)
    assert flaky["notes"]["lease faults"]["replies"] == []  # every fault was met


def test_novas_passing_faults_during_the_boot_and_ssh_waits_are_waited_out(flaky):
    booting = run(flaky, "02_provision", "booting")
    assert booting["error"] is None, booting["error"]
    assert [what for _, _, what in faults_in(flaky, booting)] == [503, 500, "reset", 504]
    (post,) = requests(flaky, "POST", r"/tacc/nova/v2\.1/servers", booting)
    server_id = post["reply"]["server"]["id"]
    assert {p for _, p, _ in faults_in(flaky, booting)} == {f"/tacc/nova/v2.1/servers/{server_id}"}
    assert [line.split(",")[0] for line in fault_lines(booting, "Nova")] == [
        "Nova: HTTP 503",
        "Nova: HTTP 500",
        "Nova: the connection was reset",
        "Nova: HTTP 504",
    ]
    assert f"{STUDENT} status: ACTIVE" in text(booting)
    ssh = run(flaky, "02_provision", "ssh")
    assert ssh["error"] is None, ssh["error"]
    assert [what for _, _, what in faults_in(flaky, ssh)] == [503, "reset"]
    assert "SSH answers on " in text(ssh)
    assert len(fault_lines(ssh, "Nova")) == 2


def test_a_lasting_fault_ends_the_wait_with_one_sentence_then_the_cell_goes_on(flaky):
    down = run(flaky, "02_provision", "delete, Nova down")
    message = down["error"]["evalue"]
    assert down["error"]["ename"] == "RuntimeError"
    assert message == (
        "Nova has failed every time this cell asked it for 5 minute(s) (last: HTTP 503) while "
        f"it waited for {STUDENT} to be deleted: the site is having trouble, not your lease or "
        "server, and your lease and its reserved IP stay yours; run this cell again in 15 "
        "minutes (it waits again for the same thing, nothing is made twice), and if it fails "
        "again, tell your instructor."
    )
    assert one_sentence(message)
    # one line while the same fault lasts, though Nova was asked every 15 s for 5 minutes
    assert fault_lines(down, "Nova") == [
        "Nova: HTTP 503, a passing fault of the site; asking again every 15 s (a fault that "
        "lasts 5 minutes stops the wait)"
    ]
    assert [w for _, _, w in faults_in(flaky, down)] == [503] * 21
    assert flaky["notes"]["down"]["leases"] == ["ACTIVE", *["DELETING"] * 3]
    back = run(flaky, "02_provision", "site back")
    assert back["error"] is None, back["error"]
    assert f"{STUDENT} status: ACTIVE" in text(back)
    posts = requests(flaky, "POST", r"/tacc/nova/v2\.1/servers")
    assert len(posts) == 2 and len(requests(flaky, "DELETE", r"/tacc/nova/.*")) == 1


def test_a_lease_name_the_project_has_already_is_not_asked_for(flaky):
    """Blazar refuses a name its lease table has (a lease being deleted keeps it): notebook 1
    asks for the name with -2 at its end, and never goes on with the old lease of that name."""
    reserved = run(flaky, "01_reserve", "reserve")
    assert reserved["error"] is None, reserved["error"]
    (post,) = requests(flaky, "POST", r"/tacc/blazar/v1/leases", reserved)
    name = post["body"]["name"]
    assert post["status"] == 201 and name.endswith("-2")
    assert name.removesuffix("-2") in flaky["notes"]["taken names"]
    assert post["reply"]["lease"]["id"] == flaky["notes"]["lease"]
    assert "yet Blazar made your lease" not in text(reserved)


# ------------------------------------------------------------------ the second node


second = scenario_fixture("second", "second_node")


def test_the_projects_server_quota_is_said_for_the_second_node_too(second):
    refused = run(second, "02_provision", "second refused")
    (post,) = requests(second, "POST", r"/tacc/nova/v2\.1/servers", refused)
    assert post["status"] == 403 and post["body"]["server"]["name"] == SECOND
    assert refused["error"]["evalue"].startswith(
        f"Nova refused {SECOND}: the project holds as many servers as its quota allows (Quota "
        "exceeded for instances: Requested 1, but already used "
    )


def test_the_second_nodes_boot_wait_runs_out_then_is_met(second):
    assert run(second, "02_provision", "first node")["error"] is None
    first = run(second, "02_provision", "second boot")
    assert first["error"]["evalue"] == (
        f"{SECOND} is still booting (BUILD) after 30 minutes, holding your lease's node and no "
        "IP yet: run this cell again, which waits again for the same server, and if it is still "
        "BUILD an hour after it was made, delete it (last cell, DELETE_SERVER = True) and run "
        "this notebook again, which boots a new one."
    )
    again = run(second, "02_provision", "second boot again")
    assert again["error"] is None and f"{SECOND} status: ACTIVE" in text(again)
    posts = requests(second, "POST", r".*/servers")
    assert [(p["body"]["server"]["name"], p["status"]) for p in posts] == [
        (STUDENT, 202),
        (SECOND, 403),
        (SECOND, 202),
    ]


def test_a_classmate_on_the_second_reserved_ip_is_named_and_left_alone(second):
    taken = run(second, "02_provision", "second IP taken")
    thief = second["classmates"]["classmate01"]
    address = second["notes"]["second IP"]
    assert taken["error"]["evalue"] == (
        f"The IP {address} reserved with your lease is attached to server "
        f"node-serve-system-classmate01 of user {thief['user_id']}, not to {SECOND}: ask that "
        "student (or your instructor) to detach it, then run this cell again."
    )
    assert requests(second, "PUT", FIPS + r"/.*", taken) == []
    back = run(second, "02_provision", "second IP back")
    (put,) = requests(second, "PUT", FIPS + r"/.*", back)
    second_id = requests(second, "POST", r".*/servers")[2]["reply"]["server"]["id"]
    assert second["port_owner"][put["body"]["floatingip"]["port_id"]] == second_id
    assert second["fip_history"][put["path"].rsplit("/", 1)[1]]["address"] == address


def test_the_second_nodes_ssh_wait_runs_out_then_is_met(second):
    """sshd answers 25 minutes after the second server is ACTIVE: without its own SSH wait, the
    next cell's commands would find no node."""
    address = second["notes"]["second IP"]
    stopped = run(second, "02_provision", "second IP back")
    assert stopped["error"]["evalue"].startswith(
        f"{SECOND} ({address}) has not taken an SSH login in 15 minutes (last answer: "
    )
    again = run(second, "02_provision", "second ssh again")
    assert again["error"] is None and f"SSH answers on {address}" in text(again)
    rest = run(second, "02_provision", "the rest")
    assert rest["error"] is None, rest["error"]
    assert {c["via"] for c in second["second_node"]["commands"]} == {address}


def test_the_ssh_command_names_the_key_python_chi_logs_in_with(second):
    out = text(run(second, "02_provision", "first node"))
    key = second["notes"]["private key"]
    (first_ip,) = re.findall(r"^floating IP: (\S+)$", out, re.M)
    assert f"    ssh -i {key} cc@{first_ip}\n" in out
    assert f"    ssh -i {key} -L 8888:127.0.0.1:8888 cc@{first_ip}" in out


def test_the_second_nodes_delete_that_never_ends_says_so(second):
    stuck = run(second, "02_provision", "second delete stuck")
    assert stuck["error"]["evalue"] == (
        f"{SECOND} is still being deleted after 10 minutes (Nova still lists it while its node "
        "is torn down; your lease and its reserved IP stay yours): run this cell again in 5 "
        "minutes, and if it is still listed half an hour after the delete, show this message "
        "to your instructor."
    )
    assert f"deleting {SECOND}, which is in ERROR" in text(stuck)


# ------------------------------------------------------------------ the lease under the server


trouble = scenario_fixture("trouble", "lease_trouble")


def test_a_server_made_after_the_lease_ended_is_taken_then_failed_and_said_so(trouble):
    over = run(trouble, "02_provision", "A is over")
    (post,) = requests(trouble, "POST", r"/tacc/nova/v2\.1/servers", over)
    a = next(x for x in trouble["leases"] if x["id"] == trouble["notes"]["A"])
    host_res = next(r["id"] for r in a["reservations"] if r["resource_type"] == "physical:host")
    assert post["status"] == 202  # Nova takes it, as the site's does
    assert post["body"]["OS-SCH-HNT:scheduler_hints"] == {"reservation": host_res}
    assert re.fullmatch(
        rf"{STUDENT} failed to start \(ERROR: No valid host was found\. There are not enough "
        r"hosts available\.\) because your lease is (TERMINATING|TERMINATED), not ACTIVE: Nova "
        r"takes a server for any lease and fails it when the lease has no node for it, so the "
        r"node is not at fault; delete the server \(cell above\) and make a new lease in "
        r"notebook 1, then run this notebook again\.",
        over["error"]["evalue"],
    ), over["error"]["evalue"]
    assert trouble["failed_boots"].get(f"{a['id']} {STUDENT}") is None


def test_the_projects_server_quota_is_said_with_who_can_raise_it(trouble):
    refused = run(trouble, "02_provision", "quota")
    (post,) = requests(trouble, "POST", r"/tacc/nova/v2\.1/servers", refused)
    assert post["status"] == 403
    message = refused["error"]["evalue"]
    assert re.fullmatch(
        rf"Nova refused {STUDENT}: the project holds as many servers as its quota allows "
        r"\(Quota exceeded for instances: Requested 1, but already used (\d+) of \1 instances\), "
        r"servers being deleted included; ask your instructor to raise the project's instances "
        r"quota \(or classmates to delete servers they no longer use\), then run this cell "
        r"again: your lease stays yours meanwhile\.",
        message,
    ), message
    assert one_sentence(message)
    deleting = run(trouble, "02_provision", "one being deleted")
    assert deleting["error"]["evalue"] == message  # Nova still counts the server being deleted
    raised = run(trouble, "02_provision", "quota raised")
    assert raised["error"] is None, raised["error"]
    (made,) = requests(trouble, "POST", r"/tacc/nova/v2\.1/servers", raised)
    b = next(x for x in trouble["leases"] if x["id"] == trouble["notes"]["B"])
    assert made["status"] == 202 and made["body"]["server"]["metadata"] == {
        "serve_system_lease": b["id"]
    }


def test_a_degraded_lease_healed_by_blazar_gets_a_server_on_its_new_node(trouble):
    healed = run(trouble, "02_provision", "degraded, replaced")
    assert healed["error"] is None, healed["error"]
    assert "is degraded: a node it reserved failed and Blazar put another node in its place" in (
        text(healed)
    )
    assert f"deleting {STUDENT}, which is in ERROR (Node failed" in text(healed)
    (post,) = requests(trouble, "POST", r"/tacc/nova/v2\.1/servers", healed)
    made = next(s for s in trouble["servers"] if s["id"] == post["reply"]["server"]["id"])
    assert made["host"] == trouble["notes"]["replaced"]["spare"]


def test_a_degraded_lease_missing_its_node_stops_notebook_2_with_what_to_do(trouble):
    missing = run(trouble, "02_provision", "degraded, missing")
    message = missing["error"]["evalue"]
    assert message.startswith("Your lease serve_system_student_")
    assert (
        " is degraded: a node it reserved failed (Blazar took it out of service) and Blazar "
        "found no free node of its type to put in its place, so no server can start there"
    ) in message
    assert one_sentence(message)
    assert requests(trouble, "POST", r"/tacc/nova/.*", missing) == []


# ------------------------------------------------------------------ D1 wherever it applies


pool_ips = scenario_fixture("pool_ips", "two_nodes_pool_ips")


def pool_posts(result, label):
    """The pool IPs notebook 2 took during a run, as {server name: (fip id, address)}."""
    taken = {}
    for post in requests(result, "POST", FIPS, run(result, "02_provision", label)):
        name = post["body"]["floatingip"]["description"].split()[3]
        fip = post["reply"]["floatingip"]
        taken[name] = (fip["id"], fip["floating_ip_address"])
    return taken


def test_each_node_takes_a_pool_ip_of_its_own(pool_ips):
    taken = pool_posts(pool_ips, "nodes on lease 1")
    assert sorted(taken) == [STUDENT, SECOND]
    assert sorted(a for a, _ in pool_ips["notes"]["on lease 1"]["ips"]) == sorted(
        address for _, address in taken.values()
    )


def test_notebook_2s_clean_up_gives_back_both_pool_ips(pool_ips):
    """D1 in notebook 2's last cell."""
    taken = pool_posts(pool_ips, "nodes on lease 1")
    cleaned = run(pool_ips, "02_provision", "clean-up")
    assert cleaned["error"] is None, cleaned["error"]
    assert sorted(neutron_deletes(pool_ips, cleaned)) == sorted(
        f"/tacc/neutron/v2.0/floatingips/{fid}" for fid, _ in taken.values()
    )
    assert pool_ips["notes"]["cleaned up"]["pool_ips"] == []


def test_notebook_2_gives_back_both_pool_ips_of_a_lease_that_is_over(pool_ips):
    """D1 in notebook 2's lease cell."""
    taken = pool_posts(pool_ips, "nodes again")
    assert len(pool_ips["notes"]["lease 1 over"]["pool_ips"]) == 2
    after = run(pool_ips, "02_provision", "after lease 1")
    assert sorted(neutron_deletes(pool_ips, after)) == sorted(
        f"/tacc/neutron/v2.0/floatingips/{fid}" for fid, _ in taken.values()
    )
    for _, address in taken.values():
        assert f"public IP {address} given back to the site's pool (its lease " in text(after)
    assert after["error"]["evalue"].startswith("You have no pending or active lease")


def test_notebook_1_gives_back_both_pool_ips_of_a_lease_that_is_over(pool_ips):
    """D1 in notebook 1's lease cell, the next day."""
    taken = pool_posts(pool_ips, "nodes on lease 2")
    next_day = run(pool_ips, "01_reserve", "next day")
    assert next_day["error"] is None, next_day["error"]
    assert sorted(neutron_deletes(pool_ips, next_day)) == sorted(
        f"/tacc/neutron/v2.0/floatingips/{fid}" for fid, _ in taken.values()
    )
    assert pool_ips["notes"]["next day"]["pool_ips"] == []
    assert unrouted(pool_ips) == []


# ------------------------------------------------------------------ a second site


second_site = scenario_fixture("second_site", "second_site")


def test_a_node_type_the_site_has_not_is_named_with_the_types_it_has(second_site):
    stopped = run(second_site, "01_reserve", "gpu_p100 at UC")
    assert (
        "- NODE_TYPE gpu_p100 has no node at CHI@UC: set NODE_TYPE in notebooks/lab_settings.py "
        "to a type of that site (with NVIDIA GPUs there: gpu_a100_pcie, gpu_rtx_6000, "
        "gpu_v100; Chameleon's Hardware Catalog lists them all)."
    ) in stopped["error"]["evalue"]
    assert requests(second_site, "POST", r".*/blazar/.*", stopped) == []


def test_a_lease_at_another_site_does_not_count(second_site):
    none = run(second_site, "02_provision", "no lease at UC")
    assert none["error"]["evalue"] == (
        "You have no pending or active lease for this lab at CHI@UC (yours there: none): make "
        "one in notebook 1 (a lease is made at one site, SITE in lab_settings.py, and used there "
        "only)."
    )
    tacc = second_site["notes"]["TACC lease"]
    assert not [e for e in second_site["api"] if tacc in e["path"]]  # never read or changed


def test_the_whole_lab_runs_at_chi_uc_with_its_own_types_networks_and_addresses(second_site):
    reserve, provision = (
        run(second_site, "01_reserve", "reserve"),
        run(second_site, "02_provision", "provision"),
    )
    assert reserve["error"] is None and provision["error"] is None, provision["error"]
    writes = [
        e
        for e in second_site["api"]
        if e["method"] in ("POST", "PUT", "DELETE") and "/v3/" not in e["path"]
    ]
    assert writes and all(e["path"].startswith("/uc/") for e in writes)  # nothing at CHI@TACC
    (lease,) = [
        e for e in requests(second_site, "POST", r"/uc/blazar/v1/leases") if e["status"] == 201
    ]
    asked = {r["resource_type"]: r for r in lease["body"]["reservations"]}
    assert asked["physical:host"]["resource_properties"] == '["==", "$node_type", "gpu_rtx_6000"]'
    assert asked["virtual:floatingip"]["network_id"] == "uc-public-90a1"  # CHI@UC's "public"
    (server,) = requests(second_site, "POST", r"/uc/nova/v2\.1/servers")
    body = server["body"]["server"]
    assert body["networks"] == [{"uuid": "uc-sharednet1-5f3b"}]  # CHI@UC's sharednet1
    assert body["imageRef"] == "uc-img-cuda-77c2"
    assert [e["status"] for e in requests(second_site, "POST", r"/uc/nova/v2\.1/os-keypairs")] == [
        200
    ]  # the student's key, uploaded at this site too
    (put,) = requests(second_site, "PUT", r"/uc/neutron/v2\.0/floatingips/.*")
    address = second_site["fip_history"][put["path"].rsplit("/", 1)[1]]["address"]
    assert address.startswith("127.21.0.")  # CHI@UC's reserved addresses
    assert {c["via"] for c in second_site["node_commands"]} == {address}
    assert f"cc@{address}" in text(provision)
    assert second_site["notes"]["held"]["servers"] == [[STUDENT, "ACTIVE"]]
