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
import os
import re
import threading
import warnings

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

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

# Limits that keep one odd upload from taking a service down.
MAX_IMAGE_BYTES = 8 * 1024 * 1024  # encoded file size
MAX_IMAGE_PIXELS = 40_000_000  # width * height declared in the header (decompression bombs)
FORMATS = ("JPEG", "PNG", "WEBP")  # what a photo upload is; anything else is refused unread
FORMAT_NAMES = "JPEG, PNG or WebP"
# A decoded 40 Mpx PNG is 120 MB: at most this many decodes run at once in one process, so a burst
# of crafted images cannot take memory without bound (JPEGs decode at reduced size: little memory).
MAX_CONCURRENT_DECODES = max(2, min(4, os.cpu_count() or 2))
_decodes = threading.BoundedSemaphore(MAX_CONCURRENT_DECODES)
# Magic numbers of formats people do send, to name them in the refusal
_OTHER_FORMATS = (
    (b"GIF8", "GIF"),
    (b"BM", "BMP"),
    (b"II*\0", "TIFF"),
    (b"MM\0*", "TIFF"),
    (b"\0\0\1\0", "ICO"),
    (b"%PDF", "PDF"),
    (b"\0\0\0\x0cjP", "JPEG 2000"),
)


class BadInput(ValueError):
    """The client sent something we cannot classify; the message says what to fix."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


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
    if len(text) > (MAX_IMAGE_BYTES * 4) // 3 + 4:
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


def _too_many_pixels(size: str) -> BadInput:
    return BadInput(
        f"Image is {size}; at most {MAX_IMAGE_PIXELS:,} pixels are accepted. Resize it first.", 413
    )


def _not_accepted(data: bytes) -> BadInput:
    kind = next((name for magic, name in _OTHER_FORMATS if data.startswith(magic)), None)
    if kind:
        article = "an" if kind[0] in "AEIOU" else "a"
        return BadInput(
            f"The file is {article} {kind} file, not a photo format this service reads: "
            f"send a {FORMAT_NAMES} file.",
            415,
        )
    return BadInput(f"The data is not an image we can read: send a {FORMAT_NAMES} file.", 415)


def load_image(data: bytes) -> Image.Image:
    """Decode image file bytes to an upright RGB PIL image of at least 224x224 (when the file is),
    refusing empty, huge, damaged or non-photo input.

    Only JPEG, PNG and WebP are opened. The size the header declares is checked before any pixel
    is decoded; a JPEG is decoded at a reduced scale (its format allows it: the model needs
    224x224, not the full photo); the EXIF orientation of phone photos is applied. At most
    MAX_CONCURRENT_DECODES decodes run at once in a process.
    """
    with _decodes:
        return _decode(data)


def _decode(data: bytes) -> Image.Image:
    if not data:
        raise BadInput(f"The image is empty (0 bytes): send a {FORMAT_NAMES} file.")
    if len(data) > MAX_IMAGE_BYTES:
        raise BadInput(
            f"The file is {len(data):,} bytes; at most {MAX_IMAGE_BYTES // (1024 * 1024)} MiB "
            "per image are accepted.",
            413,
        )
    try:
        with warnings.catch_warnings():
            # Pillow warns above its own limit (~89 Mpx) and raises above twice that, while reading
            # the header: both mean "too many pixels", never "not an image".
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data), formats=FORMATS)
            width, height = img.size
            if (
                width * height > MAX_IMAGE_PIXELS
            ):  # our cap is lower than Pillow's; checked before decoding
                raise _too_many_pixels(f"{width}x{height} pixels")
            if img.format == "JPEG":
                img.draft(
                    "RGB", (INPUT_SIZE, INPUT_SIZE)
                )  # DCT scaling: >= 224 px, up to 8x less memory
            img.load()
            img = ImageOps.exif_transpose(img)  # a phone photo shot upright is classified upright
            if getattr(img, "is_animated", False):
                img.seek(0)  # first frame of an animated PNG/WebP
            return img if img.mode == "RGB" else img.convert("RGB")
    except BadInput:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        found = re.search(
            r"\((\d+) pixels\)", str(exc)
        )  # Pillow: "Image size (N pixels) exceeds limit ..."
        size = (
            f"{int(found.group(1)):,} pixels" if found else "over Pillow's decompression-bomb limit"
        )
        raise _too_many_pixels(size) from None
    except UnidentifiedImageError:
        raise _not_accepted(data) from None
    except (OSError, SyntaxError, ValueError):
        raise BadInput(
            f"The image file is damaged or truncated: send a complete {FORMAT_NAMES} file."
        ) from None


def preprocess(img: Image.Image) -> np.ndarray:
    """RGB image -> float32 [3, 224, 224], ImageNet-normalised (the model's input)."""
    resized = (img if img.mode == "RGB" else img.convert("RGB")).resize(
        (INPUT_SIZE, INPUT_SIZE), Image.BILINEAR
    )
    pixels = np.asarray(resized, dtype=np.float32) / 255.0
    return ((pixels - MEAN) / STD).transpose(2, 0, 1).copy()


def tensor_from_bytes(data: bytes) -> np.ndarray:
    """File bytes -> the model's input. The full-size image lives only inside the decode bound."""
    with _decodes:
        img = _decode(data)
        large = img.width * img.height > 4_000_000
        tensor = preprocess(img)
        del img
    if large:
        _return_freed_memory()
    return tensor


def _return_freed_memory() -> None:
    """Hand the pages of a freed large image back to the OS. Pillow allocates images in blocks
    small enough to come from malloc's heaps, which keep freed memory for reuse: after a burst of
    large uploads the process would otherwise stay as large as the burst made it."""
    global _libc
    if _libc is None:
        import ctypes
        import ctypes.util

        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _libc.malloc_trim  # glibc only
        except (OSError, AttributeError):
            _libc = False
    if _libc:
        _libc.malloc_trim(0)


_libc = None


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
