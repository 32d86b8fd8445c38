"""The class's node as the journey test needs it (tests/test_journey_across_the_passes.py): two
GPUs, and a model repository built as the node builds it, served by a real Triton on this
machine's CPU.

    python tests/journey_node.py CLONE OUT     # the measure pass of CLONE's notebook 6, cut short

The repository the notebooks edit is the node's: `model_repository --mode docker` with GPU
instances (the weights parameter, the onnxruntime backend). The stand-in for the node's two GPUs
sits between the notebook and a real local Triton (tests/triton_helpers.py's), whose models take
the time an execution takes on the GPU reference (tests/journey_model.py: the journey is about
what passes between the passes, and a busy CPU's PyTorch would time perf_analyzer's windows
out). Every request goes through to that Triton, as it is, with three exceptions that make it
the node's:
- /metrics: Triton's own, with two GPUs added (nv_gpu_utilization and memory, by uuid), so the
  notebook counts two GPUs as on the class's node;
- a load (POST /v2/repository/models/M/load): the node's config.pbtxt is judged for a two-GPU
  server (a `gpus` list naming a third GPU is refused, as Triton refuses it), then served on the
  CPU: the real Triton's own repository gets the node's config with one CPU instance in place of
  its instance groups;
- a model's config (GET /v2/models/M/config): its instance groups as the node's file has them.
A stand-in nvidia-smi on PATH lists the same two GPUs. Nothing of the lab is replaced: the
notebook, servelab, perf_analyzer and Triton run as in the lease.

main(): the notebook carried to the node's clone, run in the measure pass from its first cell to
CUT (6.3f's reload: the lease ends during 6.3, after the chain 6.3a -> 6.3d -> 6.3f), its bundle
in the clone's results/bundles/ as on the node.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import nbformat
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from triton_helpers import start_local_triton  # noqa: E402

from labstack import lab, launcher, notebook_runner  # noqa: E402
from servelab import labenv  # noqa: E402
from servelab.triton import config_text, instances, model_repository  # noqa: E402

MODEL = Path(__file__).with_name("journey_model.py")  # each model, at the GPU reference's speed
UUIDS = ("GPU-5e1b0c1a-0000-4000-8000-000000000000", "GPU-5e1b0c1a-0000-4000-8000-000000000001")
MEMORY = 16 * 2**30  # bytes: a P100's 16 GB
LOAD = re.compile(r"/v2/repository/models/([^/]+)/load")
CONFIG = re.compile(r"/v2/models/([^/]+)(?:/versions/[^/]+)?/config")
CUT = 'reload_edited("food_classifier", before, "6.3f")'  # the last cell the lease runs
ON_CPU = "instance_group [ { count: 1, kind: KIND_CPU } ]"
# the measure pass's settings: as tests/test_notebooks.py runs notebook 6 (short windows), a
# LAB_PERF_INTERVAL_MS of the environment's first (a slow machine's longer windows)
SMALL = {
    **lab.QUICK_PARAMS,
    "PERF_INTERVAL_MS": int(os.environ.get("LAB_PERF_INTERVAL_MS", 1500)),
    "PERF_MAX_TRIALS": 5,
}


class TwoGpuNode:
    """A real local Triton shown as the class's two-GPU node; use as a context manager."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.repo = folder / "model_repository"  # the node's, which the notebooks edit
        model_repository.populate(self.repo, mode="docker", kind="gpu", verbose=False)
        self.triton = None
        self.server = None
        self.local = threading.local()

    # ------------------------------------------------------------ start, stop

    def __enter__(self) -> TwoGpuNode:
        shadow = self.folder / "cpu" / "model_repository"
        model_repository.populate(shadow, mode="local", kind="cpu", verbose=False)
        for model in model_repository.MODELS:
            shutil.copy(MODEL, shadow / model / "1" / "model.py")
        self.triton = start_local_triton(self.folder / "cpu", populated=True)
        for model in model_repository.MODELS:
            self.serve_on_cpu(model)
            load = f"{self.triton.url}/v2/repository/models/{model}/load"
            requests.post(load, headers=labenv.admin_headers(), timeout=300).raise_for_status()
        self.server = _Server(
            ("127.0.0.1", launcher.free_port()), type("H", (_Handler,), {"node": self})
        )
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
        if self.triton is not None:
            self.triton.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def env(self) -> dict:
        """What the lab's Jupyter on the node has: the server's URLs, its model repository, its
        admin key, and nvidia-smi."""
        bin_dir = self.folder / "bin"
        _fake_smi(bin_dir)
        return {
            "TRITON_SERVER_URL": self.url,
            "TRITON_METRICS_URL": f"{self.url}/metrics",
            "TRITON_GRPC_URL": f"127.0.0.1:{self.triton.grpc_port}",
            "TRITON_MODEL_REPOSITORY": str(self.repo),
            "TRITON_ADMIN_KEY": os.environ.get("TRITON_ADMIN_KEY", ""),
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        }

    # ------------------------------------------------------------ what makes it the node

    def serve_on_cpu(self, model: str) -> str:
        """The node's config of `model` put in the CPU Triton's repository, one CPU instance in
        place of its instance groups; '' or why a two-GPU Triton would refuse it."""
        text = (self.repo / model / "config.pbtxt").read_text()
        try:
            instances.placement(text, len(UUIDS))
        except ValueError as exc:
            return str(exc)
        shadow = self.triton.repo / model / "config.pbtxt"
        served = config_text.replace_fields(shadow.read_text(), ON_CPU)
        for name in ("dynamic_batching", "max_batch_size"):
            mine = config_text.field_text(text, name)
            served = config_text.replace_fields(served, mine) if mine else served
            if not mine:
                served = config_text.replace_fields(served, "", remove=(name,))
        shadow.write_text(served)
        return ""

    def as_node(self, model: str, served: dict) -> dict:
        """Triton's JSON of a config, with the instance groups the node's file asks for."""
        config = config_text.parse_config((self.repo / model / "config.pbtxt").read_text())
        groups = [
            {"count": g.count or 1, "gpus": list(g.gpus) or list(range(len(UUIDS)))}
            for g in config.instance_group
        ] or [{"count": 1, "gpus": list(range(len(UUIDS)))}]
        served["instance_group"] = [
            {"name": f"{model}_{i}", "kind": "KIND_GPU", **g, "secondary_devices": []}
            for i, g in enumerate(groups)
        ]
        return served

    def metrics(self) -> bytes:
        text = requests.get(self.triton.metrics_url, timeout=10).text
        lines = ["# TYPE nv_gpu_utilization gauge"]
        lines += [f'nv_gpu_utilization{{gpu_uuid="{u}"}} 0.000000' for u in UUIDS]
        for name, value in (("total", MEMORY), ("used", MEMORY // 20)):
            lines.append(f"# TYPE nv_gpu_memory_{name}_bytes gauge")
            lines += [f'nv_gpu_memory_{name}_bytes{{gpu_uuid="{u}"}} {value}' for u in UUIDS]
        return (text.rstrip("\n") + "\n" + "\n".join(lines) + "\n").encode()

    def forward(self, method: str, path: str, headers, body: bytes) -> requests.Response:
        session = getattr(self.local, "session", None)
        if session is None:
            session = self.local.session = requests.Session()
        kept = {
            k: v
            for k, v in headers.items()
            if k.lower() not in ("host", "connection", "content-length", "accept-encoding")
        }
        return session.request(method, self.triton.url + path, data=body, headers=kept, timeout=600)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64  # perf_analyzer opens a connection per request in flight at once


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as perf_analyzer's connections expect
    node: TwoGpuNode

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:
        self._answer("POST")

    def _answer(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        path = self.path.split("?")[0]
        if path == "/metrics":
            return self._send(200, {"Content-Type": "text/plain"}, self.node.metrics())
        load = LOAD.fullmatch(path)
        if load and method == "POST":
            refused = self.node.serve_on_cpu(load.group(1))
            if refused:
                return self._send(400, {"Content-Type": "application/json"}, _error(refused))
        resp = self.node.forward(method, self.path, self.headers, body)
        out = resp.content
        config = CONFIG.fullmatch(path)
        if config and resp.status_code == 200:
            out = json.dumps(self.node.as_node(config.group(1), resp.json())).encode()
        kept = {
            k: v
            for k, v in resp.headers.items()
            if k.lower() in ("content-type", "inference-header-content-length")
        }
        self._send(resp.status_code, kept, out)

    def _send(self, status: int, headers: dict, body: bytes) -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _error(message: str) -> bytes:
    return json.dumps({"error": f"failed to load: {message}"}).encode()


def _fake_smi(bin_dir: Path) -> None:
    """nvidia-smi as the node's, for the lab's queries: its two GPUs, no processes listed (as
    inside a container)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    rows = "".join(
        f"{i}, {u}, Tesla P100-PCIE-16GB, 00000000:{0x3B + 0x40 * i:02X}:00.0, 819, 16384, 0\\n"
        for i, u in enumerate(UUIDS)
    )
    listing = "".join(f"GPU {i}: Tesla P100-PCIE-16GB (UUID: {u})\\n" for i, u in enumerate(UUIDS))
    script = bin_dir / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        f"  *--query-gpu=*) printf '{rows}' ;;\n"
        "  *--query-compute-apps=*) ;;\n"
        f"  *-L*) printf '{listing}' ;;\n"
        "  *) echo 'nvidia-smi, as the journey test stands it in: two Tesla P100' ;;\n"
        "esac\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


# ---------------------------------------------------------------- the measure pass, cut short


def cut_short(notebook: Path, out: Path) -> Path:
    """The notebook as far as the lease lets it run: its cells up to CUT's."""
    nb = nbformat.read(notebook, as_version=4)
    last = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and CUT in c.source)
    nb.cells = nb.cells[: last + 1]
    nbformat.write(nb, out)
    return out


def measure(clone: Path, out: Path) -> None:
    """The measure pass of the clone's notebook 6 on the two-GPU stand-in, cut short; its bundle
    where the node's is (the clone's results/bundles/), its executed notebook at `out`. The
    predictions left at None are the tests' scripted ones, as in the prepare pass (so each is
    kept with the time it was made there); a fact the stand-in cannot show (where the stubs run)
    is recorded, not a stop."""
    with TwoGpuNode(out.parent / "node") as node:
        env = {
            "LAB_PREDICTIONS": json.dumps(lab.SCRIPTED_PREDICTIONS),
            "LAB_STRICT_CLAIMS": "",
            **node.env(),
            "LAB_PASS": "measure",
            "LAB_RESULTS_DIR": str(clone / "results"),  # the clone is the node's repository
            "LAB_STATE_DIR": str(out.parent / "node" / "lab"),
        }
        notebooks = clone / "notebooks"
        short = cut_short(notebooks / "06_triton_benchmarks.ipynb", out.parent / "cut.ipynb")
        notebook_runner.execute(short, out, params=SMALL, extra_env=env, cwd=notebooks)


if __name__ == "__main__":
    measure(Path(sys.argv[1]), Path(sys.argv[2]))
