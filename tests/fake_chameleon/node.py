"""The bare-metal node: an SSH server on port 22 of the floating IP its server holds, whose shell
is bash in the node's home, with SFTP (Fabric's put and get) on the same files. It listens only
on the address bound to the student's server, and only once sshd is up there (the harness asks
the fake's Nova, on the simulated clock: minutes after ACTIVE), and takes the student's key only
once cloud-init has put it there (`keys_ok`), so a notebook that attached the wrong IP, or goes
on before SSH answers, cannot reach it. A new server is a new disk (`fresh_disk`).

The commands run for real (git clones for real, docker/setup_host.sh, docker/init_env.sh and
docker/build_images.sh, in the background as notebook 2 starts it, run for real), with PATH
limited to links to harmless real tools, git, flock, setsid, nohup, and the stub system commands
of host_stubs (apt-get, systemctl, docker, nvidia-smi, cloud-init, ..., and `make`, whose exit
status a scenario sets in $STATE/make_rc and whose `ray-node` target leaves a stub `ray` in
.venv-ray/bin), and with docker/setup_host.sh pointed at a fake root. Every stub appends its
command line to calls.log (`make TARGET ...`, `ray start ...`, and for `ray` the token settings
it ran with); every SFTP open is in `transfers`.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import paramiko

from .common import now
from .host_stubs import DOCKER_INFO, GPU_STUB, SAFE_REAL_TOOLS, STUBS, make_bin

MAKE_STUB = (
    'echo "make $*: building the lab environment and the model files ..."\n'
    'rc=$(cat "$STATE/make_rc" 2>/dev/null || echo 0)\n'
    '[ "$rc" -ne 0 ] && echo "ERROR: No matching distribution found for torch==2.14.1" >&2\n'
    # make ray-node leaves Ray's command in .venv-ray/bin, as pip does: here, the stub below
    '[ "$rc" -eq 0 ] && [ "$1" = ray-node ] && mkdir -p .venv-ray/bin'
    ' && cat "$STATE/ray_stub" > .venv-ray/bin/ray && chmod +x .venv-ray/bin/ray\n'
    'echo "... last line of make"\nexit "$rc"\n'
)
# `ray` as make ray-node installs it, with Ray's token authentication as the lab turns it on:
# every command needs RAY_AUTH_MODE=token and RAY_AUTH_TOKEN_PATH naming (by an absolute path) a
# token file of mode 0600, and a node joining the head needs the head's token ($RAY_HEAD_TOKEN:
# the head's file, set by the harness on the second node). `ray start` records the node's part
# (head or joined, and its arguments) in $STATE/ray; `ray status` answers only where it ran.
RAY_STUB = r"""#!/bin/bash
echo "ray $*" >> "$CALLS"
auth="RAY_AUTH_MODE=${RAY_AUTH_MODE-} RAY_AUTH_TOKEN_PATH=${RAY_AUTH_TOKEN_PATH-}"
echo "ray-auth $auth" >> "$CALLS"
refuse() { echo "ray.exceptions.AuthenticationError: $1" >&2; exit 1; }
[ "${RAY_AUTH_MODE-}" = token ] || refuse "token authentication is not on (RAY_AUTH_MODE)"
case "${RAY_AUTH_TOKEN_PATH-}" in /*) ;; *) refuse "RAY_AUTH_TOKEN_PATH is not absolute" ;; esac
[ -s "$RAY_AUTH_TOKEN_PATH" ] || refuse "no token in $RAY_AUTH_TOKEN_PATH"
[ "$(stat -c %a "$RAY_AUTH_TOKEN_PATH")" = 600 ] || refuse "the token file is not mode 600"
if [ -n "${RAY_HEAD_TOKEN-}" ]; then
  cmp -s "$RAY_AUTH_TOKEN_PATH" "$RAY_HEAD_TOKEN" || refuse "the head refused this token"
fi
# Ray makes its --temp-dir 0777: the folder around it must be the node user's alone (0700)
private() { for a in "$@"; do case "$a" in --temp-dir=*) d=$(dirname "${a#--temp-dir=}")
  [ "$(stat -c %a "$d")" = 700 ] && [ "$(umask)" = 0077 ] && return 0 ;; esac; done; return 1; }
case "$1" in
  start) private "$@" || { echo "ray start: Ray's folders would be open to other users" >&2
    exit 1; }
    echo "$*" > "$STATE/ray"; echo "Ray runtime started." ;;
  status) [ -f "$STATE/ray" ] || { echo "Could not find any running Ray instance." >&2; exit 1; }
    echo "fake ray: this node runs: ray $(cat "$STATE/ray")" ;;
  stop) rm -f "$STATE/ray" ;;
esac
"""
# `docker`; a `docker compose` command is also recorded with the FASTAPI_BACKEND it ran with
# (which FastAPI image it builds, docker/services.yaml), in one line: the background build's lines
# and the foreground's interleave
DOCKER_STUB = (
    '[ "$1" = compose ] && echo "compose FASTAPI_BACKEND=${FASTAPI_BACKEND-} $*" >> "$CALLS"'
    + DOCKER_INFO
)
HOME_ON_NODE = "/home/cc"  # the home SFTP shows (the shell's $HOME is the fake's folder)


class _Interface(paramiko.ServerInterface):
    def __init__(self, node: "FakeNode", address: str):
        self.node, self.address = node, address

    def get_allowed_auths(self, username):
        return "publickey"

    def check_auth_publickey(self, username, key):
        ok = username == "cc" and key.get_base64() == self.node.authorized_key.get_base64()
        return paramiko.AUTH_SUCCESSFUL if ok and self.node.keys_ok else paramiko.AUTH_FAILED

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
        self.transfers: list[dict] = []  # SFTP opens: {"op": put|get, "path", "at"}
        self.extra_env: dict[str, str] = {}  # what the node's environment adds (LAB_BUNDLE)
        self.knobs: dict[str, str] = {}  # the stubs' knobs in $STATE (make_rc), kept
        self.keys_ok = False  # cloud-init has put the student's key in place
        self.server_id: str | None = None  # the server whose disk this is
        self.disks = 0  # how many servers' disks this node has had
        make_bin(
            self.bin,
            {**STUBS, **GPU_STUB, "make": MAKE_STUB, "docker": DOCKER_STUB},
            # flock, setsid, nohup: docker/build_images.sh's lock and its build in the background
            real_tools=[*SAFE_REAL_TOOLS, "git", "ls", "cmp", "flock", "setsid", "nohup"],
        )
        self.host_key = paramiko.ECDSAKey.generate()  # quick to make; the client takes any
        self._socks: dict[str, socket.socket] = {}
        self.fresh_disk(None)

    def fresh_disk(self, server_id: str | None) -> None:
        """A new server on this node: an empty home and a system as the image has it."""
        for d in (self.home, self.root, self.state):
            shutil.rmtree(d, ignore_errors=True)
        self.server_id, self.disks = server_id, self.disks + (server_id is not None)
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
        for name, value in self.knobs.items():
            (self.state / name).write_text(value)

    def keep_in_state(self, name: str, value: str) -> None:
        """A knob of the node's stubs ($STATE/name), kept across fresh disks."""
        self.knobs[name] = value
        (self.state / name).write_text(value)

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
            **self.extra_env,
        }

    def listening(self) -> set[str]:
        return set(self._socks)

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
        transport.set_subsystem_handler("sftp", paramiko.SFTPServer, _Files, self)
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
        # EOF, then the client closes the channel, as sshd leaves it to: closing it here could
        # reach the client before paramiko's reply to the exec request (a quick command, a busy
        # machine), and the client would take it for a refused request ("Channel closed.")
        channel.shutdown_write()
        deadline = time.monotonic() + 30
        while not channel.closed and time.monotonic() < deadline:
            time.sleep(0.02)
        channel.close()

    def stop(self):
        for address in list(self._socks):
            self.unlisten(address)


# ---------------------------------------------------------------------- SFTP on the node's files
class _Handle(paramiko.SFTPHandle):
    def stat(self):
        return paramiko.SFTPAttributes.from_stat(os.fstat(self.readfile.fileno()))

    def chattr(self, attr):
        return paramiko.SFTP_OK


class _Files(paramiko.SFTPServerInterface):
    """The node's files as sshd's SFTP shows them: /home/cc/... (and relative paths) are the
    node's home; the fake's own path of that home is accepted too (the shell's $HOME)."""

    def __init__(self, server, node: FakeNode, *args, **kwargs):
        super().__init__(server, *args, **kwargs)
        self.node = node

    def _local(self, path: str) -> Path | None:
        home = str(self.node.home)
        path = path if path.startswith("/") else f"{HOME_ON_NODE}/{path}"
        for prefix in (home, HOME_ON_NODE):
            if path == prefix or path.startswith(prefix + "/"):
                return Path(os.path.normpath(home + path[len(prefix) :]))
        return None

    def canonicalize(self, path):
        local = self._local(path)
        if local is None:
            return path
        return HOME_ON_NODE + str(local)[len(str(self.node.home)) :]

    def _attrs(self, path, follow=True):
        local = self._local(path)
        if local is None:
            return paramiko.SFTP_PERMISSION_DENIED
        try:
            st = local.stat() if follow else local.lstat()
        except FileNotFoundError:
            return paramiko.SFTP_NO_SUCH_FILE
        return paramiko.SFTPAttributes.from_stat(st, local.name)

    def stat(self, path):
        return self._attrs(path)

    def lstat(self, path):
        return self._attrs(path, follow=False)

    def list_folder(self, path):
        local = self._local(path)
        if local is None or not local.is_dir():
            return paramiko.SFTP_NO_SUCH_FILE
        return [paramiko.SFTPAttributes.from_stat(p.stat(), p.name) for p in local.iterdir()]

    def open(self, path, flags, attr):
        local = self._local(path)
        if local is None:
            return paramiko.SFTP_PERMISSION_DENIED
        writing = flags & (os.O_WRONLY | os.O_RDWR)
        try:
            fd = os.open(local, flags | getattr(os, "O_BINARY", 0), 0o644)
        except FileNotFoundError:
            return paramiko.SFTP_NO_SUCH_FILE
        self.node.transfers.append(
            {"op": "put" if writing else "get", "path": self.canonicalize(path),
             "at": now().isoformat()}
        )  # fmt: skip
        handle = _Handle(flags)
        f = os.fdopen(fd, "wb" if writing and not flags & os.O_RDWR else "r+b" if writing else "rb")
        handle.readfile = handle.writefile = f
        return handle

    def chattr(self, path, attr):
        local = self._local(path)
        if local is None or not local.exists():
            return paramiko.SFTP_NO_SUCH_FILE
        if attr.st_mode is not None:
            local.chmod(attr.st_mode & 0o7777)
        return paramiko.SFTP_OK

    def mkdir(self, path, attr):
        local = self._local(path)
        if local is None:
            return paramiko.SFTP_PERMISSION_DENIED
        local.mkdir()
        return paramiko.SFTP_OK

    def remove(self, path):
        local = self._local(path)
        if local is None:
            return paramiko.SFTP_PERMISSION_DENIED
        local.unlink()
        return paramiko.SFTP_OK

    def rename(self, oldpath, newpath):
        old, new = self._local(oldpath), self._local(newpath)
        if old is None or new is None:
            return paramiko.SFTP_PERMISSION_DENIED
        old.rename(new)
        return paramiko.SFTP_OK
