"""The decode budget: what decoding one uploaded image may cost, every limit named here once with
its reason, and the checks that apply them. Every service decodes through servelab.food11 (Flask,
FastAPI, Triton's preprocess and food_classifier models), which calls these.

Refused before any pixel is decoded, with a 413 that names the limit (inspect(), read from the
file's own structure, and food11's check of the size its header declares):
- more bytes, pixels, pixels per side or a longer aspect ratio than a photo has;
- a progressive JPEG with more scans, or more 8x8 blocks over all its scans, than an encoder
  writes: libjpeg visits every block of the image in every scan, even one holding nothing, and
  Pillow sets no limit (a 2000x2000 canvas with thousands of scans of a few bytes each cost about
  20 s of CPU per MB);
- more metadata (EXIF, ICC, XMP, text chunks, comments) than a camera writes, wherever the
  decoder or the orientation read finds it: JPEG APPn, PNG eXIf and text chunks (counted as they
  inflate; "Raw profile type exif", EXIF as hex text, counted as EXIF), WebP EXIF and XMP.
A JPEG is walked as libjpeg reads it: bytes between segments skipped, every segment and every
scan header counted (a stray byte no longer hides the scans behind it).
Bounded while decoding, by the operating system whatever the file's layout: each decode runs in a
worker process that the kernel stops once it has used MAX_DECODE_CPU_S of CPU time, or what is
left of its request's MAX_REQUEST_DECODE_CPU_S (servelab.decode_pool; CpuBudget keeps the
account), and at most MAX_CONCURRENT_DECODES decode at once per process, each waiting at most
DECODE_WAIT_S for its turn. The structure checks above are the fast first refusal: a file they
pass costs at most its CPU budget, however its markers are laid out.
"""

from __future__ import annotations

import math
import os
import re
import struct
import zlib
from dataclasses import dataclass

# ---------------------------------------------------------------- the limits, and why

MAX_IMAGE_BYTES = 8 * 1024 * 1024  # a phone photo is 2-6 MB; the upload forms say 8 MiB
MAX_IMAGE_PIXELS = 40_000_000  # above any phone camera's default output (12-24 Mpx); 160 MB decoded
# Pixels per side: WebP's own maximum is 16,383 and no camera writes more; a PNG decodes row by row
# at a cost per row, so a 1 x 40,000,000 PNG (156 KB) cost 4-9 s under the pixel cap alone.
MAX_SIDE = 16_384
# The longest side over the shortest: a phone's widest panorama is about 8:1; past this the
# 224x224 the model sees is a smear of a few rows.
MAX_ASPECT = 20
# A progressive JPEG's scans: libjpeg's default progression writes 10 for a colour photo, 6 for
# grey, and optimising encoders (mozjpeg, jpegtran -optimize) stay within a few dozen.
# (NVIDIA's nvImageCodec refuses over 256, after the libjpeg-turbo audit that found this attack.)
MAX_JPEG_SCANS = 64
# 8x8 blocks visited over all scans together (libjpeg costs about 40 ns a block in a scan that
# holds nothing, more in one with data): the default progression of a 40 Mpx photo without
# chroma subsampling visits 8.8 million; this is about 1 s of CPU on the lab's 2-core machine.
MAX_JPEG_SCAN_BLOCKS = 24_000_000
# EXIF: one JPEG APP1 segment holds at most 64 KiB, so no camera writes more; Pillow parses it in
# Python to turn the photo upright (an 8 MB EXIF block in a PNG with orientation 6 cost 10-26 s).
MAX_EXIF_BYTES = 64 * 1024
# All other metadata together (ICC profile, XMP, the extended XMP where portrait modes keep a
# depth map, text chunks, comments): at most half the file.
MAX_METADATA_BYTES = MAX_IMAGE_BYTES // 2
# Marker segments / chunks read to check the above: an 8 MiB PNG in libpng's 8 KiB IDAT chunks has
# 1,024; a file cut into millions of tiny ones costs Python-level work per part.
MAX_PARTS = 10_000
# CPU seconds one decode may use (its worker process's, counted by the kernel): a 40 Mpx
# progressive JPEG or PNG takes 0.5-0.9 s on the lab's 2-core machine; a decode over this is
# stopped and refused. LAB_DECODE_CPU_S sets another (a slower machine; or a test that shows the
# kernel's limit with an ordinary photo, which every structure check lets through).
MAX_DECODE_CPU_S = float(os.environ.get("LAB_DECODE_CPU_S") or 3.0)
# ... and all the images of one request together (a Triton request may carry a batch of 16)
MAX_REQUEST_DECODE_CPU_S = 4 * MAX_DECODE_CPU_S
# A decoded 40 Mpx image is 160 MB (Pillow keeps RGB in 4 bytes a pixel): at most this many decode
# at once in one process, and of those one canvas over LARGE_CANVAS pixels.
MAX_CONCURRENT_DECODES = max(2, min(4, os.cpu_count() or 2))
LARGE_CANVAS = 4_000_000
# How long a request waits for a decode slot before it is answered 503 (try again): a request
# never holds a server thread without end behind other decodes. Large canvases decode one at a
# time: 16 uploads at the pixel cap at once took about 11 s to get through on the lab's machine.
DECODE_WAIT_S = 30.0


class OverBudget(Exception):
    """The file costs more to decode than the budget allows; the message says which limit."""


@dataclass
class Facts:
    """What the file's structure says, read without decoding a pixel."""

    parts: int = 0  # marker segments or chunks
    scans: int = 0  # JPEG scans (SOS markers)
    scan_blocks: int = 0  # 8x8 blocks visited over all scans
    exif: int = 0  # bytes
    metadata: int = 0  # bytes of every other kind of metadata


def check(data: bytes) -> Facts:
    """Refuse (OverBudget) a file whose structure costs too much to decode; return what was read.
    Formats other than JPEG, PNG and WebP are left to the format check that follows."""
    if data[:3] == b"\xff\xd8\xff":
        return _jpeg(data)
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return _png(data)
    return _webp(data) if data[:4] == b"RIFF" and data[8:12] == b"WEBP" else Facts()


def check_size(width: int, height: int) -> None:
    """Refuse a canvas with more pixels, or a side or an aspect ratio, no photo has."""
    longest, shortest = max(width, height), max(1, min(width, height))
    if width * height > MAX_IMAGE_PIXELS:
        raise OverBudget(
            f"Image is {width}x{height} pixels; at most {MAX_IMAGE_PIXELS:,} pixels are accepted. "
            "Resize it first."
        )
    if longest > MAX_SIDE:
        raise OverBudget(
            f"Image is {width}x{height} pixels; at most {MAX_SIDE:,} pixels per side are "
            "accepted. Resize it first."
        )
    if longest / shortest > MAX_ASPECT:
        raise OverBudget(
            f"Image is {width}x{height} pixels, {longest / shortest:,.0f} times longer than it is "
            f"wide; at most {MAX_ASPECT}:1 is accepted. Crop it to the food first."
        )


def _limit(value: int, limit: int, what: str, fix: str, counted: bool = True) -> None:
    """Refuse value over limit. counted=False: the count stopped at the first one over it."""
    if value > limit:
        holds = f"{value:,}" if counted else f"more than {limit:,}"
        raise OverBudget(f"The file holds {holds} {what}; at most {limit:,} are accepted: {fix}.")


# ---------------------------------------------------------------- reading the structure

_RESAVE = "save it again with any image editor"
_BASELINE = "save it again as a baseline (not progressive) JPEG"
_STRIP = "strip it (exiftool -all= FILE)"
_BLOCKS = "8x8 blocks to decode over all its scans"
# libjpeg's next_marker(): anything up to an 0xFF is skipped, then fill bytes (more 0xFF); a
# marker is the byte after them, unless it is 0 (a stuffed 0xFF: skipped too)
_JPEG_MARKER = re.compile(rb"\xff+([^\x00\xff])")
_JPEG_NEXT_MARKER = re.compile(rb"\xff[^\x00\xd0-\xd7\xff]")  # not stuffing, restart or fill
_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
# TEM, SOI, RSTn: no length follows. Nor after a reserved marker (0x02-0xBF): libjpeg refuses
# one between segments, and after a scan with a restart interval takes it for a damaged restart
# marker and reads on, byte by byte, to the next marker (issue 52's D3: a length there hid 2,400
# scans from this walk)
_STANDALONE = {0x01, 0xD8, *range(0xD0, 0xD8), *range(0x02, 0xC0)}


def _jpeg(data: bytes) -> Facts:
    """Walk a JPEG's marker segments as libjpeg reads them, up to its end of image (what follows
    is not decoded: an MPO's other pictures are never looked at); after each scan header skip
    its entropy-coded data."""
    facts, at, frame = Facts(), 2, None
    while (found := _JPEG_MARKER.search(data, at)) is not None:
        marker, at = found.group(1)[0], found.end()
        if marker == 0xD9 or at + 2 > len(data):  # EOI: libjpeg reads no further; or the end
            break
        if marker in _STANDALONE:
            continue
        facts.parts += 1
        _limit(facts.parts, MAX_PARTS, "marker segments", _RESAVE, counted=False)
        (length,) = struct.unpack(">H", data[at : at + 2])
        frame = _jpeg_segment(facts, marker, data[at + 2 : at + length], frame)
        at += max(length, 2)  # libjpeg skips length - 2 bytes after the length, none if less
        if marker == 0xDA:  # start of scan: its entropy-coded data runs to the next marker
            found = _JPEG_NEXT_MARKER.search(data, at)
            at = found.start() if found else len(data)
    return facts


def _jpeg_segment(facts: Facts, marker: int, body: bytes, frame):
    """Count one marker segment into `facts` (refusing as soon as a limit is passed); the frame
    header, once one is read."""
    if marker in _SOF and frame is None:
        frame = _jpeg_frame(body)
        if frame:  # what it costs depends on the size: refuse an impossible one first
            check_size(frame[0], frame[1])
    elif 0xE0 <= marker <= 0xEF or marker == 0xFE:  # APPn, COM
        if marker == 0xE1 and body.startswith(b"Exif\0"):
            _exif(facts, len(body))
        else:
            _metadata(facts, len(body))
    elif marker == 0xDA:  # a scan header
        facts.scans += 1
        _limit(facts.scans, MAX_JPEG_SCANS, "JPEG scans", _BASELINE, counted=False)
        facts.scan_blocks += _scan_blocks(frame, body)
        _limit(facts.scan_blocks, MAX_JPEG_SCAN_BLOCKS, _BLOCKS, _BASELINE, counted=False)
    return frame


def _jpeg_frame(body: bytes) -> tuple[int, int, dict[int, tuple[int, int]]] | None:
    """(width, height, {component id: (h, v) sampling}) from a frame header."""
    if len(body) < 6:
        return None
    height, width, count = struct.unpack(">HHB", body[1:6])
    entries = [body[6 + 3 * i : 9 + 3 * i] for i in range(count)]
    parts = {e[0]: (max(1, e[1] >> 4), max(1, e[1] & 15)) for e in entries if len(e) == 3}
    return width, height, parts


def _scan_blocks(frame, body: bytes) -> int:
    """8x8 blocks a scan visits: every block of its component, or every MCU of an interleaved
    scan. Without a frame header, nothing can be decoded (libjpeg refuses it): 0."""
    if not frame or not frame[2] or not body:
        return 0
    width, height, parts = frame
    hmax = max(h for h, _ in parts.values())
    vmax = max(v for _, v in parts.values())
    ids = [body[1 + 2 * i] for i in range(body[0]) if 1 + 2 * i < len(body)]
    sampling = [parts.get(c, (1, 1)) for c in ids]
    if len(sampling) == 1:
        h, v = sampling[0]
        return math.ceil(width * h / (8 * hmax)) * math.ceil(height * v / (8 * vmax))
    mcus = math.ceil(width / (8 * hmax)) * math.ceil(height / (8 * vmax))
    return mcus * sum(h * v for h, v in sampling)


def _exif(facts: Facts, size: int) -> None:
    """Count `size` bytes of EXIF, refusing as soon as the file's EXIF is over the budget."""
    facts.exif += size
    _limit(facts.exif, MAX_EXIF_BYTES, "bytes of EXIF data", f"no camera writes more; {_STRIP}")


def _metadata(facts: Facts, size: int, counted: bool = True) -> None:
    """Count `size` bytes of other metadata, refusing as soon as they are over the budget."""
    facts.metadata += size
    _limit(facts.metadata, MAX_METADATA_BYTES, "bytes of metadata", _STRIP, counted=counted)


_PNG_METADATA = {b"iCCP", b"tEXt", b"zTXt", b"iTXt"}
_RAW_EXIF = b"Raw profile type exif"  # the key under which ImageMagick writes EXIF as hex text


def _png(data: bytes) -> Facts:
    facts, at = Facts(), 8
    while at + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[at : at + 8])
        facts.parts += 1
        _limit(facts.parts, MAX_PARTS, "PNG chunks", _RESAVE, counted=False)
        body = data[at + 8 : at + 8 + length]
        if kind == b"eXIf":
            _exif(facts, len(body))
        elif kind in _PNG_METADATA:
            _png_metadata(facts, kind, body)
        if kind == b"IEND":
            break
        at += 12 + length
    return facts


def _png_metadata(facts: Facts, kind: bytes, body: bytes) -> None:
    """A text chunk or ICC profile, counted as the decoder inflates it; the EXIF in a "Raw
    profile type exif" text counted as EXIF."""
    key, _, rest = body.partition(b"\0")
    room = MAX_METADATA_BYTES - facts.metadata
    if kind == b"tEXt":
        text = rest
    elif kind in (b"zTXt", b"iCCP"):
        text = _inflate(rest[1:], room)
    else:  # iTXt: compressed flag, method, language and translated key, then the text
        text = rest[2:].split(b"\0", 2)[-1] if rest[2:].count(b"\0") >= 2 else b""
        text = _inflate(text, room) if rest[:1] == b"\x01" else text
    _metadata(facts, len(text), counted=False)
    if key == _RAW_EXIF:  # Pillow: bytes.fromhex("".join(text.split("\n")[3:]))
        _exif(facts, len(b"".join(text.split(b"\n")[3:])) // 2)


def _inflate(data: bytes, room: int) -> bytes:
    """What zlib data inflates to, no more than `room` + 1 bytes of it (enough to refuse)."""
    try:
        return zlib.decompressobj().decompress(data, max(0, room) + 1)
    except zlib.error:
        return b""


def _webp(data: bytes) -> Facts:
    facts, at = Facts(), 12
    while at + 8 <= len(data):
        kind, length = struct.unpack("<4sI", data[at : at + 8])
        facts.parts += 1
        _limit(facts.parts, MAX_PARTS, "WebP chunks", _RESAVE, counted=False)
        if kind == b"EXIF":
            _exif(facts, length)
        elif kind in (b"ICCP", b"XMP "):
            _metadata(facts, length)
        at += 8 + length + (length & 1)
    return facts


# ---------------------------------------------------------------- bounded while decoding


class CpuBudget:
    """CPU seconds a decode, or all the decodes of one request, may use. A decode runs in a worker
    process whose CPU time the kernel bounds by what is left here (servelab.decode_pool); what it
    used is charged here."""

    def __init__(self, seconds: float | None = None):
        self.seconds = MAX_DECODE_CPU_S if seconds is None else seconds
        self.spent = 0.0

    def left(self) -> float:
        return self.seconds - self.spent

    def charge(self, seconds: float) -> None:
        self.spent += seconds

    def message(self) -> str:
        return (
            f"Decoding this image took more than {self.seconds:g} s of CPU time (a "
            "40-megapixel photo takes about 1 s): save it again as a baseline JPEG or a "
            "smaller image."
        )
