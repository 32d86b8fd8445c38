"""Decoding in worker processes whose CPU time the kernel bounds: a file that costs more than its
budget is stopped by the operating system, whatever its bytes say (issue 52: each round found a
new file layout that a structure walk miscounted; a CPU-time limit does not read the file).

    python -m servelab.decode_pool     # one worker: what run() starts, never typed by hand

image_decode.decoded() hands each decode to run(): a long-lived worker of this process's pool
(started on first use, at most decode_budget.MAX_CONCURRENT_DECODES per process, reused: no
process per request) sets a CPU-time timer, ITIMER_PROF (its user and system time), before each
call and clears it after. A call that reaches it is ended by SIGPROF, whose default action ends
the process at once, inside libjpeg's loops as anywhere; run() raises OverCpu and the pool starts
another worker. A worker that ends otherwise (a decoder crash, an out-of-memory kill) raises
WorkerEnded. The worker's environment is an allow-list (no secret of its parent's reaches it), and
it ends when its parent does (its requests' pipe closes).

What goes over the pipe: the function's name (a function of servelab, looked up in the worker),
its keyword arguments as JSON and the file's bytes; back, a PIL image (or a numpy array) as raw
bytes (no pickle), or the refusal the function raised (its `status` and message). A worker
imports what its function needs, no more: image_decode's needs Pillow alone, so a worker the
kernel ended is replaced in about a tenth of a second of CPU.

Beneath servelab.image_decode (food11 decodes through it); no notebook imports it.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import json
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from servelab import decode_budget

# what a worker's environment holds: where Python and its libraries are, and nothing else
ENV_KEPT = ("PATH", "LD_LIBRARY_PATH", "LANG", "LC_ALL", "TMPDIR")
# how long run() waits for a worker that uses no CPU (swapped out, stopped) before it ends it
WALL_LIMIT_S = 60.0
PIPE_BYTES = 1024 * 1024  # Linux's largest pipe buffer for a user (/proc/sys/fs/pipe-max-size)
_HEADER = struct.Struct(">II")  # the lengths of a message's JSON header and of its body
_pool: Pool | None = None
_pool_lock = threading.Lock()


class OverCpu(Exception):
    """The call used its CPU time (the kernel ended the worker)."""


class WorkerEnded(Exception):
    """The worker ended otherwise (a decoder crash, the OOM killer), or stopped answering."""


class Refused(Exception):
    """The function refused its input: `status` and message as it raised them."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


class Busy(Exception):
    """Every worker stayed busy for `wait_s`."""


def run(call: str, data: bytes, args: dict, cpu_s: float, wait_s: float):
    """call(data, **args) in a worker of this process's pool, within cpu_s of CPU time: its
    result (a PIL image or a numpy array), and the CPU seconds it used. Waits at most wait_s for
    a free worker (then Busy)."""
    return pool().run(call, data, args, cpu_s, wait_s)


def pool() -> Pool:
    """This process's pool (a forked child makes its own: the parent's pipes are not its)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool.pid != os.getpid():
            _pool = Pool(decode_budget.MAX_CONCURRENT_DECODES)
        return _pool


def spent() -> float:
    """CPU seconds this process's decode workers have used, the ended ones included (for the
    tests and the reliability suite: a decode's cost is the worker's, not the caller's)."""
    return pool().spent()


class Pool:
    """At most `size` workers, each running one call at a time; idle ones are reused."""

    def __init__(self, size: int):
        self.pid, self.size = os.getpid(), size
        self.slots = threading.BoundedSemaphore(size)
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._ended_cpu = 0.0

    def run(self, call: str, data: bytes, args: dict, cpu_s: float, wait_s: float):
        if not self.slots.acquire(timeout=wait_s):
            raise Busy(f"every decode worker stayed busy for {wait_s:g} s")
        try:
            with self._lock:
                # an idle worker that has ended meanwhile (killed from outside) is let go
                while self._idle and self._idle[-1].proc.poll() is not None:
                    self._idle.pop()
                worker = self._idle.pop() if self._idle else None
            worker = worker or _Worker()
            try:
                result = worker.call(call, data, args, cpu_s)
            except (Refused, RuntimeError):  # its whole answer came: the worker serves on
                self._keep(worker)
                raise
            except BaseException:  # ended, or its answer not read (a Ctrl-C): end it
                worker.end()
                with self._lock:
                    self._ended_cpu += worker.cpu()
                raise
            self._keep(worker)
            return result
        finally:
            self.slots.release()

    def _keep(self, worker: _Worker) -> None:
        with self._lock:
            self._idle.append(worker)

    def spent(self) -> float:
        with self._lock:
            return self._ended_cpu + sum(w.cpu() for w in self._idle)

    def close(self) -> None:
        """End the idle workers (the busy ones end when their caller's call does)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.end()


class _Worker:
    """One `python -m servelab.decode_pool` child and its two pipes."""

    def __init__(self):
        root = str(Path(__file__).resolve().parents[1])  # the folder servelab is in
        env = {k: os.environ[k] for k in ENV_KEPT if k in os.environ}
        env["PYTHONPATH"] = os.pathsep.join([root, *sys.path[1:]])
        self.ended_cpu = 0.0
        self.proc = subprocess.Popen(
            [_python(), "-m", "servelab.decode_pool"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=root,
        )
        for pipe in (self.proc.stdin, self.proc.stdout):  # a photo in a few writes, not 32
            with contextlib.suppress(OSError, AttributeError):
                fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)

    def call(self, call: str, data: bytes, args: dict, cpu_s: float):
        module = call.partition(":")[0]
        header = {"call": call, "args": args, "cpu_s": max(0.01, cpu_s), "imports": [module]}
        try:
            _send(self.proc.stdin, header, data)
            ready, _, _ = select.select([self.proc.stdout], [], [], WALL_LIMIT_S)
            if not ready:
                raise WorkerEnded(f"the decode worker used no CPU for {WALL_LIMIT_S:g} s")
            reply, body = _receive(self.proc.stdout)
        except (OSError, EOFError, ValueError):
            if self.end() in (-signal.SIGPROF, -signal.SIGXCPU):
                raise OverCpu(f"over {cpu_s:g} s of CPU time") from None
            raise WorkerEnded(f"the decode worker ended ({self.proc.returncode})") from None
        return _result(reply, body), reply["cpu_s"]

    def cpu(self) -> float:
        """The CPU seconds this worker has used: from /proc while it runs, from the kernel's
        account of it once it has ended."""
        if self.proc.returncode is not None:
            return self.ended_cpu
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return 0.0

    def end(self) -> int:
        """End the worker (if it has not ended) and reap it: its exit status (-N: signal N)."""
        if self.proc.returncode is None:
            with contextlib.suppress(OSError):  # not Popen.kill: its poll() would reap it
                os.kill(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                _, status, usage = os.wait4(self.proc.pid, 0)
                self.ended_cpu = usage.ru_utime + usage.ru_stime
                self.proc.returncode = os.waitstatus_to_exitcode(status)
            self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                pipe.close()
        return self.proc.returncode


def _python() -> str:
    """The interpreter for a worker: this one's, or (inside Triton's Python-backend stub, whose
    executable is the stub) the first python3 on PATH, as the stubs find their packages."""
    if Path(sys.executable).name.startswith("python"):
        return sys.executable
    return shutil.which("python3") or "python3"


def _send(pipe, header: dict, body: bytes) -> None:
    head = json.dumps(header).encode()
    pipe.write(_HEADER.pack(len(head), len(body)) + head)
    pipe.write(body)
    pipe.flush()


def _receive(pipe) -> tuple[dict, bytes]:
    sizes = pipe.read(_HEADER.size)
    if len(sizes) < _HEADER.size:
        raise EOFError("the pipe closed")
    head_size, body_size = _HEADER.unpack(sizes)
    head, body = pipe.read(head_size), pipe.read(body_size)
    if len(head) < head_size or len(body) < body_size:
        raise EOFError("the pipe closed mid-message")
    return json.loads(head), body


def _result(reply: dict, body: bytes):
    """What a worker sent back: an array, an image, or the refusal raised again here."""
    kind = reply["kind"]
    if kind == "array":
        import numpy as np

        return np.frombuffer(body, dtype=reply["dtype"]).reshape(reply["shape"]).copy()
    if kind == "image":
        from PIL import Image

        return Image.frombytes(reply["mode"], tuple(reply["size"]), body)
    if kind == "refused":
        raise Refused(reply["message"], reply["status"])
    raise RuntimeError(f"the decode worker failed: {reply['message']}")


# ---------------------------------------------------------------- the worker's side


def _reply(result) -> tuple[dict, bytes]:
    if hasattr(result, "mode") and hasattr(result, "tobytes"):  # a PIL image
        return {"kind": "image", "mode": result.mode, "size": result.size}, result.tobytes()
    import numpy as np  # only for a function that returns an array

    array = np.ascontiguousarray(result)
    return {"kind": "array", "dtype": array.dtype.str, "shape": array.shape}, array.tobytes()


def _function(name: str):
    """A function of servelab named "module:function" (nothing outside servelab is called)."""
    module, _, function = name.partition(":")
    if not module.startswith("servelab.") or not function.isidentifier():
        raise ValueError(f"not a servelab function: {name}")
    return getattr(importlib.import_module(module), function)


def serve() -> None:
    """The worker: answer calls until the requests' pipe closes; each within its CPU time."""
    signal.signal(signal.SIGPROF, signal.SIG_DFL)  # the timer's signal ends the process
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the parent's to handle
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # what a library prints goes to stderr, never into the replies
    while True:
        try:
            header, data = _receive(requests)
        except EOFError:
            return
        for module in header["imports"]:  # before the timer: an import is not the call's cost
            if module.startswith("servelab."):
                importlib.import_module(module)
        start = time.process_time()
        signal.setitimer(signal.ITIMER_PROF, header["cpu_s"])
        try:
            reply, body = _reply(_function(header["call"])(data, **header["args"]))
        except Exception as exc:  # noqa: BLE001 - sent back: the caller raises it again
            status = getattr(exc, "status", None)
            kind = "refused" if isinstance(status, int) else "failed"
            reply, body = {"kind": kind, "status": status, "message": str(exc)}, b""
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
        reply["cpu_s"] = time.process_time() - start
        _send(replies, reply, body)


if __name__ == "__main__":
    serve()
