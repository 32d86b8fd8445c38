"""What every part of the fake Chameleon shares: replies, ids, clocks, time formats.

Two clocks. Dates (a lease's start and end, what Blazar and Nova show) are real UTC time. How
long things take (a lease STARTING, a boot, sshd coming up, a delete) is simulated time:
time.monotonic() sped up SCALE times (FAKE_CHAMELEON_SCALE; 180: a minute of the site passes in
a third of a second), so the site's real durations play out in a test; the harness speeds up the
notebooks' own waits (chi_waits) by the same factor, on the same clock, so every limit the
notebooks use is met or run out for real.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import os
import time
import uuid

BLAZAR_IN = "%Y-%m-%d %H:%M"  # what python-chi sends
BLAZAR_OUT = "%Y-%m-%dT%H:%M:%S.%f"  # what Blazar answers
SITE = "CHI@TACC"
BRANCH = "class-2026"  # a branch of the published lab repository other than its default


SCALE = float(os.environ.get("FAKE_CHAMELEON_SCALE", "180"))  # simulated s per real s
MINUTE = 60.0


def sim_now() -> float:
    """The simulated clock, in seconds (only differences mean anything)."""
    return time.monotonic() * SCALE


class Reply(Exception):
    def __init__(self, status: int, body=None, headers: dict | None = None):
        self.status, self.body, self.headers = status, body, headers or {}


class Drop(Exception):
    """Close the connection without an answer (an answer lost on its way back)."""


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


def new_id() -> str:
    return str(uuid.uuid4())


def user_id_of(name: str) -> str:
    return "u-" + hashlib.sha1(name.encode()).hexdigest()[:24]


def fingerprint(public_key: str) -> str:
    digest = hashlib.md5(base64.b64decode(public_key.split()[1])).hexdigest()
    return ":".join(digest[i : i + 2] for i in range(0, 32, 2))
