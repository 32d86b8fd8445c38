"""Safe defaults, checked from the files and code as they are (static): loopback binding in local
mode, Jupyter tokens, non-root containers, upload caps, no secrets in the repository or images.
Each check: (what, passed, detail). The listening addresses of running services are measured
separately (procs.listen_addresses)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from labstack import launcher
from servelab import food11
from servelab.paths import REPO_ROOT


def _word_starting(prefix: str, rest: str) -> re.Pattern:
    """`\\b{prefix}{rest}`, spelled with the prefix first: Python's re then finds the prefix
    by a fast literal search (a pattern that begins with \\b is tried at every character, 40
    times slower over the repository's 14 MB)."""
    return re.compile(rf"{prefix}(?<=\b{prefix}){rest}")


SECRET_PATTERNS = {
    "private key": re.compile(r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |ENCRYPTED )?PRIVATE KEY-----"),
    "AWS access key": _word_starting("AKIA", r"[0-9A-Z]{16}\b"),
    "GitHub token": _word_starting("gh", r"[pousr]_[A-Za-z0-9]{36,}\b"),
    "Slack token": _word_starting("xox", r"[abpr]-[A-Za-z0-9-]{10,}"),
    "Hugging Face token": _word_starting("hf_", r"[A-Za-z0-9]{30,}\b"),
    "OpenStack password": re.compile(r"OS_PASSWORD\s*=\s*['\"]?[^\s'\"$]{4,}"),
    "application credential secret": re.compile(
        r"OS_APPLICATION_CREDENTIAL_SECRET\s*=\s*['\"]?[^\s'\"$]{4,}"
    ),
    "Jupyter token value": re.compile(r"JUPYTER_TOKEN\s*=\s*['\"]?[0-9a-f]{16,}"),
}
ROOT_USERS = ("root", "0", "0:0")


def git(root: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    """`git *args` on the tree at root. Outside a git checkout (an export, e.g. `git archive`'s),
    against an empty throwaway repository whose work tree is root: every file is then untracked,
    and the .gitignore files still decide which ones count."""
    kwargs = {"capture_output": True, "timeout": 60, **kwargs}
    inside = subprocess.run(
        ["git", "rev-parse", "--is-inside-work-tree"], cwd=root, capture_output=True, timeout=30
    )
    if inside.returncode == 0:
        return subprocess.run(["git", *args], cwd=root, **kwargs)
    with tempfile.TemporaryDirectory() as empty:
        subprocess.run(["git", "init", "-q", empty], check=True, capture_output=True, timeout=30)
        where = [f"--git-dir={Path(empty) / '.git'}", f"--work-tree={root}"]
        return subprocess.run(["git", *where, *args], cwd=root, **kwargs)


def repository_files(root: Path = REPO_ROOT) -> list[str]:
    """Every file git tracks, plus untracked ones not ignored (what the next commit could add),
    relative to root."""
    listed = git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard", check=True)
    return [name.decode(errors="replace") for name in listed.stdout.split(b"\0") if name]


def scan_secrets(root: Path = REPO_ROOT) -> tuple[int, list[str]]:
    """repository_files(root) scanned: (files scanned, 'path:line: kind' findings). The patterns
    above do not match their own source."""
    findings, scanned = [], 0
    for name in repository_files(root):
        path = root / name
        try:
            if not path.is_file() or path.stat().st_size > 5_000_000:
                continue
            text = path.read_text(errors="replace")
        except OSError:
            continue
        scanned += 1
        for kind, pattern in SECRET_PATTERNS.items():
            for m in pattern.finditer(text):
                findings.append(
                    f"{path.relative_to(root)}:{text.count(chr(10), 0, m.start()) + 1}: {kind}"
                )
    return scanned, findings


def dockerfiles(root: Path = REPO_ROOT) -> list[Path]:
    """The lab's own images (docker/Dockerfile.*). The stand-ins in docker/standins/ replace
    registry base images in tests only and run what those images run."""
    return sorted(p for p in root.glob("*/Dockerfile*") if not p.name.endswith(".dockerignore"))


def last_user(dockerfile: Path) -> str | None:
    """The user the image's process runs as: the last USER line (None: the base image's, root
    here)."""
    users = re.findall(r"^USER\s+(\S+)", dockerfile.read_text(), re.M)
    return users[-1] if users else None


def merge_extends(data: dict, folder: Path, load) -> dict:
    """A compose document with each service's `extends: {file, service}` resolved, as Compose does
    for what these checks read: mappings merged key by key, anything else taken from the service."""

    def merge(base, over):
        out = dict(base)
        for key, value in over.items():
            out[key] = (
                merge(out[key], value)
                if isinstance(value, dict) and isinstance(out.get(key), dict)
                else value
            )
        return out

    services = {}
    for name, svc in (data.get("services") or {}).items():
        ext = svc.get("extends") if isinstance(svc, dict) else None
        if ext:
            base = (load(folder / ext["file"]).get("services") or {})[ext["service"]]
            svc = merge(base, {k: v for k, v in svc.items() if k != "extends"})
        services[name] = svc
    return {**data, "services": services}


def _compose_files(root: Path = REPO_ROOT) -> list[tuple[Path, dict]]:
    """The two stacks (docker-compose-*.yaml files with a project name), extends resolved."""
    import yaml

    class Loader(yaml.SafeLoader):  # Compose's own tags (!reset, !override) read as plain values
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)

    def load(path: Path) -> dict:
        return yaml.load(path.read_text(), Loader=Loader) or {}

    stacks = [(p, load(p)) for p in sorted((root / "docker").glob("docker-compose*.yaml"))]
    return [(p, merge_extends(data, p.parent, load)) for p, data in stacks if data.get("name")]


def launcher_binding(env: dict) -> subprocess.CompletedProcess:
    """A fresh interpreter with `env` prints launcher.BIND, then the argv of a FastAPI service."""
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "from labstack import launcher; print(launcher.BIND); "
            "print(' '.join(launcher.fastapi_service(1, 'onnx').argv))",
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def checks() -> list[tuple[str, bool, str]]:
    out = []
    # local mode: what the launcher binds to when nobody asked, in a fresh interpreter
    probe = launcher_binding({k: v for k, v in os.environ.items() if k != "LAB_BIND_HOST"})
    lines = probe.stdout.splitlines()
    bind = lines[0] if lines else probe.stderr[-200:]
    out.append(
        (
            "local mode binds to 127.0.0.1 unless LAB_BIND_HOST is set",
            bind == "127.0.0.1" and len(lines) > 1 and "--host 127.0.0.1" in lines[1],
            f"launcher.BIND = {bind!r} with LAB_BIND_HOST unset; uvicorn gets --host {bind}",
        )
    )
    jupyter = launcher.jupyter_service(1, "t0ken", {})
    out.append(
        (
            "local JupyterLab requires a token, kept off its command line",
            jupyter.env.get("JUPYTER_TOKEN") == "t0ken"
            and not any("t0ken" in a for a in jupyter.argv),
            "JUPYTER_TOKEN=<32 random hex digits> (secrets.token_hex) in its environment; "
            "the command line, readable by every local user, has none",
        )
    )
    # Docker: Jupyter token, users
    for path, data in _compose_files():
        services = data.get("services") or {}
        jup = services.get("jupyter")
        if jup:
            token = str((jup.get("environment") or {}).get("JUPYTER_TOKEN", ""))
            command = (
                " ".join(map(str, jup.get("command") or []))
                if isinstance(jup.get("command"), list)
                else str(jup.get("command") or "")
            )
            out.append(
                (
                    f"{path.name}: Jupyter refuses to start without JUPYTER_TOKEN",
                    token.startswith("${JUPYTER_TOKEN:?")
                    and "token=''" not in command
                    and 'token=""' not in command,
                    f"JUPYTER_TOKEN: {token[:40]}... (':?' = Compose stops if unset or empty)",
                )
            )
        for name, svc in services.items():
            if str(svc.get("user", "")) in ROOT_USERS:
                chown = "CHOWN_EXTRA" in (svc.get("environment") or {})
                out.append(
                    (
                        f"{path.name}: {name} does not keep running as root",
                        chown and name == "jupyter",
                        "user: root only so the image's start script can take the host user's id "
                        "(NB_UID) and chown the mounted folders (CHOWN_EXTRA), then it drops to "
                        "that user"
                        if chown
                        else "user: root",
                    )
                )
    images = dockerfiles()
    for dockerfile in images:
        user = last_user(dockerfile)
        out.append(
            (
                f"{dockerfile.relative_to(REPO_ROOT)}: runs as a non-root user",
                user is not None and user not in ROOT_USERS,
                f"last USER: {user or 'none (the base image: root)'}",
            )
        )
    # upload caps
    if str(REPO_ROOT) not in sys.path:  # flask_app/ is a top-level folder of the repository
        sys.path.insert(0, str(REPO_ROOT))
    from flask_app import app as flask_module
    from servelab.serving import inference_api

    cap = flask_module.app.config.get("MAX_CONTENT_LENGTH") or 0
    out.append(
        (
            "Flask caps the upload size",
            0 < cap <= food11.MAX_IMAGE_BYTES + 1024 * 1024,
            f"MAX_CONTENT_LENGTH = {cap:,} bytes (413 page above it)",
        )
    )
    out.append(
        (
            "FastAPI caps the request body",
            0 < inference_api.MAX_BODY_BYTES < 16 * 1024 * 1024,
            f"MAX_BODY_BYTES = {inference_api.MAX_BODY_BYTES:,} bytes (413 above)",
        )
    )
    out.append(
        (
            "decoding caps file size and pixels (all services)",
            food11.MAX_IMAGE_BYTES <= 16 * 2**20 and food11.MAX_IMAGE_PIXELS <= 50_000_000,
            f"{food11.MAX_IMAGE_BYTES:,} bytes per file, {food11.MAX_IMAGE_PIXELS:,} pixels (413 "
            "above)",
        )
    )
    # request headers: every HTTP server the lab runs cuts off an endless header
    from flask_app import serve as flask_serve

    uvicorn_local = " ".join(launcher.fastapi_service(1, "onnx").argv)
    limit = " ".join(inference_api.UVICORN_ARGS)
    docker_cmds = re.findall(
        r"^CMD \[(.*?)\]", (REPO_ROOT / "docker" / "Dockerfile.fastapi").read_text(), re.M | re.S
    )
    docker_ok = bool(docker_cmds) and all(
        '"--h11-max-incomplete-event-size"' in c and '"h11"' in c for c in docker_cmds
    )
    waitress_ok = 0 < flask_serve.MAX_HEADER_BYTES <= 256 * 1024 and (
        "max_request_header_size=MAX_HEADER_BYTES" in Path(flask_serve.__file__).read_text()
    )
    out.append(
        (
            "every HTTP server of the lab limits request headers",
            limit in uvicorn_local and docker_ok and waitress_ok,
            f"uvicorn (local and Docker): {limit} (431 above); waitress: "
            f"max_request_header_size={flask_serve.MAX_HEADER_BYTES:,}",
        )
    )
    # secrets: the token file is ignored, image build contexts are allow-lists, nothing in the files
    ignored = git(REPO_ROOT, "check-ignore", "-q", "docker/.env").returncode == 0
    out.append(
        ("docker/.env (the Jupyter token) is git-ignored", ignored, "git check-ignore docker/.env")
    )
    leaky = []
    for ignore in sorted(
        REPO_ROOT.glob("*/Dockerfile*.dockerignore")
    ):  # the lab's images (not stand-ins)
        lines = [
            ln.strip()
            for ln in ignore.read_text().splitlines()
            if ln.strip() and not ln.startswith("#")
        ]
        if (
            not lines
            or lines[0] != "*"
            or any(
                ln.startswith("!") and (".env" in ln or ln in ("!docker/", "!.", "!.lab/"))
                for ln in lines
            )
        ):
            leaky.append(str(ignore.relative_to(REPO_ROOT)))
    missing = [
        str(d.relative_to(REPO_ROOT))
        for d in images
        if not d.with_name(d.name + ".dockerignore").is_file()
    ]
    out.append(
        (
            "Docker build contexts are allow-lists (no .env or .lab/ in an image)",
            not leaky and not missing,
            "every Dockerfile has a <Dockerfile>.dockerignore that starts with '*' and re-includes "
            "only code"
            + (f"; not: {leaky}" if leaky else "")
            + (f"; without one: {missing}" if missing else ""),
        )
    )
    scanned, findings = scan_secrets()
    out.append(
        (
            "no secrets in the repository",
            bool(scanned) and not findings,
            f"{scanned} files scanned for {len(SECRET_PATTERNS)} kinds of secret; "
            + (", ".join(findings[:5]) if findings else "none found"),
        )
    )
    return out
