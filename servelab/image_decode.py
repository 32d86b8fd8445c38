"""Opening an uploaded image within the decode budget (servelab.decode_budget): only photo
formats, what the file's structure and header declare checked before a pixel is decoded, the
decoding itself in a worker process whose CPU time the kernel bounds (servelab.decode_pool), few
decodes at once, and a large canvas's memory handed back once freed.

Every service decodes through servelab.food11.tensor_from_bytes, which calls decoded() here; a
refusal is a BadInput whose message says what to fix and whose status is the HTTP answer.
decoded() runs in the service's process up to the header (a refusal there costs no worker) and
hands the file to a worker, which runs decode_here(): the same checks again, then the pixels.

Introduced in notebook 4, beneath servelab.food11; no notebook imports it.
"""

from __future__ import annotations

import contextlib
import io
import re
import struct
import threading
import warnings

from PIL import Image, UnidentifiedImageError

from servelab import decode_budget, decode_pool
from servelab.decode_budget import (
    LARGE_CANVAS,
    MAX_CONCURRENT_DECODES,
    MAX_IMAGE_BYTES,
    MAX_IMAGE_PIXELS,
)

FORMATS = ("JPEG", "PNG", "WEBP")  # what a photo upload is; anything else is refused unread
FORMAT_NAMES = "JPEG, PNG or WebP"
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


def decoded(
    data: bytes,
    request: decode_budget.CpuBudget | None = None,
    draft: int = 224,
    size: int | None = None,
) -> Image.Image:
    """Decode `data` into an upright RGB image, with cost and memory bounded: resized to `size` x
    `size` where asked (food11's input), else as decoded. A JPEG is decoded at the smallest DCT
    scale that still gives `draft` pixels a side.

    The decode runs in a worker of decode_pool within MAX_DECODE_CPU_S of CPU time (and what is
    left of its request's, `request`), enforced by the kernel: over it, 413. At most
    MAX_CONCURRENT_DECODES decodes run at once in a process, and a canvas over LARGE_CANVAS
    pixels (up to 160 MB once decoded) decodes alone: a burst of crafted uploads costs one large
    canvas at a time, not one per request. A request waits at most DECODE_WAIT_S for its turn
    (then 503: try again).
    """
    with _open(data) as img:  # the structure and header only: refusals here cost no worker
        large = img.width * img.height > LARGE_CANVAS
    budget = request or decode_budget.CpuBudget()
    seconds = min(decode_budget.MAX_DECODE_CPU_S, budget.left())
    if seconds <= 0:
        raise BadInput(budget.message(), 413)
    # a large canvas waits for its turn without holding a worker that small photos need
    with _turn(_large_decode, large):
        return _in_worker(data, {"draft": draft, "size": size}, seconds, budget)


def _in_worker(data: bytes, args: dict, seconds: float, budget: decode_budget.CpuBudget):
    """decode_here(data, **args) in a worker within `seconds` of CPU, charged to `budget`; each
    way it can end answered as the BadInput it is."""
    try:
        result, used = decode_pool.run(
            f"{__name__}:decode_here", data, args, seconds, decode_budget.DECODE_WAIT_S
        )
    except decode_pool.OverCpu:
        budget.charge(seconds)
        over = budget if budget.left() <= 0 else decode_budget.CpuBudget()
        raise BadInput(over.message(), 413) from None
    except decode_pool.Refused as exc:
        raise BadInput(str(exc), exc.status) from None
    except decode_pool.WorkerEnded:
        raise _stopped() from None
    except decode_pool.Busy:
        raise _busy() from None
    budget.charge(used)
    return result


def decode_here(data: bytes, draft: int, size: int | None) -> Image.Image:
    """What a worker runs (decode_pool): open and check the file again, decode it and return the
    upright RGB image (resized to `size` x `size` if given); a refusal is raised as the BadInput
    it is. Once a large canvas is freed, on success and on error alike, its pages are handed
    back to the OS. Needs Pillow alone: a worker starts in a tenth of a second."""
    img = _open(data, structure=False)  # the caller checked the structure (decoded())
    large = img.width * img.height > LARGE_CANVAS
    try:
        result, error = _keep_decoded(img, draft, size)
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
        raise _busy()
    try:
        yield
    finally:
        lock.release()


def _stopped() -> BadInput:
    """The decoder crashed (or was killed) on the file: nothing an ordinary photo does."""
    return BadInput(
        f"The decoder stopped on this file: send a complete {FORMAT_NAMES} file saved by an "
        "ordinary image editor.",
        422,
    )


def _busy() -> BadInput:
    return BadInput(
        f"The service is busy decoding other images (at most {MAX_CONCURRENT_DECODES} at "
        "once): try again in a few seconds.",
        503,
    )


def _open(data: bytes, structure: bool = True) -> Image.Image:
    """Open the file and check what its structure (unless structure=False: checked already) and
    header declare (format, cost, pixels, sides); decode nothing."""
    _check_length(data)
    error = None
    try:
        if structure:
            decode_budget.check(data)  # scans, metadata: from the file's structure
        with warnings.catch_warnings():
            # Pillow warns above its own limit (~89 Mpx) and raises above twice that, while reading
            # the header: both mean "too many pixels", never "not an image".
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data), formats=FORMATS)
    except Exception as exc:  # noqa: BLE001 - _refusal names what it knows and re-raises the rest
        error = _refusal(exc, data)
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


def _check_length(data: bytes) -> None:
    if not data:
        raise BadInput(f"The image is empty (0 bytes): send a {FORMAT_NAMES} file.")
    if len(data) > MAX_IMAGE_BYTES:
        raise BadInput(
            f"The file is {len(data):,} bytes; at most {MAX_IMAGE_BYTES // (1024 * 1024)} MiB "
            "per image are accepted.",
            413,
        )


def _refusal(exc: Exception, data: bytes) -> BadInput:
    """What the client is told when opening the file failed with `exc` (anything unexpected is
    raised again: it is a bug, not the client's)."""
    if isinstance(exc, decode_budget.OverBudget):
        return BadInput(str(exc), 413)
    if isinstance(exc, (Image.DecompressionBombError, Image.DecompressionBombWarning)):
        # Pillow: "Image size (N pixels) exceeds limit ..."
        found = re.search(r"\((\d+) pixels\)", str(exc))
        return _too_many_pixels(
            f"{int(found.group(1)):,} pixels" if found else "over Pillow's decompression-bomb limit"
        )
    if isinstance(exc, UnidentifiedImageError):
        return _not_accepted(data)
    if isinstance(exc, (OSError, SyntaxError, ValueError, struct.error)):
        return _damaged()
    raise exc


def _keep_decoded(img: Image.Image, draft: int, size: int | None) -> tuple:
    """(the decoded upright RGB image, None), resized to size x size if given, or (None,
    BadInput) when decoding fails. The error is returned, not raised, so no traceback keeps the
    half-decoded canvas alive."""
    try:
        if img.format in ("JPEG", "MPO"):  # an MPO (a phone's multi-picture JPEG) is one too
            img.draft("RGB", (draft, draft))  # DCT scaling: >= draft px, up to 8x less
        img.load()
        upright = _upright(img)  # a phone photo shot upright stays upright
        if getattr(upright, "is_animated", False):
            upright.seek(0)  # first frame of an animated PNG/WebP
        rgb = upright if upright.mode == "RGB" else upright.convert("RGB")
        return (rgb.resize((size, size), Image.BILINEAR) if size else rgb.copy()), None
    except (OSError, SyntaxError, ValueError, EOFError):
        return None, _damaged()


# EXIF orientation -> the turn that makes the picture upright (as ImageOps.exif_transpose)
_TURNS = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}


def _upright(img: Image.Image) -> Image.Image:
    """The picture turned as its orientation says (EXIF, or XMP where EXIF has none: Pillow's
    getexif reads both, the EXIF's first directory only, its size within the budget). Not
    ImageOps.exif_transpose, which also rewrites every tag of the metadata it keeps: the pixels
    are all the model needs."""
    orientation = img.getexif().get(0x0112, 1)
    turn = _TURNS.get(orientation) if isinstance(orientation, int) else None
    return img.transpose(turn) if turn is not None else img


def _damaged() -> BadInput:
    return BadInput(f"The image file is damaged or truncated: send a complete {FORMAT_NAMES} file.")


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
