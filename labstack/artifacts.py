"""Build the lab's model artifacts: food11.pth, model.onnx, test images, perf_analyzer input.

    python -m labstack.artifacts            # build (cached: does nothing if already up to date)
    python -m labstack.artifacts --force    # rebuild

Weights: with no checkpoint given, a seeded *untrained* MobileNetV2 whose BatchNorm statistics
are recomputed on generated images and whose head is scaled, so different images get different
classes (a fresh torchvision model in eval mode answers ~1/11 for everything, which would make
any PyTorch-vs-ONNX comparison meaningless). Latency lessons do not depend on the weights.

A trained checkpoint (whole model or state_dict, 11 classes) is used instead when
FOOD11_CHECKPOINT is set to a file path or an http(s) URL: the same code path builds the ONNX
export, the check and the metadata from it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
import urllib.request
import warnings
from importlib.metadata import version
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from servelab import food11
from servelab.paths import (
    ARTIFACTS_JSON,
    LAB_DIR,
    MODEL_ONNX,
    MODEL_PTH,
    MODEL_STATE_DICT,
    PERF_INPUT_JSON,
    TEST_IMAGES,
)

BUILDER_VERSION = 3  # bump when the recipe changes, so cached artifacts are rebuilt
SEED = int(os.environ.get("FOOD11_SEED", "11"))
ONNX_RELATIVE_TOLERANCE = 1e-4  # of the logits' range; see compare_runtimes

# (file name, size, format): JPEG and PNG, several sizes, one with alpha, one greyscale.
TEST_IMAGE_SPECS = [
    ("plate_640x480.jpg", (640, 480), "JPEG", "RGB"),
    ("bowl_300x300.png", (300, 300), "PNG", "RGB"),
    ("tray_1024x768.jpg", (1024, 768), "JPEG", "RGB"),
    ("snack_224x224.png", (224, 224), "PNG", "RGBA"),
    ("soup_500x375.jpg", (500, 375), "JPEG", "RGB"),
    ("grey_320x240.png", (320, 240), "PNG", "L"),
]


def synthetic_food_image(rng: np.random.Generator, size: tuple[int, int]) -> Image.Image:
    """A generated 'plate of food': background texture, a plate, blobs of colour; not a photo."""
    w, h = size
    base = rng.integers(0, 256, size=3)
    noise = rng.normal(0, 40, size=(h // 8 + 1, w // 8 + 1, 3))
    bg = np.clip(base + noise, 0, 255).astype(np.uint8)
    img = Image.fromarray(bg).resize((w, h), Image.BILINEAR)
    draw = ImageDraw.Draw(img)
    cx, cy, r = w / 2, h / 2, min(w, h) * rng.uniform(0.3, 0.45)
    draw.ellipse(
        [cx - r, cy - r, cx + r, cy + r], fill=tuple(int(v) for v in rng.integers(180, 256, 3))
    )
    for _ in range(int(rng.integers(3, 12))):
        br = r * rng.uniform(0.1, 0.4)
        bx, by = cx + rng.uniform(-r, r) * 0.6, cy + rng.uniform(-r, r) * 0.6
        colour = tuple(int(v) for v in rng.integers(0, 256, 3))
        if rng.random() < 0.5:
            draw.ellipse([bx - br, by - br, bx + br, by + br], fill=colour)
        else:
            draw.rectangle([bx - br, by - br * 0.5, bx + br, by + br * 0.5], fill=colour)
    return img.filter(ImageFilter.GaussianBlur(radius=float(rng.uniform(0, 2))))


def write_test_images(folder: Path, seed: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = []
    for name, size, fmt, mode in TEST_IMAGE_SPECS:
        img = synthetic_food_image(rng, size).convert(mode)
        path = folder / name
        img.save(path, fmt, **({"quality": 90} if fmt == "JPEG" else {}))
        paths.append(path)
    return paths


def _fetch_checkpoint(setting: str) -> Path:
    """A path is used as it is; a URL is downloaded once into .lab/cache/."""
    if setting.startswith(("http://", "https://")):
        cache = (
            LAB_DIR
            / "cache"
            / ("checkpoint-" + hashlib.sha256(setting.encode()).hexdigest()[:16] + ".pth")
        )
        if not cache.exists():
            cache.parent.mkdir(parents=True, exist_ok=True)
            print(f"downloading checkpoint {setting}")
            urllib.request.urlretrieve(setting, cache)
        return cache
    path = Path(setting).expanduser()
    if not path.exists():
        sys.exit(f"FOOD11_CHECKPOINT={setting!r}: no such file")
    return path


def load_checkpoint(path: Path):
    """Whole pickled model or a state_dict, as produced by the food-11 training lab."""
    import torch

    obj = torch.load(path, map_location="cpu", weights_only=False)
    if isinstance(obj, dict):
        state = obj.get("state_dict", obj.get("model_state_dict", obj))
        model = food11.new_model()
        model.load_state_dict(state)
        obj = model
    out_features = obj.classifier[-1].out_features
    if out_features != len(food11.CLASSES):
        sys.exit(
            f"checkpoint {path} has {out_features} outputs; the lab needs {len(food11.CLASSES)}"
        )
    return obj.eval()


def calibrated_untrained_model(seed: int):
    """Seeded random weights, made non-degenerate: BN stats from generated images, scaled head."""
    import torch

    torch.manual_seed(seed)
    model = food11.new_model()
    rng = np.random.default_rng(seed + 1)
    images = [synthetic_food_image(rng, (256, 256)) for _ in range(96)]
    batch = torch.from_numpy(np.stack([food11.preprocess(im) for im in images]))
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.reset_running_stats()
            module.momentum = None  # cumulative average over the calibration batches
    model.train()
    with torch.no_grad():
        for chunk in batch.split(16):
            model(chunk)
    model.eval()
    with torch.no_grad():
        features = torch.nn.functional.adaptive_avg_pool2d(model.features(batch), 1).flatten(1)
        head = model.classifier[1]
        # Centre the features and scale the head so logits spread ~3 across images.
        head.bias -= head.weight @ features.mean(0)
        logits = model.classifier(features)
        head.weight *= 3.0 / float(logits.std())
        head.bias *= 3.0 / float(logits.std())
    return model


def export_onnx(model, path: Path) -> None:
    import torch

    dummy = torch.randn(1, 3, food11.INPUT_SIZE, food11.INPUT_SIZE)
    path.parent.mkdir(parents=True, exist_ok=True)
    with (
        warnings.catch_warnings()
    ):  # the TorchScript exporter is deprecated but still the most robust for this model
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            model,
            dummy,
            str(path),
            input_names=["input"],
            output_names=["output"],
            dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )


def compare_runtimes(model, onnx_path: Path, seed: int) -> dict:
    """Run PyTorch and ONNX Runtime on one random batch of generated photos and compare.

    The tolerance is relative to the logits' spread (1e-4 of their range): both fp32 runtimes
    drift ~2e-4 in absolute terms from a float64 reference on logits spanning ~15, so an
    absolute 1e-4 would reject correct exports. The float64 errors are recorded as evidence.
    """
    import copy

    import onnxruntime as ort
    import torch

    rng = np.random.default_rng(seed + 2)
    x = np.stack([food11.preprocess(synthetic_food_image(rng, (240, 240))) for _ in range(8)])
    with torch.no_grad():
        ref = model(torch.from_numpy(x)).numpy()
        exact = copy.deepcopy(model).double()(torch.from_numpy(x).double()).numpy()
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    got = session.run(["output"], {"input": x})[0]
    spread = float(ref.max() - ref.min())
    diff = float(np.abs(ref - got).max())
    return {
        "max_abs_diff": diff,
        "logit_range": spread,
        "tolerance": ONNX_RELATIVE_TOLERANCE * spread,
        "torch_fp32_vs_fp64": float(np.abs(ref - exact).max()),
        "onnx_fp32_vs_fp64": float(np.abs(got - exact).max()),
        "top1_agree": bool((ref.argmax(1) == got.argmax(1)).all()),
    }


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_key(checkpoint: str | None) -> str:
    # food11.py decodes and pre-processes the images the weights are calibrated on and the recorded
    # test predictions come from: a change there rebuilds
    parts = [
        str(BUILDER_VERSION),
        str(SEED),
        checkpoint or "",
        version("torch"),  # the packages' metadata: importing torch for it cost 5 s
        version("torchvision"),
        sha256(Path(food11.__file__)),
    ]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def up_to_date(key: str) -> bool:
    try:
        meta = json.loads(ARTIFACTS_JSON.read_text())
    except (OSError, ValueError):
        return False
    files = [MODEL_PTH, MODEL_STATE_DICT, MODEL_ONNX, PERF_INPUT_JSON] + [
        TEST_IMAGES / s[0] for s in TEST_IMAGE_SPECS
    ]
    return (
        meta.get("build_key") == key
        and all(f.exists() for f in files)
        and meta.get("sha256", {}).get("food11.pth") == sha256(MODEL_PTH)
    )


def build(force: bool = False) -> dict:
    checkpoint = os.environ.get("FOOD11_CHECKPOINT") or None
    key = build_key(checkpoint)
    if not force and up_to_date(key):
        meta = json.loads(ARTIFACTS_JSON.read_text())
        print(f"artifacts up to date ({meta['weights']} weights) in {MODEL_PTH.parent}")
        return meta
    import torch  # after the check: seconds to import

    start = time.time()
    if checkpoint:
        model = load_checkpoint(_fetch_checkpoint(checkpoint))
        weights = "trained"
    else:
        model = calibrated_untrained_model(SEED)
        weights = "untrained"
    MODEL_PTH.parent.mkdir(parents=True, exist_ok=True)
    torch.save(model, MODEL_PTH)
    torch.save(model.state_dict(), MODEL_STATE_DICT)
    export_onnx(model, MODEL_ONNX)
    check = compare_runtimes(model, MODEL_ONNX, SEED)
    if check["max_abs_diff"] > check["tolerance"] or not check["top1_agree"]:
        sys.exit(f"ONNX export differs from PyTorch: {check}")
    images = write_test_images(TEST_IMAGES, SEED)
    predictions = {}
    with torch.no_grad():
        for path in images:
            logits = model(torch.from_numpy(food11.tensor_from_bytes(path.read_bytes())[None]))[
                0
            ].numpy()
            predictions[path.name] = food11.top_class(logits)
    PERF_INPUT_JSON.write_text(
        json.dumps({"data": [{"INPUT_IMAGE": [food11.encode_file(images[0])]}]})
    )
    meta = {
        "weights": weights,
        "weights_note": (
            "UNTRAINED: seeded random MobileNetV2 (BatchNorm recalibrated, head scaled); "
            "predictions are arbitrary, latency is real"
        )
        if weights == "untrained"
        else f"trained checkpoint from {checkpoint}",
        "checkpoint": checkpoint,
        "seed": SEED,
        "build_key": key,
        "classes": list(food11.CLASSES),
        "onnx_check": check,
        "test_images": [p.name for p in images],
        "test_image_predictions": predictions,
        "torch": torch.__version__,
        "sha256": {"food11.pth": sha256(MODEL_PTH), "model.onnx": sha256(MODEL_ONNX)},
        "build_seconds": round(time.time() - start, 1),
    }
    ARTIFACTS_JSON.write_text(json.dumps(meta, indent=2) + "\n")
    print(
        f"built {weights} artifacts in {meta['build_seconds']} s: ONNX vs PyTorch max |diff| "
        f"{check['max_abs_diff']:.1e} <= {check['tolerance']:.1e} (1e-4 of the logit range "
        f"{check['logit_range']:.1f}); vs float64: torch {check['torch_fp32_vs_fp64']:.1e}, "
        f"onnx {check['onnx_fp32_vs_fp64']:.1e}"
    )
    for name, (label, prob) in predictions.items():
        print(f"  {name:22s} -> {label} ({prob:.2f})")
    return meta


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    build(force=parser.parse_args().force)
