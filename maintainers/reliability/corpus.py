"""Bad and odd image files: a hand-made corpus with the answer each must get, and a Hypothesis
strategy that mutates small valid files (headers are most of their bytes, so mutations hit them)."""

from __future__ import annotations

import functools
import io
import re
import struct
import zlib

import numpy as np

from servelab import food11

# (name, bytes, expected status or None, words the answer must contain). None: any clear answer
# is fine (200 for an odd but readable file, or a 4xx that says what is wrong).
Case = tuple[str, bytes, "int | None", str]


def encode(img, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def png_header_dims(data: bytes, width: int, height: int) -> bytes:
    """A PNG whose IHDR claims width x height, with a correct CRC (only the size gives it away)."""
    ihdr = struct.pack(">II", width, height) + data[24:29]
    return data[:16] + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr)) + data[33:]


def jpeg_sof_dims(data: bytes, width: int, height: int) -> bytes:
    """A JPEG whose SOF marker claims width x height (the pixel data stay the small image's)."""
    out = bytearray(data)
    i = 2
    while i < len(out) - 9:
        if out[i] == 0xFF and out[i + 1] in (0xC0, 0xC1, 0xC2):
            out[i + 5 : i + 9] = struct.pack(">HH", height, width)
            return bytes(out)
        i += 2 + struct.unpack(">H", out[i + 2 : i + 4])[0]
    raise ValueError("no SOF marker")


def jpeg_scan_bomb(side: int = 2000, scans: int = 5000) -> bytes:
    """A progressive JPEG of a grey side x side canvas followed by `scans` more copies of its
    last scan, a few bytes each: libjpeg visits every block of the image in each (about 2 ms a
    scan at 2000x2000 on the lab's machine), so 5,000 scans in 86 KB cost about 10 s of CPU.
    Made here, never stored: the bomb of the red-team round (issue 35)."""
    from PIL import Image

    data = encode(Image.new("L", (side, side), 128), "JPEG", progressive=True, quality=90)
    last = data.rindex(b"\xff\xda")  # the last scan: its header and entropy-coded data
    eoi = data.rindex(b"\xff\xd9")
    return data[:eoi] + data[last:eoi] * scans + data[eoi:]


def jpeg_stray_scan_bomb(side: int = 2000, scans: int = 5000, stray: bytes = b"\x00") -> bytes:
    """The scan bomb with `stray` bytes before its first scan header: libjpeg skips them (with a
    warning) and decodes every scan; a structure walk that stopped there saw none (issue 43:
    86 KB, 5-7 s of CPU)."""
    bomb = jpeg_scan_bomb(side, scans)
    at = bomb.index(b"\xff\xda")
    return bomb[:at] + stray + bomb[at:]


def jpeg_restart_hidden_scans(
    side: int = 2000, marker: int = 0x02, room: int = 60_000, restart_blocks: int = 16_000
) -> bytes:
    """Issue 52's D3: a progressive JPEG whose first scan has a restart interval and whose last
    restart marker is replaced by a reserved marker (FF 02) with a length that spans every scan
    after it (as many copies of the last scan as `room` bytes hold, 2,200 at 2000x2000). libjpeg
    takes the reserved marker for a damaged restart and reads on to the next marker, byte by
    byte: every hidden scan is decoded (66 KB, about 7 s of CPU); a walk that takes the marker
    for a segment skips its length and sees one scan. (`room` stays under 0xFF00: a length whose
    first byte is FF reads as a marker, to libjpeg too.)"""
    from PIL import Image

    data = encode(
        Image.new("L", (side, side), 128),
        "JPEG",
        progressive=True,
        quality=90,
        restart_marker_blocks=restart_blocks,
    )
    first = data.index(b"\xff\xda")
    start = first + 2 + struct.unpack(">H", data[first + 2 : first + 4])[0]
    end = re.compile(rb"\xff[^\x00\xd0-\xd7\xff]").search(data, start).start()  # the scan's end
    restarts = re.compile(rb"\xff[\xd0-\xd7]").finditer(data, start, end)
    restart = [found.start() for found in restarts][-1]  # its last restart marker
    eoi, last = data.rindex(b"\xff\xd9"), data.rindex(b"\xff\xda")
    hidden = data[end:eoi]  # the other scans, then copies of the last one
    assert room < 0xFF00, room
    while len(hidden) + (eoi - last) <= room:
        hidden += data[last:eoi]
    length = struct.pack(">H", len(hidden) + 2)
    return data[:restart] + bytes([0xFF, marker]) + length + hidden + data[eoi:]


def exif_block(orientation: int = 6, pointing: int = 0, filler: int = 0) -> bytes:
    """An EXIF block ('Exif\0\0' and a big-endian TIFF structure) whose first directory holds
    the orientation, `pointing` more entries that each point at the same bytes (the whole
    block: legal TIFF, never written by a camera; a reader that copies each entry's data pays
    the block's size `pointing` times) and a `filler`-byte comment."""
    entries = 1 + pointing + (1 if filler else 0)
    head = 8 + 2 + 12 * entries + 4  # the header, the directory, the next directory's offset
    size = head + filler
    rows = [struct.pack(">HHIHH", 0x0112, 3, 1, orientation, 0)]
    rows += [struct.pack(">HHII", 0x1000 + i, 7, size, 0) for i in range(pointing)]
    if filler:
        rows.append(struct.pack(">HHII", 0x9286, 7, filler, head))
    tiff = b"MM\x00\x2a" + struct.pack(">IH", 8, entries) + b"".join(rows) + b"\0" * 4
    return b"Exif\x00\x00" + tiff + b"A" * filler


def png_raw_profile_exif(block: bytes, compressed: bool = True, side: int = 64) -> bytes:
    """A PNG carrying an EXIF block as ImageMagick writes one into a text chunk: "Raw profile
    type exif", hex in lines of 72, zTXt (compressed) or tEXt. Pillow reads the orientation from
    it (issue 43: 4.3 KB, 3.5 s of CPU past every budget)."""
    from PIL import Image, PngImagePlugin

    raw = block[6:] if block.startswith(b"Exif\0\0") else block
    hexes = raw.hex()
    lines = "\n".join(hexes[i : i + 72] for i in range(0, len(hexes), 72))
    info = PngImagePlugin.PngInfo()
    info.add_text("Raw profile type exif", f"\nexif\n{len(raw):8d}\n{lines}\n", zip=compressed)
    return encode(Image.new("RGB", (side, side * 3 // 4), (200, 120, 40)), "PNG", pnginfo=info)


def mpo(side: int = 4000, frames: int = 2) -> bytes:
    """A phone's multi-picture JPEG (MPO), side x 3/4 side, smooth noise: decoded at full size
    it costs a 12 Mpx canvas; at the reduced scale the model needs, a 500 px one."""
    from PIL import Image

    rng = np.random.default_rng(side)
    small = Image.fromarray(rng.integers(0, 255, (60, 80, 3), dtype=np.uint8))
    big = small.resize((side, side * 3 // 4))
    return encode(big, "MPO", save_all=True, append_images=[big] * (frames - 1), quality=80)


def webp_with_exif(block: bytes) -> bytes:
    from PIL import Image

    return encode(Image.new("RGB", (64, 48), (30, 120, 200)), "WEBP", exif=block)


def png_with_exif(size: int, orientation: int = 6) -> bytes:
    """A small PNG carrying an EXIF block of about `size` bytes (orientation set: the decode
    would turn the picture upright, which parses the block)."""
    from PIL import Image

    exif = Image.Exif()
    exif[0x0112] = orientation
    exif[0x9286] = b"A" * size  # UserComment
    return encode(Image.new("RGB", (64, 48), (200, 120, 40)), "PNG", exif=exif)


@functools.lru_cache(maxsize=1)
def image_corpus() -> tuple[Case, ...]:
    """Truncated JPEG/PNG, decompression bombs and lying headers, CMYK, 16-bit, animated WebP,
    EXIF rotation, formats that are refused (GIF, BMP, TIFF, ICO, PDF) and non-images.
    Built once (the 400 Mpx bomb takes a moment to encode)."""
    from PIL import Image

    rgb = Image.new("RGB", (64, 48), (200, 120, 40))
    jpeg, png = encode(rgb, "JPEG", quality=90), encode(rgb, "PNG")
    rng = np.random.default_rng(0)
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: rotate 90 degrees (a phone photo taken upright)
    frames = [Image.new("P", (40, 30), i * 40) for i in range(4)]
    sixteen = Image.fromarray((np.arange(64 * 48, dtype=np.uint16).reshape(48, 64) * 20))
    too_big = food11.MAX_IMAGE_BYTES + 1024 * 1024
    return (
        (
            "random bytes (1 KiB)",
            rng.integers(0, 256, 1024, dtype=np.uint8).tobytes(),
            415,
            "not an image",
        ),
        ("one zero byte", b"\x00", 415, "not an image"),
        ("text file", b"hello, this is not a photo\n" * 10, 415, "not an image"),
        ("PNG signature only", png[:8], 415, "not an image"),
        ("PNG header only (IHDR)", png[:33], None, ""),
        ("PNG truncated at 50%", png[: len(png) // 2], 400, "damaged or truncated"),
        ("PNG without IEND", png[:-12], None, ""),
        ("JPEG SOI marker only", jpeg[:2], None, ""),
        ("JPEG truncated at 30 bytes", jpeg[:30], 400, "damaged or truncated"),
        ("JPEG truncated at 50%", jpeg[: len(jpeg) // 2], 400, "damaged or truncated"),
        (
            "JPEG with flipped bytes",
            bytes(b ^ 0x55 if 200 < i < 260 else b for i, b in enumerate(jpeg)),
            None,
            "",
        ),
        (
            "PNG 20000x20000 1-bit (400 Mpx bomb, 50 KiB file)",
            encode(Image.new("1", (20000, 20000)), "PNG"),
            413,
            "pixels",
        ),
        (
            "PNG 10000x10000 1-bit (100 Mpx, over Pillow's warning limit)",
            encode(Image.new("1", (10000, 10000)), "PNG"),
            413,
            "pixels",
        ),
        (
            "PNG 10000x5000 grey (50 Mpx, over the 40 Mpx cap)",
            encode(Image.new("L", (10000, 5000)), "PNG"),
            413,
            "pixels",
        ),
        ("PNG header claims 100000x100000", png_header_dims(png, 100000, 100000), 413, "pixels"),
        ("JPEG header claims 65000x65000", jpeg_sof_dims(jpeg, 65000, 65000), 413, "pixels"),
        (
            "PNG 65000x1 (more pixels per side than a photo has)",
            encode(Image.new("L", (65000, 1)), "PNG"),
            413,
            "per side",
        ),
        (
            "PNG 4000x100 (40:1, an aspect no photo has)",
            encode(Image.new("L", (4000, 100)), "PNG"),
            413,
            "times longer",
        ),
        ("PNG 3000x200 (15:1, a panorama)", encode(Image.new("L", (3000, 200)), "PNG"), 200, ""),
        (
            "JPEG progressive 2000x2000 with 5000 extra scans (scan bomb, 86 KB)",
            jpeg_scan_bomb(2000, 5000),
            413,
            "JPEG scans",
        ),
        ("PNG with a 1 MiB EXIF block, orientation 6", png_with_exif(2**20), 413, "EXIF"),
        ("PNG 1x1", encode(Image.new("RGB", (1, 1)), "PNG"), 200, ""),
        ("JPEG CMYK", encode(Image.new("CMYK", (64, 48), (0, 100, 200, 10)), "JPEG"), 200, ""),
        ("PNG 16-bit greyscale", encode(sixteen, "PNG"), 200, ""),
        (
            "PNG RGBA (transparency)",
            encode(Image.new("RGBA", (64, 48), (10, 200, 30, 0)), "PNG"),
            200,
            "",
        ),
        ("PNG palette", encode(rgb.convert("P"), "PNG"), 200, ""),
        ("PNG 1-bit", encode(Image.new("1", (64, 48), 1), "PNG"), 200, ""),
        (
            "GIF animated (4 frames)",
            encode(frames[0], "GIF", save_all=True, append_images=frames[1:]),
            415,
            "GIF file",
        ),
        ("JPEG with EXIF rotation", encode(rgb, "JPEG", exif=exif), 200, ""),
        ("JPEG progressive", encode(rgb, "JPEG", progressive=True), 200, ""),
        ("WebP", encode(rgb, "WEBP"), 200, ""),
        (
            "WebP animated (3 frames)",
            encode(rgb, "WEBP", save_all=True, append_images=[rgb, rgb]),
            200,
            "",
        ),
        ("BMP", encode(rgb, "BMP"), 415, "BMP file"),
        (
            "TIFF, 2 pages",
            encode(rgb, "TIFF", save_all=True, append_images=[rgb]),
            415,
            "TIFF file",
        ),
        ("ICO 256x256", encode(Image.new("RGB", (256, 256)), "ICO"), 415, "ICO file"),
        (
            "SVG text",
            b"<svg xmlns='http://www.w3.org/2000/svg' width='10' height='10'/>",
            415,
            "not an image",
        ),
        ("PDF header", b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n", 415, "PDF file"),
        (
            "EPS (would need Ghostscript)",
            b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\nshowpage\n",
            415,
            "not an image",
        ),
        ("empty file", b"", 400, "empty"),
        (
            f"{too_big // 2**20} MiB of JPEG-looking bytes",
            jpeg[:20] + b"\xff" * too_big,
            413,
            "at most",
        ),
    )


def corpus_file(prefix: str) -> bytes:
    """The bytes of the corpus case whose name starts with prefix (e.g. "PNG 20000x20000", the
    bomb)."""
    return next(data for name, data, *_ in image_corpus() if name.startswith(prefix))


@functools.lru_cache(maxsize=1)
def seed_images() -> tuple[bytes, ...]:
    """Small valid files in every format the fuzzer mutates; [0] is a JPEG, [1] a PNG, [5] a GIF."""
    from PIL import Image

    rgb = Image.new("RGB", (24, 16), (90, 160, 30))
    frames = [Image.new("P", (12, 12), i * 60) for i in range(3)]
    return (
        encode(rgb, "JPEG"),
        encode(rgb, "PNG"),
        encode(rgb, "JPEG", progressive=True),
        encode(rgb.convert("RGBA"), "PNG"),
        encode(rgb.convert("CMYK"), "JPEG"),
        encode(frames[0], "GIF", save_all=True, append_images=frames[1:]),
        encode(rgb, "WEBP"),
    )


def mutated_images():
    """Hypothesis strategy: random bytes, or a valid small image truncated / bit-flipped / spliced /
    with a size field overwritten (where huge-dimension headers come from)."""
    from hypothesis import strategies as st

    seeds = seed_images()

    @st.composite
    def mutate(draw):
        data = bytearray(draw(st.sampled_from(seeds)))
        for _ in range(draw(st.integers(1, 4))):
            if not data:
                break
            i = draw(st.integers(0, len(data) - 1))
            op = draw(st.sampled_from(["truncate", "flip", "insert", "delete", "dims"]))
            if op == "truncate":
                del data[i:]
            elif op == "flip":
                data[i] = draw(st.integers(0, 255))
            elif op == "insert":
                data[i:i] = draw(st.binary(min_size=1, max_size=32))
            elif op == "delete":
                del data[i : i + draw(st.integers(1, 64))]
            elif (
                len(data) > 24
            ):  # overwrite 4 bytes near the start: sizes live there in every format
                j = draw(st.integers(0, min(len(data), 40) - 4))
                data[j : j + 4] = struct.pack(">I", draw(st.integers(0, 2**32 - 1)))
        return bytes(data)

    return st.one_of(st.binary(max_size=2048), mutate())
