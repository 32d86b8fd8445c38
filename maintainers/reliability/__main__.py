"""python -m maintainers.reliability: run the parts, write the report, exit 1 if anything broke
the contract.

    python -m maintainers.reliability    # everything -> docs/reliability.md (make reliability)
    python -m maintainers.reliability --only soak --soak-seconds 300 \
        --out results/reliability_soak.md                                        # make soak

About 10-15 minutes on a 2-core machine with the defaults (the stack part starts `make up
RAY=1`'s whole stack and crashes its Triton seven times). Every service it starts is stopped at
the end.
"""

from __future__ import annotations

import argparse
import base64
import os
import sys
import tempfile
import time
from pathlib import Path

import requests

from flask_app.app import PREDICT_SLOTS
from maintainers.reliability import (
    decode_cost,
    faults,
    faults_triton,
    faults_watchdog,
    hostile,
    report,
    safe_defaults,
    stack_round,
)
from maintainers.reliability.fuzz_decoding import fuzz_decoding
from maintainers.reliability.fuzz_fastapi import fuzz_fastapi
from maintainers.reliability.fuzz_flask import fuzz_flask
from maintainers.reliability.fuzz_triton import MODELS, fuzz_triton
from maintainers.reliability.procs import (
    fastapi_and_flask,
    listen_addresses,
    start_flask,
    start_triton,
)
from maintainers.reliability.soak import fastapi_sender, flask_sender, soak, triton_sender
from servelab import labenv
from servelab.paths import REPO_ROOT

REPORT = REPO_ROOT / "docs" / "reliability.md"
PARTS = ("fuzz", "soak", "faults", "hostile", "safe", "stack")
DEFAULTS = {"examples": 100, "soak_seconds": 12.0, "concurrency": 4, "seed": 0}
OVERSIZED_MIB, REGION_MIB = 128, 64  # the oversized-input check: element size, region limit


def run_all(
    parts=PARTS,
    examples: int = DEFAULTS["examples"],
    soak_seconds: float = DEFAULTS["soak_seconds"],
    concurrency: int = DEFAULTS["concurrency"],
    seed: int = DEFAULTS["seed"],
    log=print,
) -> dict:
    """The measurements of `parts`; services start once per half (FastAPI+Flask, then Triton)."""
    from labstack import artifacts
    from servelab.paths import TEST_IMAGES

    built = artifacts.build()
    image_path = TEST_IMAGES / built["test_images"][0]
    image = image_path.read_bytes()
    b64 = base64.b64encode(image).decode()
    out = {
        "examples": examples,
        "soak_seconds": soak_seconds,
        "concurrency": concurrency,
        "seed": seed,
        "image": image_path.name,
        "fuzz": [],
        "soak": [],
        "faults": [],
        "hostile": [],
        "safe": [],
        "stack": [],
        "binds": [],
        "triton_messages": {},
    }
    t_all = time.perf_counter()
    if "fuzz" in parts:
        log("fuzz: shared image decoding ...")
        out["fuzz"].append(fuzz_decoding(examples * 4, seed))
    if {"fuzz", "soak", "hostile"} & set(parts):
        with fastapi_and_flask() as services:
            apis, flask = {b: services[b] for b in ("pt", "onnx")}, services["flask"]
            out["binds"] += [
                (p.name, p.record["port"], sorted(listen_addresses(p.record["port"])))
                for p in services.values()
            ]
            if "fuzz" in parts:
                for b, proc in apis.items():
                    log(f"fuzz: FastAPI {b} ...")
                    out["fuzz"].append(fuzz_fastapi(proc, examples, examples // 2, seed))
                log("fuzz: Flask upload ...")
                out["fuzz"].append(fuzz_flask(flask, examples // 2, seed))
            if "soak" in parts:
                for b, proc in apis.items():
                    log(f"soak: FastAPI {b} ({soak_seconds:.0f} s) ...")
                    out["soak"].append(
                        soak(
                            f"FastAPI {b} POST /predict",
                            fastapi_sender(proc.url, b64),
                            soak_seconds,
                            concurrency,
                            proc.pid,
                        )
                    )
                log(f"soak: Flask -> FastAPI onnx ({soak_seconds:.0f} s) ...")
                out["soak"].append(
                    soak(
                        "Flask upload -> FastAPI onnx",
                        flask_sender(flask.url, image),
                        soak_seconds,
                        concurrency,
                        flask.pid,
                    )
                )
            if "hostile" in parts:
                log(
                    f"hostile: {hostile.SLOW_CLIENTS} slow clients on Flask, chunked body and "
                    "crafted images on FastAPI onnx ..."
                )
                onnx = apis["onnx"]
                out["hostile"].append(hostile.slow_clients(flask.url))
                out["hostile"].append(hostile.chunked_body(onnx.url, onnx.pid))
                for target in (onnx, flask):
                    out["hostile"].append(hostile.endless_headers(target.url, target.pid))
                log("hostile: crafted canvases to FastAPI (whole, truncated) and Flask ...")
                out["hostile"].append(hostile.crafted_canvases(onnx.url, onnx.pid))
                out["hostile"].append(hostile.crafted_canvases(onnx.url, onnx.pid, truncated=True))
                # Flask in front of FastAPI onnx: both decode each upload
                out["hostile"].append(
                    hostile.crafted_canvases(flask.url, flask.pid, target="flask")
                )
                log("hostile: scan bombs and large photos (decode cost) to Flask and FastAPI ...")
                out["hostile"].append(decode_cost.scan_bombs(flask.url, "flask"))
                out["hostile"].append(decode_cost.scan_bombs(onnx.url, "fastapi"))
                out["hostile"].append(decode_cost.costly_photos(onnx.url, "fastapi"))
                log("hostile: D3 and its variants from four clients while photos upload ...")
                for target, name in ((flask, "flask"), (onnx, "fastapi")):
                    out["hostile"].append(
                        decode_cost.attackers_and_victims(target.url, name, target.pid)
                    )
                hole = decode_cost.BlackHole()
                held = start_flask(hole.url)
                try:
                    out["hostile"].append(decode_cost.held_uploads(held.url, PREDICT_SLOTS))
                finally:
                    held.stop()
                    hole.close()
    with tempfile.TemporaryDirectory(prefix="reliability-") as tmp:
        tmp = Path(tmp)
        if "faults" in parts:
            log("faults: FastAPI killed behind Flask, FastAPI killed mid-benchmark, launcher ...")
            out["faults"].append(faults.fastapi_killed_behind_flask(image))
            out["faults"].append(faults.fastapi_killed_mid_benchmark(b64))
            out["faults"] += faults.crash_up_down_down(tmp / "launcher", full_stack=True)
            out["faults"].append(faults.stale_pid(tmp / "launcher"))
            log("faults: two restarts at once, up after a crash with clients connected ...")
            out["faults"].append(faults.concurrent_restarts(tmp / "launcher"))
            out["faults"].append(faults.crash_keeps_ports_and_survivors(tmp / "launcher"))
            log("faults: Triton's stubs, server and every process killed (make up's stack) ...")
            out["faults"] += faults.triton_killed(tmp / "launcher", b64)
            log("faults: a stub killed after its repair, while loading, stopped; the watchdog ...")
            out["faults"] += faults_watchdog.watchdog_faults(tmp / "watchdog", image)
        if {"fuzz", "soak", "faults", "hostile"} & set(parts):
            log("triton: starting (both models) ...")
            # under the watchdog, as `make up` runs it; its region limit lowered so a 128 MiB
            # element shows what a larger one does with the default
            triton = start_triton(tmp / "triton", watchdog_args=[f"--max-region-mib={REGION_MIB}"])
            try:
                out["triton_version"] = (
                    requests.get(f"{triton.url}/v2", timeout=10).json().get("version", "?")
                )
                out["binds"].append(
                    (
                        "triton",
                        triton.record["port"],
                        sorted(listen_addresses(triton.record["port"])),
                    )
                )
                if "fuzz" in parts:
                    log("fuzz: Triton ...")
                    tallies = fuzz_triton(triton, b64, generated=examples // 2, seed=seed)
                    out["fuzz"] += tallies.values()
                    out["triton_messages"] = {m: t.messages for m, t in tallies.items()}
                if "soak" in parts:
                    for model in MODELS:
                        log(f"soak: Triton {model} ({soak_seconds:.0f} s) ...")
                        out["soak"].append(
                            soak(
                                f"Triton {model}",
                                triton_sender(triton.url, model, b64),
                                soak_seconds,
                                concurrency,
                                triton.pid,
                            )
                        )
                if "hostile" in parts:
                    log("hostile: Triton's repository API without the node's secret ...")
                    out["hostile"] += hostile.repository_api(
                        triton.url, labenv.ADMIN_HEADER, os.environ["TRITON_ADMIN_KEY"]
                    )
                    log("hostile: Triton's other state-changing APIs, HTTP and gRPC ...")
                    grpc = f"127.0.0.1:{triton.record['grpc_port']}"
                    out["hostile"] += hostile.admin_apis(triton.url, grpc, labenv.admin_headers())
                    out["hostile"].append(hostile.stub_region_attack(triton.url, triton.pid))
                    for _ in range(2):  # the region is given back every time, not once
                        out["hostile"].append(
                            hostile.oversized_input(
                                triton.url, grpc, triton.tritonserver_pid(), mib=OVERSIZED_MIB
                            )
                        )
                if "faults" in parts:
                    log("faults: Triton broken configs, killed mid-benchmark ...")
                    out["faults"] += faults_triton.broken_configs(triton, b64)
                    out["faults"].append(faults_triton.killed_mid_benchmark(triton, tmp))
            finally:
                triton.stop()
    if "safe" in parts:
        log("safe defaults ...")
        out["safe"] = safe_defaults.checks()
    if "stack" in parts:
        with tempfile.TemporaryDirectory(prefix="reliability-stack-") as tmp:
            out["stack"] = stack_round.run(Path(tmp), image, log)
    out["seconds"] = round(time.perf_counter() - t_all, 1)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m maintainers.reliability", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--out", default=str(REPORT), help="where to write the report (default docs/reliability.md)"
    )
    parser.add_argument(
        "--only", nargs="+", choices=PARTS, default=list(PARTS), help="run only these parts"
    )
    parser.add_argument(
        "--examples",
        type=int,
        default=DEFAULTS["examples"],
        help="generated cases per schemathesis mode (other generators scale with it)",
    )
    parser.add_argument("--soak-seconds", type=float, default=DEFAULTS["soak_seconds"])
    parser.add_argument("--concurrency", type=int, default=DEFAULTS["concurrency"])
    parser.add_argument("--seed", type=int, default=DEFAULTS["seed"])
    args = parser.parse_args(argv)
    res = run_all(
        args.only,
        args.examples,
        args.soak_seconds,
        args.concurrency,
        args.seed,
        log=lambda m: print(m, file=sys.stderr, flush=True),
    )
    # the command that reproduces this report (without --out), written into it
    command = "python -m maintainers.reliability"
    if list(args.only) != list(PARTS):
        command += " --only " + " ".join(args.only)
    for key, default in DEFAULTS.items():
        value = getattr(args, key)
        if value != default:
            command += f" --{key.replace('_', '-')} " + (
                f"{value:g}" if isinstance(value, float) else str(value)
            )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report.render(res, command))
    bad = report.problems(res)
    print(
        f"wrote {out} in {res['seconds']:.0f} s; "
        + ("all good" if not bad else f"{len(bad)} problem(s):\n  " + "\n  ".join(bad)),
        file=sys.stderr,
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
