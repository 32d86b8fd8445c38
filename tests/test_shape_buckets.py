"""One ONNX Runtime session per batch size (servelab/serving/shape_buckets.py) and the check that
a batch-size change does not stall (labstack/batch_switch.py). The stall itself only happens on
ONNX Runtime's CUDA provider (measured on the H100: docs/results/); here, on the CPU, the tests
check what makes the fix a fix: every session only ever sees its own shape, and the padded answers
are the unpadded ones."""

import json
import time

import numpy as np
import onnxruntime as ort
import pytest

from labstack import batch_switch
from servelab.paths import MODEL_ONNX
from servelab.serving.runtimes import OnnxClassifier
from servelab.serving.shape_buckets import BucketedSessions, bucket_sizes


def test_bucket_sizes_are_powers_of_two_the_preferred_and_the_largest():
    assert bucket_sizes(16) == [1, 2, 4, 8, 16]
    assert bucket_sizes(16, preferred=[4, 6, 8]) == [1, 2, 4, 6, 8, 16]
    assert bucket_sizes(12, preferred=[20]) == [1, 2, 4, 8, 12]  # a size above the largest: no
    assert bucket_sizes(1) == [1]
    with pytest.raises(ValueError, match="at least 1"):
        bucket_sizes(0)


class ShapeRecorder:
    """An InferenceSession that remembers the batch sizes it was asked to run."""

    def __init__(self):
        self.session = ort.InferenceSession(str(MODEL_ONNX), providers=["CPUExecutionProvider"])
        self.seen: set[int] = set()

    def get_inputs(self):
        return self.session.get_inputs()

    def run(self, names, feeds):
        self.seen.add(len(feeds["input"]))
        return self.session.run(names, feeds)


@pytest.mark.slow  # six sessions of the model and a few batches: seconds on a busy machine
def test_each_session_sees_one_shape_and_padding_changes_no_answer(built_artifacts):
    made: list[ShapeRecorder] = []

    def make():
        made.append(ShapeRecorder())
        return made[-1]

    buckets = BucketedSessions(make, bucket_sizes(16, preferred=[6]))
    one = ort.InferenceSession(str(MODEL_ONNX), providers=["CPUExecutionProvider"])
    batch = np.random.default_rng(0).random((21, 3, 224, 224), dtype=np.float32)
    for n in (16, 5, 1, 7, 6, 3, 21):  # 21: a chunk of 16, then 5 padded to 6
        got = buckets(batch[:n])
        want = one.run(["output"], {"input": batch[:n]})[0]
        assert got.shape == (n, 11)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert [r.seen for r in made] == [{s} for s in buckets.sizes]  # the fix: one shape each
    assert [buckets.size_for(n) for n in (1, 3, 5, 6, 7, 9, 16, 40)] == [1, 4, 6, 6, 8, 16, 16, 16]


def test_on_the_cpu_provider_one_session_serves_every_size(built_artifacts):
    classifier = OnnxClassifier(device="cpu", batch_sizes=[1, 2, 4, 8, 16])
    assert classifier.device == "CPUExecutionProvider" and classifier.buckets is None
    assert classifier(np.zeros((3, 3, 224, 224), dtype=np.float32)).shape == (3, 11)


def test_the_check_fails_a_runtime_that_stalls_on_a_size_change():
    last = {}

    def stalls(batch):  # 40 ms whenever the size differs from the previous call, else 2 ms
        time.sleep(0.040 if last.get("n", len(batch)) != len(batch) else 0.002)
        last["n"] = len(batch)

    def steady(batch):
        time.sleep(0.005)

    assert batch_switch.measure(stalls, batch_switch.MIXED, rounds=1)["ratio"] > 5
    assert batch_switch.measure(steady, batch_switch.MIXED, rounds=1)["ratio"] < 2


@pytest.mark.slow  # the lab's model, mixed and grouped: a few seconds on two cores
def test_runtime_check_runs_on_this_machine_and_records_its_rows(built_artifacts, tmp_path):
    out = tmp_path / "switch.json"
    rc = batch_switch.main(["runtime", "--rounds", "1", "--out", str(out)])
    data = json.loads(out.read_text())
    (name,) = data["rows"]  # no CUDA provider here: only the lab's row
    assert "OnnxClassifier (CPUExecutionProvider" in name
    assert data["sizes"] == batch_switch.MIXED and data["rows"][name]["calls"]["mixed"] == 12
    assert rc == (0 if data["verdict"] else 1)
