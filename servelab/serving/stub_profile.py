"""Where a Python-backend instance's time goes, execution by execution (a maintainers' tool).

food_classifier_tuned's model.py keeps one StubClock when its config names a folder in the
parameter `profile_dir`; execute() then marks each phase as it ends:

- "between": from the end of the previous execute() to the start of this one (the stub's own C++
  work on the responses and the next requests, and any wait for the next batch);
- "inputs": reading the requests' input tensors (pb_utils.get_input_tensor_by_name, as_numpy);
- "stage": stacking them into one pinned host buffer;
- "device": the copy to the GPU, the graph's replay and the wait for the logits to come back;
- "responses": building one InferenceResponse per request.

The GPU's own share of "device" is timed with CUDA events (copy, graph), so a long "device" with
short events says the instance waited for the GPU (other instances' work on it), not for its own
kernels. Each instance writes its cumulative sums to PROFILE_DIR/<instance>.json at most every
WRITE_EVERY_S seconds; the difference of two readings is the profile of what ran between them.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

PHASES = ("between", "inputs", "stage", "device", "responses")
WRITE_EVERY_S = 0.2


class StubClock:
    def __init__(self, folder: Path | str, instance: str, cuda=None):
        self.path = Path(folder) / f"{instance.replace('/', '_')}.json"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._cuda = cuda  # torch.cuda, where the model is on a GPU: events time its share
        self.ns = dict.fromkeys(PHASES, 0)
        self.gpu_ms = {"copy": 0.0, "graph": 0.0}
        self.executions = self.requests = self.images = self.padded = 0
        self.extra: dict = {}  # counters of the runtime's own, written with the sums
        self._t = self._end = 0
        self._written = 0.0
        self._events = [cuda.Event(enable_timing=True) for _ in range(3)] if cuda else None

    def start(self) -> None:
        self._t = time.perf_counter_ns()
        if self._end:
            self.ns["between"] += self._t - self._end

    def mark(self, phase: str, padded: int | None = None, events=None) -> None:
        now = time.perf_counter_ns()
        self.ns[phase] += now - self._t
        self._t = now
        if padded is not None:
            self.padded += padded
        if events:  # the logits are back, so the events have completed
            self.gpu_ms["copy"] += events[0].elapsed_time(events[1])
            self.gpu_ms["graph"] += events[1].elapsed_time(events[2])

    def gpu_events(self):
        return self._events

    def end(self, requests: int, images: int) -> None:
        self.executions += 1
        self.requests += requests
        self.images += images
        self._end = time.perf_counter_ns()
        if time.monotonic() - self._written >= WRITE_EVERY_S:
            self.write()

    def snapshot(self) -> dict:
        return {
            "pid": os.getpid(),
            "executions": self.executions,
            "requests": self.requests,
            "images": self.images,
            "padded_images": self.padded,
            "ms": {k: v / 1e6 for k, v in self.ns.items()},
            "gpu_ms": dict(self.gpu_ms),
            **self.extra,
        }

    def write(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.snapshot()))
        os.replace(tmp, self.path)
        self._written = time.monotonic()


def read(folder: Path | str) -> dict[str, dict]:
    """Every instance's latest sums in `folder`, by file name."""
    out = {}
    for path in sorted(Path(folder).glob("*.json")):
        try:
            out[path.stem] = json.loads(path.read_text())
        except (OSError, ValueError):  # being replaced right now: the next reading has it
            continue
    return out


def between(before: dict[str, dict], after: dict[str, dict]) -> dict:
    """What ran between two read()s, summed over the instances: totals, and per execution."""
    keys = ("executions", "requests", "images", "padded_images", "direct_batches")
    total = dict.fromkeys(keys, 0)
    ms = dict.fromkeys(PHASES, 0.0)
    gpu = {"copy": 0.0, "graph": 0.0}
    for name, now in after.items():
        was = before.get(name, {})
        for k in keys:
            total[k] += now.get(k, 0) - was.get(k, 0)
        for k in PHASES:
            ms[k] += now["ms"][k] - was.get("ms", {}).get(k, 0.0)
        for k in gpu:
            gpu[k] += now["gpu_ms"][k] - was.get("gpu_ms", {}).get(k, 0.0)
    n = max(total["executions"], 1)
    refused = sorted({why for now in after.values() for why in now.get("direct_refused", [])})
    return {
        "direct_refused": refused[:10],
        **total,
        "instances": len(after),
        "mean_batch": total["requests"] / n,
        "mean_padded_batch": total["padded_images"] / n,
        "ms_per_execution": {k: v / n for k, v in ms.items()},
        "gpu_ms_per_execution": {k: v / n for k, v in gpu.items()},
        "execute_ms_per_execution": sum(ms[k] for k in PHASES if k != "between") / n,
    }
