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
import contextlib
import io
import json
import re
import struct
import threading
import warnings

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from servelab import decode_budget
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
# ones the services and the reliability suite name are importable from here too.
MAX_IMAGE_BYTES = decode_budget.MAX_IMAGE_BYTES  # encoded file size
MAX_IMAGE_PIXELS = decode_budget.MAX_IMAGE_PIXELS  # width * height declared in the header
MAX_BASE64_CHARS = (MAX_IMAGE_BYTES * 4) // 3 + 4  # the base64 text of the largest file
# ... with the line breaks of the `base64` command (one per 76 characters): a longer text is
# refused by its length alone, before anything copies it
MAX_BASE64_TEXT = MAX_BASE64_CHARS * 78 // 76 + 1024
FORMATS = ("JPEG", "PNG", "WEBP")  # what a photo upload is; anything else is refused unread
FORMAT_NAMES = "JPEG, PNG or WebP"
MAX_CONCURRENT_DECODES = decode_budget.MAX_CONCURRENT_DECODES
LARGE_CANVAS = decode_budget.LARGE_CANVAS
_decodes = threading.BoundedSemaphore(MAX_CONCURRENT_DECODES)
_large_decode = threading.Lock()
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
    refusing empty, huge, damaged, too costly or non-photo input.

    Only JPEG, PNG and WebP are opened. What the file's structure and header declare is checked
    before any pixel is decoded (servelab.decode_budget: size, pixels, sides, JPEG scans,
    metadata); a JPEG is decoded at a reduced scale (its format allows it: the model needs
    224x224, not the full photo); the EXIF orientation of phone photos is applied. The services
    decode through tensor_from_bytes(), which keeps only the model's input (this keeps the image).
    """
    return _decoded(data, lambda img: img.copy())


def tensor_from_bytes(data: bytes, request: decode_budget.CpuBudget | None = None) -> np.ndarray:
    """File bytes -> the model's input: the one decoding path of every service (FastAPI, Flask,
    Triton's Python models). The full-size image lives only inside the decode bound. `request`:
    the CPU budget of all the images of one request (tensors_from_bytes), besides this image's."""
    return _decoded(data, preprocess, request)


def tensors_from_bytes(files) -> np.ndarray:
    """Several files (one request's batch) -> [n, 3, 224, 224], within one request's CPU budget
    as well as each image's."""
    request = request_budget()
    return np.stack([tensor_from_bytes(bytes(f), request) for f in files])


def request_budget() -> decode_budget.CpuBudget:
    """The CPU budget of all the images of one request (decode_budget.MAX_REQUEST_DECODE_CPU_S),
    started now on this thread."""
    return decode_budget.CpuBudget(decode_budget.MAX_REQUEST_DECODE_CPU_S)


def _decoded(data: bytes, keep, request: decode_budget.CpuBudget | None = None):
    """Decode `data` and return keep(upright RGB image), with cost and memory bounded.

    At most MAX_CONCURRENT_DECODES decodes run at once in a process, and a canvas over
    LARGE_CANVAS pixels (up to 160 MB once decoded) decodes alone: a burst of crafted uploads
    costs one large canvas at a time, not one per request. A request waits at most
    DECODE_WAIT_S for its turn (then 503: try again), and a decode stops once it has used its CPU
    budget. Once a large canvas is freed, on success and on error alike, its pages are handed
    back to the OS.
    """
    img = _open(data)  # the structure and header only: refusals here cost no pixel memory
    large = img.width * img.height > LARGE_CANVAS
    result = error = None
    try:
        # a large canvas waits for its turn without holding a slot that small photos need
        with _turn(_large_decode, large), _turn(_decodes):
            budgets = [decode_budget.CpuBudget(), *([request] if request else [])]
            img.fp.budgets = budgets
            result, error = _keep_decoded(img, keep)
    finally:
        img.close()
        del img
        if large:
            _return_freed_memory()
    if error is not None:
        raise error
    return result


@contextlib.contextmanager
def _turn(lock, needed: bool = True):
    """Hold `lock` for the block, waiting at most DECODE_WAIT_S for it (then 503)."""
    if not needed:
        yield
        return
    if not lock.acquire(timeout=decode_budget.DECODE_WAIT_S):
        raise BadInput(
            f"The service is busy decoding other images (at most {MAX_CONCURRENT_DECODES} at "
            "once): try again in a few seconds.",
            503,
        )
    try:
        yield
    finally:
        lock.release()


class _Metered(io.BytesIO):
    """The file as the decoder reads it: each time it asks for more, the CPU budgets of this
    decode (and of its request) are checked."""

    budgets: list = []

    def read(self, size=-1):
        for budget in self.budgets:
            budget.check()
        return super().read(size)


def _open(data: bytes) -> Image.Image:
    """Open the file and check what its structure and header declare (format, cost, pixels,
    sides); decode nothing."""
    if not data:
        raise BadInput(f"The image is empty (0 bytes): send a {FORMAT_NAMES} file.")
    if len(data) > MAX_IMAGE_BYTES:
        raise BadInput(
            f"The file is {len(data):,} bytes; at most {MAX_IMAGE_BYTES // (1024 * 1024)} MiB "
            "per image are accepted.",
            413,
        )
    error = None
    try:
        decode_budget.check(data)  # scans, metadata: from the file's structure
        with warnings.catch_warnings():
            # Pillow warns above its own limit (~89 Mpx) and raises above twice that, while reading
            # the header: both mean "too many pixels", never "not an image".
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(_Metered(data), formats=FORMATS)
    except decode_budget.OverBudget as exc:
        error = BadInput(str(exc), 413)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        # Pillow: "Image size (N pixels) exceeds limit ..."
        found = re.search(r"\((\d+) pixels\)", str(exc))
        error = _too_many_pixels(
            f"{int(found.group(1)):,} pixels" if found else "over Pillow's decompression-bomb limit"
        )
    except UnidentifiedImageError:
        error = _not_accepted(data)
    except (OSError, SyntaxError, ValueError, struct.error):
        error = _damaged()
    if error is not None:  # raised here, not inside `except`: nothing of the file stays referenced
        raise error
    try:
        decode_budget.check_size(*img.size)  # pixels (our cap is lower than Pillow's), sides
    except decode_budget.OverBudget as exc:
        error = BadInput(str(exc), 413)
    if error is not None:
        img.close()
        raise error
    return img


def _keep_decoded(img: Image.Image, keep) -> tuple:
    """(keep(decoded upright RGB image), None), or (None, BadInput) when decoding fails or goes
    over its budget. The error is returned, not raised, so no traceback keeps the half-decoded
    canvas alive."""
    try:
        if img.format == "JPEG":
            img.draft("RGB", (INPUT_SIZE, INPUT_SIZE))  # DCT scaling: >= 224 px, up to 8x less
        img.load()
        upright = ImageOps.exif_transpose(img)  # a phone photo shot upright stays upright
        if getattr(upright, "is_animated", False):
            upright.seek(0)  # first frame of an animated PNG/WebP
        rgb = upright if upright.mode == "RGB" else upright.convert("RGB")
        return keep(rgb), None
    except decode_budget.OverBudget as exc:
        return None, BadInput(str(exc), 413)
    except (OSError, SyntaxError, ValueError, EOFError):
        return None, _damaged()


def _damaged() -> BadInput:
    return BadInput(f"The image file is damaged or truncated: send a complete {FORMAT_NAMES} file.")


def preprocess(img: Image.Image) -> np.ndarray:
    """RGB image -> float32 [3, 224, 224], ImageNet-normalised (the model's input)."""
    resized = (img if img.mode == "RGB" else img.convert("RGB")).resize(
        (INPUT_SIZE, INPUT_SIZE), Image.BILINEAR
    )
    pixels = np.asarray(resized, dtype=np.float32) / 255.0
    return ((pixels - MEAN) / STD).transpose(2, 0, 1).copy()


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
