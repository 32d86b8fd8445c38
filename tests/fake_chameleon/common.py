"""What every part of the fake Chameleon shares: replies, ids, clocks, time formats."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import uuid

BLAZAR_IN = "%Y-%m-%d %H:%M"  # what python-chi sends
BLAZAR_OUT = "%Y-%m-%dT%H:%M:%S.%f"  # what Blazar answers
SITE = "CHI@TACC"
BRANCH = "class-2026"  # a branch of the published lab repository other than its default


class Reply(Exception):
    def __init__(self, status: int, body=None, headers: dict | None = None):
        self.status, self.body, self.headers = status, body, headers or {}


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


def new_id() -> str:
    return str(uuid.uuid4())


def user_id_of(name: str) -> str:
    return "u-" + hashlib.sha1(name.encode()).hexdigest()[:24]


def fingerprint(public_key: str) -> str:
    digest = hashlib.md5(base64.b64decode(public_key.split()[1])).hexdigest()
    return ":".join(digest[i : i + 2] for i in range(0, 32, 2))
