"""Helper for tests: a real local tritonserver on free ports, stopped for sure afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from labstack import launcher, triton_local
from servelab.triton import model_repository


@dataclass
class LocalTriton:
    proc: subprocess.Popen
    repo: Path
    log: Path
    http_port: int
    grpc_port: int
    metrics_port: int
    ready_seconds: float = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM the server's process group (Python-backend stubs too); SIGKILL after grace."""
        if self.proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue


def start_local_triton(
    workdir: Path, timeout: float = 90.0, populated: bool = False
) -> LocalTriton:
    """Populate workdir/model_repository (local mode, CPU; populated: it is already), start
    tritonserver (under its watchdog, --no-repair: .proc is the watchdog's process, which ends
    with the server's status), wait for READY."""
    repo = workdir / "model_repository"
    if not populated:
        model_repository.populate(repo, mode="local", kind="cpu")
    ports = [launcher.free_port() for _ in range(3)]
    while len(set(ports)) < 3:
        ports = [launcher.free_port() for _ in range(3)]
    # as every part of the lab starts it: the admin key masked, in no environment but the
    # watchdog's, which only starts it here (no repairs: a test sees what the server does)
    argv, env = triton_local.supervised_command(
        repo,
        *ports,
        workdir / "triton_health.json",
        backends=workdir / "backends",
        repair=False,
        address="127.0.0.1",
    )
    log = workdir / "tritonserver.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    server = LocalTriton(proc, repo, log, *ports)
    start = time.monotonic()
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"tritonserver exited with code {proc.returncode}:\n{server.log_tail()}"
                )
            try:
                if requests.get(f"{server.url}/v2/health/ready", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() - start > timeout:
                raise RuntimeError(
                    f"tritonserver not READY after {timeout:.0f} s:\n{server.log_tail()}"
                )
            time.sleep(0.3)
    except BaseException:
        server.stop()
        raise
    server.ready_seconds = time.monotonic() - start
    return server


def infer(url: str, model: str, inputs: dict, outputs: list[str]) -> dict:
    """One request through tritonclient: inputs name -> numpy array (object dtype for BYTES), the
    named outputs back as numpy arrays. Errors are tritonclient's InferenceServerException."""
    import numpy as np
    import tritonclient.http as httpclient
    from tritonclient.utils import np_to_triton_dtype

    client = httpclient.InferenceServerClient(url.split("://")[-1])
    tensors = []
    for name, value in inputs.items():
        value = np.asarray(value)
        tensor = httpclient.InferInput(
            name,
            list(value.shape),
            "BYTES" if value.dtype == object else np_to_triton_dtype(value.dtype),
        )
        tensor.set_data_from_numpy(value)
        tensors.append(tensor)
    result = client.infer(
        model, tensors, outputs=[httpclient.InferRequestedOutput(o) for o in outputs]
    )
    return {o: result.as_numpy(o) for o in outputs}
