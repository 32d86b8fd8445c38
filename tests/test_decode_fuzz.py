"""The decode budget holds on any byte sequence: files crafted to cost seconds of CPU, then
mutated the ways a decoder forgives (stray bytes between segments, unknown and reserved markers
with a length, repeated segments) and the ways it does not (flipped bytes, cuts, splices), each
through the one decoding path every service uses (servelab.food11.tensor_from_bytes). For each,
the CPU time it cost (this process's and its decode workers', time.process_time and
decode_pool.spent(): the decode's own cost, whatever else the machine runs) must stay under one
decode's budget, MAX_DECODE_CPU_S, and the answer must be a picture or a clear refusal (BadInput).
The same files again with the structure walk switched off: the kernel's CPU limit on the decode
worker holds alone, whatever the markers say.

What the seeds are: the scan bomb (5,000 scans, 86 KB) with a stray byte before its scans (issue
43: 5-7 s of CPU past the structure walk), a progressive photo, EXIF carried as "Raw profile type
exif" text in a PNG (the issue's second bypass), EXIF in WebP and a JPEG, an MPO (the issue's
third: it skipped the reduced-scale decode), a PNG whose text inflates a hundredfold, and issue
52's D3: a reserved marker (FF 02, FF 50, FF BF) with a length, after a scan with a restart
interval, hiding 2,000 scans from the walk (7 s of CPU). About 20 s on the 2-core machine; the
mutations come from one fixed seed, so a failure names its case.
"""

from __future__ import annotations

import functools
import random
import time

import pytest
from PIL import Image

from maintainers.reliability import corpus
from servelab import decode_budget, decode_pool, food11

# Pillow warns on each EXIF entry it skips (pointing past its block): expected here
pytestmark = [pytest.mark.timeout(600), pytest.mark.filterwarnings("ignore::UserWarning")]
MUTATIONS_PER_SEED = 24
UNKNOWN_SEGMENT = b"\xff\xf3\x00\x06junk"  # JPG3: a marker no decoder knows, with a length
RESERVED = (0x02, 0x50, 0xBF)  # RES markers: libjpeg reads through them at a restart boundary


@functools.lru_cache(maxsize=1)
def seeds() -> dict[str, bytes]:
    import io

    from PIL import PngImagePlugin

    text = PngImagePlugin.PngInfo()
    text.add_text("comment", "x" * 5_000_000, zip=True)  # 5 MB of text in a few KB
    photo = Image.effect_mandelbrot((1600, 1200), (-2, -1.2, 1, 1.2), 60).convert("RGB")
    buf = io.BytesIO()
    photo.save(buf, "JPEG", progressive=True, quality=85)
    exif = corpus.exif_block(6, filler=60_000)
    return {
        "stray-byte scan bomb": corpus.jpeg_stray_scan_bomb(2000, 5000),
        "scan bomb": corpus.jpeg_scan_bomb(2000, 5000),
        "progressive photo": buf.getvalue(),
        "raw profile EXIF (PNG zTXt)": corpus.png_raw_profile_exif(corpus.exif_block(6, 2000)),
        "raw profile EXIF (PNG tEXt)": corpus.png_raw_profile_exif(exif, compressed=False),
        "WebP EXIF": corpus.webp_with_exif(exif),
        "JPEG EXIF": corpus.encode(photo.resize((400, 300)), "JPEG", exif=exif),
        "MPO": corpus.mpo(4000),
        "PNG text bomb": corpus.encode(Image.new("RGB", (64, 48)), "PNG", pnginfo=text),
        **{
            f"D3: FF {m:02X} after a restart interval": corpus.jpeg_restart_hidden_scans(marker=m)
            for m in RESERVED
        },
    }


def mutate(data: bytes, rng: random.Random, others: list[bytes]) -> tuple[str, bytes]:
    """One mutation, named: what libjpeg tolerates (stray bytes, unknown segments, a segment
    repeated) before a marker, or damage anywhere."""
    markers = [
        i for i in range(2, len(data) - 1) if data[i] == 0xFF and data[i + 1] not in (0, 0xFF)
    ]
    at = rng.choice(markers) if markers and rng.random() < 0.7 else rng.randrange(len(data))
    kind = rng.choice(["stray", "unknown", "reserved", "repeat", "flip", "cut", "splice"])
    if kind == "stray":
        return kind, data[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 4))) + data[
            at:
        ]
    if kind == "unknown":
        return kind, data[:at] + UNKNOWN_SEGMENT + data[at:]
    if kind == "reserved":  # a reserved marker and a length spanning up to 40 KB of what follows
        marker, length = rng.choice(RESERVED), rng.randint(2, min(40_000, len(data) - at + 2))
        return kind, data[:at] + bytes([0xFF, marker]) + length.to_bytes(2, "big") + data[at:]
    if kind == "repeat":  # the stretch up to the next marker, twice
        end = next((m for m in markers if m > at), len(data))
        return kind, data[:end] + data[at:end] + data[end:]
    if kind == "flip":
        return kind, data[:at] + bytes([rng.randrange(256)]) + data[at + 1 :]
    if kind == "cut":
        return kind, data[: max(at, 3)]
    other = rng.choice(others)
    return kind, data[:at] + other[rng.randrange(len(other)) :]


def decode_cpu(data: bytes) -> tuple[float, str]:
    """(CPU seconds of this process and its decode workers, what the decode answered)."""
    start, workers = time.process_time(), decode_pool.spent()
    try:
        food11.tensor_from_bytes(data)
        answer = "decoded"
    except food11.BadInput as exc:
        answer = f"{exc.status}: {str(exc)[:60]}"
    return time.process_time() - start + decode_pool.spent() - workers, answer


def test_every_seed_is_answered_within_the_budget():
    answers = {}
    for name, data in seeds().items():
        cpu, answer = decode_cpu(data)
        answers[name] = answer
        assert cpu < decode_budget.MAX_DECODE_CPU_S, f"{name}: {cpu:.2f} s ({answer})"
    # what each must answer: refused from its structure, or decoded (the MPO at reduced scale)
    assert (
        answers["stray-byte scan bomb"].startswith("413")
        and "scans" in answers["stray-byte scan bomb"]
    )
    assert answers["PNG text bomb"].startswith("413") and "metadata" in answers["PNG text bomb"]
    assert answers["progressive photo"] == answers["MPO"] == answers["WebP EXIF"] == "decoded"
    assert answers["JPEG EXIF"] == answers["raw profile EXIF (PNG tEXt)"] == "decoded"
    assert food11.load_image(seeds()["MPO"]).size == (500, 375)
    for m in RESERVED:  # the walk counts the scans behind a reserved marker: refused at once
        answer = answers[f"D3: FF {m:02X} after a restart interval"]
        assert answer.startswith("413") and "JPEG scans" in answer, answer


@pytest.mark.slow  # each bomb decodes until the kernel stops it: about 3 s
def test_with_the_structure_walk_off_the_kernel_bounds_every_seed(monkeypatch):
    """No marker layout gets past the budget: the walk switched off (a layout it misreads), every
    seed costs at most the worker's CPU limit (here 0.5 s) and is answered, a bomb with a 413
    that names the CPU time; photos still decode."""
    monkeypatch.setattr(decode_budget, "check", lambda data: decode_budget.Facts())
    monkeypatch.setattr(decode_budget, "MAX_DECODE_CPU_S", 0.5)
    answers = {}
    for name, data in seeds().items():
        cpu, answers[name] = decode_cpu(data)
        assert cpu < 1.0, f"{name}: {cpu:.2f} s ({answers[name]})"
    for name in ("stray-byte scan bomb", "scan bomb", *(n for n in answers if "D3" in n)):
        assert answers[name].startswith("413") and "CPU time" in answers[name], answers[name]
    assert answers["progressive photo"] == answers["MPO"] == "decoded"


@pytest.mark.slow  # about 10 s: 216 decodes
def test_mutated_files_cost_less_cpu_than_one_decode_may():
    rng = random.Random(43)
    pool = list(seeds().values())
    worst = (0.0, "", "")
    for name, data in seeds().items():
        for _ in range(MUTATIONS_PER_SEED):
            kind, mutated = mutate(data, rng, pool)
            cpu, answer = decode_cpu(mutated)
            worst = max(worst, (cpu, f"{name}, {kind}", answer))
            assert cpu < decode_budget.MAX_DECODE_CPU_S, f"{name}, {kind}: {cpu:.2f} s ({answer})"
    print(
        f"{len(pool) * MUTATIONS_PER_SEED} mutated files; the costliest: {worst[1]}, "
        f"{worst[0]:.2f} s of CPU ({worst[2]})"
    )


@pytest.mark.parametrize("stray", [b"\x00", b"\x42\x42", b"\xff\x00", UNKNOWN_SEGMENT])
def test_the_scans_after_what_libjpeg_skips_are_still_counted(stray):
    bomb = corpus.jpeg_scan_bomb(2000, 5000)
    every = bomb.replace(b"\xff\xda", stray + b"\xff\xda")  # before every scan header
    for crafted in (corpus.jpeg_stray_scan_bomb(2000, 5000, stray), every):
        cpu, answer = decode_cpu(crafted)
        assert answer.startswith("413") and "JPEG scans" in answer, answer
        assert cpu < 0.5
