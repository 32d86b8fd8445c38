"""docker/setup_host.sh: lint, dry run, idempotence, CPU-only hosts.

The script is run for real, but against a fake root (SETUP_FAKE_ROOT) and with PATH limited to
stub commands plus a few harmless real tools, so nothing on this machine can be changed: the
stubs for apt-get, usermod, nvidia-ctk, systemctl, docker... only record their arguments and
update a small fake package/group database under the fake root.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from fake_chameleon.host_stubs import GPU_STUB, MUTATING, STUBS, make_bin

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "docker" / "setup_host.sh"
USER = "student"


class FakeHost:
    def __init__(
        self,
        base: Path,
        gpu: bool = True,
        os_id: str = "ubuntu",
        version: str = "24.04",
        extra_stubs: dict | None = None,
    ):
        self.root = base / "root"
        self.state = base / "state"
        self.bin = base / "bin"
        self.calls = base / "calls.log"
        # what a bare Ubuntu already has
        for d in (
            self.root / "etc/apt/sources.list.d",
            self.root / "usr/share/keyrings",
            self.state,
        ):
            d.mkdir(parents=True)
        codename = {"22.04": "jammy", "24.04": "noble"}.get(version, "x")
        (self.root / "etc" / "os-release").write_text(
            f'NAME="Ubuntu"\nID={os_id}\nVERSION_ID="{version}"\nVERSION_CODENAME={codename}\n'
        )
        (self.state / "installed").write_text("")
        (self.state / "group").write_text("")
        make_bin(self.bin, {**STUBS, **(GPU_STUB if gpu else {}), **(extra_stubs or {})})

    def run(
        self, *args: str, expect_rc: int = 0, env: dict | None = None
    ) -> subprocess.CompletedProcess:
        env = {
            "PATH": str(self.bin),
            "SETUP_FAKE_ROOT": str(self.root),
            "STATE": str(self.state),
            "CALLS": str(self.calls),
            "HOME": str(self.root),
            "LANG": "C.UTF-8",
            **(env or {}),
        }
        proc = subprocess.run(
            ["bash", str(SCRIPT), "--user", USER, *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == expect_rc, proc.stdout + proc.stderr
        return proc

    def calls_made(self) -> list[str]:
        return self.calls.read_text().splitlines() if self.calls.exists() else []

    def installed(self) -> set[str]:
        return set((self.state / "installed").read_text().split())

    def daemon_json(self) -> dict:
        return json.loads((self.root / "etc" / "docker" / "daemon.json").read_text())

    def files(self) -> set[str]:
        return {str(p.relative_to(self.root)) for p in self.root.rglob("*")}


def executed(proc: subprocess.CompletedProcess) -> list[str]:
    return [line[2:] for line in proc.stdout.splitlines() if line.startswith("+ ")]


def planned(proc: subprocess.CompletedProcess) -> list[str]:
    return [
        line[len("DRY-RUN: ") :]
        for line in proc.stdout.splitlines()
        if line.startswith("DRY-RUN: ")
    ]


def mutating_calls(calls: list[str]) -> list[str]:
    return [c for c in calls if c.split()[0] in MUTATING]


def test_shellcheck_clean():
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (scripts/install_system_packages.sh installs it)")
    proc = subprocess.run(
        ["shellcheck", "--shell=bash", str(SCRIPT)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dry_run_prints_every_change_and_makes_none(tmp_path):
    host = FakeHost(tmp_path)
    before = host.files()
    proc = host.run("--dry-run")
    plan = "\n".join(planned(proc))
    for expected in [
        "docker.asc",
        "download.docker.com/linux/ubuntu noble stable",
        "apt-get install",
        "docker-ce ",
        "docker-compose-plugin",
        f"usermod -aG docker {USER}",
        "nvidia-container-toolkit.list",
        "nvidia-container-toolkit",
        "nvidia-ctk runtime configure --runtime=docker",
        "native.cgroupdriver=cgroupfs",
        "systemctl restart docker",
        "nvtop",
        "docker run --rm --gpus all",
    ]:
        assert expected in plan, f"dry run does not mention {expected!r}:\n{plan}"
    assert executed(proc) == []
    assert mutating_calls(host.calls_made()) == [], "dry run ran a system-changing command"
    assert host.files() == before, "dry run wrote files"
    assert host.installed() == set()


def test_second_run_changes_nothing(tmp_path):
    # The dry run on an identical fresh host must announce everything run 1 then really runs.
    preview_host = FakeHost(tmp_path / "preview")
    preview = [
        c.replace(str(preview_host.root), "") for c in planned(preview_host.run("--dry-run"))
    ]

    host = FakeHost(tmp_path / "host")
    daemon = host.root / "etc" / "docker" / "daemon.json"
    daemon.parent.mkdir(parents=True)
    daemon.write_text(
        json.dumps({"log-driver": "json-file", "exec-opts": ["native.cgroupdriver=systemd"]})
    )

    first = host.run()
    assert executed(first), "run 1 on a bare host should have changed things"
    for cmd in executed(first):
        cmd = cmd.replace(str(host.root), "")
        assert cmd in preview, f"run 1 ran a command the dry run did not print: {cmd}"
    assert {
        "docker-ce",
        "docker-compose-plugin",
        "nvidia-container-toolkit",
        "nvtop",
    } <= host.installed()
    assert f"docker:x:999:{USER}" in (host.state / "group").read_text()
    cfg = host.daemon_json()
    assert cfg["log-driver"] == "json-file", "daemon.json was overwritten instead of merged"
    assert "nvidia" in cfg["runtimes"]
    assert cfg["exec-opts"] == ["native.cgroupdriver=cgroupfs"]
    assert any(c.startswith("docker run --rm --gpus all") for c in host.calls_made())

    calls_after_first = len(host.calls_made())
    second = host.run()
    assert executed(second) == [], f"run 2 changed something:\n{second.stdout}"
    assert "0 changes" in second.stdout
    new_calls = host.calls_made()[calls_after_first:]
    assert mutating_calls(new_calls) == []
    assert any(c.startswith("docker run --rm --gpus all") for c in new_calls), "self-check skipped"
    assert host.daemon_json() == cfg

    third = host.run("--dry-run")
    assert planned(third) == ["docker run --rm --gpus all ubuntu:24.04 nvidia-smi"]


def test_host_without_gpu_is_set_up_for_cpu(tmp_path):
    host = FakeHost(tmp_path, gpu=False, version="22.04")
    first = host.run()
    assert "No NVIDIA driver or GPU found" in first.stderr
    assert "docker-compose-cpu.yaml" in first.stderr + first.stdout
    assert "nvidia-container-toolkit" not in host.installed()
    assert {"docker-ce", "nvtop"} <= host.installed()
    assert not any(c.startswith("nvidia-ctk") for c in host.calls_made())
    assert any(c.startswith("docker run --rm ubuntu:24.04 true") for c in host.calls_made())
    assert "jammy stable" in (host.root / "etc/apt/sources.list.d/docker.list").read_text()
    second = host.run()
    assert executed(second) == []


def test_refuses_other_distributions(tmp_path):
    host = FakeHost(tmp_path, os_id="fedora", version="40")
    proc = host.run(expect_rc=1)
    assert "Ubuntu 22.04/24.04" in proc.stderr
    assert mutating_calls(host.calls_made()) == []


def test_install_script_has_no_stray_shellcheck_directive():
    """A comment starting with 'shellcheck' is parsed as a directive (SC1073) and stops the lint."""
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (scripts/install_system_packages.sh installs it)")
    script = REPO / "scripts" / "install_system_packages.sh"
    proc = subprocess.run(
        ["shellcheck", "--shell=bash", str(script)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def first_call(calls: list[str], prefix: str) -> int:
    return next(i for i, c in enumerate(calls) if c.startswith(prefix))


def test_waits_for_cloud_init_and_a_busy_package_manager(tmp_path):
    """First boot: cloud-init is waited for, then apt's locks (held by automatic updates for two
    more checks) before the first apt-get."""
    host = FakeHost(tmp_path)
    (host.state / "lock_busy").write_text("2")
    proc = host.run(env={"SETUP_LOCK_POLL": "0"})
    calls = host.calls_made()
    assert "cloud-init status --wait" in calls
    before_apt = calls[: first_call(calls, "apt-get")]
    fuser = [i for i, c in enumerate(before_apt) if c.startswith("fuser ")]
    assert len(fuser) == 4, calls  # busy, busy, free; free again right before the first apt-get
    assert "/var/lib/dpkg/lock-frontend" in calls[fuser[0]]
    assert first_call(calls, "cloud-init") < fuser[0]
    assert "holds the package manager" in proc.stdout


def test_dry_run_waits_for_the_package_manager_too(tmp_path):
    host = FakeHost(tmp_path)
    (host.state / "lock_busy").write_text("1")
    proc = host.run("--dry-run", env={"SETUP_LOCK_POLL": "0"})
    planned_apt = [c for c in planned(proc) if " apt-get " in f" {c} "]
    # busy, free; then one check before each apt-get the run would make
    assert len([c for c in host.calls_made() if c.startswith("fuser ")]) == 2 + len(planned_apt)
    assert planned_apt and "holds the package manager" in proc.stdout


def test_gives_up_with_a_clear_message_when_the_lock_stays_busy(tmp_path):
    host = FakeHost(tmp_path)
    (host.state / "lock_busy").write_text("99")
    proc = host.run(expect_rc=1, env={"SETUP_LOCK_POLL": "0", "SETUP_LOCK_TRIES": "3"})
    assert "still holds the package manager" in proc.stderr and "again" in proc.stderr
    assert not any(c.startswith("apt-get") for c in host.calls_made())


def test_without_fuser_busy_means_an_apt_or_dpkg_process(tmp_path):
    pgrep = (
        'n=$(cat "$STATE/lock_busy" 2>/dev/null || echo 0)\n'
        '[ "$n" -gt 0 ] && { echo $((n - 1)) > "$STATE/lock_busy"; exit 0; }\nexit 1\n'
    )
    host = FakeHost(tmp_path, extra_stubs={"pgrep": pgrep})
    (host.bin / "fuser").unlink()
    (host.state / "lock_busy").write_text("1")
    host.run(env={"SETUP_LOCK_POLL": "0"})
    calls = host.calls_made()
    pgrep = [c for c in calls if c.startswith("pgrep")]
    # busy, free; then one check before each apt-get
    apt_gets = sum(c.startswith("apt-get") for c in calls)
    assert pgrep == ["pgrep -x apt|apt-get|dpkg|unattended-upgr"] * (2 + apt_gets)
    assert first_call(calls, "pgrep") < first_call(calls, "apt-get")


def test_restarts_a_daemon_that_has_not_loaded_daemon_json(tmp_path):
    """daemon.json already right (an earlier run stopped before the restart), but the running
    daemon still uses runc only and the systemd cgroup driver: the script restarts it."""
    host = FakeHost(tmp_path)
    host.run()
    (host.state / "running.json").write_text("{}")  # what the daemon loaded before the change
    proc = host.run()
    assert executed(proc) == ["systemctl restart docker"], proc.stdout
    assert "has not loaded" in proc.stdout
    assert json.loads((host.state / "running.json").read_text()) == host.daemon_json()
    assert executed(host.run()) == []


def test_warns_where_python_is_too_old_for_the_lab_environment(tmp_path):
    """Ubuntu 22.04's python3 is 3.10; the pins (requirements/constraints.txt) need 3.11+."""
    import sys

    old_python = (
        f'case "$*" in *version_info*) exit 1;; -V) echo "Python 3.10.12"; exit 0;; esac\n'
        f'exec {sys.executable} "$@"\n'
    )
    host = FakeHost(tmp_path, version="22.04", extra_stubs={"python3": old_python})
    proc = host.run()
    assert "needs Python 3.11 or newer; this host's python3 is 3.10.12" in proc.stderr
    ok = FakeHost(tmp_path / "ok").run()
    assert "needs Python 3.11" not in ok.stderr


def test_lab_environment_needs_python_311_as_the_docs_say():
    """The lowest Python the pinned packages accept, read from the installed distributions'
    Requires-Python, is what setup_host.sh checks and docs/ways_to_run.md states."""
    import importlib.metadata
    import re

    from packaging.specifiers import SpecifierSet

    pins = dict(
        re.findall(
            r"^([A-Za-z0-9_.\-]+)==(\S+)", (REPO / "requirements/constraints.txt").read_text(), re.M
        )
    )
    floor = (3, 0)
    for name in pins:
        try:
            spec = importlib.metadata.metadata(name).get("Requires-Python") or ""
        except importlib.metadata.PackageNotFoundError:
            continue
        for s in SpecifierSet(spec):
            if s.operator in (">=", ">"):
                floor = max(floor, tuple(int(x) for x in s.version.split(".")[:2]))
    assert floor == (3, 11), f"the pins now need Python {floor}: update setup_host.sh and the docs"
    assert "sys.version_info < (3, 11)" in SCRIPT.read_text()
    assert "Python 3.11 or newer" in (REPO / "docs" / "ways_to_run.md").read_text()


def test_every_apt_get_waits_for_automatic_updates_that_start_in_between(tmp_path):
    """Unattended upgrades stay on in Chameleon's images and may take the package manager between
    two steps (here: right after the Docker packages are installed). Every apt-get first waits
    for it and is told to wait for dpkg's lock itself too."""
    starts_updates = 'case "$*" in *docker-ce*) echo 2 > "$STATE/lock_busy" ;; esac\n'
    host = FakeHost(tmp_path, extra_stubs={"apt-get": starts_updates + STUBS["apt-get"]})
    host.run(env={"SETUP_LOCK_POLL": "1", "SETUP_LOCK_TRIES": "30"})
    calls = host.calls_made()
    apt = [i for i, c in enumerate(calls) if c.startswith("apt-get ")]
    assert len(apt) >= 4
    for i in apt:
        assert calls[i].split()[2:4] == ["-o", "DPkg::Lock::Timeout=30"], calls[i]
        assert calls[i - 1].startswith("fuser "), f"{calls[i]} ran without checking the locks first"
    docker = next(i for i in apt if "docker-ce" in calls[i])
    after = apt[apt.index(docker) + 1]
    waits = [c for c in calls[docker + 1 : after] if c.startswith("fuser ")]
    assert len(waits) == 3  # busy, busy, free
    assert {"docker-ce", "nvidia-container-toolkit", "nvtop"} <= host.installed()
    assert not host.installed() & {"-o", "DPkg::Lock::Timeout=30"}
