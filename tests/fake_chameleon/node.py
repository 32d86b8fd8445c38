"""The bare-metal node: an SSH server on port 22 of the floating IP its server holds, whose shell
is bash in the node's home. It listens only on the addresses bound to the student's server (the
fake's Neutron says when), so a notebook that attached the wrong IP cannot reach it.

The commands run for real (git clones for real, docker/setup_host.sh and docker/init_env.sh run
for real), with PATH limited to links to harmless real tools, git, and the stub system commands
of host_stubs (apt-get, systemctl, docker, nvidia-smi, cloud-init, ..., and `make`, whose exit
status a scenario sets in $STATE/make_rc and whose `ray-node` target leaves a stub `ray` in
.venv-ray/bin), and with docker/setup_host.sh pointed at a fake root. Every stub appends its
command line to calls.log (`make TARGET ...`, `ray start ...`).
"""

from __future__ import annotations

import socket
import subprocess
import threading
from pathlib import Path

import paramiko

from .host_stubs import GPU_STUB, SAFE_REAL_TOOLS, STUBS, make_bin

MAKE_STUB = (
    'echo "make $*: building the lab environment and the model files ..."\n'
    'rc=$(cat "$STATE/make_rc" 2>/dev/null || echo 0)\n'
    '[ "$rc" -ne 0 ] && echo "ERROR: No matching distribution found for torch==2.14.1" >&2\n'
    # make ray-node leaves Ray's command in .venv-ray/bin, as pip does: here, the stub below
    '[ "$rc" -eq 0 ] && [ "$1" = ray-node ] && mkdir -p .venv-ray/bin'
    ' && cat "$STATE/ray_stub" > .venv-ray/bin/ray && chmod +x .venv-ray/bin/ray\n'
    'echo "... last line of make"\nexit "$rc"\n'
)
# `ray` as make ray-node installs it: `ray start` records the node's part (head or joined, and
# its arguments) in $STATE/ray; `ray status` answers only where a `ray start` ran
RAY_STUB = (
    '#!/bin/bash\necho "ray $*" >> "$CALLS"\n'
    'case "$1" in\n'
    '  start) echo "$*" > "$STATE/ray"; echo "Ray runtime started." ;;\n'
    '  status) [ -f "$STATE/ray" ] || { echo "Could not find any running Ray instance." >&2;'
    " exit 1; }\n"
    '    echo "fake ray: this node runs: ray $(cat "$STATE/ray")" ;;\n'
    '  stop) rm -f "$STATE/ray" ;;\n'
    "esac\n"
)


class _Interface(paramiko.ServerInterface):
    def __init__(self, node: "FakeNode", address: str):
        self.node, self.address = node, address

    def get_allowed_auths(self, username):
        return "publickey"

    def check_auth_publickey(self, username, key):
        ok = username == "cc" and key.get_base64() == self.node.authorized_key.get_base64()
        return paramiko.AUTH_SUCCESSFUL if ok else paramiko.AUTH_FAILED

    def check_channel_request(self, kind, chanid):
        return (
            paramiko.OPEN_SUCCEEDED
            if kind == "session"
            else paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED
        )

    def check_channel_env_request(self, channel, name, value):
        return False  # like Ubuntu's sshd (AcceptEnv LANG LC_* only)

    def check_channel_exec_request(self, channel, command):
        args = (channel, command.decode(), self.address)
        threading.Thread(target=self.node.run_command, args=args, daemon=True).start()
        return True


class FakeNode:
    def __init__(self, base: Path, authorized_key: paramiko.PKey):
        self.authorized_key = authorized_key
        self.home = base / "home" / "cc"
        self.root = base / "root"
        self.state = base / "state"
        self.bin = base / "bin"
        self.calls = base / "calls.log"
        self.commands: list[dict] = []
        for d in (
            self.home,
            self.root / "etc/apt/sources.list.d",
            self.root / "usr/share/keyrings",
            self.state,
        ):
            d.mkdir(parents=True, exist_ok=True)
        os_release = 'NAME="Ubuntu"\nID=ubuntu\nVERSION_ID="24.04"\nVERSION_CODENAME=noble\n'
        (self.root / "etc/os-release").write_text(os_release)
        (self.state / "installed").write_text("")
        (self.state / "group").write_text("")
        (self.state / "ray_stub").write_text(RAY_STUB)
        make_bin(
            self.bin,
            {**STUBS, **GPU_STUB, "make": MAKE_STUB},
            real_tools=[*SAFE_REAL_TOOLS, "git", "ls"],
        )
        self.host_key = paramiko.RSAKey.generate(2048)
        self._socks: dict[str, socket.socket] = {}

    def call_lines(self) -> list[str]:
        """Each stub command the node ran, as `NAME ARGS` (make with its target, ray start ...)."""
        return self.calls.read_text().splitlines() if self.calls.exists() else []

    def env(self) -> dict:
        return {
            "PATH": str(self.bin),
            "HOME": str(self.home),
            "USER": "cc",
            "LANG": "C.UTF-8",
            "SETUP_FAKE_ROOT": str(self.root),
            "STATE": str(self.state),
            "CALLS": str(self.calls),
            "GIT_CONFIG_NOSYSTEM": "1",
            "SETUP_LOCK_POLL": "0",
        }

    def listen(self, address: str) -> None:
        """Answer SSH on address (the floating IP now bound to this node's server)."""
        if address in self._socks:
            return
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, 22))
        sock.listen(16)
        self._socks[address] = sock
        threading.Thread(target=self._accept, args=(sock,), daemon=True).start()

    def unlisten(self, address: str) -> None:
        sock = self._socks.pop(address, None)
        if sock is not None:
            try:  # wakes the thread blocked in accept(), which would keep the port taken
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def _accept(self, sock):
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        transport = paramiko.Transport(conn)
        transport.add_server_key(self.host_key)
        try:
            transport.start_server(server=_Interface(self, conn.getsockname()[0]))
        except (paramiko.SSHException, EOFError, OSError):
            return  # a bare TCP check (check_connectivity) connects and hangs up
        channels = []  # paramiko holds channels weakly: keep them until the client hangs up
        while transport.is_active():
            channel = transport.accept(timeout=1)
            if channel is not None:
                channels.append(channel)

    def run_command(self, channel, command: str, address: str):
        record = {"command": command, "via": address}  # via: the floating IP the client used
        self.commands.append(record)
        proc = subprocess.Popen(
            ["bash", "-c", command],
            cwd=self.home,
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

        def pump(stream, send):
            for chunk in iter(lambda: stream.read1(4096), b""):
                send(chunk)

        err = threading.Thread(target=pump, args=(proc.stderr, channel.sendall_stderr))
        err.start()
        pump(proc.stdout, channel.sendall)
        err.join()
        record["rc"] = proc.wait()
        channel.send_exit_status(record["rc"])
        channel.close()

    def stop(self):
        for address in list(self._socks):
            self.unlisten(address)
