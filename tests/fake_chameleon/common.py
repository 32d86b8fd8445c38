"""What every part of the fake Chameleon shares: replies, ids, clocks, time formats.

Two clocks. Dates (a lease's start and end, what Blazar and Nova show) are real UTC time. How
long things take (a lease STARTING, a boot, sshd coming up, a delete) is the site's clock: real
time plus every jump a notebook's wait makes. The notebooks' waits (chi_waits) read this clock
and, instead of sleeping, move it on by as long as they would have slept (`advance`, through the
fake's /_clock): a 30-minute boot wait takes the site's 30 minutes in a fraction of a second, and
every limit the notebooks use is met or runs out on the site's durations. The clock moves only
when something waits (or a scenario moves it): a node whose sshd starts minutes after its
server is ACTIVE answers only a notebook that waits for it.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import hashlib
import threading
import time
import uuid

BLAZAR_IN = "%Y-%m-%d %H:%M"  # what python-chi sends
BLAZAR_OUT = "%Y-%m-%dT%H:%M:%S.%f"  # what Blazar answers
SITE = "CHI@TACC"  # where Chameleon's Jupyter starts (OS_REGION_NAME), and the lab's own site


@dataclasses.dataclass(frozen=True)
class Site:
    """A Chameleon site: its own Keystone, Blazar, Nova, Neutron and Glance under /<uid>, its
    own bare-metal inventory ((node type, count, GPUs per node, GPU model, GPU vendor)), its own
    network and image ids, public addresses (<addresses>.0.x reserved, <addresses>.1.x the pool)
    and private addresses (<fixed>.x.y on sharednet1)."""

    name: str
    uid: str
    location: str
    inventory: tuple
    shared_net: str
    public_net: str
    images: tuple  # (id, name)
    addresses: str
    fixed: str


NVIDIA, AMD = "NVIDIA Corporation", "Advanced Micro Devices, Inc. [AMD/ATI]"
SITES = {
    # AMD's MI100 is a GPU node type this lab cannot use (its images need NVIDIA's CUDA).
    "CHI@TACC": Site(
        "CHI@TACC",
        "tacc",
        "Austin, Texas, USA",
        (
            ("gpu_p100", 24, 2, "P100", NVIDIA),
            ("gpu_v100", 2, 4, "V100", NVIDIA),
            ("gpu_rtx_6000", 1, 1, "RTX 6000", NVIDIA),
            ("gpu_mi100", 2, 2, "MI100", AMD),
            ("compute_skylake", 4, 0, None, None),
        ),
        "net-shared",
        "net-public",
        (("img-cuda", "CC-Ubuntu24.04-CUDA"), ("img-plain", "CC-Ubuntu24.04")),
        "127.20",
        "10.52",
    ),
    # no gpu_p100 at CHI@UC; its networks and images have ids of their own
    "CHI@UC": Site(
        "CHI@UC",
        "uc",
        "Chicago, Illinois, USA",
        (
            ("gpu_rtx_6000", 24, 1, "RTX 6000", NVIDIA),
            ("gpu_a100_pcie", 4, 4, "A100", NVIDIA),
            ("gpu_v100", 4, 4, "V100", NVIDIA),
            ("compute_cascadelake_r", 8, 0, None, None),
        ),
        "uc-sharednet1-5f3b",
        "uc-public-90a1",
        (("uc-img-cuda-77c2", "CC-Ubuntu24.04-CUDA"), ("uc-img-plain-41d0", "CC-Ubuntu24.04")),
        "127.21",
        "10.140",
    ),
}
BRANCH = "class-2026"  # a branch of the published lab repository other than its default


MINUTE = 60.0
_jumped = 0.0  # seconds the clock was moved on
_jump_lock = threading.Lock()
on_advance: list = []  # called after each jump (the harness: nodes whose sshd is up now answer)


def sim_now() -> float:
    """The site's clock, in seconds (only differences mean anything)."""
    return time.monotonic() + _jumped


def jumped() -> float:
    """How far the waits (and scenarios) have moved the clock on, in all."""
    return _jumped


def advance(seconds: float) -> float:
    """Move the site's clock on (a notebook's wait, or a scenario's pause); returns the time."""
    global _jumped
    with _jump_lock:
        _jumped += max(0.0, float(seconds))
    for listener in on_advance:
        listener()
    return sim_now()


class Reply(Exception):
    def __init__(self, status: int, body=None, headers: dict | None = None):
        self.status, self.body, self.headers = status, body, headers or {}


class Drop(Exception):
    """Close the connection without an answer (an answer lost on its way back)."""


class Reset(Drop):
    """Reset the connection (TCP RST): "Connection reset by peer", as a restarting proxy does."""


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


def new_id() -> str:
    return str(uuid.uuid4())


def user_id_of(name: str) -> str:
    return "u-" + hashlib.sha1(name.encode()).hexdigest()[:24]


def fingerprint(public_key: str) -> str:
    digest = hashlib.md5(base64.b64decode(public_key.split()[1])).hexdigest()
    return ":".join(digest[i : i + 2] for i in range(0, 32, 2))
