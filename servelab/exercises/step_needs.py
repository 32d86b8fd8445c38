"""What a step needs of an answer beyond its form, judged by what the answer does.

Introduced in notebook 4; the notebooks call these through servelab.exercises (exercises.<name>).

- A request timed in milliseconds (4.4's send_one): its latency contains the server's own time
  for it (Server-Timing), so it is never less, and not twenty times more.
- One model's statistics (5.4), not every model's.
- Where Triton puts the instances an instance_group asks for (notebooks 6 and 7), whatever the
  spelling: instances per device.

A check returns True, or raises Wrong with what is wrong; exercises ends its sentence with it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from servelab.triton import instances


class Wrong(Exception):
    """What a check raises to say what is wrong with this answer (its sentence ends with it)."""


# ---------------------------------------------------------------- a request, timed


def timed_request(record) -> bool:
    """4.4's check of send_one's record: its four keys, status 200, and a latency in milliseconds,
    judged against the server's own time for the same request (decode + queue + infer in its
    Server-Timing), which the latency contains: never less, and not twenty times more."""
    missing = [k for k in ("t_start", "latency_ms", "status", "server_timing") if k not in record]
    if missing:
        raise Wrong(f"it has no {', '.join(missing)}: return the four keys of its docstring")
    if record["status"] != 200:
        raise Wrong(f"the status is {record['status']!r}, the service answers a good request 200")
    server_ms = _server_ms(record["server_timing"])
    if server_ms is None:
        raise Wrong(
            'server_timing is not the Server-Timing header: resp.headers.get("Server-Timing")'
        )
    said = f"its latency_ms, {record['latency_ms']:g}, is"
    server = f"the server's own time for the request ({server_ms:.2f} ms in its Server-Timing)"
    if record["latency_ms"] < server_ms:
        raise Wrong(
            f"{said} less than {server}: the unit looks wrong, latency_ms is in milliseconds and "
            "time.perf_counter() counts seconds"
        )
    if record["latency_ms"] > 20 * server_ms + 500:  # a slow network adds ms, not a factor 1000
        raise Wrong(f"{said} over 20 times {server}: the unit looks wrong, it is in milliseconds")
    if not 0 < record["t_start"] <= time.perf_counter():
        raise Wrong("t_start is not the time.perf_counter() reading taken as the request left")
    return True


def _server_ms(header) -> float | None:
    """decode + queue + infer of a Server-Timing header ("decode;dur=2.1, ..."), in ms."""
    parts = dict(p.strip().partition(";dur=")[::2] for p in str(header or "").split(","))
    try:
        return sum(float(ms) for ms in parts.values()) if "infer" in parts else None
    except ValueError:
        return None


# ---------------------------------------------------------------- where the instances go


@dataclass(frozen=True)
class Instances:
    """An instance_group's need, judged by where Triton puts the instances (instances.placement)
    on a server with `n_gpus` GPUs: instances per device, {"GPU 0": 2, "GPU 1": 2}. One group
    listing every GPU, a group per GPU, and a KIND_GPU group without `gpus` (every GPU the server
    sees) all put 2 on each GPU; 4 + 8 in two groups put 4 on one GPU and 8 on the other."""

    per_device: dict
    n_gpus: int


def on_every_gpu(count: int, n_gpus: int) -> dict[str, Instances]:
    """The need of a step that puts `count` instances on every GPU of a server with `n_gpus`
    GPUs; without a GPU, `count` instances in all (the lab writes KIND_GPU as KIND_CPU there)."""
    every = {f"GPU {i}": count for i in range(n_gpus)} or {"CPU": count}
    return {"instance_group": Instances(every, n_gpus)}


def on_first_gpu(count: int, n_gpus: int) -> dict[str, Instances]:
    """The need of a step that puts `count` instances on GPU 0 and none on the others."""
    return {"instance_group": Instances({"GPU 0" if n_gpus else "CPU": count}, n_gpus)}


def check_instances(config, want: Instances) -> bool:
    """Does a ModelConfig put the instances `want` says where it says?"""
    if not config.instance_group:
        raise Wrong("has no `instance_group`")
    try:
        got = _placed(config, want.n_gpus)
    except ValueError as exc:  # a GPU the server does not have
        raise Wrong(f"would not load in Triton: {exc}") from None
    if got != want.per_device:
        rule = (
            " (a KIND_GPU group puts `count` instances on each GPU of its `gpus`, or on every "
            "GPU without one)"
        )
        elsewhere = want.n_gpus and got.keys() != want.per_device.keys()  # other devices
        raise Wrong(
            f"puts {_devices(got)}, the step needs {_devices(want.per_device)}"
            + (rule if elsewhere else "")
        )
    return True


def _placed(config, n_gpus: int) -> dict[str, int]:
    """Instances per device; without a GPU every group's count runs on the CPU (the lab writes
    KIND_GPU as KIND_CPU there, see triton_config.edit)."""
    if n_gpus <= 0:
        return {"CPU": sum(group.count or 1 for group in config.instance_group)}
    return instances.placement(config, n_gpus)


def _devices(per_device: dict[str, int]) -> str:
    """{"GPU 0": 4, "GPU 1": 8} -> "4 on GPU 0 and 8 on GPU 1"."""
    said = [f"{n} on {'the CPU' if d == 'CPU' else d}" for d, n in sorted(per_device.items())]
    return " and ".join([", ".join(said[:-1]), said[-1]] if len(said) > 1 else said)
