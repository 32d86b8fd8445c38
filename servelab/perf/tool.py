"""Where the lab's command-line tools are, and the environment they need to start.

perf_analyzer comes from the `tritonclient[all]==2.51.0` wheel (next to this interpreter) or, in
the Docker stack's Jupyter image, from PATH. The wheel's binary loads libcudart.so.12 even on a
machine without a GPU: the `nvidia-cuda-runtime-cu12` wheel carries it, so its folder goes on
LD_LIBRARY_PATH (the system package libb64-0d provides the other library it needs).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import sysconfig
from pathlib import Path


def venv_bin() -> Path:
    """The folder of the running interpreter (not resolved: a venv's bin/python is a symlink)."""
    return Path(sys.executable).parent


def site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def join_paths(*parts, existing: str | None = None) -> str:
    """A PATH-like value: `parts` first (empty ones skipped), then `existing` without repeats."""
    items = [str(p) for p in parts if p]
    if existing:
        items += [p for p in existing.split(os.pathsep) if p and p not in items]
    return os.pathsep.join(items)


def cuda_runtime_lib() -> Path | None:
    """nvidia/cuda_runtime/lib of the nvidia-cuda-runtime-cu12 wheel (libcudart.so.12), if any."""
    try:
        spec = importlib.util.find_spec("nvidia.cuda_runtime")
    except ModuleNotFoundError:
        spec = None
    if spec is not None and spec.submodule_search_locations:
        lib = Path(list(spec.submodule_search_locations)[0]) / "lib"
        if lib.is_dir():
            return lib
    lib = site_packages() / "nvidia" / "cuda_runtime" / "lib"
    return lib if lib.is_dir() else None


def perf_analyzer_path() -> str:
    """perf_analyzer next to this interpreter (tritonclient's wheel puts it there), else on PATH."""
    candidate = venv_bin() / "perf_analyzer"
    if candidate.is_file():
        return str(candidate)
    found = shutil.which("perf_analyzer")
    if found:
        return found
    raise FileNotFoundError(
        "perf_analyzer not found: pip install 'tritonclient[all]==2.51.0' "
        "(its wheel ships bin/perf_analyzer), or use the lab's Jupyter image"
    )


def perf_analyzer_env(base: dict | None = None) -> dict:
    """The environment perf_analyzer starts with: libcudart's folder and this venv's bin first."""
    env = dict(os.environ if base is None else base)
    env["LD_LIBRARY_PATH"] = join_paths(cuda_runtime_lib(), existing=env.get("LD_LIBRARY_PATH"))
    env["PATH"] = join_paths(venv_bin(), existing=env.get("PATH"))
    return env
