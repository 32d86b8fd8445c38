"""The checks that ask a real Triton what a right answer is (issue 42): 5.2's classify must return
what food_classifier answers for the photos, so a pair written into the function is refused with
the server's own answer beside it; 6.3b's load_model is judged by the model being READY.

A real local tritonserver (tests/triton_helpers.py); the solved classify runs as notebook 5
writes it, with tritonclient.
"""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.http as httpclient
from test_exercise_call_sites import the_checks
from triton_helpers import start_local_triton

from servelab import exercises, food11, paths
from servelab.exercises import NotYet

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]


@pytest.fixture(scope="module")
def triton(built_artifacts, tmp_path_factory):
    server = start_local_triton(tmp_path_factory.mktemp("triton_checks"), timeout=90)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def notebook_5(triton):
    """Notebook 5's namespace: its client, the values it hands the checks, its classify solved."""
    exercises.given(TRITON=triton.url)
    client = httpclient.InferenceServerClient(triton.url.split("://")[-1])
    scope = {"exercises": exercises, "httpclient": httpclient, "client": client}
    scope |= {"np": np, "food11": food11, "photo": paths.test_photo()}
    [(solution, name, check)] = the_checks("05_triton_setup", "function")
    assert name == "classify" and '"5.2"' in check
    exec(solution, scope)
    return scope, check


def test_52_the_solved_classify_is_what_the_server_answers(notebook_5):
    scope, check = notebook_5
    exec(check, scope)
    label, probability = scope["answer"]
    assert label in food11.CLASSES and 0 < probability <= 1


def test_52_a_pair_written_into_classify_is_refused_with_the_servers_answer(notebook_5):
    """The tester's: classify returns ('Soup', 0.5) whatever the photo."""
    scope, check = notebook_5

    def classify(photo):
        """(class name, probability) that food_classifier gives one photo file (a Path)."""
        return "Soup", 0.5

    scope["classify"] = classify
    with pytest.raises(NotYet) as caught:
        exec(check, scope)
    said = str(caught.value)
    assert said.startswith(
        "5.2: one photo through tritonclient: classify() returned ('Soup', 0.5000)"
    )
    assert "where food_classifier answers (" in said and said.endswith(
        "return what the server's answer holds."
    )


def test_52_the_label_alone_is_not_the_answer(notebook_5):
    """A classify that asks the server but returns a probability of its own is refused too."""
    scope, check = notebook_5
    solved = scope["classify"]

    def classify(photo):
        """(class name, probability) that food_classifier gives one photo file (a Path)."""
        return solved(photo)[0], 1.0

    scope["classify"] = classify
    with pytest.raises(NotYet, match=r"returned \('\w[^']*', 1\.0000\) for "):
        exec(check, scope)


def test_63b_load_model_is_judged_by_the_model_being_ready(triton):
    exercises.given(TRITON=triton.url)
    assert exercises.result(None, "6.3b") is None  # load_model returns nothing; READY decides
    exercises.given(TRITON="http://127.0.0.1:9")  # nothing answers there: not READY
    with pytest.raises(NotYet, match="load food_classifier again: your answer is None; after"):
        exercises.result(None, "6.3b")
