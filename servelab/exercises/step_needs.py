"""What a step needs of an answer beyond its form, judged by what the answer does.

Introduced in notebook 4; servelab/exercises/steps.py, the table of steps, names them.

- A request body that carries the photo (4.2), a request timed in milliseconds (4.4's send_one):
  its latency contains the server's own time for it (Server-Timing), so it is never less, and not
  twenty times more; its start taken before the request left, not after the answer came back.
- What the server answers, not a pair that looks like one (5.2's classify): the check asks
  Triton itself for the same photos and compares.
- A model READY after the call that loads it (6.3b); the stubs you counted, as Triton placed them.
- Where Triton puts the instances an instance_group asks for (notebooks 6 and 7), whatever the
  spelling: instances per device. Preferred batch sizes in any order (Triton keeps a set).
- A run's mean latency with its windows' spread (6.6h's options).

A check returns True, or raises Wrong with what is wrong; exercises ends its sentence with it.
"""

from __future__ import annotations

import base64
import re
import textwrap
import time
from dataclasses import dataclass
from typing import ClassVar

import requests

from servelab import food11
from servelab.claims import Measured
from servelab.paths import TEST_IMAGES
from servelab.triton import instances


class Wrong(Exception):
    """What a check raises to say what is wrong with this answer (its sentence ends with it)."""


# ---------------------------------------------------------------- a request, built and timed


def base64_body(body, photo) -> bool:
    """4.2: {"image": the photo's file as base64 text}."""
    if not isinstance(body, dict) or set(body) != {"image"}:
        shown = sorted(body) if isinstance(body, dict) else type(body).__name__
        raise Wrong(f"the body is a dict with one key, image (yours: {shown})")
    if not isinstance(body["image"], str):
        raise Wrong(
            f"its image is {type(body['image']).__name__}, which JSON cannot carry: .decode() "
            "makes the base64 bytes text"
        )
    if base64.b64decode(body["image"]) != photo.read_bytes():
        raise Wrong(f"its image does not decode to the bytes of {photo.name}")
    return True


def send_one_timed(send_one, url: str, payload) -> dict:
    """4.4: send_one called once, timed from outside: its record must hold the latency of a
    request it sent, started when it called (not after the answer came back)."""
    with requests.Session() as session:
        called = time.perf_counter()
        record = send_one(session, url, payload)
        returned = time.perf_counter()
    try:
        timed_request(record, (called, returned))
    except Wrong as exc:
        shown = textwrap.shorten(repr(record), 120, placeholder=" …")
        raise Wrong(f"returned {shown}; {exc}") from None
    return record


def timed_request(record, called: tuple[float, float] | None = None) -> bool:
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
    if called is not None:
        _within_the_call(record, *called)
    return True


def _within_the_call(record, called: float, returned: float) -> None:
    """The request's start and end fall inside the call of send_one (0.5 ms for the clock)."""
    ends = record["t_start"] + record["latency_ms"] / 1000
    if record["t_start"] < called - 5e-4:
        raise Wrong("t_start is earlier than the call of send_one: read it inside send_one")
    if ends > returned + 5e-4:
        late = (ends - returned) * 1000
        raise Wrong(
            f"t_start + latency_ms ends {late:.1f} ms after send_one returned: t_start was read "
            "after the answer came back; read it just before session.post"
        )


def _server_ms(header) -> float | None:
    """decode + queue + infer of a Server-Timing header ("decode;dur=2.1, ..."), in ms."""
    parts = dict(p.strip().partition(";dur=")[::2] for p in str(header or "").split(","))
    try:
        return sum(float(ms) for ms in parts.values()) if "infer" in parts else None
    except ValueError:
        return None


# ---------------------------------------------------------------- what the server answers


def infer_one(triton: str, model: str, photo) -> tuple[str, float]:
    """(class, probability) that `model` answers for one photo file, asked over Triton's HTTP
    API directly (JSON): what the student's tritonclient call should have returned."""
    body = {
        "inputs": [
            {
                "name": "INPUT_IMAGE",
                "shape": [1, 1],
                "datatype": "BYTES",
                "data": [food11.encode_file(photo)],
            }
        ]
    }
    resp = requests.post(f"{triton}/v2/models/{model}/infer", json=body, timeout=60)
    resp.raise_for_status()
    out = {o["name"]: o["data"][0] for o in resp.json()["outputs"]}
    return str(out["FOOD_LABEL"]), float(out["PROBABILITY"])


def classified_as_served(classify, photo, triton: str, model: str):
    """5.2: classify(photo) returns what the server answers for that photo, and for a second
    photo too (a pair written into the function answers one photo at best)."""
    photos = [photo] + [p for p in sorted(TEST_IMAGES.glob("*.jpg")) if p != photo][:1]
    answers = []
    for each in photos:
        got = classify(each)
        if not (isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], str)):
            raise Wrong(
                f"returned {got!r}: it returns a pair such as ('Soup', 0.41), the class as text "
                "and the probability as a number"
            )
        label, probability = infer_one(triton, model, each)
        if got[0] != label or abs(float(got[1]) - probability) > 1e-4:
            raise Wrong(
                f"returned ({got[0]!r}, {float(got[1]):.4f}) for {each.name}, where {model} "
                f"answers ({label!r}, {probability:.4f}): return what the server's answer holds"
            )
        answers.append(got)
    return answers[0]


def a_class(answer) -> str:
    """7.4b: one of the 11 classes."""
    if answer not in food11.CLASSES:
        raise Wrong(f"returned {answer!r}: it returns the class name, e.g. 'Soup', of the image")
    return answer


def model_ready(triton: str, model: str) -> bool:
    """6.3b: the model answers READY."""
    try:
        return requests.get(f"{triton}/v2/models/{model}/ready", timeout=5).status_code == 200
    except requests.RequestException:
        return False


def stubs_on_gpu0(count, placed: dict) -> bool:
    """6.3e: the stub processes on GPU 0 (the CPU's without a GPU), as Triton placed them: a
    whole number, counted, not worked out."""
    try:
        number = float(count)
    except (TypeError, ValueError):
        raise Wrong(f"{count!r} is not a number of processes") from None
    if not number.is_integer():
        raise Wrong(f"{number:g} is not a whole number of processes")
    if int(number) != placed.get("GPU 0", placed.get("CPU", 0)):
        raise Wrong("not what the node shows: count the stub lines again")
    return True


# ---------------------------------------------------------------- a run's mean latency


def mean_latency(run):
    """A perf run's mean latency (ms) with the lowest and highest of its last three windows."""
    windows = [w["avg_latency_ms"] for w in run.windows][-3:]
    reported = run.row["avg_latency_ms"]
    return Measured.from_windows(windows, reported) if windows else Measured.exact(reported)


# ---------------------------------------------------------------- where the instances go


class AnyOrder(list):
    """A repeated field whose order does not count: Triton keeps preferred_batch_size as a set."""


def _count(count, n_gpus: int):
    """A count as a need writes it: a number, a notebook value ("{INSTANCES}"), or f(n_gpus)."""
    return count(n_gpus) if callable(count) else count


@dataclass(frozen=True)
class Instances:
    """An instance_group's need on a server with `n_gpus` GPUs, judged by where Triton puts the
    instances (instances.placement): instances per device, {"GPU 0": 2, "GPU 1": 2}. One group
    listing every GPU, a group per GPU, and a KIND_GPU group without `gpus` (every GPU the server
    sees) all put 2 on each GPU; 4 + 8 in two groups put 4 on one GPU and 8 on the other."""

    per_device: dict
    n_gpus: int
    per_gpu_count: ClassVar[bool] = False

    def placed(self, n_gpus: int) -> dict:
        return self.per_device

    def names(self) -> set[str]:
        return set()


@dataclass(frozen=True)
class Every:
    """`count` instances on every GPU of the server (`count` in all without a GPU: the lab writes
    KIND_GPU as KIND_CPU there), whatever its number of GPUs."""

    count: object
    per_gpu_count: ClassVar[bool] = True

    def placed(self, n_gpus: int) -> dict:
        count = _count(self.count, n_gpus)
        return {f"GPU {i}": count for i in range(n_gpus)} or {"CPU": count}

    def names(self) -> set[str]:
        return {"N_GPUS", *re.findall(r"\{(\w+)\}", str(self.count))}


@dataclass(frozen=True)
class OnFirst(Every):
    """`count` instances on GPU 0 and none on the others (on the CPU without a GPU)."""

    def placed(self, n_gpus: int) -> dict:
        return {"GPU 0" if n_gpus else "CPU": _count(self.count, n_gpus)}


def on_every_gpu(count: int, n_gpus: int) -> dict[str, Instances]:
    """The need of a step that puts `count` instances on every GPU of a server with `n_gpus`
    GPUs; without a GPU, `count` instances in all (the lab writes KIND_GPU as KIND_CPU there)."""
    return {"instance_group": Instances(Every(count).placed(n_gpus), n_gpus)}


def on_first_gpu(count: int, n_gpus: int) -> dict[str, Instances]:
    """The need of a step that puts `count` instances on GPU 0 and none on the others."""
    return {"instance_group": Instances(OnFirst(count).placed(n_gpus), n_gpus)}


def placed(config, n_gpus: int) -> dict[str, int]:
    """Instances per device; without a GPU every group's count runs on the CPU (the lab writes
    KIND_GPU as KIND_CPU there, see triton_config.edit). Wrong: a group Triton would refuse."""
    if not config.instance_group:
        raise Wrong("has no `instance_group`")
    if n_gpus <= 0:
        return {"CPU": sum(group.count or 1 for group in config.instance_group)}
    try:
        return instances.placement(config, n_gpus)
    except ValueError as exc:  # a GPU the server does not have
        raise Wrong(f"would not load in Triton: {exc}") from None


def devices(per_device: dict[str, int]) -> str:
    """{"GPU 0": 4, "GPU 1": 8} -> "4 on GPU 0 and 8 on GPU 1"."""
    said = [f"{n} on {'the CPU' if d == 'CPU' else d}" for d, n in sorted(per_device.items())]
    return " and ".join([", ".join(said[:-1]), said[-1]] if len(said) > 1 else said)
