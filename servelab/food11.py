"""The Food-11 model as every part of the lab sees it: its classes, pre- and post-processing
(shared by every service, Triton model and the Flask UI), its architecture, and which weights
were built.

Introduced in notebook 4.

Importing this needs only numpy and Pillow (torch is imported inside new_model() alone), so the
Flask app and Triton's Python backend can use it without a deep-learning framework.
"""

from __future__ import annotations

import base64
import binascii
import json

import numpy as np
from PIL import Image

from servelab import decode_budget, image_decode
from servelab.image_decode import BadInput
from servelab.paths import ARTIFACTS_JSON

CLASSES = (
    "Bread",
    "Dairy product",
    "Dessert",
    "Egg",
    "Fried food",
    "Meat",
    "Noodles/Pasta",
    "Rice",
    "Seafood",
    "Soup",
    "Vegetable/Fruit",
)
INPUT_SIZE = 224
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)

# What decoding one upload may cost: every limit and its reason is in servelab.decode_budget; the
# ones the services and the reliability suite name are importable from here too (the decoding
# itself, within those limits: servelab.image_decode).
MAX_IMAGE_BYTES = decode_budget.MAX_IMAGE_BYTES  # encoded file size
MAX_IMAGE_PIXELS = decode_budget.MAX_IMAGE_PIXELS  # width * height declared in the header
MAX_BASE64_CHARS = (MAX_IMAGE_BYTES * 4) // 3 + 4  # the base64 text of the largest file
# ... with the line breaks of the `base64` command (one per 76 characters): a longer text is
# refused by its length alone, before anything copies it
MAX_BASE64_TEXT = MAX_BASE64_CHARS * 78 // 76 + 1024


def decode_base64(text: str) -> bytes:
    """Strict base64 decode (a data-URL prefix is accepted) with messages a student can act on."""
    if not isinstance(text, str):
        raise BadInput(
            "'image' must be a string holding a base64-encoded JPEG, PNG or WebP file.", 422
        )
    if text.startswith("data:") and "," in text:
        text = text.split(",", 1)[1]
    text = "".join(text.split())  # line breaks from `base64` CLI output are fine
    if not text:
        raise BadInput("'image' is empty: send the base64 encoding of a JPEG, PNG or WebP file.")
    if len(text) > MAX_BASE64_CHARS:
        raise BadInput(
            f"The base64 text is {len(text):,} characters: the file it encodes must be at most "
            f"{MAX_IMAGE_BYTES // (1024 * 1024)} MiB.",
            413,
        )
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise BadInput(
            "'image' is not valid base64: encode the file bytes with base64 "
            "(e.g. base64.b64encode(open(path, 'rb').read()).decode())."
        ) from None


def load_image(data: bytes) -> Image.Image:
    """Decode image file bytes to an upright RGB PIL image of at least 224x224 (when the file is),
    refusing empty, huge, damaged, too costly or non-photo input.

    Only JPEG, PNG and WebP are opened. What the file's structure and header declare is checked
    before any pixel is decoded (servelab.decode_budget: size, pixels, sides, JPEG scans,
    metadata); a JPEG is decoded at a reduced scale (its format allows it: the model needs
    224x224, not the full photo); the EXIF orientation of phone photos is applied. The services
    decode through tensor_from_bytes(), which keeps only the model's input (this keeps the image).
    """
    return image_decode.decoded(data, draft=INPUT_SIZE)


def tensor_from_bytes(data: bytes, request: decode_budget.CpuBudget | None = None) -> np.ndarray:
    """File bytes -> the model's input: the one decoding path of every service (FastAPI, Flask,
    Triton's Python models). The full-size image lives only inside the decode bound. `request`:
    the CPU budget of all the images of one request (tensors_from_bytes), besides this image's."""
    return preprocess(image_decode.decoded(data, request, draft=INPUT_SIZE, size=INPUT_SIZE))


def tensors_from_bytes(files) -> np.ndarray:
    """Several files (one request's batch) -> [n, 3, 224, 224], within one request's CPU budget
    as well as each image's."""
    request = request_budget()
    return np.stack([tensor_from_bytes(bytes(f), request) for f in files])


def request_budget() -> decode_budget.CpuBudget:
    """The CPU budget of all the images of one request (decode_budget.MAX_REQUEST_DECODE_CPU_S):
    what each image's decode used is charged to it."""
    return decode_budget.CpuBudget(decode_budget.MAX_REQUEST_DECODE_CPU_S)


def preprocess(img: Image.Image) -> np.ndarray:
    """RGB image -> float32 [3, 224, 224], ImageNet-normalised (the model's input)."""
    resized = (img if img.mode == "RGB" else img.convert("RGB")).resize(
        (INPUT_SIZE, INPUT_SIZE), Image.BILINEAR
    )
    pixels = np.asarray(resized, dtype=np.float32) / 255.0
    return ((pixels - MEAN) / STD).transpose(2, 0, 1).copy()


def tensor_from_base64(text: str, request: decode_budget.CpuBudget | None = None) -> np.ndarray:
    return tensor_from_bytes(decode_base64(text), request)


def softmax(logits: np.ndarray) -> np.ndarray:
    logits = np.asarray(logits, dtype=np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    e = np.exp(shifted)
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)


def top_class(logits: np.ndarray) -> tuple[str, float]:
    """Logits of one image -> (class name, softmax probability of that class)."""
    probs = softmax(np.asarray(logits).reshape(-1))
    index = int(np.argmax(probs))
    return CLASSES[index], float(probs[index])


def encode_file(path) -> str:
    """Base64 text of a file, as the services expect it."""
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode("ascii")


# --- the model behind these classes, and the weights `make artifacts` built


def new_model():
    """torchvision MobileNetV2 with an 11-way head (the lab's architecture), untrained."""
    import torch.nn as nn
    from torchvision.models import mobilenet_v2

    model = mobilenet_v2(weights=None)
    model.classifier[1] = nn.Linear(model.last_channel, len(CLASSES))
    return model


def read_metadata() -> dict:
    """The built artifacts' metadata (weights trained or not, files, hashes), or a clear message."""
    if not ARTIFACTS_JSON.exists():
        raise FileNotFoundError(f"{ARTIFACTS_JSON} missing: run `make artifacts` first")
    return json.loads(ARTIFACTS_JSON.read_text())
