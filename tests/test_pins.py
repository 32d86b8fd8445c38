"""Versions are pinned in one place, requirements/constraints.txt; other requirement files list
names only."""

import re
import subprocess

from servelab.paths import REPO_ROOT

CONSTRAINTS = REPO_ROOT / "requirements" / "constraints.txt"
NAME = re.compile(r"^([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*(.*)$")


def _lines(path):
    return [
        line.split("#")[0].strip()
        for line in path.read_text().splitlines()
        if line.split("#")[0].strip()
    ]


def _norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def pins() -> dict:
    out = {}
    for line in _lines(CONSTRAINTS):
        name, extras, spec = NAME.match(line).groups()
        assert spec.startswith("==") and not extras, (
            f"constraints.txt: {line!r} must be NAME==VERSION"
        )
        out[_norm(name)] = spec[2:]
    return out


def requirement_files():
    files = sorted((REPO_ROOT / "requirements").glob("*.txt")) + sorted(
        REPO_ROOT.glob("*/requirements.txt")
    )
    return [f for f in files if f != CONSTRAINTS]


def test_every_requirement_is_pinned_in_constraints_and_only_there():
    pinned = pins()
    files = requirement_files()
    assert any(f.name == "lab.txt" for f in files)
    for path in files:
        for line in _lines(path):
            if line.startswith("-"):
                continue
            name, _extras, spec = NAME.match(line).groups()
            assert not spec, (
                f"{path.relative_to(REPO_ROOT)}: {line!r} carries a version; pin it in "
                "constraints.txt"
            )
            assert _norm(name) in pinned, (
                f"{path.relative_to(REPO_ROOT)}: {name} has no pin in constraints.txt"
            )


def test_the_triton_pairing_that_works():
    pinned = pins()
    assert (
        pinned["tritonclient"] == "2.51.0"
    )  # perf_analyzer that runs on glibc 2.36, same as the server
    assert pinned["nvidia-pytriton"] == "0.7.0"  # carries Triton 2.51
    assert pinned["numpy"].startswith("1.")  # numpy 2 broke responses of the wheel's Python backend
    assert int(pinned["protobuf"].split(".")[0]) < 5  # tritonclient[grpc] 2.51 needs protobuf < 5


def test_perf_analyzer_is_the_servers_release():
    """tritonclient's perf_analyzer, not the version-less one triton-model-analyzer's wheel
    writes over it (the Makefile installs tritonclient again after requirements/lab.txt)."""
    from servelab.perf import tool as tools

    done = subprocess.run(
        [tools.perf_analyzer_path(), "--version"],
        env=tools.perf_analyzer_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Perf Analyzer Version 2.51.0" in done.stdout + done.stderr, done.stderr
