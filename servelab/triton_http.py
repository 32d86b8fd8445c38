"""A small Triton HTTP/REST client (KServe v2 protocol, binary tensor extension) on top of requests.

Introduced in notebook 6.

Used by the Flask UI and the notebooks' single-request examples; perf_analyzer does the load.
Thread-safe (one requests call per inference), unlike geventhttpclient-based tritonclient.http.
"""
from __future__ import annotations

import json
import struct

import numpy as np
import requests

DTYPES = {"FP32": np.float32, "FP16": np.float16, "INT64": np.int64, "INT32": np.int32, "UINT8": np.uint8}


class TritonError(RuntimeError):
    """Triton answered with an error (the message is Triton's own)."""


def _encode_bytes(items: list[bytes]) -> bytes:
    return b"".join(struct.pack("<I", len(b)) + b for b in items)


def _decode_bytes(raw: bytes) -> list[bytes]:
    out, i = [], 0
    while i < len(raw):
        (n,) = struct.unpack_from("<I", raw, i)
        out.append(raw[i + 4:i + 4 + n])
        i += 4 + n
    return out


def infer(url: str, model: str, inputs: dict, outputs: list[str], timeout: float = 30.0,
          version: str = "") -> dict:
    """inputs: name -> np.ndarray (numeric) or list[bytes|str] with a leading batch dim. Returns name -> array/list."""
    header_inputs, blobs = [], []
    for name, value in inputs.items():
        if isinstance(value, np.ndarray) and value.dtype != object:
            datatype = next(k for k, v in DTYPES.items() if np.dtype(v) == value.dtype)
            blob, shape = np.ascontiguousarray(value).tobytes(), list(value.shape)
        else:  # BYTES: a batch of one string each -> shape [batch, 1]
            items = [v.encode() if isinstance(v, str) else bytes(v) for v in value]
            datatype, blob, shape = "BYTES", _encode_bytes(items), [len(items), 1]
        header_inputs.append({"name": name, "shape": shape, "datatype": datatype,
                              "parameters": {"binary_data_size": len(blob)}})
        blobs.append(blob)
    header = json.dumps({"inputs": header_inputs,
                         "outputs": [{"name": o, "parameters": {"binary_data": True}} for o in outputs]}).encode()
    path = f"{url.rstrip('/')}/v2/models/{model}" + (f"/versions/{version}" if version else "") + "/infer"
    resp = requests.post(path, data=header + b"".join(blobs), timeout=timeout,
                         headers={"Inference-Header-Content-Length": str(len(header)),
                                  "Content-Type": "application/octet-stream"})
    if resp.status_code != 200:
        try:
            message = resp.json().get("error", resp.text)
        except ValueError:
            message = resp.text
        raise TritonError(f"{model}: HTTP {resp.status_code}: {message}")
    hlen = int(resp.headers.get("Inference-Header-Content-Length", len(resp.content)))
    meta = json.loads(resp.content[:hlen])
    result, offset = {}, hlen
    for out in meta["outputs"]:
        size = out.get("parameters", {}).get("binary_data_size")
        if size is None:  # JSON-encoded output
            data = out["data"]
        else:
            raw = resp.content[offset:offset + size]
            offset += size
            data = _decode_bytes(raw) if out["datatype"] == "BYTES" else \
                np.frombuffer(raw, dtype=DTYPES[out["datatype"]]).reshape(out["shape"])
        result[out["name"]] = data
    return result


def model_metadata(url: str, model: str, timeout: float = 5.0) -> dict:
    resp = requests.get(f"{url.rstrip('/')}/v2/models/{model}", timeout=timeout)
    if resp.status_code != 200:
        raise TritonError(f"{model}: HTTP {resp.status_code}: {resp.text}")
    return resp.json()


def model_ready(url: str, model: str, timeout: float = 5.0) -> bool:
    try:
        return requests.get(f"{url.rstrip('/')}/v2/models/{model}/ready", timeout=timeout).status_code == 200
    except requests.RequestException:
        return False
