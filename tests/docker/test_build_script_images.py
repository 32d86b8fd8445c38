"""docker/build_images.sh with a real Docker engine: what notebook 2 starts in the background on
a node is what the stacks' `up` then uses, unchanged, and a failed build is reported by `wait`
with its log. (Its logic without Docker: tests/test_build_images.py.)

This module runs first (file order): its builds are the build cache's after `make docker-images`,
which builds with the same script.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from compose_stack import DOCKER_DIR, Stack, build_script

pytestmark = pytest.mark.slow  # builds images and creates containers

# each image the script builds, by the stack (and FastAPI runtime) whose `up` uses it
IMAGES = {
    ("fastapi", "pt"): ["servelab/fastapi-pt:lab", "servelab/flask:lab", "servelab/jupyter:lab"],
    ("fastapi", "onnx"): [
        "servelab/fastapi-onnx:lab",
        "servelab/flask:lab",
        "servelab/jupyter:lab",
    ],
    ("triton", "pt"): ["servelab/triton:lab", "servelab/flask:lab", "servelab/jupyter:lab"],
}


def layers(ref: str) -> list[str]:
    """An image's file-system layers ([] if there is none): what a build makes. (Its id also
    covers Compose's labels, e.g. the project that built it last: the stacks share the Flask and
    Jupyter images, so `up` of one stack relabels them, with no layer built.)"""
    out = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{json .RootFS.Layers}}", ref],
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout) if out.returncode == 0 else []


def test_what_the_background_build_makes_is_what_up_uses_without_rebuilding(settings, tmp_path):
    started = build_script("start", settings=settings, state=tmp_path)
    assert started.returncode == 0 and "in the background" in started.stdout, started.stderr
    waited = build_script("wait", settings=settings, state=tmp_path)
    assert waited.returncode == 0, waited.stdout + (tmp_path / "build_images.log").read_text()
    assert waited.stdout.count("Built: ") == 3
    built = {tag: layers(tag) for tags in IMAGES.values() for tag in tags}
    assert all(built.values()), built
    for (name, backend), tags in IMAGES.items():
        for each in ("fastapi", "triton"):  # both use the container names flask and jupyter
            Stack(each, settings).down()
        stack = Stack(name, settings)
        env = {**settings.process_env, "FASTAPI_BACKEND": backend}
        up = subprocess.run(  # `up --build` as the notebooks run it, without starting anything
            stack.argv("up", "--build", "--no-start"),
            cwd=DOCKER_DIR,
            env=env,
            text=True,
            capture_output=True,
            timeout=1800,
        )
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        assert {tag: layers(tag) for tag in tags} == {tag: built[tag] for tag in tags}, (
            f"`up --build` of the {name} stack ({backend}) built a layer again"
        )
        created = subprocess.run(
            stack.argv("ps", "-a", "--format", "{{.Image}}"),
            cwd=DOCKER_DIR,
            env=env,
            capture_output=True,
            text=True,
        ).stdout.split()
        assert sorted(created) == sorted(tags), (name, backend, created)  # what `up` uses
        stack.down()


def test_wait_reports_a_failed_build_with_its_log(settings, tmp_path):
    """Base images no registry has (a registry that refuses at once): every part fails; the
    images built before stay as they were."""
    before = {tag: layers(tag) for tags in IMAGES.values() for tag in tags}
    missing = {
        name: "localhost:1/servelab-test/missing:none"
        for name in ("PYTHON_IMAGE", "TRITON_IMAGE", "JUPYTER_IMAGE")
    }
    assert build_script("start", settings=settings, state=tmp_path, **missing).returncode == 0
    failed = build_script("wait", "fastapi", settings=settings, state=tmp_path)
    assert failed.returncode == 1, failed.stdout
    log = tmp_path / "build_images.log"
    assert f"Its log: {log}" in failed.stdout and "builds what is missing" in failed.stdout
    assert "localhost:1/servelab-test/missing" in log.read_text()
    assert build_script("wait", settings=settings, state=tmp_path).returncode == 1
    assert {tag: layers(tag) for tag in before} == before
