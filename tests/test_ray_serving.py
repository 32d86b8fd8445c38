"""Notebook 9's pieces that need no cluster: its exercises' checker (a deployment's options read
as Ray reads them: every correct spelling accepted, each wrong one answered in one sentence),
the open loop's schedule and windows, the recovery time, and the exact stop of a Ray node's
process session (labstack/ray_cluster.py). The cluster itself: tests/test_notebook_09.py."""

from __future__ import annotations

import http.server
import os
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from ray.serve.config import AutoscalingConfig
from test_notebooks import exercises_of

from labstack import editions, ray_cluster
from servelab import claims, exercises, loadgen, ray_serving
from servelab.exercises import NotYet, judgement
from servelab.loadgen import open_loop
from servelab.serving.ray_app import FoodClassifier

TWO = {"num_replicas": 2, "max_ongoing_requests": 1}
SCALE = {"min_replicas": 1, "max_replicas": 2, "target_ongoing_requests": 1}
SCALE_NEEDS = {
    "max_ongoing_requests": 1,
    **{f"autoscaling_config.{k}": v for k, v in SCALE.items()},
}


def check(answer, needs=TWO):
    return exercises.deployment_options(answer, "9.2", "two replicas", FoodClassifier, needs)


def sentence(answer, needs=TWO) -> str:
    with pytest.raises(NotYet) as caught:
        check(answer, needs)
    text = str(caught.value)
    assert caught.value._render_traceback_() == [text]
    assert "\n" not in text and text.endswith("."), text
    return text


@pytest.mark.parametrize(
    "answer",
    [
        FoodClassifier.options(num_replicas=2, max_ongoing_requests=1),
        {"num_replicas": 2, "max_ongoing_requests": 1},
        {"num_replicas": "2", "max_ongoing_requests": 1.0},  # Ray reads both as 2 and 1
        {**TWO, "max_queued_requests": -1},  # Ray's default, written out
        {**TWO, "ray_actor_options": {"num_cpus": 0.5}},  # the lab's own, written out
    ],
    ids=["options()", "dict", "text and float", "a default", "the lab's actor options"],
)
def test_every_correct_spelling_is_accepted(answer):
    deployment = check(answer)
    assert deployment.num_replicas == 2 and deployment.max_ongoing_requests == 1


@pytest.mark.parametrize(
    "answer, words",
    [
        (..., "replace the `...` in the cell above with FoodClassifier.options(...)"),
        (FoodClassifier, "your options give `num_replicas=1`, the step needs `num_replicas=2`"),
        ({"num_replicas": 2}, "`max_ongoing_requests=5`, the step needs `max_ongoing_requests=1`"),
        ({"num_replicas": 4, "max_ongoing_requests": 1}, "`num_replicas=4`"),
        ({"num_replica": 2}, "unexpected keyword argument 'num_replica'"),
        ({**TWO, "max_queued_requests": 10}, "leave `max_queued_requests` out"),
        ({"num_replicas": 2, "max_ongoing_requests": 0}, "greater than 0"),
        ("num_replicas=2", "not a str"),
    ],
)
def test_a_wrong_answer_is_refused_in_one_sentence(answer, words):
    assert words in sentence(answer)


@pytest.mark.parametrize(
    "autoscaling",
    [SCALE, AutoscalingConfig(**SCALE), {**SCALE, "min_replicas": "1", "max_replicas": 2.0}],
    ids=["dict", "AutoscalingConfig", "other number spellings"],
)
def test_autoscaling_spellings(autoscaling):
    for extra in ({}, {"num_replicas": "auto"}):  # "auto": Ray's own way to say it autoscales
        answer = FoodClassifier.options(
            max_ongoing_requests=1, autoscaling_config=autoscaling, **extra
        )
        check(answer, SCALE_NEEDS)


def test_autoscaling_mistakes():
    def options(**autoscaling):
        return {"max_ongoing_requests": 1, "autoscaling_config": {**SCALE, **autoscaling}}

    # Ray itself would ignore a misspelt field and leave max_replicas at its default of 1
    assert "no field 'max_replica'" in sentence(options(max_replica=3), SCALE_NEEDS)
    assert "`autoscaling_config.max_replicas=4`" in sentence(options(max_replicas=4), SCALE_NEEDS)
    assert "leave `initial_replicas` out" in sentence(options(initial_replicas=2), SCALE_NEEDS)
    fixed = {"num_replicas": 2, **options()}
    assert "not allowed when autoscaling_config" in sentence(fixed, SCALE_NEEDS)
    assert "no `autoscaling_config`" in sentence(TWO, SCALE_NEEDS)


def test_schedule_offers_the_rate_of_each_phase():
    moments = open_loop.schedule([(10, 50), (10, 200)], poisson=True)
    assert 400 < (moments < 10).sum() < 600 and 1800 < (moments >= 10).sum() < 2200
    even = open_loop.schedule([(2, 10)], poisson=False)
    assert np.allclose(np.diff(even), 0.1)


class _Quick(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - the stdlib's name
        self.rfile.read(int(self.headers["Content-Length"]))
        time.sleep(0.01)
        self.send_response(200)
        self.send_header("Server-Timing", "infer;dur=10")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.mark.slow  # 2 s of open-loop load against a server
def test_open_loop_against_a_local_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quick)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/"
        df = open_loop.run(url, b"x" * 1000, phases=[(1, 20), (1, 60)], max_in_flight=16)
    finally:
        server.shutdown()
    row = loadgen.summarize(df)
    assert row["errors"] == 0 and 50 < len(df) < 110
    assert row["request_rate"] == pytest.approx(len(df) / 2)
    # how many left late is the machine's (a busy one sends late): the row counts them truly
    late = (df["late_ms"] > open_loop.LATE_MS).mean() * 100
    assert row["delayed_pct"] == pytest.approx(late) and row["infer_mean_ms"] == 10
    windows = open_loop.over_time(df)
    assert windows["offered_per_s"].iloc[1] > windows["offered_per_s"].iloc[0]
    assert (windows["p95_ms"].dropna() >= 10).all()


def test_recovery_time():
    windows = pd.DataFrame({"t_s": np.arange(1.0, 21.0), "p95_ms": [50.0] * 20})
    windows.loc[5:9, "p95_ms"] = 900  # over the budget from t = 6 to t = 10
    assert ray_serving.recovery_s(windows, 5, 15, budget_ms=500) == 5
    windows.loc[5:, "p95_ms"] = 900  # never back
    assert ray_serving.recovery_s(windows, 5, 15, budget_ms=500) is None
    windows.loc[12:, "p95_ms"] = np.nan  # nothing sent from t = 13: not a recovery
    assert ray_serving.recovery_s(windows, 5, 20, budget_ms=500) is None


@pytest.mark.slow  # about 2 s: until init has reaped what was killed (ps shows it till then)
def test_a_ray_node_is_stopped_with_everything_it_started(tmp_path):
    """What `down` does to a Ray node: its `ray start` and every process in its session, workers
    in process groups of their own included; nothing outside it."""
    script = "import os, subprocess, time\n"
    script += "subprocess.Popen(['sleep', '300'], preexec_fn=os.setpgrp)\ntime.sleep(300)"
    leader = subprocess.Popen(["python3", "-c", script], start_new_session=True)
    outsider = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:

        def sleeping() -> bool:  # the child has become `sleep` (not the fork before its exec)
            return any(
                Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep")
                for pid in ray_cluster.session_members(leader.pid)
                if Path(f"/proc/{pid}/cmdline").exists()
            )

        deadline = time.time() + 20
        while not sleeping() and time.time() < deadline:
            time.sleep(0.1)
        members = ray_cluster.session_members(leader.pid)
        assert len(members) == 2, members  # the leader and its child in a group of its own
        # reaped here as soon as it dies, as init reaps a `ray start` whose launcher has exited
        threading.Thread(target=leader.wait, daemon=True).start()
        ray_cluster.stop_sessions([leader.pid], grace=0.2)
        assert ray_cluster.session_members(leader.pid) == []
        assert outsider.poll() is None
    finally:
        outsider.kill()
        leader.kill()
    folder = ray_cluster.temp_dir()
    ray_cluster.remove_temp_dir(folder)
    assert not os.path.exists(folder)


def test_ray_starts_only_behind_a_folder_of_the_labs_user_alone(tmp_path):
    """Ray opens its own folders to everyone (0777, no sticky bit): both nodes' `ray start` get a
    `--temp-dir` inside the cluster's 0700 folder, and the wrapper refuses one without it."""
    from servelab.serving.ray_loopback import private_parent

    folder = ray_cluster.temp_dir()
    try:
        assert oct(os.stat(folder).st_mode & 0o777) == "0o700"
        head = ray_cluster.head_service(folder)
        record = {"temp_dir": folder, "gcs_port": 1}
        for argv in (head.argv, ray_cluster.node_service(record).argv):
            assert f"--temp-dir={folder}/ray" in argv, argv
            assert private_parent(argv) is None
    finally:
        ray_cluster.remove_temp_dir(folder)
    assert not os.path.exists(folder)
    opened = tmp_path / "open"
    opened.mkdir(mode=0o755)
    os.chmod(opened, 0o755)
    (tmp_path / "link").symlink_to(opened)
    for argv, why in (
        (["start", "--head"], "/tmp/ray"),
        ([f"--temp-dir={opened}/ray"], "not a folder of this user's alone"),
        ([f"--temp-dir={tmp_path}/link/ray"], "not a folder of this user's alone"),
        ([f"--temp-dir={tmp_path}/missing/ray"], "No such file"),
    ):
        assert why in (private_parent(argv) or ""), argv


def test_the_student_edition_stops_first_at_decision_9_1():
    """Run All of the student edition stops at decision 9.1's check, with one sentence (the slow
    test runs the solved edition only: the cluster's minutes are spent once)."""
    _, _, check = exercises_of(editions.source_of("09_ray_serve_cluster"))[0]
    assert check.startswith("ongoing = judgement.fewest_near_best(") and '"9.1"' in check, check
    measured = {1: claims.Measured.exact(20.0), 2: claims.Measured.exact(30.0)}
    with pytest.raises(NotYet) as caught:
        judgement.fewest_near_best(..., "9.1", "the max_ongoing_requests of each replica", measured)
    text = str(caught.value)
    assert caught.value._render_traceback_() == [text] and "\n" not in text
    assert text.startswith("9.1: ") and "max_ongoing_requests" in text and "..." in text, text


@pytest.mark.slow
def test_the_batched_deployment_answers_each_request_as_one_at_a_time_would(monkeypatch):
    """BatchedFoodClassifier (the three-way comparison's Ray Serve with @serve.batch) in a plain
    event loop, Ray's replica context stood in for: requests sent together run in batches of at
    most max_batch_size, each answered with its own class (the unbatched model's), its batch's
    size in Server-Timing; a body of the wrong size is refused."""
    import asyncio
    import importlib.util
    import json
    import types

    import ray
    from ray import serve

    from servelab import food11
    from servelab.serving.runtimes import OnnxClassifier

    # a copy of the module of its own: @serve.batch keeps its queue on the decorated function,
    # and a queue started here would travel with the class when a later test deploys it
    spec = importlib.util.find_spec("servelab.serving.ray_app")
    ray_app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ray_app)

    context = types.SimpleNamespace(get_node_id=lambda: "abcdef0123456789")
    replica = types.SimpleNamespace(
        _deployment_config=types.SimpleNamespace(max_ongoing_requests=16)
    )
    monkeypatch.setattr(ray, "get_gpu_ids", lambda: [])
    monkeypatch.setattr(ray, "get_runtime_context", lambda: context)
    monkeypatch.setattr(serve, "get_replica_context", lambda: replica)
    batched = ray_app.BatchedFoodClassifier.func_or_class(
        max_batch_size=4, batch_wait_timeout_s=0.2
    )

    class Request:
        def __init__(self, body: bytes):
            self._body = body

        async def body(self) -> bytes:
            return self._body

    images = [np.random.default_rng(i).random(ray_app.IMAGE_SHAPE, np.float32) for i in range(6)]

    async def send():
        answers = await asyncio.gather(*(batched(Request(x.tobytes())) for x in images))
        refused = await batched(Request(b"x"))
        return answers, refused

    answers, refused = asyncio.run(send())
    sizes = [int(float(a.headers["Server-Timing"].split("batch;dur=")[1])) for a in answers]
    assert sorted(sizes) == [2, 2, 4, 4, 4, 4]  # six requests at once: a batch of 4, then 2
    alone = OnnxClassifier()
    expected = [food11.top_class(alone(x)[0])[0] for x in images]
    assert [json.loads(a.body)["label"] for a in answers] == expected
    assert refused.status_code == 400 and b"602112 bytes" in refused.body
