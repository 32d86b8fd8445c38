"""Safe defaults: loopback binding in local mode, Jupyter tokens, non-root containers, upload caps,
no secrets.

The checks are reliability.safe_defaults.checks() (section 4 of docs/reliability.md); every
one must pass. The listening addresses of running services: test_fuzz_services.py,
test_fuzz_triton.py.
"""

import os
import subprocess
from pathlib import Path

import pytest

from maintainers.reliability import safe_defaults
from servelab.paths import REPO_ROOT

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def checks() -> list[tuple[str, bool, str]]:
    """Run when a test asks, not at import: collecting the suite runs no check."""
    return safe_defaults.checks()


def test_every_safe_default_holds(checks):
    for check, ok, detail in checks:
        print(f"{'pass' if ok else 'FAIL'}  {check}: {detail}")
    failed = [f"{check}: {detail}" for check, ok, detail in checks if not ok]
    assert not failed, "\n".join(failed)


def test_every_dockerfile_is_checked_for_its_user(checks):
    """Every Dockerfile in the tree, at any depth (not the checks' own glob), has its user check."""
    checked = {c for c, _, _ in checks if c.endswith("runs as a non-root user")}
    # the stand-ins of registry base images (tests only) run as their originals do
    in_tree = {
        name
        for name in safe_defaults.repository_files(REPO_ROOT)
        if "Dockerfile" in Path(name).name
        and not name.endswith(".dockerignore")
        and not name.startswith("docker/standins/")
    }
    assert len(safe_defaults.dockerfiles()) == 4 and len(in_tree) == 4, in_tree
    assert {
        f"{d.relative_to(REPO_ROOT)}: runs as a non-root user" for d in safe_defaults.dockerfiles()
    } <= checked
    assert {f"{name}: runs as a non-root user" for name in in_tree} <= checked


def test_triton_image_uses_the_ngc_non_root_user():
    dockerfile = REPO_ROOT / "docker" / "Dockerfile.triton"
    assert safe_defaults.last_user(dockerfile) == "triton-server"
    text = dockerfile.read_text()
    assert text.index("USER triton-server") > text.rindex("RUN ")  # nothing after it runs as root


def test_user_check_sees_root(tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM python:3.11-slim\nUSER app\nRUN true\nUSER root\n")
    assert safe_defaults.last_user(tmp_path / "Dockerfile") == "root"
    (tmp_path / "Dockerfile").write_text("FROM python:3.11-slim\n")
    assert safe_defaults.last_user(tmp_path / "Dockerfile") is None


def test_lab_bind_host_is_honoured_when_asked():
    out = safe_defaults.launcher_binding({**os.environ, "LAB_BIND_HOST": "0.0.0.0"})
    bind, argv = out.stdout.splitlines()
    assert bind == "0.0.0.0" and "--host 0.0.0.0" in argv


@pytest.mark.parametrize("checkout", [True, False], ids=["git checkout", "plain folder"])
def test_secret_scanner_finds_a_planted_key(tmp_path, checkout):
    """In a checkout and in a plain folder (an export): every file counts unless .gitignore'd."""
    if checkout:
        subprocess.run(["git", "init", "-q", str(tmp_path)], check=True, timeout=30)
    (tmp_path / ".gitignore").write_text("ignored.env\n")
    (tmp_path / "ignored.env").write_text("export OS_" + "PASSWORD=not_scanned\n")
    # planted secrets built at run time, so this file itself stays clean for the scan
    dashes = "-" * 5
    (tmp_path / "id_rsa").write_text(f"{dashes}BEGIN OPENSSH PRIVATE KEY{dashes}\nabc\n")
    (tmp_path / "openrc.sh").write_text("export OS_" + "PASSWORD=hunter22\n")
    (tmp_path / "ok.md").write_text("JUPYTER_TOKEN=${JUPYTER_TOKEN:?set it}\n")
    scanned, findings = safe_defaults.scan_secrets(tmp_path)
    assert scanned == 4 and sorted(f.split(": ", 1)[1] for f in findings) == [
        "OpenStack password",
        "private key",
    ]


@pytest.mark.parametrize(
    ("kind", "prefix", "rest"),
    [
        ("AWS access key", "AKIA", "Q" * 16),
        ("GitHub token", "ghp_", "a1" * 18),
        ("Slack token", "xoxb-", "12345-abcde"),
        ("Hugging Face token", "hf_", "Z9" * 15),
    ],
)
def test_a_token_is_found_where_a_word_starts_and_only_there(tmp_path, kind, prefix, rest):
    token = prefix + rest  # built at run time, so this file itself stays clean for the scan
    (tmp_path / "found.env").write_text(f"KEY={token}\nkey: {token} here\n")
    (tmp_path / "inside.txt").write_text(f"x{token}\n")  # a longer word: not this token
    _, findings = safe_defaults.scan_secrets(tmp_path)
    assert sorted(findings) == [f"found.env:1: {kind}", f"found.env:2: {kind}"]


def test_every_http_server_limits_request_headers(checks):
    """uvicorn's default parser buffered an unfinished header without limit (+513 MiB from 32
    sockets): the lab's uvicorn commands (local and Docker) and waitress carry a limit."""
    (row,) = [c for c in checks if c[0] == "every HTTP server of the lab limits request headers"]
    assert row[1], row[2]
