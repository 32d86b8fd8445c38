"""A stand-in for Triton's HTTP API on a two-GPU node, for tests of instance-group changes: the
repository API (load, unload, index), readiness, the served config, and the metrics endpoint
with what the lab's Python-backend instances publish (servelab/serving/gpu_report.py).

Like Triton 2.51, it answers an unload at once and finalizes the old instances afterwards: an
instance named in `linger` keeps running (and reporting, with its process id) for that many
seconds, while the repository index says UNLOADING. A load sent meanwhile starts the new
instances beside it. `index_says_unloading=False` makes a server whose index says UNAVAILABLE
while an old instance still runs: nothing tells the lab to wait, so only the lab's own check of
where each instance runs can catch it."""

from __future__ import annotations

import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from servelab.triton import instances

UUIDS = ("GPU-f2a1c3d4-0000-1111-2222-333344445555", "GPU-0b9e8d7c-6666-7777-8888-999900001111")


class FakeTriton:
    """Serves one model from `repo/<model>/config.pbtxt` on http://127.0.0.1:<port>."""

    def __init__(self, repo: Path, model: str, linger: dict | None = None, **behaviour):
        self.repo, self.model = repo, model
        self.linger = linger or {}  # instance name -> seconds it outlives an unload
        self.index_says_unloading = behaviour.get("index_says_unloading", True)
        self.pids = itertools.count(1000)
        self.lock = threading.Lock()
        self.ready = False
        self.served: dict = {}
        self.running: list[dict] = []  # {name, device_id, pid, ends} (ends: None while served)
        self.events: list[tuple[float, str]] = []  # (time, what): loads, unloads, ends
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def metrics_url(self) -> str:
        return f"{self.url}/metrics"

    def __enter__(self) -> FakeTriton:
        self.thread.start()
        self.load()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    # ------------------------------------------------------------ the server's side

    def _expire(self) -> None:
        now = time.monotonic()
        for inst in [i for i in self.running if i["ends"] is not None and i["ends"] <= now]:
            self.running.remove(inst)
            self.events.append((now, f"ended {inst['name']} (pid {inst['pid']})"))

    def load(self) -> None:
        text = (self.repo / self.model / "config.pbtxt").read_text()
        groups = instances._groups(text)
        with self.lock:
            now = time.monotonic()
            for inst in self.running:  # loaded while READY: the old model goes once this is READY
                if inst["ends"] is None:
                    inst["ends"] = now + self.linger.get(inst["name"], 0.0)
            self._expire()
            self.events.append((now, "load"))
            for g, group in enumerate(groups):
                for device in group["gpus"] or range(len(UUIDS)):
                    for k in range(group["count"]):
                        name = f"{self.model}_{g}_{k}"
                        inst = {"name": name, "device_id": device, "pid": next(self.pids)}
                        self.running.append({**inst, "ends": None})
            self.served = {
                "name": self.model,
                "instance_group": [
                    {"name": f"{self.model}_{g}", **group} for g, group in enumerate(groups)
                ],
            }
            self.ready = True

    def unload(self) -> None:
        with self.lock:
            now = time.monotonic()
            self.events.append((now, "unload"))
            self.ready = False
            for inst in self.running:
                if inst["ends"] is None:
                    inst["ends"] = now + self.linger.get(inst["name"], 0.0)
            self._expire()

    def state(self) -> str:
        with self.lock:
            self._expire()
            if self.ready:
                return "READY"
            finalizing = any(i["ends"] is not None for i in self.running)
            return "UNLOADING" if finalizing and self.index_says_unloading else "UNAVAILABLE"

    def metrics(self) -> str:
        with self.lock:
            self._expire()
            lines = ["# TYPE lab_cuda_device gauge"]
            for inst in self.running:
                for index, uuid in enumerate(UUIDS):
                    lines.append(
                        f'lab_cuda_device{{instance="{inst["name"]}",gpu_index="{index}",'
                        f'gpu_uuid="{uuid}"}} 1'
                    )
            lines.append("# TYPE lab_instance_gpu gauge")
            for inst in self.running:
                lines.append(
                    f'lab_instance_gpu{{model="{self.model}",instance="{inst["name"]}",'
                    f'device_id="{inst["device_id"]}",gpu_uuid="{UUIDS[inst["device_id"]]}"}} '
                    f"{inst['pid']}"
                )
        return "\n".join(lines) + "\n"

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def _send(self, status: int, body: str = "", kind: str = "application/json"):
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - http.server's spelling
                model = f"/v2/models/{fake.model}"
                if self.path == f"{model}/ready":
                    self._send(200 if fake.ready else 400)
                elif self.path == f"{model}/config":
                    self._send(200, json.dumps(fake.served))
                elif self.path == "/metrics":
                    self._send(200, fake.metrics(), "text/plain")
                else:
                    self._send(404, json.dumps({"error": f"no {self.path}"}))

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                repository = f"/v2/repository/models/{fake.model}"
                if self.path == f"{repository}/load":
                    fake.load()
                    self._send(200, "{}")
                elif self.path == f"{repository}/unload":
                    fake.unload()
                    self._send(200, "{}")
                elif self.path == "/v2/repository/index":
                    entry = {"name": fake.model, "version": "1", "state": fake.state()}
                    self._send(200, json.dumps([entry]))
                else:
                    self._send(404, json.dumps({"error": f"no {self.path}"}))

        return Handler
