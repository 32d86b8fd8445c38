"""Notebooks 1 and 2, executed cell by cell against a fake Chameleon (tests/fake_chameleon/), in a
project where 39 classmates already have leases, servers and floating IPs, from a copy laid out
as a Trovi launch lays it out (an unpacked `git archive`, no .git).

Each scenario runs once (module fixtures), in one of a few workers of their own network
namespace (tests/fake_chameleon/results.py); the tests read what it recorded: every cell's
output, every API request with its body and time, the commands the node ran (and on which IP),
and the final state. The values sent are checked, not only the calls.
  class_day          a student's whole lab, every notebook run twice, then the clean-up cells,
                     on a good day's durations (the site's clock: fake_chameleon/common.py)
  pending_lease      a lease for tomorrow: refused, then freed just after a refusal; made,
                     found again, and notebook 2 waits for it
  two_active         two ACTIVE leases of the student's: both notebooks use the one ending last,
                     which started first
  server_on_earlier_lease  the server on lease A, a later lease B appears: notebook 2 stays on
                     A and says how to move; then the student moves
  starting_lease     a lease Blazar takes 25 minutes to start: notebook 2's 15-minute wait runs
                     out, then is met; several_pending: two PENDING leases, then
                     an ACTIVE one beside them, and DELETE_LEASE keeping the later ones
  repo_refs          REPO_REF as a branch (which then moves on) and as a commit
  two_nodes          NODE_COUNT = 2 (notebook 9 on two machines): two hosts, two IPs, the second
                     server and node set up by notebook 2's optional section, Ray's head and join
                     with Ray's token authentication
  trovi_settings     the artifact as committed, then one wrong setting after another
  oldest_python_chi  python-chi 1.1.0 installed for real; old_python_chi: 1.0.9 is refused
Trouble (refusals, floating IPs, failing servers): tests/test_chameleon_trouble.py; the site's
slowness and lease states: tests/test_chameleon_site.py; its passing faults, the second node's
trouble, ended and degraded leases, quotas and a second site: tests/test_chameleon_unkind.py; the
passes' files (prepared notebooks to the node, result bundles back):
tests/test_chameleon_passes.py.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fake_chameleon.results import (
    at,
    blazar_time,
    needs_namespace,
    neutron_deletes,
    requests,
    reservation,
    reserved_fip,
    run,
    scenario,
    scenario_fixture,
    scenarios_ahead,  # noqa: F401 - autouse: the class's scenarios run side by side
    students,
    text,
    unrouted,
)

from servelab.paths import LAB_DIR

REPO = Path(__file__).resolve().parent.parent
OLDEST_PYTHON_CHI = "1.1.0"  # Server.delete(delete_ips=...) came with 1.1; 1.0.x lacks it
OLDEST_WHEEL_SHA256 = "f8a08a6848800ec3208a1f7753ae53a8a70644bde39696abe5627d5eee24193c"

pytestmark = [needs_namespace, pytest.mark.slow]


def code_cells(notebook: str) -> int:
    import nbformat

    nb = nbformat.read(REPO / "notebooks" / f"{notebook}.ipynb", 4)
    return sum(c.cell_type == "code" for c in nb.cells)


def lease_posts(result, during=None):
    return [
        e for e in requests(result, "POST", r"/tacc/blazar/v1/leases", during) if e["status"] == 201
    ]


def server_post(result, during=None):
    (post,) = requests(result, "POST", r"/tacc/nova/v2\.1/servers", during)
    return post


def attached(result, during=None) -> tuple[dict, str]:
    """The floating IP a notebook attached (as made) and the server it went to."""
    (put,) = requests(result, "PUT", r"/tacc/neutron/v2\.0/floatingips/.*", during)
    fip = result["fip_history"][put["path"].rsplit("/", 1)[1]]
    return fip, result["port_owner"][put["body"]["floatingip"]["port_id"]]


def reserved_with(lease) -> str:
    return f"reservation:{reservation(lease, 'virtual:floatingip')['id']}"


def host_reservation(lease) -> str:
    return reservation(lease, "physical:host")["id"]


def writes(result, during) -> list[tuple[str, str]]:
    """What a run changed: POST, PUT and DELETE requests (logins and key pairs aside)."""
    log = result["api"][during["api_from"] : during["api_to"]]
    return [
        (e["method"], re.sub(r"/[0-9a-f-]{36}", "/ID", e["path"]))
        for e in log
        if e["method"] in ("POST", "PUT", "DELETE")
        and "/v3/" not in e["path"]
        and "os-keypairs" not in e["path"]
    ]


class_day = scenario_fixture("class_day", "class_day")


# ------------------------------------------------------------------ a normal day, twice over


def test_both_notebooks_run_top_to_bottom_twice_from_a_trovi_copy(class_day):
    for notebook in ("01_reserve", "02_provision"):
        for label in ("first", "again"):
            a_run = run(class_day, notebook, label)
            assert a_run["error"] is None, a_run["error"]
            assert len(a_run["cells"]) == code_cells(notebook)
    assert class_day["work_has_git"] is False


def test_the_lease_is_three_hours_of_one_gpu_p100_from_now_with_one_ip(class_day):
    (post,) = lease_posts(class_day)
    body = post["body"]
    assert re.fullmatch(r"serve_system_student_\d{8}-\d{4}", body["name"]), body["name"]
    assert body["start_date"] == "now"
    # python-chi ends it 3 h after the request was built, on a whole minute (a minute's slack)
    length = blazar_time(body["end_date"]) - at(post)
    assert abs(length - dt.timedelta(hours=3)) <= dt.timedelta(minutes=1), length
    hosts = [r for r in body["reservations"] if r["resource_type"] == "physical:host"]
    fips = [r for r in body["reservations"] if r["resource_type"] == "virtual:floatingip"]
    assert [(json.loads(r["resource_properties"]), r["min"], r["max"]) for r in hosts] == [
        (["==", "$node_type", "gpu_p100"], 1, 1)
    ]
    assert [(r["amount"], r["network_id"]) for r in fips] == [(1, "net-public")]


def test_the_server_boots_on_the_new_leases_host_with_the_cuda_image(class_day):
    (lease,) = lease_posts(class_day)
    post = server_post(class_day)
    hint = post["body"]["OS-SCH-HNT:scheduler_hints"]
    assert hint == {"reservation": reservation(lease["reply"]["lease"], "physical:host")["id"]}
    server = post["body"]["server"]
    assert server["metadata"] == {"serve_system_lease": lease["reply"]["lease"]["id"]}
    assert server["name"] == "node-serve-system-student"
    assert server["imageRef"] == "img-cuda" and server["flavorRef"] == "flv-bm"
    assert server["key_name"] == "student-jupyter" and class_day["keypairs"] == ["student-jupyter"]
    assert server["networks"] == [{"uuid": "net-shared"}]
    # one node: notebook 2's optional section (the second node) says so and makes nothing
    made = requests(class_day, "POST", r"/tacc/nova/v2\.1/servers")
    assert [p["body"]["server"]["name"] for p in made] == ["node-serve-system-student"]
    assert class_day["second_node"] is None  # no second server: no second node answered
    for label in ("first", "again"):
        assert "Your lease holds one node: nothing to do here" in text(
            run(class_day, "02_provision", label)
        )


def test_the_ip_attached_is_the_one_reserved_with_the_lease(class_day):
    (lease,) = lease_posts(class_day)
    fip, server_id = attached(class_day)
    assert fip["tags"] == ["blazar", reserved_with(lease["reply"]["lease"])]
    assert server_id == server_post(class_day)["reply"]["server"]["id"]
    assert requests(class_day, "POST", r"/tacc/neutron/v2\.0/floatingips") == [], (
        "took an IP from the pool"
    )
    assert {c["via"] for c in class_day["node_commands"]} == {fip["address"]}  # ssh went there
    assert f"cc@{fip['address']}" in text(run(class_day, "02_provision", "first"))


def test_classmates_leases_servers_and_ips_are_left_alone(class_day):
    mine = {
        server_post(class_day)["reply"]["server"]["id"],
        lease_posts(class_day)[0]["reply"]["lease"]["id"],
    }
    changes = [
        e
        for e in class_day["api"]
        if e["method"] in ("PUT", "DELETE")
        and e["path"].rsplit("/", 1)[1] not in mine
        and "floatingips" not in e["path"]
    ]
    assert changes == []
    for name, who in class_day["classmates"].items():
        if "ip_id" in who:
            fip = next(f for f in class_day["fips"] if f["id"] == who["ip_id"])
            bound_to = class_day["port_owner"].get(fip["port_id"])
            held = who["role"] in ("running", "horizon")  # booting, stranded: unattached
            assert bound_to == (who["server"] if held else None), name


def test_running_everything_again_creates_nothing(class_day):
    writes = [
        e
        for e in class_day["api"]
        if e["method"] in ("POST", "PUT", "DELETE")
        and "/auth" not in e["path"]
        and "os-keypairs" not in e["path"]
    ]
    kinds = [(e["method"], re.sub(r"/[0-9a-f-]{36}", "/ID", e["path"])) for e in writes]
    assert kinds == [
        ("POST", "/tacc/blazar/v1/leases"),
        ("POST", "/tacc/nova/v2.1/servers"),
        ("PUT", "/tacc/neutron/v2.0/floatingips/ID"),  # round 1 only
        ("DELETE", "/tacc/nova/v2.1/servers/ID"),
        ("DELETE", "/tacc/nova/v2.1/servers/ID"),
        ("DELETE", "/tacc/blazar/v1/leases/ID"),
    ], kinds
    second = run(class_day, "02_provision", "again")
    assert "exists (ACTIVE): it will be reused" in text(second)
    assert "Nothing to do: this host was already set up (0 changes)" in text(second)


def test_the_project_named_in_the_settings_is_used(class_day):
    scopes = [
        e["body"]["auth"]["scope"]["project"]
        for e in requests(class_day, "POST", r"/tacc:5000/v3/auth/tokens")
        if "scope" in e["body"]["auth"]
    ]
    assert scopes and all(s["name"] == "CHI-231138" for s in scopes), scopes


def test_the_node_gets_the_taught_tag_from_the_repository_set(class_day):
    assert class_day["clone_head"] == class_day["tags"]["v1"] != class_day["tags"]["main"]
    clones = [c for c in class_day["node_commands"] if "lab version: %h" in c["command"]]
    assert len(clones) == 2 and all(c["rc"] == 0 for c in clones)
    assert f"git clone --quiet {class_day['repo_url']} serve-system-lab" in clones[0]["command"]


def test_setup_waits_for_first_boot_then_installs(class_day):
    calls = class_day["node_calls"]
    assert calls.index("cloud-init status --wait") < next(
        i for i, c in enumerate(calls) if c.startswith("apt-get")
    )
    setup = [c for c in class_day["node_commands"] if "setup_host.sh" in c["command"]]
    assert [c["rc"] for c in setup] == [0, 0]


def test_the_images_are_built_in_the_background_once_the_host_is_set_up(class_day):
    """Notebook 2 starts docker/build_images.sh in the background after the host setup and
    docker/.env, before the model files: its SSH command returns, and the build goes on to build
    every image of the stacks with their own files (two GPUs, no CPU override) and settings, in
    the order notebooks 3, 4 and 5 need them; notebook 2 run again builds again (Docker's cache)."""
    commands = [c["command"] for c in class_day["node_commands"]]

    def first(part):
        return next(i for i, c in enumerate(commands) if part in c)

    start = "cd serve-system-lab && bash docker/build_images.sh start"
    assert [c["rc"] for c in class_day["node_commands"] if c["command"] == start] == [0, 0]
    assert first("setup_host.sh") < first("init_env.sh") < commands.index(start)
    assert commands.index(start) < first("make artifacts-only")
    calls = class_day["node_calls"]
    builds = [c for c in calls if c.startswith("compose FASTAPI_BACKEND=")]
    once = [
        "compose FASTAPI_BACKEND= compose -f docker-compose-fastapi.yaml build",
        "compose FASTAPI_BACKEND=onnx compose -f docker-compose-fastapi.yaml build fastapi_server",
        "compose FASTAPI_BACKEND= compose -f docker-compose-triton.yaml build",
    ]
    assert builds == once * 2, builds
    # after the setup restarted Docker with the nvidia runtime: the GPU files were chosen
    assert calls.index("systemctl restart docker") < calls.index(builds[0])
    status = class_day["node"]["images"]["status"].splitlines()
    assert status[0].startswith("start ") and status[0].endswith(" gpu")
    assert [line.split()[:2] for line in status[1:]] == [
        ["fastapi", "ok"],
        ["onnx", "ok"],
        ["triton", "ok"],
        ["end", "0"],
    ]
    assert "Building the lab's images in the background on this node, for the GPUs" in text(
        run(class_day, "02_provision", "first")
    )


def test_the_jupyter_token_stays_on_the_node(class_day):
    token = class_day["jupyter_token"]
    assert token and len(token) == 32
    assert all(token not in c["text"] for r in class_day["runs"] for c in r["cells"])


def test_classmates_whose_user_names_contain_each_other_are_told_apart(class_day):
    """student2's name holds the student's and its lease ends after the student's: a lease or
    server chosen by name prefix (or Nova's name filter, a regular expression) would take it;
    stud's name is inside the student's, and its pool IP is left in the project."""
    near = {n: w for n, w in class_day["classmates"].items() if n in ("student2", "stud")}
    assert {w["role"] for w in near.values()} == {"horizon", "stranded"}
    (lease,) = lease_posts(class_day)
    assert server_post(class_day)["body"]["OS-SCH-HNT:scheduler_hints"]["reservation"] == (
        host_reservation(lease["reply"]["lease"])
    )
    theirs = {w[k] for w in near.values() for k in ("lease", "ip_id", "server") if k in w}
    touched = [e for e in class_day["api"] if e["path"].rsplit("/", 1)[-1] in theirs]
    assert [e["method"] for e in touched if e["method"] != "GET"] == []
    assert {f["id"] for f in class_day["fips"]} >= {w["ip_id"] for w in near.values()}


def test_no_request_goes_to_a_path_neutron_does_not_have(class_day):
    """python-chi 1.2.10's default Server.delete() sends DELETE /v2.0/<floating IP id> (no
    such resource; openstacksdk does not raise on its 404): the clean-up cell deletes by id."""
    assert unrouted(class_day) == []
    assert neutron_deletes(class_day) == []  # the reserved IP, attached at delete, stays
    assert "127.20.0." in attached(class_day)[0]["address"]  # (it was a reserved one)


def test_clean_up_deletes_only_the_students_server_and_lease(class_day):
    deletes = [
        run(class_day, "02_provision", label)
        for label in ("delete server", "delete server again", "delete server, none left")
    ]
    assert [r["error"] for r in deletes] == [None, None, None]
    assert "server node-serve-system-student deleted" in text(deletes[0])
    assert "nothing to delete" in text(deletes[-1])
    server_id = server_post(class_day)["reply"]["server"]["id"]
    assert [e["path"] for e in requests(class_day, "DELETE", r"/tacc/nova/v2\.1/servers/.*")] == [
        f"/tacc/nova/v2.1/servers/{server_id}"
    ] * 2
    assert (
        requests(class_day, "DELETE", r"/tacc/neutron/v2\.0/floatingips/.*") == []
    )  # the reserved IP stays
    lease_delete = run(class_day, "01_reserve", "delete lease")
    (created,) = lease_posts(class_day)
    assert [e["path"] for e in requests(class_day, "DELETE", r"/tacc/blazar/v1/leases/.*")] == [
        f"/tacc/blazar/v1/leases/{created['reply']['lease']['id']}"
    ]
    assert f"lease {created['body']['name']} (ACTIVE) deleted" in text(lease_delete)
    mine = [x for x in class_day["leases"] if x["user_id"] == class_day["user_id"]]
    left = {x["name"] for x in mine if x["status"] != "DELETING"}  # Blazar takes a minute
    assert left == {"serve_system_student", "serve_system_student_20250101-1200"}  # the ended ones


def test_clean_up_costs_the_same_whatever_the_class_size(class_day):
    """22 classmates' servers are in the project: the clean-up cell reads the server list once
    and builds no object per server (each of which would look up its image and key pair); the
    one python-chi object it builds is the student's server's, to bring its bundles back, and
    not for a server already being deleted."""
    again = run(class_day, "02_provision", "delete server again")
    during = class_day["api"][again["api_from"] : again["api_to"]]
    assert len([e for e in during if e["path"].endswith("/servers/detail")]) == 1
    assert [e for e in during if "/glance/" in e["path"] or "os-keypairs" in e["path"]] == []
    first = run(class_day, "02_provision", "delete server")
    during = class_day["api"][first["api_from"] : first["api_to"]]
    assert len([e for e in during if "/glance/v2/images" in e["path"]]) <= 4


# ------------------------------------------------------------------ two nodes (notebook 9)


two_nodes = scenario_fixture("two_nodes", "two_nodes")


def test_node_count_2_reserves_two_hosts_and_two_ips(two_nodes):
    for notebook, label in [("01_reserve", "two nodes"), ("02_provision", "two nodes")]:
        assert run(two_nodes, notebook, label)["error"] is None
    (post,) = lease_posts(two_nodes)
    asked = {r["resource_type"]: r for r in post["body"]["reservations"]}
    assert (asked["physical:host"]["min"], asked["physical:host"]["max"]) == (2, 2)
    assert asked["virtual:floatingip"]["amount"] == 2
    lease = post["reply"]["lease"]
    booked = [a for a in two_nodes["allocations"] if a["id"] == host_reservation(lease)]
    assert len({a["host"] for a in booked}) == 2  # two gpu_p100 hosts, the class's last free ones
    assert {two_nodes["hosts"][a["host"]] for a in booked} == {"gpu_p100"}
    reserved = [f for f in two_nodes["fips"] if reserved_with(lease) in f["tags"]]
    assert len({f["floating_ip_address"] for f in reserved}) == 2


def test_the_second_server_goes_on_the_same_reservation_with_the_lease_record(two_nodes):
    (lease,) = lease_posts(two_nodes)
    lease = lease["reply"]["lease"]
    first, second = requests(two_nodes, "POST", r"/tacc/nova/v2\.1/servers")
    assert [p["body"]["server"]["name"] for p in (first, second)] == [
        "node-serve-system-student",
        "node2-serve-system-student",
    ]
    for post in (first, second):
        hint = post["body"]["OS-SCH-HNT:scheduler_hints"]
        assert hint == {"reservation": host_reservation(lease)}
        assert post["body"]["server"]["metadata"] == {"serve_system_lease": lease["id"]}
    made = {s["id"]: s for s in two_nodes["servers"]}
    ids = [p["reply"]["server"]["id"] for p in (first, second)]
    assert made[ids[0]]["host"] != made[ids[1]]["host"]  # one server per reserved host
    again = run(two_nodes, "02_provision", "again")
    assert writes(two_nodes, again) == []  # run again: nothing made, attached or deleted


def test_each_node_gets_its_own_ip_of_the_lease_never_a_classmates(two_nodes):
    (lease,) = lease_posts(two_nodes)
    servers = [p["reply"]["server"]["id"] for p in requests(two_nodes, "POST", r".*/servers")]
    puts = requests(two_nodes, "PUT", r"/tacc/neutron/v2\.0/floatingips/.*")
    assert len(puts) == 2 and requests(two_nodes, "POST", r".*/floatingips") == []
    ips = [two_nodes["fip_history"][put["path"].rsplit("/", 1)[1]] for put in puts]
    assert all(ip["tags"] == ["blazar", reserved_with(lease["reply"]["lease"])] for ip in ips)
    assert [two_nodes["port_owner"][p["body"]["floatingip"]["port_id"]] for p in puts] == servers
    first, second = (ip["address"] for ip in ips)
    assert first != second
    classmates = {w.get("ip") for w in two_nodes["classmates"].values()}
    assert not {first, second} & classmates
    # each node answered SSH on its own IP only: node 1's commands came in on the first
    assert {c["via"] for c in two_nodes["node_commands"]} == {first}
    assert {c["via"] for c in two_nodes["second_node"]["commands"]} == {second}


def private_ips(result) -> list[str]:
    """The private (fixed) IP Nova reports for each of the student's servers, in order made."""
    servers = [p["reply"]["server"]["id"] for p in requests(result, "POST", r".*/servers")]
    return [result["fixed_ips"][s] for s in servers]


def test_node_2_is_set_up_as_node_1_and_joins_a_ray_head_on_private_ips(two_nodes):
    head, other = private_ips(two_nodes)
    assert head != other and head.startswith("10.52.") and other.startswith("10.52.")
    node1, node2 = two_nodes["node_calls"], two_nodes["second_node"]["calls"]
    make = "make ray-node TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu"
    assert node1.count(make) == node2.count(make) == 2  # each run of notebook 2
    assert "make artifacts-only TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu" in node1
    # the class's tag, as the instructor moved it between the two runs (test_chameleon_passes)
    assert two_nodes["second_node"]["clone_head"] == two_nodes["tags"]["v1 moved"]
    setup = [c for c in two_nodes["second_node"]["commands"] if "setup_host.sh" in c["command"]]
    assert [c["rc"] for c in setup] == [0, 0]
    starts = [c for c in node1 + node2 if c.startswith("ray start")]
    homes = [two_nodes["node"]["home"], two_nodes["second_node"]["home"]]
    assert starts == [  # once each: run again, `ray status` answers and nothing starts twice
        f"ray start --temp-dir={homes[0]}/.lab_ray/ray --head --port=6379 "
        f"--node-ip-address={head} --dashboard-host=127.0.0.1",
        f"ray start --temp-dir={homes[1]}/.lab_ray/ray --address={head}:6379 "
        f"--node-ip-address={other}",
    ]  # the stub refuses a --temp-dir whose folder is not the node user's alone (0700)
    assert starts[0] in node1 and starts[1] in node2
    assert f"LAB_RAY_HEAD={head}:6379" in text(run(two_nodes, "02_provision", "two nodes"))


def test_every_ray_command_runs_with_rays_token_authentication(two_nodes):
    """Ray on sharednet1, a network every project at the site shares: each `ray` command on
    either node ran with RAY_AUTH_MODE=token and RAY_AUTH_TOKEN_PATH naming the clone's
    .lab/ray_token by its absolute path (the stub refuses anything else, and a joining node
    whose token is not the head's)."""
    for node in (two_nodes["node"], two_nodes["second_node"]):
        calls = node["calls"]
        rays = [c for c in calls if c.startswith("ray ")]
        auth = [c for c in calls if c.startswith("ray-auth ")]
        assert rays and len(auth) == len(rays)
        for line in auth:
            mode, path = line.split()[1:]
            assert mode == "RAY_AUTH_MODE=token"
            path = path.removeprefix("RAY_AUTH_TOKEN_PATH=")
            assert path.startswith("/") and path.endswith("/serve-system-lab/.lab/ray_token")
        ran = [c for c in node["commands"] if ".venv-ray/bin/ray" in c["command"]]
        assert ran and all(c["rc"] == 0 for c in ran)
    assert "Ray's token: made on node-serve-system-student" in text(
        run(two_nodes, "02_provision", "two nodes")
    )


def test_the_token_is_made_once_shared_by_sftp_and_never_shown(two_nodes):
    """Made on the first node (64 hex digits, mode 0600), copied to the second as it is, and
    git-ignored in both clones; its value is on no command line the notebook sent, in no cell's
    output, and in no request to Chameleon's APIs. The notebook run again keeps it."""
    one, two = two_nodes["node"], two_nodes["second_node"]
    token = one["ray_token"]
    assert re.fullmatch(r"[0-9a-f]{64}", token) and two["ray_token"] == token
    assert one["ray_token_mode"] == two["ray_token_mode"] == "0o600"
    assert one["ray_token_ignored"] is two["ray_token_ignored"] is True
    commands = [c["command"] for n in (one, two) for c in n["commands"]]
    assert commands and not [c for c in commands if token in c]
    outputs = [c["text"] for r in two_nodes["runs"] for c in r["cells"]]
    assert not [t for t in outputs if token in t]
    assert token not in json.dumps(two_nodes["api"])
    put = [t for t in two["transfers"] if t["path"].endswith(".lab/ray_token")]
    got = [t for t in one["transfers"] if t["path"].endswith(".lab/ray_token")]
    assert [t["op"] for t in put] == ["put"] * 2 and [t["op"] for t in got] == ["get"] * 2


def test_a_lease_of_fewer_nodes_than_node_count_stops_notebook_1(two_nodes):
    asked = run(two_nodes, "01_reserve", "three asked")
    assert asked["error"]["ename"] == "RuntimeError"
    assert "holds 2 node(s) and NODE_COUNT is 3; a lease cannot grow" in asked["error"]["evalue"]
    assert len(lease_posts(two_nodes)) == 1


def test_clean_up_deletes_both_servers_of_the_student_and_nobody_elses(two_nodes):
    deleted = run(two_nodes, "02_provision", "delete servers")
    assert deleted["error"] is None
    servers = [p["reply"]["server"]["id"] for p in requests(two_nodes, "POST", r".*/servers")]
    assert writes(two_nodes, deleted) == [("DELETE", "/tacc/nova/v2.1/servers/ID")] * 2
    paths = [e["path"] for e in requests(two_nodes, "DELETE", r".*", deleted)]
    assert paths == [f"/tacc/nova/v2.1/servers/{s}" for s in servers]
    for name in ("node-serve-system-student", "node2-serve-system-student"):
        assert f"server {name} deleted" in text(deleted)
    during = two_nodes["api"][deleted["api_from"] : deleted["api_to"]]
    # one look at the list, and python-chi's own lookups of the first server (its bundles)
    assert len([e for e in during if e["path"].endswith("/servers/detail")]) <= 4


# ------------------------------------------------------------------ a lease for later


pending_lease = scenario_fixture("pending_lease", "pending_lease")


def test_a_lease_for_later_starts_and_ends_when_asked(pending_lease):
    (post,) = lease_posts(pending_lease)
    start, end = blazar_time(post["body"]["start_date"]), blazar_time(post["body"]["end_date"])
    # 20 h after the cell ran, on a whole minute; the request follows within seconds
    assert dt.timedelta(0) <= at(post) + dt.timedelta(hours=20) - start <= dt.timedelta(minutes=2)
    assert end - start == dt.timedelta(hours=3)
    assert post["reply"]["lease"]["status"] == "PENDING"


def test_a_pending_lease_is_used_again_not_doubled(pending_lease):
    (post,) = lease_posts(pending_lease)
    again = run(pending_lease, "01_reserve", "again")
    assert again["error"] is None
    assert f"using your lease {post['body']['name']} (PENDING)" in text(again)
    assert requests(pending_lease, "POST", r"/tacc/blazar/v1/leases", again) == []


def test_notebook_2_says_when_a_pending_lease_starts_and_makes_nothing(pending_lease):
    (post,) = lease_posts(pending_lease)
    waiting = run(pending_lease, "02_provision", "pending")
    start = post["body"]["start_date"]
    assert waiting["error"]["evalue"] == (
        f"Your lease {post['body']['name']} is PENDING and starts at {start} "
        "UTC: run this notebook again after that."
    )
    assert requests(pending_lease, "POST", r"/tacc/nova/v2\.1/servers") == []
    assert requests(pending_lease, "PUT", r"/tacc/neutron/.*") == []


# ------------------------------------------------------------------ two active leases


two_active = scenario_fixture("two_active", "two_active")


def test_with_two_active_leases_both_notebooks_use_the_one_ending_last(two_active):
    """The one that ends last started first and has no reserved IP: the one that started last
    (or was made last, or has a reserved IP) is the wrong choice."""
    longer, shorter = students(two_active, two_active["leases"])
    assert longer["end_date"] > shorter["end_date"] and longer["start_date"] < shorter["start_date"]
    assert lease_posts(two_active) == []
    reserve, provision = (
        run(two_active, "01_reserve", "two active"),
        run(two_active, "02_provision", "two active"),
    )
    assert reserve["error"] is None and provision["error"] is None
    assert f"using your lease {longer['name']} (ACTIVE)" in text(reserve)
    post = server_post(two_active)
    assert post["body"]["OS-SCH-HNT:scheduler_hints"]["reservation"] == host_reservation(longer)
    assert post["body"]["server"]["metadata"] == {"serve_system_lease": longer["id"]}
    (fip_post,) = requests(two_active, "POST", r"/tacc/neutron/v2\.0/floatingips")
    assert fip_post["body"]["floatingip"]["description"] == (
        f"public IP of node-serve-system-student for lease {longer['id']}, allocated by notebook 2"
    )
    fip, server_id = attached(two_active)
    assert fip["address"] == fip_post["reply"]["floatingip"]["floating_ip_address"]
    assert server_id == post["reply"]["server"]["id"]
    assert f"Your other lease(s) {shorter['name']} ACTIVE" in text(provision)
    assert "no server of this lab runs on" in text(provision)


# ------------------------------------------------------------------ a server and its lease


earlier_lease = scenario_fixture("earlier_lease", "server_on_earlier_lease")


def test_the_server_records_the_lease_it_is_made_on(earlier_lease):
    (a,) = students(earlier_lease, earlier_lease["leases"])
    first = run(earlier_lease, "02_provision", "on A")
    post = server_post(earlier_lease, first)
    assert post["body"]["server"]["metadata"] == {"serve_system_lease": a["id"]}
    assert post["body"]["OS-SCH-HNT:scheduler_hints"]["reservation"] == host_reservation(a)


def test_a_later_lease_leaves_the_server_on_its_own_lease(earlier_lease):
    """The issue's case: notebook 2 used the later lease B, called A (the server's) unused and
    reused the server, whose reservation and IP were A's."""
    (a,), b = students(earlier_lease, earlier_lease["leases"]), earlier_lease["notes"]["B"]
    assert b["end_date"] > a["end_date"]
    again = run(earlier_lease, "02_provision", "B appears")
    out = text(again)
    assert again["error"] is None and writes(earlier_lease, again) == []
    assert f"your lease: {a['name']}, ends" in out
    assert f"node-serve-system-student runs on {a['name']} and stays on it" in out
    assert f"Your lease {b['name']} ACTIVE" in out and "To move to it: copy results/ off" in out
    assert "no server of this lab runs on" not in out  # neither lease is idle: A holds the server
    assert f"floating IP: {reserved_fip(earlier_lease, a)['floating_ip_address']}" in out


def test_a_server_without_its_record_beside_two_leases_is_named_not_guessed(earlier_lease):
    unknown = run(earlier_lease, "02_provision", "no record")
    assert unknown["error"]["evalue"].startswith(
        "Your server node-serve-system-student carries no record of the lease it runs on"
    )
    assert "you have 2 active leases" in unknown["error"]["evalue"]
    assert writes(earlier_lease, unknown) == []


def test_moving_to_the_later_lease_makes_a_server_there_with_its_ip(earlier_lease):
    (a,), b = students(earlier_lease, earlier_lease["leases"]), earlier_lease["notes"]["B"]
    gone = run(earlier_lease, "02_provision", "move: delete server")
    moved = run(earlier_lease, "02_provision", "move: on B")
    assert gone["error"] is None and moved["error"] is None, moved["error"]
    first_server = server_post(earlier_lease, run(earlier_lease, "02_provision", "on A"))
    old_id = first_server["reply"]["server"]["id"]
    # the server was still listed (being deleted): notebook 2 waited for it, never reused it
    assert "deleting node-serve-system-student, which is being deleted already" in text(moved)
    assert writes(earlier_lease, moved)[0] == ("DELETE", "/tacc/nova/v2.1/servers/ID")
    assert requests(earlier_lease, "DELETE", r"/tacc/nova/v2\.1/servers/.*", moved)[0][
        "path"
    ].endswith(old_id)
    post = server_post(earlier_lease, moved)
    assert post["body"]["OS-SCH-HNT:scheduler_hints"]["reservation"] == host_reservation(b)
    assert post["body"]["server"]["metadata"] == {"serve_system_lease": b["id"]}
    fip, server_id = attached(earlier_lease, moved)
    assert fip["tags"] == ["blazar", reserved_with(b)]
    assert server_id == post["reply"]["server"]["id"]
    assert f"Your other lease(s) {a['name']} ACTIVE" in text(moved)
    assert neutron_deletes(earlier_lease) == [] and unrouted(earlier_lease) == []


def test_a_server_left_from_a_lease_that_is_over_is_replaced_on_the_active_lease(earlier_lease):
    """B was deleted, and Blazar failed to delete its server: that server is not reused (its
    reservation is gone), but deleted, and a new one made on A, with A's IP."""
    (a,), b = students(earlier_lease, earlier_lease["leases"]), earlier_lease["notes"]["B"]
    replaced = run(earlier_lease, "02_provision", "B gone, its server left")
    assert replaced["error"] is None, replaced["error"]
    on_b = server_post(earlier_lease, run(earlier_lease, "02_provision", "move: on B"))
    assert (
        f"deleting node-serve-system-student, which was made on another lease ({b['id']}), "
        "now over" in text(replaced)
    )
    assert [e["path"] for e in requests(earlier_lease, "DELETE", r"/tacc/.*", replaced)] == [
        f"/tacc/nova/v2.1/servers/{on_b['reply']['server']['id']}"
    ]
    post = server_post(earlier_lease, replaced)
    assert post["body"]["OS-SCH-HNT:scheduler_hints"]["reservation"] == host_reservation(a)
    assert post["body"]["server"]["metadata"] == {"serve_system_lease": a["id"]}
    fip, server_id = attached(earlier_lease, replaced)
    assert fip["tags"] == ["blazar", reserved_with(a)]
    assert server_id == post["reply"]["server"]["id"]


# ------------------------------------------------------------------ starting and pending leases


starting_lease = scenario_fixture("starting_lease", "starting_lease")


def test_a_starting_lease_is_used_and_notebook_2_waits_15_minutes_then_says_to_run_again(
    starting_lease,
):
    (lease,) = students(starting_lease, starting_lease["leases"])
    reserve = run(starting_lease, "01_reserve", "starting")
    assert reserve["error"] is None and lease_posts(starting_lease) == []
    assert f"using your lease {lease['name']} (STARTING)" in text(reserve)
    waiting = run(starting_lease, "02_provision", "starting")
    assert waiting["error"]["evalue"] == (
        f"Your lease {lease['name']} is still STARTING after 15 minutes, with its node(s) booked "
        "for you and no server of yours on it yet: run this cell again in 5 minutes, and if it is "
        "still not ACTIVE half an hour later, or it turns ERROR, delete it (notebook 1, last "
        "cell: DELETE_LEASE = True) and make a new lease in notebook 1."
    )
    assert f"your lease {lease['name']} is STARTING: waiting for Blazar" in text(waiting)
    assert writes(starting_lease, waiting) == []
    # the wait asked Blazar every 30 s of the site's clock, not in a tight loop
    reads = requests(starting_lease, "GET", rf"/tacc/blazar/v1/leases/{lease['id']}", waiting)
    assert 5 <= len(reads) <= 50, len(reads)  # fewer on a busy machine: each read takes longer


def test_once_started_the_server_goes_on_that_lease_not_a_classmates_starting_one(starting_lease):
    (lease,) = students(starting_lease, starting_lease["leases"])
    started = run(starting_lease, "02_provision", "started")
    assert started["error"] is None, started["error"]
    assert f"your lease {lease['name']} is ACTIVE" in text(started)
    post = server_post(starting_lease, started)
    assert post["body"]["OS-SCH-HNT:scheduler_hints"]["reservation"] == host_reservation(lease)
    fip, _ = attached(starting_lease, started)
    assert fip["tags"] == ["blazar", reserved_with(lease)]
    (classmate,) = [w for w in starting_lease["classmates"].values() if w["role"] == "starting"]
    assert (
        next(x for x in starting_lease["leases"] if x["id"] == classmate["lease"])["status"]
        == "STARTING"
    )


several_pending = scenario_fixture("several_pending", "several_pending")


def test_with_two_pending_leases_the_one_that_starts_first_is_named(several_pending):
    tomorrow, afternoon = (
        several_pending["notes"]["tomorrow"],
        several_pending["notes"]["afternoon"],
    )
    reserve = run(several_pending, "01_reserve", "two pending")
    assert f"using your lease {afternoon['name']} (PENDING)" in text(reserve)
    assert lease_posts(several_pending) == []
    waiting = run(several_pending, "02_provision", "two pending")
    assert waiting["error"]["evalue"] == (
        f"Your lease {afternoon['name']} is PENDING and starts at "
        f"{afternoon['start_date'][:16].replace('T', ' ')} UTC: run this notebook again after that."
    )
    assert writes(several_pending, waiting) == []
    assert tomorrow["start_date"] > afternoon["start_date"]


def test_an_active_lease_beside_pending_ones_is_used_and_they_are_not_called_unused(
    several_pending,
):
    notes = several_pending["notes"]
    used = run(several_pending, "02_provision", "active beside pending")
    assert used["error"] is None, used["error"]
    post = server_post(several_pending, used)
    assert post["body"]["OS-SCH-HNT:scheduler_hints"]["reservation"] == host_reservation(
        notes["now"]
    )
    fip, _ = attached(several_pending, used)
    assert fip["tags"] == ["blazar", reserved_with(notes["now"])]
    for later in (notes["tomorrow"], notes["afternoon"]):
        assert later["name"] not in text(used)


def test_delete_lease_deletes_the_running_lease_and_keeps_the_later_ones_unless_asked(
    several_pending,
):
    notes = several_pending["notes"]
    first = run(several_pending, "01_reserve", "delete lease")
    assert first["error"] is None
    assert [e["path"] for e in requests(several_pending, "DELETE", r"/tacc/blazar/.*", first)] == [
        f"/tacc/blazar/v1/leases/{notes['now']['id']}"
    ]
    out = text(first)
    assert f"lease {notes['now']['name']} (ACTIVE) deleted" in out
    for later in (notes["tomorrow"], notes["afternoon"]):
        start = later["start_date"][:16].replace("T", " ")
        assert f"kept {later['name']} (PENDING, starts {start} UTC)" in out
    both = run(several_pending, "01_reserve", "delete later leases")
    deleted = [e["path"] for e in requests(several_pending, "DELETE", r"/tacc/blazar/.*", both)]
    assert sorted(deleted) == sorted(
        f"/tacc/blazar/v1/leases/{x['id']}" for x in (notes["tomorrow"], notes["afternoon"])
    )
    left = students(several_pending, several_pending["leases"])
    assert [x for x in left if x["status"] != "DELETING"] == []  # Blazar takes a minute


# ------------------------------------------------------------------ REPO_REF: tag, branch, commit


repo_refs = scenario_fixture("repo_refs", "repo_refs")


def test_a_branch_is_checked_out_as_the_repository_has_it_now(repo_refs):
    """A branch other than the default has no local branch in the clone; and once it moves on,
    a local branch (or `checkout BRANCH`) would keep the commit of the first run."""
    for label in ("branch", "branch moved on", "commit"):
        assert run(repo_refs, "02_provision", label)["error"] is None, label
    tags = repo_refs["tags"]
    assert repo_refs["clone_heads"]["branch"] == tags["class-2026"]
    assert repo_refs["clone_heads"]["branch moved on"] == tags["class-2026 fixed"]
    assert tags["class-2026 fixed"] not in (tags["class-2026"], tags["main"], tags["v1"])


def test_a_commit_id_is_checked_out_as_it_is(repo_refs):
    assert repo_refs["clone_heads"]["commit"] == repo_refs["tags"]["main"]
    assert f"lab version: {repo_refs['tags']['main'][:7]}" in text(
        run(repo_refs, "02_provision", "commit")
    )


# ------------------------------------------------------------- the settings, as Trovi lays them out


trovi_settings = scenario_fixture("trovi_settings", "trovi_settings")


def test_the_artifact_as_committed_stops_at_once_naming_each_setting(trovi_settings):
    for notebook in ("01_reserve", "02_provision"):
        first = run(trovi_settings, notebook, "as committed")
        assert len(first["cells"]) == 1 and first["error"]["ename"] == "RuntimeError"
        for name in ("REPO_URL", "REPO_REF", "PROJECT"):
            assert (
                f"{name} is empty: set it in notebooks/lab_settings.py" in first["error"]["evalue"]
            )
        assert first["api_to"] == first["api_from"], (
            "it asked Chameleon before the settings were right"
        )
    assert trovi_settings["work_has_git"] is False


CHECKS, SITE_CHECKS = 0, 2  # notebook 1's cells: settings checked offline; against the site
WRONG_SETTINGS = [
    ("tag not pushed", CHECKS, "REPO_REF v2 is not a tag or branch of"),
    (
        "not my project",
        SITE_CHECKS,
        "PROJECT CHI-999999 is not one of your Chameleon projects "
        "(CHI-000001, CHI-231138): set PROJECT in notebooks/",
    ),
    (
        "no such node type or image",
        SITE_CHECKS,
        "NODE_TYPE gpu_h100 has no node at CHI@TACC: set NODE_TYPE in notebooks/lab_settings.py",
    ),
    (
        "no such node type or image",
        SITE_CHECKS,
        "IMAGE CC-Ubuntu99 does not exist at CHI@TACC: set IMAGE in notebooks/lab_settings.py",
    ),
    (
        "no such site",
        SITE_CHECKS,
        "SITE CHI@Mars is not a Chameleon site: set SITE in notebooks/lab_settings.py",
    ),
]


@pytest.mark.parametrize("label,cell,expected", WRONG_SETTINGS)
def test_each_wrong_setting_is_named_before_any_lease(trovi_settings, label, cell, expected):
    a_run = run(trovi_settings, "01_reserve", label)
    assert a_run["error"]["n"] == cell and expected in a_run["error"]["evalue"], a_run["error"]
    assert requests(trovi_settings, "POST", r"/tacc/blazar/v1/leases", a_run) == []


def test_with_every_setting_right_the_trovi_copy_makes_the_lease(trovi_settings):
    done = run(trovi_settings, "01_reserve", "all set")
    assert done["error"] is None
    assert len(lease_posts(trovi_settings)) == 1 == len(lease_posts(trovi_settings, done))


# ------------------------------------------------------------------ python-chi versions


@pytest.fixture(scope="module")
def oldest_python_chi(tmp_path_factory):
    """python-chi 1.1.0 from PyPI (hash-pinned, cached in .lab/cache/), without dependencies:
    the installed ones are those of 1.2.10, which 1.1.0 shares."""
    target = LAB_DIR / "cache" / f"python-chi-{OLDEST_PYTHON_CHI}"
    if not (target / "chi" / "__init__.py").exists():
        pins = tmp_path_factory.mktemp("pins") / "oldest.txt"
        pins.write_text(f"python-chi=={OLDEST_PYTHON_CHI} --hash=sha256:{OLDEST_WHEEL_SHA256}\n")
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--require-hashes",
                "--target",
                str(target),
                "-r",
                str(pins),
            ],
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, (
            f"python-chi {OLDEST_PYTHON_CHI} could not be installed:\n{proc.stderr[-3000:]}"
        )
    return scenario(
        "oldest_python_chi", tmp_path_factory, env={"FAKE_CHAMELEON_PYTHON_CHI": str(target)}
    )


def test_the_oldest_python_chi_allowed_runs_both_notebooks_and_their_clean_up(oldest_python_chi):
    assert f"python-chi {OLDEST_PYTHON_CHI};" in text(run(oldest_python_chi, "01_reserve", "first"))
    failed = run(oldest_python_chi, "02_provision", "server in ERROR")
    assert "run the cell above (it deletes the failed server)" in failed["error"]["evalue"]
    assert "deleting node-serve-system-student, which is in ERROR" in text(
        run(oldest_python_chi, "02_provision", "cell above, then the rest")
    )
    for a_run in oldest_python_chi["runs"]:
        assert a_run["error"] is None or a_run is failed, (a_run["label"], a_run["error"])
    (lease,) = lease_posts(oldest_python_chi)
    assert [
        json.loads(r["resource_properties"])
        for r in lease["body"]["reservations"]
        if r["resource_type"] == "physical:host"
    ] == [["==", "$node_type", "gpu_p100"]]
    posts = requests(oldest_python_chi, "POST", r"/tacc/nova/v2\.1/servers")
    assert [p["body"]["OS-SCH-HNT:scheduler_hints"]["reservation"] for p in posts] == [
        reservation(lease["reply"]["lease"], "physical:host")["id"]
    ] * 2
    fip, _ = attached(oldest_python_chi)
    assert fip["tags"] == ["blazar", reserved_with(lease["reply"]["lease"])]
    assert "server node-serve-system-student deleted" in text(
        run(oldest_python_chi, "02_provision", "delete server")
    )


def test_notebooks_gate_at_the_oldest_python_chi_tested_and_name_the_pin():
    pin = re.search(
        r"^python-chi==(\S+)", (REPO / "requirements/constraints.txt").read_text(), re.M
    ).group(1)
    for name in ("01_reserve", "02_provision"):
        src = (REPO / "notebook_sources" / f"{name}.py").read_text()
        assert f'Version(PYTHON_CHI) < Version("{OLDEST_PYTHON_CHI}")' in src
        assert f"python-chi=={pin}" in src and 'context.version = "1.0"' in src


old_python_chi = scenario_fixture("old_python_chi", "old_python_chi")


def test_an_older_python_chi_is_named_before_anything_runs(old_python_chi):
    result = old_python_chi
    for a_run in result["runs"]:
        assert len(a_run["cells"]) == 1
        assert f"python-chi 1.0.9 is older than {OLDEST_PYTHON_CHI}" in a_run["error"]["evalue"]
        assert "%pip install python-chi==1.2.10" in a_run["error"]["evalue"]
    assert result["api"] == []
