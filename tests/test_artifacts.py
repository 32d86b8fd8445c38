"""The model artifacts: ONNX I/O contract, runtimes agree, untrained weights are non-degenerate,
and a trained checkpoint given by path or URL goes through the same loading code."""

import functools
import http.server
import json
import threading

import numpy as np
import onnx
import pytest
import torch

from labstack import artifacts
from servelab import food11
from servelab.paths import MODEL_ONNX, MODEL_PTH
from servelab.serving.runtimes import OnnxClassifier, TorchClassifier


def test_onnx_io_contract(built_artifacts):
    model = onnx.load(str(MODEL_ONNX))
    (inp,), (out,) = model.graph.input, model.graph.output
    assert inp.name == "input" and out.name == "output"
    in_dims = [d.dim_param or d.dim_value for d in inp.type.tensor_type.shape.dim]
    out_dims = [d.dim_param or d.dim_value for d in out.type.tensor_type.shape.dim]
    assert isinstance(in_dims[0], str) and in_dims[1:] == [3, 224, 224]  # dynamic batch axis
    assert isinstance(out_dims[0], str) and out_dims[1:] == [11]


@pytest.mark.slow  # runs the model on a batch: seconds, more on a busy machine
def test_runtimes_agree_on_the_test_images(test_images, built_artifacts):
    batch = np.stack([food11.tensor_from_bytes(p.read_bytes()) for p in test_images])
    torch_logits = TorchClassifier(device="cpu")(batch)
    onnx_logits = OnnxClassifier(device="cpu")(batch)
    spread = float(torch_logits.max() - torch_logits.min())
    assert np.abs(torch_logits - onnx_logits).max() <= 1e-4 * spread
    assert (torch_logits.argmax(1) == onnx_logits.argmax(1)).all()
    check = built_artifacts["onnx_check"]
    assert check["max_abs_diff"] <= check["tolerance"] and check["top1_agree"]


@pytest.mark.slow  # runs the model on a batch: seconds, more on a busy machine
def test_untrained_weights_are_labelled_and_not_degenerate(test_images, built_artifacts):
    assert (
        built_artifacts["weights"] == "untrained" and "UNTRAINED" in built_artifacts["weights_note"]
    )
    batch = np.stack([food11.tensor_from_bytes(p.read_bytes()) for p in test_images])
    probs = food11.softmax(TorchClassifier(device="cpu")(batch))
    assert len(set(probs.argmax(1).tolist())) >= 3, "different images should get different classes"
    assert probs.max(1).std() > 0.05, "probabilities should differ between images, not all be ~1/11"


@pytest.fixture
def state_dict_checkpoint(tmp_path):
    torch.manual_seed(0)
    model = food11.new_model()
    path = tmp_path / "trained.pth"
    torch.save({"state_dict": model.state_dict()}, path)
    return path, model


@pytest.mark.slow  # runs the model on a batch: seconds, more on a busy machine
def test_checkpoint_by_path_loads_through_the_same_code(state_dict_checkpoint):
    path, original = state_dict_checkpoint
    loaded = artifacts.load_checkpoint(artifacts._fetch_checkpoint(str(path)))
    x = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        assert torch.allclose(loaded(x), original.eval()(x), atol=1e-5)


def test_checkpoint_by_url_is_downloaded_once(state_dict_checkpoint, tmp_path, monkeypatch):
    path, _ = state_dict_checkpoint
    monkeypatch.setattr(artifacts, "LAB_DIR", tmp_path / "lab")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(path.parent))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/{path.name}"
        cached = artifacts._fetch_checkpoint(url)
        assert cached.read_bytes() == path.read_bytes()
        assert artifacts.load_checkpoint(cached).classifier[-1].out_features == 11
    finally:
        server.shutdown()


def test_cached_build_is_a_no_op(built_artifacts, capsys):
    before = MODEL_PTH.stat().st_mtime_ns
    meta = artifacts.build()
    assert MODEL_PTH.stat().st_mtime_ns == before and "up to date" in capsys.readouterr().out
    assert meta["sha256"] == json.loads(artifacts.ARTIFACTS_JSON.read_text())["sha256"]


def test_torch_runtime_falls_back_to_the_state_dict(tmp_path, built_artifacts):
    """A whole-model pickle an older torch cannot read (simulated: not a pickle at all) is rebuilt
    from food11_state_dict.pth, and gives the same logits as the real model."""
    from servelab.paths import MODEL_STATE_DICT

    (tmp_path / "food11.pth").write_bytes(b"written by a newer torch")
    (tmp_path / "food11_state_dict.pth").write_bytes(MODEL_STATE_DICT.read_bytes())
    x = np.random.default_rng(0).standard_normal((2, 3, 224, 224)).astype(np.float32)
    rebuilt = TorchClassifier(tmp_path / "food11.pth", device="cpu")(x)
    assert np.allclose(rebuilt, TorchClassifier(device="cpu")(x), atol=1e-5)
    (tmp_path / "food11_state_dict.pth").unlink()
    with pytest.raises(Exception):
        TorchClassifier(tmp_path / "food11.pth", device="cpu")
