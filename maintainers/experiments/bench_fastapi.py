#!/usr/bin/env python3
"""Side-by-side benchmark of the FastAPI half, in one run on this machine (`make bench`).

1. Sequential p50 of the PyTorch service vs the ONNX service (requests interleaved, so both see
   the same machine state).
2. The notebooks' Python load generator vs wrk (an independent C load tool) on the same endpoint
   at the same concurrency: is our load generator itself a bottleneck?

Prints the measurements and the ratios; writes them as JSON with --out. A script, not a test:
the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import requests

from labstack import launcher
from labstack.artifacts import build
from servelab import food11, loadgen
from servelab.paths import TEST_IMAGES

WRK_SCRIPT = """
local f = assert(io.open("{body}", "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
"""


def _ms(text: str) -> float:
    value, unit = re.match(r"([\d.]+)(us|ms|s)", text).groups()
    return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]


def run_wrk(url: str, body: bytes, connections: int, seconds: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "body.json").write_bytes(body)
        script = Path(tmp) / "post.lua"
        script.write_text(WRK_SCRIPT.format(body=Path(tmp) / "body.json"))
        cmd = [
            "wrk",
            "-t2",
            f"-c{connections}",
            f"-d{seconds}s",
            "--latency",
            "-s",
            str(script),
            url,
        ]
        print("  $ " + " ".join(cmd))
        out = subprocess.run(
            cmd, capture_output=True, text=True, timeout=seconds + 60, check=True
        ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50 = _ms(re.search(r"50%\s+([\d.]+\w+)", out).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {
        "throughput_rps": rps,
        "median_ms": p50,
        "errors": int(errors.group(1)) if errors else 0,
    }


def sequential_interleaved(urls: dict, payload: dict, n: int) -> dict:
    lat = {name: [] for name in urls}
    sessions = {name: requests.Session() for name in urls}
    for _ in range(n):
        for name, url in urls.items():
            start = time.perf_counter()
            resp = sessions[name].post(f"{url}/predict", json=payload, timeout=60)
            lat[name].append((time.perf_counter() - start) * 1e3)
            resp.raise_for_status()
    return {name: float(np.median(v)) for name, v in lat.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sequential", type=int, default=100, help="requests per runtime, interleaved"
    )
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seconds", type=int, default=15, help="length of each throughput run")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()
    if not shutil.which("wrk"):
        sys.exit("wrk not found: run `make setup` (it installs Debian's wrk)")
    build()
    image = sorted(TEST_IMAGES.glob("*.jpg"))[0]
    payload = {"image": food11.encode_file(image)}
    servers = {
        name: launcher.start(launcher.fastapi_service(launcher.free_port(), name))
        for name in ("pytorch", "onnx")
    }
    urls = {name: launcher.service_url(rec["port"]) for name, rec in servers.items()}
    try:
        sequential_interleaved(urls, payload, 5)  # warm-up
        print(f"1. sequential, {args.sequential} requests per runtime, interleaved ({image.name})")
        p50 = sequential_interleaved(urls, payload, args.sequential)
        print(f"  PyTorch p50 {p50['pytorch']:.1f} ms | ONNX p50 {p50['onnx']:.1f} ms")

        url = f"{urls['onnx']}/predict"
        print(f"2. throughput at concurrency {args.concurrency} on {url}, {args.seconds} s each")
        wrk = run_wrk(url, json.dumps(payload).encode(), args.concurrency, args.seconds)
        n = max(args.concurrency * 4, int(wrk["throughput_rps"] * args.seconds))
        df = loadgen.run(url, payload, n=n, concurrency=args.concurrency, progress=False)
        ours = loadgen.summarize(df)
        print(
            f"  wrk: {wrk['throughput_rps']:.1f} req/s, p50 {wrk['median_ms']:.1f} ms, non-2xx "
            f"{wrk['errors']}"
        )
        print(
            f"  python loadgen: {ours['throughput_rps']:.1f} req/s, p50 {ours['median_ms']:.1f} "
            f"ms, errors {ours['errors']} ({n} requests)"
        )
    finally:
        for rec in servers.values():
            launcher.stop_process(rec["pid"], rec["marker"])
    result = {
        "machine": f"{platform.node()} {platform.machine()} {platform.processor() or ''}".strip(),
        "date": time.strftime("%F %T"),
        "pytorch_p50_ms": p50["pytorch"],
        "onnx_p50_ms": p50["onnx"],
        "ratio_pytorch_over_onnx_p50": p50["pytorch"] / p50["onnx"],
        "wrk_rps": wrk["throughput_rps"],
        "loadgen_rps": ours["throughput_rps"],
        "ratio_loadgen_over_wrk_rps": ours["throughput_rps"] / wrk["throughput_rps"],
        "wrk_p50_ms": wrk["median_ms"],
        "loadgen_p50_ms": ours["median_ms"],
    }
    print("\nratios (measured side by side in this run):")
    print(f"  PyTorch p50 / ONNX p50           = {result['ratio_pytorch_over_onnx_p50']:.2f}")
    print(f"  Python loadgen req/s / wrk req/s = {result['ratio_loadgen_over_wrk_rps']:.2f}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
