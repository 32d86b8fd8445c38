"""docker/setup_host.sh: lint, dry run, idempotence, CPU-only hosts.

The script is run for real, but against a fake root (SETUP_FAKE_ROOT) and with PATH limited to
stub commands plus a few harmless real tools, so nothing on this machine can be changed: the
stubs for apt-get, usermod, nvidia-ctk, systemctl, docker... only record their arguments and
update a small fake package/group database under the fake root.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "docker" / "setup_host.sh"
USER = "student"

# Real tools the script may use that cannot change the system outside the fake root.
SAFE_REAL_TOOLS = ["bash", "sh", "python3", "sed", "grep", "cut", "head", "id", "cat", "chmod",
                   "install", "env", "mkdir", "dirname", "tr"]
# Commands that change a real system: each must only ever be reached through the script's run().
MUTATING = {"apt-get", "usermod", "groupadd", "nvidia-ctk", "systemctl", "curl", "gpg"}

STUBS = {
    "sudo": 'exec "$@"\n',
    "dpkg-query": 'pkg="${!#}"\ngrep -qx "$pkg" "$STATE/installed" 2>/dev/null || exit 1\n'
                  'printf "install ok installed"\n',
    "dpkg": '[ "$1" = --print-architecture ] && echo amd64\n',
    "apt-get": (
        'if [ "$1" = install ]; then shift\n'
        '  for a in "$@"; do case "$a" in -*) ;; *) echo "$a" >> "$STATE/installed" ;; esac; done\n'
        '  grep -qx docker-ce "$STATE/installed" && ! grep -q "^docker:" "$STATE/group" 2>/dev/null'
        ' && echo "docker:x:999:" >> "$STATE/group"\n'
        'fi\nexit 0\n'),
    "getent": 'grep "^$2:" "$STATE/group" 2>/dev/null\n',
    "groupadd": 'g="${!#}"; grep -q "^$g:" "$STATE/group" 2>/dev/null || echo "$g:x:998:" >> "$STATE/group"\n',
    "usermod": (  # usermod -aG GROUP USER
        'python3 - "$STATE/group" "$2" "$3" <<"PY"\n'
        'import sys\npath, group, user = sys.argv[1:]\nout = []\n'
        'for line in open(path).read().splitlines():\n'
        '    name, x, gid, members = line.split(":")\n'
        '    if name == group:\n'
        '        members = ",".join([m for m in members.split(",") if m] + [user])\n'
        '    out.append(":".join([name, x, gid, members]))\n'
        'open(path, "w").write("\\n".join(out) + "\\n")\nPY\n'),
    "curl": ('out=""\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && out="$2"; shift; done\n'
             'if [ -n "$out" ]; then echo fake-key > "$out"\n'
             'else echo "deb https://nvidia.github.io/libnvidia-container/stable/deb/\\$(ARCH) /"; fi\n'),
    "gpg": 'out=""\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && out="$2"; shift; done\ncat > "$out"\n',
    "nvidia-ctk": (  # nvidia-ctk runtime configure --runtime=docker --config=PATH
        'cfg="${!#}"; cfg="${cfg#--config=}"\n'
        'python3 - "$cfg" <<"PY"\n'
        'import json, os, sys\np = sys.argv[1]\n'
        'd = json.load(open(p)) if os.path.exists(p) and os.path.getsize(p) else {}\n'
        'd.setdefault("runtimes", {})["nvidia"] = {"path": "nvidia-container-runtime", "args": []}\n'
        'os.makedirs(os.path.dirname(p), exist_ok=True)\nopen(p, "w").write(json.dumps(d))\nPY\n'),
    "systemctl": "exit 0\n",
    "docker": 'case "$*" in *nvidia-smi*) echo "fake: 2 GPUs visible in the container";; esac\n',
}
GPU_STUB = {"nvidia-smi": 'echo "GPU 0: Tesla P100-PCIE-16GB (UUID: GPU-0)"\n'
                          'echo "GPU 1: Tesla P100-PCIE-16GB (UUID: GPU-1)"\n'}


class FakeHost:
    def __init__(self, base: Path, gpu: bool = True, os_id: str = "ubuntu", version: str = "24.04"):
        self.root = base / "root"
        self.state = base / "state"
        self.bin = base / "bin"
        self.calls = base / "calls.log"
        # what a bare Ubuntu already has
        for d in (self.root / "etc/apt/sources.list.d", self.root / "usr/share/keyrings", self.state, self.bin):
            d.mkdir(parents=True)
        codename = {"22.04": "jammy", "24.04": "noble"}.get(version, "x")
        (self.root / "etc" / "os-release").write_text(
            f'NAME="Ubuntu"\nID={os_id}\nVERSION_ID="{version}"\nVERSION_CODENAME={codename}\n')
        (self.state / "installed").write_text("")
        (self.state / "group").write_text("")
        for tool in SAFE_REAL_TOOLS:
            # the real binary (not a pyenv-style shim that needs the caller's PATH)
            real = sys.executable if tool == "python3" else shutil.which(tool)
            assert real, f"test needs {tool}"
            (self.bin / tool).symlink_to(os.path.realpath(real))
        stubs = dict(STUBS, **(GPU_STUB if gpu else {}))
        for name, body in stubs.items():
            path = self.bin / name
            path.write_text(f'#!/bin/bash\necho "{name} $*" >> "$CALLS"\n{body}')
            path.chmod(path.stat().st_mode | stat.S_IXUSR)

    def run(self, *args: str, expect_rc: int = 0) -> subprocess.CompletedProcess:
        env = {"PATH": str(self.bin), "SETUP_FAKE_ROOT": str(self.root), "STATE": str(self.state),
               "CALLS": str(self.calls), "HOME": str(self.root), "LANG": "C.UTF-8"}
        proc = subprocess.run(["bash", str(SCRIPT), "--user", USER, *args], env=env,
                              capture_output=True, text=True, timeout=60)
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
    return [line[len("DRY-RUN: "):] for line in proc.stdout.splitlines() if line.startswith("DRY-RUN: ")]


def mutating_calls(calls: list[str]) -> list[str]:
    return [c for c in calls if c.split()[0] in MUTATING]


def test_shellcheck_clean():
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (scripts/install_system_packages.sh installs it)")
    proc = subprocess.run(["shellcheck", "--shell=bash", str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dry_run_prints_every_change_and_makes_none(tmp_path):
    host = FakeHost(tmp_path)
    before = host.files()
    proc = host.run("--dry-run")
    plan = "\n".join(planned(proc))
    for expected in ["docker.asc", "download.docker.com/linux/ubuntu noble stable",
                     "apt-get install", "docker-ce ", "docker-compose-plugin",
                     f"usermod -aG docker {USER}", "nvidia-container-toolkit.list",
                     "nvidia-container-toolkit", "nvidia-ctk runtime configure --runtime=docker",
                     "native.cgroupdriver=cgroupfs", "systemctl restart docker", "nvtop",
                     "docker run --rm --gpus all"]:
        assert expected in plan, f"dry run does not mention {expected!r}:\n{plan}"
    assert executed(proc) == []
    assert mutating_calls(host.calls_made()) == [], "dry run ran a system-changing command"
    assert host.files() == before, "dry run wrote files"
    assert host.installed() == set()


def test_second_run_changes_nothing(tmp_path):
    # The dry run on an identical fresh host must announce everything run 1 then really runs.
    preview_host = FakeHost(tmp_path / "preview")
    preview = [c.replace(str(preview_host.root), "") for c in planned(preview_host.run("--dry-run"))]

    host = FakeHost(tmp_path / "host")
    daemon = host.root / "etc" / "docker" / "daemon.json"
    daemon.parent.mkdir(parents=True)
    daemon.write_text(json.dumps({"log-driver": "json-file", "exec-opts": ["native.cgroupdriver=systemd"]}))

    first = host.run()
    assert executed(first), "run 1 on a bare host should have changed things"
    for cmd in executed(first):
        cmd = cmd.replace(str(host.root), "")
        assert cmd in preview, f"run 1 ran a command the dry run did not print: {cmd}"
    assert {"docker-ce", "docker-compose-plugin", "nvidia-container-toolkit", "nvtop"} <= host.installed()
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
