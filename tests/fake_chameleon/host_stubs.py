"""Stub system commands for an Ubuntu host that is not there: docker/setup_host.sh runs against
them in tests/test_setup_host.py, and so does the fake Chameleon node (node.py).

Each stub appends its command line to $CALLS and keeps a little state under $STATE: the installed
packages, the group database, the configuration the running Docker daemon loaded (copied from
daemon.json by `systemctl restart docker`), how many more checks find apt's locks busy.
Real tools that cannot change anything outside the fake root are linked in by `make_bin`.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
from pathlib import Path

# Real tools the script may use that cannot change the system outside the fake root.
SAFE_REAL_TOOLS = [
    "bash",
    "sh",
    "python3",
    "sed",
    "grep",
    "cut",
    "head",
    "tail",
    "id",
    "cat",
    "chmod",
    "install",
    "env",
    "mkdir",
    "dirname",
    "tr",
    "sleep",
    "od",
    "stat",
]
# Commands that change a real system: each must only ever be reached through the script's run().
MUTATING = {"apt-get", "usermod", "groupadd", "nvidia-ctk", "systemctl", "curl", "gpg"}

DOCKER_INFO = (
    '\nif [ "$1" = info ]; then\n'
    '  grep -qx docker-ce "$STATE/installed" 2>/dev/null'
    ' || { echo "Cannot connect to the Docker daemon" >&2; exit 1; }\n'
    r"""  python3 - "$STATE/running.json" <<"PY"
import json, os, sys
p = sys.argv[1]
cfg = json.load(open(p)) if os.path.exists(p) and os.path.getsize(p) else {}
runtimes = {"runc": {"path": "runc"}, **cfg.get("runtimes", {})}
driver = "cgroupfs" if "native.cgroupdriver=cgroupfs" in cfg.get("exec-opts", []) else "systemd"
print(json.dumps(runtimes), driver)
PY
  exit 0
fi
case "$*" in *nvidia-smi*) echo "fake: 2 GPUs visible in the container";; esac
"""
)

STUBS = {
    "sudo": 'exec "$@"\n',
    "dpkg-query": 'pkg="${!#}"\ngrep -qx "$pkg" "$STATE/installed" 2>/dev/null || exit 1\n'
    'printf "install ok installed"\n',
    "dpkg": '[ "$1" = --print-architecture ] && echo amd64\n',
    "apt-get": (  # apt-get install [-o NAME=VALUE] [-flags] PACKAGES...
        'if [ "$1" = install ]; then shift\n'
        "  while [ $# -gt 0 ]; do\n"
        '    case "$1" in -o) shift ;; -*) ;; *) echo "$1" >> "$STATE/installed" ;; esac; shift\n'
        "  done\n"
        '  grep -qx docker-ce "$STATE/installed" && ! grep -q "^docker:" "$STATE/group" 2>/dev/null'
        ' && echo "docker:x:999:" >> "$STATE/group"\n'
        "fi\nexit 0\n"
    ),
    "getent": 'grep "^$2:" "$STATE/group" 2>/dev/null\n',
    "groupadd": (
        'g="${!#}"; grep -q "^$g:" "$STATE/group" 2>/dev/null'
        ' || echo "$g:x:998:" >> "$STATE/group"\n'
    ),
    "usermod": (  # usermod -aG GROUP USER
        'python3 - "$STATE/group" "$2" "$3" <<"PY"\n'
        "import sys\npath, group, user = sys.argv[1:]\nout = []\n"
        "for line in open(path).read().splitlines():\n"
        '    name, x, gid, members = line.split(":")\n'
        "    if name == group:\n"
        '        members = ",".join([m for m in members.split(",") if m] + [user])\n'
        '    out.append(":".join([name, x, gid, members]))\n'
        'open(path, "w").write("\\n".join(out) + "\\n")\nPY\n'
    ),
    "curl": (
        'out=""\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && out="$2"; shift; done\n'
        'if [ -n "$out" ]; then echo fake-key > "$out"\n'
        'else echo "deb https://nvidia.github.io/libnvidia-container/stable/deb/\\$(ARCH) /"; fi\n'
    ),
    "gpg": 'out=""\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && out="$2"; shift; done\ncat > "$out"\n',
    "nvidia-ctk": (  # nvidia-ctk runtime configure --runtime=docker --config=PATH
        'cfg="${!#}"; cfg="${cfg#--config=}"\n'
        'python3 - "$cfg" <<"PY"\n'
        "import json, os, sys\np = sys.argv[1]\n"
        "d = json.load(open(p)) if os.path.exists(p) and os.path.getsize(p) else {}\n"
        'd.setdefault("runtimes", {})["nvidia"] = '
        '{"path": "nvidia-container-runtime", "args": []}\n'
        'os.makedirs(os.path.dirname(p), exist_ok=True)\nopen(p, "w").write(json.dumps(d))\nPY\n'
    ),
    # the daemon loads daemon.json when it (re)starts
    "systemctl": (
        'if [ "$1 $2" = "restart docker" ]; then\n'
        '  cat "$SETUP_FAKE_ROOT/etc/docker/daemon.json" > "$STATE/running.json" 2>/dev/null'
        " || true\nfi\n"
    ),
    "docker": DOCKER_INFO,
    # first boot: `cloud-init status --wait` blocks until cloud-init is done
    "cloud-init": 'echo "status: done"\n',
    # apt's locks are held for as many checks as $STATE/lock_busy says
    "fuser": (
        'n=$(cat "$STATE/lock_busy" 2>/dev/null || echo 0)\n'
        'if [ "$n" -gt 0 ]; then echo $((n - 1)) > "$STATE/lock_busy"; echo " 4242"; exit 0; fi\n'
        "exit 1\n"
    ),
}
GPU_STUB = {
    "nvidia-smi": 'echo "GPU 0: Tesla P100-PCIE-16GB (UUID: GPU-0)"\n'
    'echo "GPU 1: Tesla P100-PCIE-16GB (UUID: GPU-1)"\n'
}


def make_bin(bin_dir: Path, stubs: dict[str, str], real_tools: list[str] = SAFE_REAL_TOOLS) -> None:
    """bin_dir gets a link to each real tool and an executable stub for each entry of stubs."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for tool in real_tools:
        if tool in stubs:
            continue
        # the real binary (not a pyenv-style shim that needs the caller's PATH)
        real = sys.executable if tool == "python3" else shutil.which(tool)
        assert real, f"test needs {tool}"
        (bin_dir / tool).symlink_to(os.path.realpath(real))
    for name, body in stubs.items():
        path = bin_dir / name
        assert not path.exists(), f"{path} exists"
        path.write_text(f'#!/bin/bash\necho "{name} $*" >> "$CALLS"\n{body}')
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
