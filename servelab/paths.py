"""Where things live in the repository (one place, so no module guesses a path)."""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
STAGING = REPO_ROOT / "models_staging"
MODEL_PTH = Path(os.environ.get("FOOD11_MODEL_PATH", STAGING / "food11.pth"))
# The same weights as a plain state_dict: loadable by an older torch/torchvision (the GPU images)
MODEL_STATE_DICT = MODEL_PTH.with_name("food11_state_dict.pth")
MODEL_ONNX = Path(os.environ.get("FOOD11_ONNX_PATH", STAGING / "model.onnx"))
ARTIFACTS_JSON = STAGING / "artifacts.json"
TEST_IMAGES = STAGING / "test_images"
PERF_INPUT_JSON = STAGING / "perf_input.json"
LAB_DIR = Path(os.environ.get("LAB_STATE_DIR", REPO_ROOT / ".lab"))
RESULTS = Path(os.environ.get("LAB_RESULTS_DIR", REPO_ROOT / "results"))
