"""`make status`: what runs, healthy or not (Triton: per model, from its watchdog's report; Flask:
DEGRADED while it cannot classify, its /healthz), its URL and log, and what recovers what is
not; where the secrets are, never their values."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import requests

from labstack.lab_files import SECRETS, TRITON_HEALTH, URLS_ENV
from labstack.lab_secrets import SECRET_KEYS
from labstack.ports import service_url
from labstack.processes import comm, is_running, is_zombie, left_by_watchdog
from labstack.records import read_state


def healthy(rec: dict) -> bool:
    if not is_running(rec["pid"], rec["marker"]) or is_zombie(rec["pid"]):
        return False
    try:
        return requests.get(rec["health"], timeout=5).status_code == 200
    except requests.RequestException:
        return False


def _triton_models(rec: dict) -> tuple[bool, list[str]]:
    """Triton's health per model: its own readiness and its watchdog's report on the stubs."""
    from servelab.serving.triton_watchdog import check

    health_file = Path(rec.get("health_file") or TRITON_HEALTH)
    return check(f"http://127.0.0.1:{rec['port']}", health_file)


def _triton_status(rec: dict) -> tuple[str, list[str]]:
    """Triton's word (healthy, DEGRADED, DOWN) and lines: per model from Triton and its watchdog's
    report, and whether the watchdog itself runs (killed, it leaves a server nothing repairs)."""
    if is_running(rec["pid"], rec["marker"]) and not is_zombie(rec["pid"]):
        ok, lines = _triton_models(rec)
        return ("healthy" if ok else "DEGRADED"), lines
    servers = [p for p in left_by_watchdog(rec) if comm(p) == "tritonserver"]
    _, lines = _triton_models(rec)
    lines = [ln for ln in lines if not ln.startswith("watchdog:")]
    if servers:
        return "DEGRADED", [
            f"its watchdog (pid {rec['pid']}) is not running: tritonserver (pid {servers[0]}) "
            "still serves, but nothing repairs a model whose stub dies or a server that wedges",
            *lines,
            "recover: `make up` (starts Triton and its watchdog again, on the same ports)",
        ]
    return "DOWN", [*lines, "recover: `make up` (or `make restart SERVICE=triton`)"]


def _flask_status(rec: dict) -> tuple[str, list[str]]:
    """Flask's word and lines: its /healthz, which answers 503 "degraded" (naming the model
    server and what is wrong with it) while the page serves but cannot classify an upload."""
    if not healthy(rec):  # its process and /livez (the page itself)
        return "DOWN", ["recover: `make up` starts it again"]
    try:
        resp = requests.get(f"{service_url(rec['port'])}/healthz", timeout=5)
        body = resp.json()
    except (requests.RequestException, ValueError):
        return "DOWN", ["its /healthz does not answer: `make restart SERVICE=flask`"]
    if resp.status_code == 200:
        return "healthy", []
    return "DEGRADED", [
        f"uploads fail: {body.get('problem') or f'/healthz answered HTTP {resp.status_code}'}",
        "recover: `make up` (starts the model server it calls, if that is down)",
    ]


def red(word: str) -> str:
    """A status word for a person: in red where a terminal shows it (NO_COLOR set: never)."""
    if word == "healthy" or not sys.stdout.isatty() or os.environ.get("NO_COLOR"):
        return word
    return f"\033[1;31m{word}\033[0m"


def print_status(state: dict | None = None) -> None:
    """Each service: running and healthy or not (Triton: per model, and its watchdog), its URL and
    log, and what recovers one that is not; where the secrets are, never their values."""
    state = state or read_state()
    if not state.get("services"):
        print("local stack is not running (make up)")
        return
    for name, rec in state["services"].items():
        if name == "triton":
            word, lines = _triton_status(rec)
        elif name == "flask":
            word, lines = _flask_status(rec)
        else:
            word = "healthy" if healthy(rec) else "DOWN"
            lines = [] if word == "healthy" else ["recover: `make up` starts it again"]
        shown = red(word) + " " * max(0, 8 - len(word))
        print(
            f"  {name:8s} pid {rec['pid']:<7d} {shown} {service_url(rec['port'])}"
            f"   log: {rec['log']}"
        )
        for line in lines:
            print(f"             {line}")
    if URLS_ENV.exists():
        shown = [
            line
            for line in URLS_ENV.read_text().splitlines()
            if line.split("=", 1)[0] not in (*SECRET_KEYS, "JUPYTER_URL")
        ]
        print(f"\n{URLS_ENV} (what notebooks and tools read):\n  " + "\n  ".join(shown))
        if "jupyter" in state["services"]:
            print(
                f"\nJupyterLab: {service_url(state['services']['jupyter']['port'])}/lab; "
                "the link with "
                f"its token is the JUPYTER_URL line of {URLS_ENV}"
            )
        secrets_shown = "the Jupyter token, Triton's admin key"
        where = f"{SECRETS} and {URLS_ENV}"
        if "ray_head" in state["services"]:
            secrets_shown += ", the Ray cluster's token"
            where += " (Ray's: the file RAY_AUTH_TOKEN_PATH names)"
        print(f"Secrets ({secrets_shown}): {where}, readable only by you; not shown here")
