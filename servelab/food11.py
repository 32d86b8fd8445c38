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
import io
import json
import re
import warnings

import numpy as np
from PIL import Image, UnidentifiedImageError

from servelab.paths import ARTIFACTS_JSON

CLASSES = (
    "Bread", "Dairy product", "Dessert", "Egg", "Fried food", "Meat",
    "Noodles/Pasta", "Rice", "Seafood", "Soup", "Vegetable/Fruit",
)
INPUT_SIZE = 224
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)

# Limits that keep one odd upload from taking a service down.
MAX_IMAGE_BYTES = 8 * 1024 * 1024          # encoded file size
MAX_IMAGE_PIXELS = 40_000_000              # width * height after decoding (decompression bombs)


class BadInput(ValueError):
    """The client sent something we cannot classify; the message says what to fix."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def decode_base64(text: str) -> bytes:
    """Strict base64 decode (a data-URL prefix is accepted) with messages a student can act on."""
    if not isinstance(text, str):
        raise BadInput("'image' must be a string holding a base64-encoded JPEG or PNG file.", 422)
    if text.startswith("data:") and "," in text:
        text = text.split(",", 1)[1]
    text = "".join(text.split())  # line breaks from `base64` CLI output are fine
    if not text:
        raise BadInput("'image' is empty: send the base64 encoding of a JPEG or PNG file.")
    if len(text) > (MAX_IMAGE_BYTES * 4) // 3 + 4:
        raise BadInput(
            f"Image too large: the encoded file must be at most {MAX_IMAGE_BYTES // (1024 * 1024)} MiB.", 413
        )
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise BadInput(
            "'image' is not valid base64: encode the file bytes with base64 "
            "(e.g. base64.b64encode(open(path, 'rb').read()).decode())."
        ) from None


def _too_many_pixels(size: str) -> BadInput:
    return BadInput(f"Image is {size}; at most {MAX_IMAGE_PIXELS:,} pixels are accepted. Resize it first.", 413)


def load_image(data: bytes) -> Image.Image:
    """Decode image file bytes to an RGB PIL image, refusing empty, huge or non-image input."""
    if not data:
        raise BadInput("The image is empty (0 bytes): send a JPEG or PNG file.")
    if len(data) > MAX_IMAGE_BYTES:
        raise BadInput(f"Image too large: at most {MAX_IMAGE_BYTES // (1024 * 1024)} MiB per file.", 413)
    try:
        with warnings.catch_warnings():
            # Pillow warns above its own limit (~89 Mpx) and raises above twice that, while reading
            # the header: both mean "too many pixels", never "not an image".
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data))
            width, height = img.size
            if width * height > MAX_IMAGE_PIXELS:  # our cap is lower than Pillow's; checked before decoding
                raise _too_many_pixels(f"{width}x{height} pixels")
            img.load()
    except BadInput:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        found = re.search(r"\((\d+) pixels\)", str(exc))  # Pillow: "Image size (N pixels) exceeds limit ..."
        size = f"{int(found.group(1)):,} pixels" if found else "over Pillow's decompression-bomb limit"
        raise _too_many_pixels(size) from None
    except UnidentifiedImageError:
        raise BadInput("The data is not an image we can read: send a JPEG or PNG file.", 415) from None
    except (OSError, SyntaxError, ValueError):
        raise BadInput("The image file is damaged or truncated: send a complete JPEG or PNG file.") from None
    if getattr(img, "is_animated", False):
        img.seek(0)  # first frame of an animated GIF/PNG
    return img.convert("RGB")


def preprocess(img: Image.Image) -> np.ndarray:
    """RGB image -> float32 [3, 224, 224], ImageNet-normalised (the model's input)."""
    resized = img.convert("RGB").resize((INPUT_SIZE, INPUT_SIZE), Image.BILINEAR)
    pixels = np.asarray(resized, dtype=np.float32) / 255.0
    return ((pixels - MEAN) / STD).transpose(2, 0, 1).copy()


def tensor_from_bytes(data: bytes) -> np.ndarray:
    return preprocess(load_image(data))


def tensor_from_base64(text: str) -> np.ndarray:
    return tensor_from_bytes(decode_base64(text))


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
