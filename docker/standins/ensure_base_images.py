"""Make the three registry base images of the lab available to `docker build`: pull each one, and
only where the pull fails, build its local stand-in under the same tag (README.md here).

    python docker/standins/ensure_base_images.py          # what `make test-docker` runs first

The tags are read from the compose files (docker/services.yaml, with docker/.env applied), so the
stand-ins always replace exactly the images the lab's Dockerfiles name. An image that is already
here and is not a stand-in is kept; a stand-in found here is replaced whenever a pull succeeds.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOCKER_DIR = HERE.parent
REPO = DOCKER_DIR.parent
CONSTRAINTS = REPO / "requirements" / "constraints.txt"
ROOTFS_TAG = "servelab-standin/debian:bookworm"
LABEL = "org.servelab.standin"
# build arg in services.yaml -> stand-in folder here
ROLES = {"PYTHON_IMAGE": "python", "TRITON_IMAGE": "tritonserver", "JUPYTER_IMAGE": "jupyter"}
ARG_OF = {role: arg for arg, role in ROLES.items()}
HOST_CA_DIR = Path("/usr/local/share/ca-certificates")


def say(message: str) -> None:
    print(f"[base images] {message}", flush=True)


def docker(
    *args: str, check: bool = True, capture: bool = True, **kw
) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], check=check, text=True, capture_output=capture, **kw)


def base_image_tags() -> dict[str, str]:
    """build arg -> image tag, as the compose files resolve them (docker/.env applied)."""
    # the secrets docker/init_env.sh writes are required (`:?`) but play no part in a build:
    # placeholders let this run on a clean checkout, before docker/.env exists
    env = {
        **os.environ,
        **{
            key: os.environ.get(key) or "unused-for-config"
            for key in ("JUPYTER_TOKEN", "TRITON_ADMIN_KEY")
        },
    }
    out = subprocess.run(
        [
            "docker",
            "compose",
            "-f",
            "docker-compose-fastapi.yaml",
            "-f",
            "docker-compose-triton.yaml",
            "config",
            "--format",
            "json",
        ],
        cwd=DOCKER_DIR,
        env=env,
        check=True,
        text=True,
        capture_output=True,
    ).stdout
    tags = {}
    for service in json.loads(out)["services"].values():
        for arg, value in ((service.get("build") or {}).get("args") or {}).items():
            if arg in ROLES:
                tags[arg] = value
    missing = set(ROLES) - set(tags)
    if missing:
        raise SystemExit(
            f"the compose files name no {', '.join(sorted(missing))}: "
            "docker/services.yaml and this script disagree"
        )
    return tags


def pinned(package: str) -> str:
    match = re.search(rf"^{re.escape(package)}==(\S+)", CONSTRAINTS.read_text(), flags=re.M)
    if not match:
        raise SystemExit(f"{package} is not pinned in {CONSTRAINTS}")
    return match.group(1)


def standin_of(tag: str) -> str | None:
    """What the local image `tag` stands in for, '' for a real image, None if there is none."""
    probe = docker("image", "inspect", "--format", "{{json .Config.Labels}}", tag, check=False)
    if probe.returncode != 0:
        return None
    labels = json.loads(probe.stdout.strip() or "null") or {}
    return labels.get(LABEL, "")


def debian_mirror() -> str:
    """The Debian mirror this host's apt uses (CI machines have their own)."""
    for source in [
        Path("/etc/apt/sources.list"),
        *sorted(Path("/etc/apt/sources.list.d").glob("*")),
    ]:
        if source.is_file():
            match = re.search(
                r"(?:^URIs:\s*|^deb\s+(?:\[[^]]*\]\s+)?)(https?://\S+/debian)\b",
                source.read_text(),
                flags=re.M,
            )
            if match:
                return match.group(1)
    return "http://deb.debian.org/debian"


def build_rootfs() -> None:
    """A minimal Debian bookworm image from debootstrap, trusting this host's extra CA certificates
    (pip and apt inside the builds go through the host's network, which may intercept TLS)."""
    if standin_of(ROOTFS_TAG) is not None:
        return
    if not shutil.which("debootstrap"):
        raise SystemExit(
            "debootstrap is missing: bash scripts/install_docker_engine.sh installs it"
        )
    with tempfile.TemporaryDirectory(prefix="standin-rootfs-") as tmp:
        root = Path(tmp) / "rootfs"
        mirror = debian_mirror()
        say(f"debootstrap bookworm from {mirror} (about 30 s)")
        subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                "--include=ca-certificates",
                "bookworm",
                str(root),
                mirror,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        extra = sorted(HOST_CA_DIR.glob("*.crt")) if HOST_CA_DIR.is_dir() else []
        for cert in extra:
            shutil.copy(cert, root / "usr/local/share/ca-certificates" / cert.name)
        if extra:
            subprocess.run(
                ["chroot", str(root), "update-ca-certificates"],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        # pip uses its own CA bundle unless told to use the system one (which has the host's CAs)
        (root / "etc/pip.conf").write_text("[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n")
        shutil.rmtree(root / "var/cache/apt/archives", ignore_errors=True)
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        subprocess.run(
            ["docker", "import", "--change", f"LABEL {LABEL}=debian:bookworm", "-", ROOTFS_TAG],
            stdin=tar.stdout,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        tar.wait()
    say(f"built {ROOTFS_TAG} (extra CA certificates from the host: {len(extra)})")


def build_standin(role: str, tags: dict[str, str]) -> None:
    """`docker compose build` of one service of compose.yaml (here), tagged as the image it
    replaces."""
    env = {
        **os.environ,
        **tags,
        "DEBIAN_ROOTFS": ROOTFS_TAG,
        "PYTRITON_VERSION": pinned("nvidia-pytriton"),
        "JUPYTERLAB_VERSION": pinned("jupyterlab"),
        "IPYKERNEL_VERSION": pinned("ipykernel"),
    }
    say(f"building the STAND-IN for {tags[ARG_OF[role]]} from docker/standins/{role}/")
    subprocess.run(
        ["docker", "compose", "-f", str(HERE / "compose.yaml"), "build", role], env=env, check=True
    )


def ensure(tags: dict[str, str]) -> dict[str, str]:
    """Each base image present; returns tag -> 'real' or 'STAND-IN'."""
    kinds = {}
    # the Python stand-in first: the Triton stand-in's build stage starts from it
    for arg in ("PYTHON_IMAGE", "TRITON_IMAGE", "JUPYTER_IMAGE"):
        tag, role = tags[arg], ROLES[arg]
        have = standin_of(tag)
        if have == "":
            kinds[tag] = "real"
            continue
        pull = docker("pull", "-q", tag, check=False)
        if pull.returncode == 0:
            kinds[tag] = "real"
            say(f"pulled {tag}")
            continue
        reason = (pull.stderr.strip().splitlines() or ["no reason given"])[-1]
        if have is None:
            say(f"cannot pull {tag} ({reason[:120]})")
            build_rootfs()
            build_standin(role, tags)
        kinds[tag] = "STAND-IN"
    return kinds


def main() -> None:
    tags = base_image_tags()
    kinds = ensure(tags)
    for tag, kind in kinds.items():
        say(f"{kind:8s} {tag}")
    if "STAND-IN" in kinds.values():
        say(
            "stand-ins cannot show: CUDA/GPUs, Triton's C++ onnxruntime backend (a Python-based "
            "one runs model.onnx on the CPU instead); see docker/standins/README.md"
        )


if __name__ == "__main__":
    sys.exit(main())
