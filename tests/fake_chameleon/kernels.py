"""Jupyter kernels for a scenario, forked from one process that has imported them already.

A student's kernel imports ipykernel and python-chi (openstacksdk, keystoneauth, the OpenStack
clients) before its first cell runs: about 2.5 s of CPU, and a scenario opens up to eight
kernels (a student who reopens a notebook gets a fresh one). So a `Zygote` (one per harness
worker, kept while the kernels' environment stays the same: python-chi reads some of it at
import) imports all that once and forks a fresh kernel process for each notebook opened. A
forked kernel is a new interpreter state for the notebook (nothing of an earlier kernel in it),
running ipykernel's own IPKernelApp on the connection file jupyter_client made; only its
modules are loaded already.

    python kernels.py serve SOCKET     the zygote (harness.Worker starts it)
    python -S kernels.py launch SOCKET CONNECTION_FILE
                                       the process jupyter_client starts as "the kernel": it asks
                                       the zygote for a kernel, passes on the signals it gets
                                       (an interrupt) and exits with the kernel's exit status;
                                       killed, its kernel is killed too.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys

# What a kernel of notebooks 1 and 2 imports before or in its first cells.
PRELOAD = [
    "ipykernel.kernelapp",
    "ipykernel.ipkernel",
    "IPython",
    "chi",
    "chi.context",
    "chi.lease",
    "chi.server",
    "chi.network",
    "chi.hardware",
    "chi.image",
    "blazarclient.client",
    "blazarclient.v1.client",
    "blazarclient.v1.hosts",
    "novaclient.client",
    "neutronclient.v2_0.client",
    "glanceclient.v2.client",
    "keystoneclient.v3.client",
    "openstack.connection",
    "ipykernel.debugger",  # debugpy
    "ipykernel.zmqshell",
    "IPython.core.debugger",
    "IPython.core.completerlib",
    "IPython.extensions.storemagic",
    "tornado.platform.asyncio",
    "sqlite3",  # IPython's history
    "dogpile.cache",
    "oslo_utils.encodeutils",
    "OpenSSL",
    "netrc",
    "pydoc",
    "faulthandler",
    "dateutil.parser",
    "packaging.version",
    "invoke.exceptions",
    "fabric",
    "paramiko",
]


# ---------------------------------------------------------------------- the zygote
def serve(path: str) -> None:
    """Fork a kernel for each request on the unix socket `path`; report each one's exit."""
    import importlib
    import selectors

    sys.modules.setdefault("rfc3987_syntax", None)  # as in harness.py: a parser nothing here uses
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:  # an older python-chi lacks a module: the kernel imports it then
            pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "new")
    sel.register(wake_r, selectors.EVENT_READ, "child")
    kernels: dict[int, socket.socket] = {}  # kernel pid -> its launcher's connection
    print("ready", flush=True)
    while True:
        for key, _ in sel.select():
            if key.data == "new":
                conn, _ = listener.accept()
                request = json.loads(conn.makefile().readline())
                pid = os.fork()
                if pid == 0:
                    for fd in (listener, conn, *kernels.values()):
                        fd.close()
                    _kernel(request)
                kernels[pid] = conn
                conn.sendall(f"{pid}\n".encode())
                sel.register(conn, selectors.EVENT_READ, pid)
            elif key.data == "child":
                os.read(wake_r, 512)
                _reap(kernels, sel)
            else:  # the launcher: a signal to pass on, or gone (killed): its kernel goes too
                data = key.fileobj.recv(64)
                pid = key.data
                for word in data.split() if data else [str(int(signal.SIGKILL)).encode()]:
                    try:
                        os.kill(pid, int(word))
                    except ProcessLookupError:
                        pass
                if not data:
                    sel.unregister(key.fileobj)


def _reap(kernels: dict, sel) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = kernels.pop(pid, None)
        if conn is not None:
            try:
                sel.unregister(conn)
            except (KeyError, ValueError):
                pass
            try:
                conn.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
            except OSError:
                pass
            conn.close()


def _kernel(request: dict) -> None:
    """In the forked child: become the kernel jupyter_client asked for."""
    import ctypes

    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG: dies with the zygote
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[0] = request["cwd"]  # as `python -m ipykernel_launcher` run there has it
    sys.argv = ["ipykernel_launcher", "-f", request["connection_file"]]
    code = 0
    try:
        from ipykernel import kernelapp

        kernelapp.launch_new_instance()
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else 0
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


# ---------------------------------------------------------------------- the launcher
def launch(path: str, connection_file: str) -> int:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    request = {"connection_file": connection_file, "cwd": os.getcwd(), "env": dict(os.environ)}
    conn.sendall((json.dumps(request) + "\n").encode())
    replies = conn.makefile()
    replies.readline()  # the kernel's pid

    def pass_on(signum, frame):
        conn.sendall(f"{signum} ".encode())

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, pass_on)
    while True:
        try:
            line = replies.readline()
        except InterruptedError:
            continue
        if not line:
            return 1
        if line.startswith("exit "):
            return int(line.split()[1])


class Zygote:
    """A zygote, started with the kernels' environment; `manager` is the KernelManager class for
    nbclient whose kernels it forks."""

    def __init__(self, path, env: dict, cwd):
        import subprocess

        from jupyter_client.manager import KernelManager

        self.path = str(path)
        if os.path.exists(self.path):  # an earlier zygote's, stopped
            os.unlink(self.path)
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "serve", self.path],
            env=env,
            cwd=str(cwd),
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout.readline().strip() == "ready", "the kernels' zygote did not start"
        launcher = [sys.executable, "-S", os.path.abspath(__file__), "launch", self.path]

        class ZygoteKernels(KernelManager):
            def format_kernel_cmd(self, extra_arguments=None):
                return [*launcher, os.path.realpath(self.connection_file)]

        self.manager = ZygoteKernels

    def stop(self) -> None:
        self.proc.kill()  # its kernels die with it (PR_SET_PDEATHSIG)
        self.proc.wait()


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2])
    else:
        sys.exit(launch(sys.argv[2], sys.argv[3]))
