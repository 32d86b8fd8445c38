"""Hostile clients against the running services, each bounded in count and time (make reliability).

- slow_clients: N sockets that send half a request and never finish it; does the page (its /livez)
  still answer?
- chunked_body: a `Transfer-Encoding: chunked` body far over the limit; when does the 413 come, and
  how much memory does the service take meanwhile?
- crafted_canvases: small PNG files that declare a canvas of tens of megapixels, sent together;
  how high does the service's memory go, and does it come back down?
- endless_headers: sockets that send one request header without end; does the server cut each off
  early, and how much memory does it take meanwhile?
- oversized_input: one BYTES element far larger than any image, over gRPC: refused, and the
  stub's shared-memory region (Triton copies the request into it first) shrinks again;
- repository_api: Triton's model-repository API without the node's secret (refused?) and with it.
- admin_apis: every Triton API that changes the server's state or memory (model repository,
  system and CUDA shared memory, logging, trace), over HTTP and gRPC, without the secret, with a
  wrong one and with it; then the shared-memory attack that crashed tritonserver (a stub's own
  /dev/shm region registered as an output region), and whether the server still serves.

Each returns one row (a dict) for docs/reliability.md; `ok` says whether it met its bound.
"""

from __future__ import annotations

import concurrent.futures
import io
import select
import socket
import time
from pathlib import Path
from urllib.parse import urlparse

import requests
from PIL import Image

from maintainers.reliability.procs import rss_tree_kib

SLOW_CLIENTS = 64  # half-open connections held at once
HEALTHZ_BOUND_S = 1.0  # the page's /livez must answer within this while they are held
CHUNKED_TOTAL_MB = 300  # what a hostile client offers to send
CANVAS_PIXELS = 6300 * 6300  # declared by each crafted PNG (just under the lab's 40 Mpx cap)
CANVAS_CLIENTS = 16
RSS_RETURN_BOUND_MIB = 150  # resident memory after the crafted burst, above where it started
SETTLE_S = 5.0  # ... this long after the last answer


def _host_port(url: str) -> tuple[str, int]:
    parsed = urlparse(url)
    return parsed.hostname, parsed.port


def slow_clients(url: str, n: int = SLOW_CLIENTS, hold_s: float = 3.0) -> dict:
    """Hold n connections that sent an unfinished request; time GET /livez (the page itself, its
    model server aside) meanwhile."""
    host, port = _host_port(url)
    sockets, opened = [], 0
    try:
        for _ in range(n):
            s = socket.create_connection((host, port), timeout=5)
            s.sendall(
                b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data\r\n"
            )  # no end
            sockets.append(s)
            opened += 1
        time.sleep(hold_s)  # let the server hand them to whatever reads requests
        start = time.perf_counter()
        try:
            status = requests.get(f"{url}/livez", timeout=10).status_code
        except requests.RequestException as exc:
            status = type(exc).__name__
        seconds = time.perf_counter() - start
    finally:
        for s in sockets:
            s.close()
    return {
        "check": f"/livez with {opened} half-open connections held",
        "status": status,
        "seconds": round(seconds, 3),
        "bound": f"< {HEALTHZ_BOUND_S:g} s",
        "ok": status == 200 and seconds < HEALTHZ_BOUND_S,
    }


def chunked_body(url: str, pid: int, total_mb: int = CHUNKED_TOTAL_MB, chunk_kb: int = 256) -> dict:
    """POST /predict with a chunked body of up to total_mb; stop sending once the server answers."""
    host, port = _host_port(url)
    rss_before = rss_tree_kib(pid)[0] / 1024
    peak = rss_before
    chunk = b"A" * (chunk_kb * 1024)
    sent = 0
    status = None
    reply = b""
    with socket.create_connection((host, port), timeout=30) as s:
        s.sendall(
            b"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        s.sendall(b"%x\r\n%s\r\n" % (len(b'{"image": "'), b'{"image": "'))
        deadline = time.time() + 120
        while sent < total_mb * 2**20 and time.time() < deadline:
            if select.select([s], [], [], 0)[0]:
                break  # the server answered (413 expected) before the body ended
            try:
                s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))  # whole chunks only: blocking send
            except OSError:
                break  # the server closed the connection after answering
            sent += len(chunk)
            if sent % (16 * 2**20) < len(chunk):
                peak = max(peak, rss_tree_kib(pid)[0] / 1024)
        try:
            reply = s.recv(65536)
        except OSError:
            pass
        if reply.startswith(b"HTTP/1.1 "):
            status = int(reply[9:12])
    peak = max(peak, rss_tree_kib(pid)[0] / 1024)
    growth = peak - rss_before
    return {
        "check": f"chunked body (up to {total_mb} MB offered)",
        "status": status,
        "sent_mib": round(sent / 2**20, 1),
        "rss_before_mib": round(rss_before, 1),
        "rss_growth_mib": round(growth, 1),
        "bound": "413 before 32 MiB sent, growth < 64 MiB",
        "ok": status == 413 and sent < 32 * 2**20 and growth < 64,
    }


HEADER_SOCKETS = 32
HEADER_OFFER_MIB = 16  # what each socket offers to send as one header line
HEADER_GROWTH_BOUND_MIB = 64


def endless_headers(
    url: str, pid: int, sockets: int = HEADER_SOCKETS, offer_mib: int = HEADER_OFFER_MIB
) -> dict:
    """`sockets` connections, each sending `GET /` with one header whose value never ends (up to
    offer_mib MiB each, all held open): resident memory of the server before and at the end, and
    how many connections the server cut off (an answer such as 431, or a close)."""
    host, port = _host_port(url)
    rss_before = rss_tree_kib(pid)[0] / 1024
    chunk = b"a" * (64 * 1024)
    opened, cut, sent_total = [], 0, 0
    deadline = time.time() + 120
    try:
        for _ in range(sockets):
            s = socket.create_connection((host, port), timeout=5)
            opened.append(s)
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Filler: ")
            sent = 0
            while sent < offer_mib * 2**20 and time.time() < deadline:
                if select.select([s], [], [], 0)[0]:
                    break  # the server answered (431 or 400) or closed the connection
                try:
                    s.sendall(chunk)
                except OSError:  # reset, or a full buffer the server no longer reads (timeout)
                    break
                sent += len(chunk)
            sent_total += sent
            if sent < offer_mib * 2**20:
                cut += 1
        time.sleep(1.0)
        rss_after = rss_tree_kib(pid)[0] / 1024
    finally:
        for s in opened:
            s.close()
    growth = rss_after - rss_before
    return {
        "check": f"{len(opened)} connections each sending a request header of up to "
        f"{offer_mib} MiB",
        "status": f"{cut} cut off",
        "sent_mib": round(sent_total / 2**20, 1),
        "rss_before_mib": round(rss_before, 1),
        "rss_growth_mib": round(growth, 1),
        "bound": f"every connection cut off, growth < {HEADER_GROWTH_BOUND_MIB} MiB",
        "ok": cut == len(opened) == sockets and growth < HEADER_GROWTH_BOUND_MIB,
    }


def crafted_png(pixels: int = CANVAS_PIXELS, truncated: bool = False) -> bytes:
    """A flat-coloured PNG of `pixels` (square): tiny on disk, pixels * 3 bytes once decoded.
    truncated: cut before its end (IEND and the last image data), so decoding fails late, after
    most of the canvas was allocated: the service's error path."""
    side = int(pixels**0.5)
    buf = io.BytesIO()
    Image.new("RGB", (side, side), (200, 120, 40)).save(buf, format="PNG", optimize=True)
    data = buf.getvalue()
    return data[: len(data) * 9 // 10] if truncated else data


def crafted_canvases(
    url: str,
    pid: int,
    clients: int = CANVAS_CLIENTS,
    target: str = "fastapi",
    truncated: bool = False,
    settle_s: float = SETTLE_S,
) -> dict:
    """`clients` concurrent uploads of crafted PNGs (FastAPI: POST /predict with JSON; Flask: the
    upload form); resident memory before, at the peak and `settle_s` after the last answer."""
    import base64

    png = crafted_png(truncated=truncated)
    rss_before = rss_tree_kib(pid)[0] / 1024
    peak = [rss_before]

    def post(_):
        if target == "flask":
            files = {"file": ("canvas.png", png, "image/png")}
            return requests.post(f"{url}/predict", files=files, timeout=300).status_code
        body = {"image": base64.b64encode(png).decode()}
        return requests.post(f"{url}/predict", json=body, timeout=300).status_code

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        futures = [pool.submit(post, i) for i in range(clients)]
        while not all(f.done() for f in futures):
            peak.append(rss_tree_kib(pid)[0] / 1024)
            time.sleep(0.2)
        done = [f.result() for f in futures]
    time.sleep(settle_s)  # the measure: memory 5 s after the burst
    rss_after = rss_tree_kib(pid)[0] / 1024
    kind = "truncated " if truncated else ""
    return {
        "check": f"{'Flask' if target == 'flask' else 'FastAPI'}: {clients} concurrent "
        f"{len(png) // 1024} KiB {kind}PNGs declaring {CANVAS_PIXELS / 1e6:.0f} Mpx",
        "status": sorted(set(done)),
        "rss_before_mib": round(rss_before, 1),
        "rss_peak_mib": round(max(peak), 1),
        "rss_after_mib": round(rss_after, 1),
        "bound": f"{settle_s:g} s after: after - before < {RSS_RETURN_BOUND_MIB} MiB",
        # Flask answers 502 when no model server answers (its readable page), never 500
        "ok": all(s in (200, 400, 413, 502) for s in done)
        and rss_after - rss_before < RSS_RETURN_BOUND_MIB,
    }


def repository_api(triton_url: str, header: str, key: str) -> list[dict]:
    """A load request carrying a model file (what would run code) without the secret, then a plain
    index request with and without it."""
    evil = {
        "parameters": {
            "config": '{"backend": "python", "max_batch_size": 0}',
            "file:1/model.py": "cHJpbnQoJ3B3bmVkJyk=",
        }
    }  # base64 of print('pwned')
    rows = []
    for name, path, body, headers, want in (
        (
            "load with a model.py, no secret",
            "/v2/repository/models/pwned/load",
            evil,
            {},
            "refused",
        ),
        ("repository index, no secret", "/v2/repository/index", {}, {}, "refused"),
        (
            "repository index, wrong secret",
            "/v2/repository/index",
            {},
            {header: "guess"},
            "refused",
        ),
        (
            "repository index, the node's secret",
            "/v2/repository/index",
            {},
            {header: key},
            "allowed",
        ),
    ):
        resp = requests.post(f"{triton_url}{path}", json=body, headers=headers, timeout=30)
        allowed = resp.status_code == 200
        rows.append(
            {
                "check": f"Triton {name}",
                "status": resp.status_code,
                "detail": resp.text[:120].replace("\n", " "),
                "bound": want,
                "ok": allowed == (want == "allowed"),
            }
        )
    return rows


def _stub_regions(server_pid: int) -> list[str]:
    """The /dev/shm objects that tritonserver's Python-backend stubs map (their IPC regions)."""
    from maintainers.reliability.procs import children

    found = []
    for pid in children(server_pid):
        try:
            maps = Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            continue
        found += [ln.split()[-1] for ln in maps.splitlines() if " /dev/shm/" in ln]
    return sorted(set(found))


def _http_call(url: str, method: str, path: str, body, headers: dict) -> tuple[int, str]:
    resp = requests.request(method, f"{url}{path}", json=body, headers=headers, timeout=30)
    return resp.status_code, resp.text[:120].replace("\n", " ")


def _grpc_call(grpc_url: str, name: str, headers: dict) -> tuple[str, str]:
    """One gRPC admin call by name; ('OK', ...) or (Triton's status code, its message)."""
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    client = grpcclient.InferenceServerClient(grpc_url)
    calls = {
        "system shared memory status": lambda h: client.get_system_shared_memory_status(headers=h),
        "system shared memory register": lambda h: client.register_system_shared_memory(
            "probe", "/lab_probe_missing", 64, headers=h
        ),
        "system shared memory unregister all": lambda h: client.unregister_system_shared_memory(
            headers=h
        ),
        "CUDA shared memory status": lambda h: client.get_cuda_shared_memory_status(headers=h),
        "CUDA shared memory unregister all": lambda h: client.unregister_cuda_shared_memory(
            headers=h
        ),
        "log settings": lambda h: client.get_log_settings(headers=h),
        "log settings update": lambda h: client.update_log_settings(
            {"log_verbose_level": 0}, headers=h
        ),
        "trace settings": lambda h: client.get_trace_settings(headers=h),
        "repository index": lambda h: client.get_model_repository_index(headers=h),
    }
    try:
        calls[name](headers)
        return "OK", ""
    except InferenceServerException as exc:
        message = exc.message() or ""
        # a call that reached the API and failed on its argument was not refused
        return str(exc.status() or "error"), message[:120]
    finally:
        client.close()


HTTP_ADMIN_CALLS = (  # (what, method, path, body)
    ("system shared memory status", "GET", "/v2/systemsharedmemory/status", None),
    (
        "system shared memory register",
        "POST",
        "/v2/systemsharedmemory/region/probe/register",
        {"key": "/lab_probe_missing", "offset": 0, "byte_size": 64},
    ),
    ("system shared memory unregister all", "POST", "/v2/systemsharedmemory/unregister", {}),
    ("CUDA shared memory status", "GET", "/v2/cudasharedmemory/status", None),
    ("CUDA shared memory unregister all", "POST", "/v2/cudasharedmemory/unregister", {}),
    ("log settings", "GET", "/v2/logging", None),
    ("log settings update", "POST", "/v2/logging", {"log_verbose_level": 0}),
    ("trace settings", "GET", "/v2/trace/setting", None),
    ("trace settings update", "POST", "/v2/trace/setting", {"trace_level": ["OFF"]}),
    ("repository index", "POST", "/v2/repository/index", {}),
    ("model unload", "POST", "/v2/repository/models/no_such_model/unload", {}),
)
GRPC_ADMIN_CALLS = (
    "system shared memory status",
    "system shared memory register",
    "system shared memory unregister all",
    "CUDA shared memory status",
    "CUDA shared memory unregister all",
    "log settings",
    "log settings update",
    "trace settings",
    "repository index",
)


def _refused_http(status: int, text: str) -> bool:
    return status == 403 and "restricted" in text


def _refused_grpc(status: str, text: str) -> bool:
    return status == "StatusCode.UNAVAILABLE" and "restricted" in text


def admin_apis(http_url: str, grpc_url: str, headers: dict) -> list[dict]:
    """Every state-changing Triton API over HTTP and gRPC, one row each: refused without the
    secret and with a wrong one, answered with `headers` (labenv.admin_headers(): one dict for both
    protocols). A call that reached the API and failed on its argument counts as answered."""
    wrong = {k: "guess" for k in headers} or {"lab-admin-key": "guess"}
    attempts = (("no secret", {}), ("wrong secret", wrong), ("the secret", headers))
    rows = []
    for protocol, calls in (("HTTP", HTTP_ADMIN_CALLS), ("gRPC", GRPC_ADMIN_CALLS)):
        for call in calls:
            what = call[0] if protocol == "HTTP" else call
            seen, refused = [], []
            for _, sent in attempts:
                if protocol == "HTTP":
                    status, text = _http_call(http_url, *call[1:], sent)
                    refused.append(_refused_http(status, text))
                else:
                    status, text = _grpc_call(grpc_url, what, sent)
                    refused.append(_refused_grpc(status, text))
                seen.append((str(status).replace("StatusCode.", ""), text))
            rows.append(
                {
                    "check": f"Triton {protocol} {what}: no secret / wrong secret / the secret",
                    "status": " / ".join(s for s, _ in seen),
                    "detail": seen[0][1]
                    if refused[0]
                    else f"answered without the secret: {seen[0][1][:80]}",
                    "bound": "refused / refused / answered",
                    "ok": refused == [True, True, False],
                }
            )
    return rows


def stub_region_attack(http_url: str, server_pid: int, model: str = "food_classifier_onnx") -> dict:
    """The crash of the issue: register a Python-backend stub's own IPC region as a system
    shared-memory region (no secret) and have Triton write an inference output into it."""
    regions = _stub_regions(server_pid)
    if not regions:
        return {
            "check": "Triton: a stub's /dev/shm region as an output region, no secret",
            "status": None,
            "detail": "no stub region found",
            "bound": "refused, server serves",
            "ok": False,
        }
    key = "/" + Path(regions[0]).name
    register = requests.post(
        f"{http_url}/v2/systemsharedmemory/region/evil/register",
        json={"key": key, "offset": 0, "byte_size": 44},
        timeout=30,
    )
    body = {
        "inputs": [
            {
                "name": "input",
                "shape": [1, 3, 224, 224],
                "datatype": "FP32",
                "data": [0.0] * (3 * 224 * 224),
            }
        ],
        "outputs": [
            {
                "name": "output",
                "parameters": {"shared_memory_region": "evil", "shared_memory_byte_size": 44},
            }
        ],
    }
    try:
        infer = requests.post(f"{http_url}/v2/models/{model}/infer", json=body, timeout=60)
        answer = f"inference HTTP {infer.status_code}"
    except requests.RequestException as exc:
        answer = f"inference: no answer ({type(exc).__name__})"
    time.sleep(1.0)  # a crash takes the server down within this
    try:
        serving = requests.get(f"{http_url}/v2/models/{model}/ready", timeout=10).status_code == 200
    except requests.RequestException:
        serving = False
    return {
        "check": "Triton: a stub's /dev/shm region as an output region, no secret",
        "status": register.status_code,
        "detail": f"register: {register.text[:80]}; {answer}; serving after: "
        + ("yes" if serving else "NO"),
        "bound": "refused, server serves",
        "ok": _refused_http(register.status_code, register.text) and serving,
    }


def oversized_input(
    http_url: str, grpc_url: str, server_pid: int, mib: int = 128, limit_s: float = 120.0
) -> dict:
    """One INPUT_IMAGE element of `mib` MiB to food_classifier over gRPC (Triton 2.51 has no size
    limit of its own: it copies the request into the model's stub region). Refused? How large
    does the region get, and is it back to its start size within limit_s, the model serving?"""
    import numpy as np
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    from maintainers.reliability.procs import children

    def region_mib() -> float:
        sizes = [0]
        for pid in children(server_pid):
            try:
                maps = Path(f"/proc/{pid}/maps").read_text()
            except OSError:
                continue
            for name in {ln.split()[-1] for ln in maps.splitlines() if " /dev/shm/" in ln}:
                try:
                    sizes.append(Path(name).stat().st_size)
                except OSError:
                    continue
        return max(sizes) / 2**20

    before = region_mib()
    client = grpcclient.InferenceServerClient(grpc_url)
    value = grpcclient.InferInput("INPUT_IMAGE", [1, 1], "BYTES")
    value.set_data_from_numpy(np.array([[b"A" * (mib * 2**20)]], dtype=np.object_))
    try:
        client.infer("food_classifier", [value], client_timeout=300)
        answer = "answered"
    except InferenceServerException as exc:
        answer = f"{exc.status()}: {(exc.message() or '')[:90]}"
    finally:
        del value
        client.close()
    peak = region_mib()
    start = time.monotonic()
    while region_mib() > before + 1 and time.monotonic() - start < limit_s:
        time.sleep(1.0)
    after, took = region_mib(), time.monotonic() - start
    body = {"inputs": [{"name": "INPUT_IMAGE", "shape": [1, 1], "datatype": "BYTES", "data": [""]}]}
    probe = requests.post(f"{http_url}/v2/models/food_classifier/infer", json=body, timeout=60)
    serving = probe.status_code == 400 and "empty" in probe.text  # model.py itself answered
    return {
        "check": f"Triton: one {mib} MiB INPUT_IMAGE element over gRPC",
        "status": answer,
        "region_mib": f"{before:.0f} -> {peak:.0f} -> {after:.0f} after {took:.0f} s",
        "bound": f"refused; the stub's region back to {before:.0f} MiB within {limit_s:.0f} s; "
        "serving",
        "ok": "INVALID_ARGUMENT" in answer and after <= before + 1 and serving,
    }
