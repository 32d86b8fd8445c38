"""Local mode: the real Triton Inference Server 2.51 and perf_analyzer, without Docker.

The `nvidia-pytriton` wheel carries a complete tritonserver binary, its Python backend and one
Python-backend stub per Python version; `tritonclient[all]==2.51.0` carries perf_analyzer.
This module assembles what they need to run from the venv:

- a backend folder .lab/triton/backends/python/ with libtriton_python.so,
  triton_python_backend_utils.py and the stub built for the running interpreter;
- the environment: LD_LIBRARY_PATH (the wheel's bundled libraries, libpython, CUDA runtime for
  perf_analyzer), PATH with the venv's bin first (the stubs find their site-packages through the
  first python3 on PATH; stub_python() can put another numpy in front for them).

Every part of the lab starts the server with supervised_command() (or service(), the same as a
launcher Service): under its watchdog, the admin key on no command line but tritonserver's own
for its first milliseconds and in no environment but the watchdog's. Nothing here starts it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import secrets
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from labstack.lab_secrets import without_secrets
from servelab.paths import LAB_DIR, REPO_ROOT
from servelab.perf import tool as tools

BACKENDS_DIR = LAB_DIR / "triton" / "backends"
PY_VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"


class TritonNotInstalled(RuntimeError):
    pass


def pytriton_root() -> Path:
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise TritonNotInstalled(
            "nvidia-pytriton is not installed in this environment (pip install "
            "-r requirements/lab.txt -c requirements/constraints.txt)"
        )
    return Path(list(spec.submodule_search_locations)[0]) / "tritonserver"


def tritonserver_binary() -> Path:
    path = pytriton_root() / "bin" / "tritonserver"
    if not path.is_file():
        raise TritonNotInstalled(f"{path} is missing: the nvidia-pytriton wheel is incomplete")
    return path


def bundled_libs() -> Path:
    """nvidia_pytriton.libs/: libtritonserver and the libraries auditwheel bundled with it."""
    root = pytriton_root().parent.parent  # .../site-packages
    libs = root / "nvidia_pytriton.libs"
    if not libs.is_dir():
        raise TritonNotInstalled(f"{libs} is missing: the nvidia-pytriton wheel is incomplete")
    return libs


def libpython_dir() -> Path:
    return Path(sysconfig.get_config_var("LIBDIR") or Path(sys.base_prefix) / "lib")


def _copy_if_changed(src: Path, dst: Path) -> None:
    if (
        dst.is_file()
        and dst.stat().st_size == src.stat().st_size
        and dst.stat().st_mtime >= src.stat().st_mtime
    ):
        return
    tmp = dst.with_name(dst.name + ".tmp")
    shutil.copy2(src, tmp)
    os.replace(tmp, dst)


def backend_directory(dest: Path = BACKENDS_DIR) -> Path:
    """Build (or refresh) dest/python/ for the running Python version; return dest."""
    root = pytriton_root()
    stub = root / "python_backend_stubs" / PY_VERSION / "triton_python_backend_stub"
    if not stub.is_file():
        have = sorted(p.name for p in (root / "python_backend_stubs").iterdir())
        raise TritonNotInstalled(
            f"the pytriton wheel has no Python-backend stub for Python {PY_VERSION} "
            f"(it has {', '.join(have)})"
        )
    python_dir = Path(dest) / "python"
    python_dir.mkdir(parents=True, exist_ok=True)
    for src in (
        root / "backends" / "python" / "libtriton_python.so",
        root / "backends" / "python" / "triton_python_backend_utils.py",
        stub,
    ):
        _copy_if_changed(src, python_dir / src.name)
    (python_dir / "triton_python_backend_stub").chmod(0o755)
    return Path(dest)


def stub_python(folders: list[str], root: Path) -> Path:
    """A venv at root/stub_python whose import path starts with `folders`; its bin/ goes first on
    PATH.

    The Python-backend stub is its own program embedding libpython: it ignores PYTHONPATH (seen:
    its sys.path has none of it) and takes its site-packages from the first `python3` on PATH
    (that venv's pyvenv.cfg). So the way to give the stubs other packages than this venv's is
    another venv first on PATH, whose .pth file lists `folders`, then the repository root and
    this venv's site-packages (everything else the models import).
    """
    import venv

    target = root / "stub_python"
    site = target / "lib" / f"python{PY_VERSION}" / "site-packages"
    if not (target / "bin" / "python3").exists():
        venv.EnvBuilder(with_pip=False, clear=True, symlinks=True).create(target)
    site.mkdir(parents=True, exist_ok=True)
    # plain lines are added in order; the import line adds this venv's site-packages with its own
    # .pth files
    lines = [
        *folders,
        str(REPO_ROOT),
        f"import site; site.addsitedir({str(tools.site_packages())!r})",
    ]
    (site / "lab_stub_path.pth").write_text("\n".join(lines) + "\n")
    return target / "bin"


def server_env(base: dict | None = None, stub_root: Path = BACKENDS_DIR.parent) -> dict:
    """The full environment for tritonserver and its Python-backend stubs: `base` (default this
    process's) without the lab's secrets (lab_secrets.without_secrets), and what the server needs.

    LAB_TRITON_PYTHONPATH (optional, folders separated by ':') goes first on the stubs' import
    path and nowhere else, through stub_python(): a machine whose own numpy is 2.x (the GPU
    reference machine) gives the stubs a numpy < 2 this way without changing what the rest of
    the lab imports.
    """
    env = without_secrets(dict(os.environ if base is None else base))
    env["LD_LIBRARY_PATH"] = tools.join_paths(
        bundled_libs(), libpython_dir(), existing=env.get("LD_LIBRARY_PATH")
    )
    env["PATH"] = tools.join_paths(tools.venv_bin(), existing=env.get("PATH"))
    folders = [f for f in (env.get("LAB_TRITON_PYTHONPATH") or "").split(os.pathsep) if f]
    if folders:
        env["PATH"] = tools.join_paths(stub_python(folders, stub_root), existing=env["PATH"])
    env.setdefault("PYTHONUNBUFFERED", "1")
    # `gpus: [ i ]` is CUDA's device i; CUDA's default order leaves equal GPUs in an unspecified
    # order, PCI bus order is nvidia-smi's and nvtop's (servelab/triton/gpus.py)
    env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    return env


def check_stub_numpy(env: dict) -> str:
    """The numpy version the Python-backend stubs will import; raise if it is 2.x.

    The stubs in nvidia-pytriton 0.7.0 were built for numpy 1.x. With numpy 2 they do not fail
    at load time: BYTES inputs reach model.py as garbage (the stub process then dies on
    `deserialize_bytes_tensor`) and outputs come back with wrong sizes. Seen with the 3.11 and
    3.12 stubs; a clear error at start is better than a server that crashes on the first request.
    """
    # Ask the interpreter the stubs will take their packages from: the first python3 on the
    # server's PATH, without PYTHONPATH (which the stubs ignore).
    python = shutil.which("python3", path=env["PATH"]) or sys.executable
    probe_env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    probe = subprocess.run(
        [python, "-c", "import numpy; print(numpy.__version__)"],
        env={**probe_env, "PYTHONNOUSERSITE": "1"},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    version = probe.stdout.strip()
    if probe.returncode != 0 or not version:
        raise TritonNotInstalled(
            f"the Python-backend stubs cannot import numpy: {probe.stderr.strip()[-500:]}"
        )
    if int(version.split(".")[0]) >= 2:
        raise TritonNotInstalled(
            f"the Python-backend stubs would import numpy {version}; the stubs of nvidia-pytriton "
            "0.7.0 need numpy < 2 (with 2.x every BYTES input arrives corrupted). Install numpy<2 "
            "in this environment, or put a folder holding numpy 1.26 in LAB_TRITON_PYTHONPATH "
            "(read only for the stubs)."
        )
    return version


def shm_prefix(http_port: int) -> str:
    """The name prefix of the /dev/shm regions of the Python-backend stubs of the server on
    http_port: a server started again on that port (after a crash) knows which regions were its
    predecessor's (servelab.serving.triton_watchdog.remove_stale_regions), and no other server's."""
    return f"servelab_triton_{int(http_port)}_"


def server_command(
    repo: Path,
    http_port: int = 8000,
    grpc_port: int = 8001,
    metrics_port: int = 8002,
    backends: Path = BACKENDS_DIR,
    address: str | None = None,
    extra_args: list[str] | None = None,
) -> tuple[list[str], dict]:
    """argv and environment of `tritonserver` serving every model in repo (explicit model control),
    without the admin key: supervised_command() starts it, the one way the lab does.

    Explicit mode + --load-model=*: every model is loaded at start, and later loads/unloads go
    through the repository API (POST /v2/repository/models/<m>/load), as the lab's config
    changes do. As in the Docker stack, a model that fails to load is reported UNAVAILABLE while
    the server serves the others (--exit-on-error=false), and /v2/health/ready means "the server
    is up" (--strict-readiness=false). A short exit timeout frees the ports soon after SIGTERM.
    The three endpoints listen on `address` (default LAB_BIND_HOST, as the launcher's other
    services, else 127.0.0.1). The stubs' shared-memory regions are named with
    shm_prefix(http_port). The environment is this process's without the lab's secrets.
    """
    address = address or os.environ.get("LAB_BIND_HOST") or "127.0.0.1"
    argv = [
        str(tritonserver_binary()),
        f"--model-repository={Path(repo).resolve()}",
        f"--backend-directory={backend_directory(backends).resolve()}",
        "--model-control-mode=explicit",
        "--load-model=*",
        "--exit-on-error=false",
        "--strict-readiness=false",
        f"--http-address={address}",
        f"--http-port={int(http_port)}",
        f"--grpc-address={address}",
        f"--grpc-port={int(grpc_port)}",
        f"--metrics-address={address}",
        f"--metrics-port={int(metrics_port)}",
        "--allow-cpu-metrics=true",
        "--metrics-interval-ms=500",
        "--exit-timeout-secs=5",
        "--log-verbose=0",
        f"--backend-config=python,shm-region-prefix-name={shm_prefix(http_port)}",
        *(extra_args or []),
    ]
    env = server_env(stub_root=Path(backends).parent)
    check_stub_numpy(env)
    return argv, env


def supervised_command(
    repo: Path,
    http_port: int,
    grpc_port: int,
    metrics_port: int,
    health_file: Path | str,
    backends: Path = BACKENDS_DIR,
    admin_key: str | None = None,
    repair: bool = True,
    watchdog_args: list[str] | tuple = (),
    **server_args,
) -> tuple[list[str], dict]:
    """How every part of the lab starts tritonserver (`make up`, the reliability suite, the tests,
    the GPU reference): under servelab.serving.triton_watchdog, which adds the flags restricting
    labenv.RESTRICTED_APIS to the admin header, with the key from its own environment, masks the
    key on tritonserver's command line once the server has read it, and starts the server from
    an environment without it (the stubs run the models' code: none of them holds it). No
    command line ever shows the key but tritonserver's, for its first tens of milliseconds.

    The key is admin_key, else TRITON_ADMIN_KEY (made, and put into this process's environment
    for its own clients, if there is none); it is in the environment returned, the watchdog's.
    repair=False (a measurement, where a repair would hide what happened): the watchdog only
    starts the server that way and waits for it (--no-repair). argv and env of the watchdog."""
    from servelab.labenv import RESTRICTED_APIS

    server_argv, env = server_command(
        repo, http_port, grpc_port, metrics_port, backends, **server_args
    )
    env["TRITON_ADMIN_KEY"] = admin_key or _admin_key()
    extra = [*watchdog_args, *([] if repair else ["--no-repair"])]
    argv = [
        sys.executable,
        "-m",
        "servelab.serving.triton_watchdog",
        f"--url=http://127.0.0.1:{int(http_port)}",
        f"--health-file={health_file}",
        f"--restrict-apis={','.join(RESTRICTED_APIS)}",
        *extra,
        "--",
        *server_argv,
    ]
    return argv, env


def service(
    repo: Path,
    ports: tuple[int, int, int],
    health_file: Path | str,
    name: str = "triton",
    health: str = "/v2/health/ready",
    timeout: float = 300,
    **supervised,
):
    """supervised_command() as a launcher Service (labstack.processes.start): recognised by its
    health file, recording its ports, its stubs' region prefix and its health file."""
    from labstack.processes import Service

    http, grpc, metrics = ports
    argv, env = supervised_command(repo, http, grpc, metrics, health_file, **supervised)
    return Service(
        name,
        argv,
        health=f"http://127.0.0.1:{int(http)}{health}",
        marker=f"--health-file={health_file}",
        env=env,
        timeout=timeout,
        ports={"port": http, "grpc_port": grpc, "metrics_port": metrics},
        extra={"shm_prefix": shm_prefix(http), "health_file": str(health_file)},
    )


def server_pid(watchdog_pid: int) -> int | None:
    """The tritonserver a watchdog (supervised_command) runs now, by its process id, if any."""
    from servelab.serving.triton_procs import descendants

    for pid in descendants(watchdog_pid):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/comm").read_text().strip() == "tritonserver":
                return pid
    return None


def _admin_key() -> str:
    """TRITON_ADMIN_KEY, made (and put into this process's environment) if there is none."""
    if not os.environ.get("TRITON_ADMIN_KEY"):
        os.environ["TRITON_ADMIN_KEY"] = secrets.token_hex(16)
    return os.environ["TRITON_ADMIN_KEY"]
