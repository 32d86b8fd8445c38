"""The decode budget (servelab.decode_budget) through the one decoding path (servelab.food11), in
process: what costs too much is refused from the file's structure before a pixel is decoded, in
milliseconds, with a 413 that names the limit; legitimate photos at the limits still decode; the
kernel stops a decode that runs over its CPU budget, in the worker process that decodes it
(servelab.decode_pool), whatever the file's layout. The bombs are made here (reliability.corpus),
never stored. (Against the running services: tests/test_decode_cost.py.)"""

from __future__ import annotations

import io
import logging
import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from maintainers.reliability import corpus
from servelab import decode_budget, decode_pool, food11
from servelab.serving.log_limit import RateLimit

pytestmark = pytest.mark.timeout(300)


def _refused(data: bytes) -> tuple[food11.BadInput, float]:
    """The refusal, and the CPU it cost: this thread's and the decode workers'."""
    start, workers = time.thread_time(), decode_pool.spent()
    with pytest.raises(food11.BadInput) as err:
        food11.tensor_from_bytes(data)
    return err.value, time.thread_time() - start + decode_pool.spent() - workers


def _photo(side: int, fmt: str = "JPEG", **kw) -> bytes:
    """Smooth noise, side x side: decodes like a photo, not like a flat canvas."""
    rng = np.random.default_rng(side)
    small = Image.fromarray(rng.integers(0, 255, (side // 16, side // 16, 3), dtype=np.uint8))
    buf = io.BytesIO()
    small.resize((side, side)).save(buf, fmt, **kw)
    return buf.getvalue()


def test_a_scan_bomb_is_refused_in_milliseconds_with_a_413_naming_the_scans():
    error, cpu = _refused(corpus.jpeg_scan_bomb(2000, 5000))
    assert error.status == 413 and "JPEG scans" in str(error) and "baseline" in str(error)
    assert cpu < 0.5, f"{cpu:.2f} s of CPU to refuse it"


@pytest.mark.slow
def test_the_scan_bomb_is_real_pillow_alone_spends_seconds_on_it():
    """What the budget saves: the same kind of file, decoded by Pillow without the lab's checks."""
    bomb = corpus.jpeg_scan_bomb(2000, 2000)
    start = time.thread_time()
    with Image.open(io.BytesIO(bomb)) as img:
        img.draft("RGB", (224, 224))
        img.load()
    assert time.thread_time() - start > 0.5  # about 4 s on the lab's 2-core machine


def test_many_scans_of_a_large_canvas_are_refused_by_their_blocks():
    """Under the scan count, over the blocks: 40 scans over a 40 Mpx grey canvas."""
    error, cpu = _refused(corpus.jpeg_scan_bomb(6300, 40))
    assert error.status == 413 and "8x8 blocks" in str(error) and cpu < 0.5


@pytest.mark.slow  # two 12 Mpx photos made and decoded: about 2 s
def test_progressive_photos_as_encoders_write_them_decode():
    """libjpeg's default progression (10 scans), 4:4:4 and 4:2:0, at 12 Mpx; a few dozen extra
    scans on a small image, as an optimising encoder might write."""
    for kw in ({}, {"subsampling": 0}):
        data = _photo(4000, progressive=True, quality=85, **kw)
        facts = decode_budget.check(data)
        assert facts.scans == 10 and facts.scan_blocks < decode_budget.MAX_JPEG_SCAN_BLOCKS
        assert food11.tensor_from_bytes(data).shape == (3, 224, 224)
    assert food11.tensor_from_bytes(corpus.jpeg_scan_bomb(640, 40)).shape == (3, 224, 224)


def test_pixels_per_side_and_aspect_are_refused_before_decoding():
    tall = corpus.encode(Image.new("L", (1, 40_000)), "PNG")  # the 1 x 40,000,000 kind, smaller
    error, cpu = _refused(tall)
    assert error.status == 413 and "per side" in str(error) and cpu < 0.5
    error, _ = _refused(corpus.encode(Image.new("L", (2100, 100)), "PNG"))
    assert "times longer" in str(error) and f"{decode_budget.MAX_ASPECT}:1" in str(error)
    panorama = corpus.encode(Image.new("RGB", (16_000, 2_000)), "JPEG")  # 8:1
    assert food11.tensor_from_bytes(panorama).shape == (3, 224, 224)


def test_metadata_over_the_budget_is_refused_and_a_phone_photo_is_turned_upright():
    error, cpu = _refused(corpus.png_with_exif(8 * 2**20 - 4096))
    assert error.status == 413 and "EXIF" in str(error) and "exiftool" in str(error)
    assert cpu < 0.5
    # a JPEG with a full 64 KiB APP1 (EXIF, orientation 6: shot upright) still decodes, upright
    exif = Image.Exif()
    exif[0x0112] = 6
    exif[0x9286] = b"A" * 60_000
    wide = Image.new("RGB", (300, 100), (0, 0, 0))
    wide.paste((255, 255, 255), (0, 0, 150, 100))  # left half white: after turning, the top
    x = food11.tensor_from_bytes(corpus.encode(wide, "JPEG", exif=exif))
    assert x[0, 20, 112] > x[0, 200, 112]
    text = PngInfo()
    for i in range(5):  # text chunks: 5 x 1 MiB, stored as they are
        text.add_text(f"note{i}", "x" * 2**20)
    error, _ = _refused(corpus.encode(Image.new("RGB", (64, 48)), "PNG", pnginfo=text))
    assert error.status == 413 and "bytes of metadata" in str(error)


def test_a_png_cut_into_too_many_chunks_is_refused():
    png = corpus.encode(Image.new("RGB", (64, 48)), "PNG")
    chunk = b"\0\0\0\0tEXt" + b"\x00" * 4  # an empty text chunk (its CRC is not checked first)
    many = png[:33] + chunk * (decode_budget.MAX_PARTS + 1) + png[33:]
    error, cpu = _refused(many)
    assert "PNG chunks" in str(error) and cpu < 0.5


@pytest.mark.slow  # a 40 Mpx PNG made, then decoded until the kernel stops it: about 2 s
def test_the_cpu_budget_stops_a_decode_that_runs_over_it(monkeypatch):
    """A real 40 Mpx PNG (about 0.4 s of CPU to decode) under a budget of 0.1 s: the kernel stops
    its worker at 0.1 s of CPU time."""
    # pixels (x, y, x/7 + y/3) mod 256, built channel by channel in uint8: the same image as
    # np.mgrid would give, without its 2 GB of int64 intermediates (14 s on a busy 2-core machine)
    i = np.arange(6300, dtype=np.uint16)
    canvas = np.empty((6300, 6300, 3), np.uint8)
    canvas[..., 0] = (i % 256)[None, :]
    canvas[..., 1] = (i % 256)[:, None]
    canvas[..., 2] = ((i // 7)[None, :] + (i // 3)[:, None]) % 256
    png = corpus.encode(Image.fromarray(canvas), "PNG", compress_level=1)  # 1 s less to write
    monkeypatch.setattr(decode_budget, "MAX_DECODE_CPU_S", 0.1)
    error, cpu = _refused(png)
    assert error.status == 413 and "more than 0.1 s of CPU" in str(error)
    assert cpu < 0.5, f"stopped only after {cpu:.2f} s"


def test_the_kernel_bounds_a_decode_whatever_its_markers_say(monkeypatch):
    """Issue 52's D3 (a reserved marker after a restart interval hid 2,000 scans from the walk:
    7 s of CPU) with the structure walk switched off, as a layout no walk foresees would pass it:
    the worker decoding it is ended by the kernel at its CPU budget, 413; the pool starts another
    and the next photo decodes. The walk itself now counts those scans (refused in ms)."""
    bomb = corpus.jpeg_restart_hidden_scans()
    error, cpu = _refused(bomb)
    assert error.status == 413 and "JPEG scans" in str(error) and cpu < 0.5
    monkeypatch.setattr(decode_budget, "check", lambda data: decode_budget.Facts())
    monkeypatch.setattr(decode_budget, "MAX_DECODE_CPU_S", 0.5)
    start = time.monotonic()
    error, cpu = _refused(bomb)
    assert error.status == 413 and "more than 0.5 s of CPU time" in str(error), error
    assert 0.4 < cpu < 1.0, f"{cpu:.2f} s of CPU"  # the worker's, counted by the kernel
    assert time.monotonic() - start < 30
    assert food11.tensor_from_bytes(_photo(640)).shape == (3, 224, 224)
    assert food11.tensors_from_bytes([_photo(640)] * 3).shape == (3, 3, 224, 224)


def test_a_decode_worker_killed_mid_decode_is_a_422_and_replaced(monkeypatch):
    """A worker that ends otherwise than by its CPU limit (the OOM killer, a decoder crash):
    that upload gets a 422 that says so, the next one a fresh worker."""
    monkeypatch.setattr(decode_budget, "check", lambda data: decode_budget.Facts())
    pool = decode_pool.pool()
    answer: list = []
    decoding = threading.Thread(
        target=lambda: answer.append(_refused(corpus.jpeg_restart_hidden_scans())[0])
    )
    decoding.start()
    busy: set[int] = set()
    deadline = time.monotonic() + 30
    while not busy and time.monotonic() < deadline:
        time.sleep(0.2)
        busy = _pool_children() - {w.proc.pid for w in pool._idle}
    for pid in busy:
        os.kill(pid, signal.SIGKILL)
    decoding.join(timeout=60)
    assert busy and answer and answer[0].status == 422, answer
    assert "decoder stopped" in str(answer[0])
    assert food11.tensor_from_bytes(_photo(640)).shape == (3, 224, 224)


def _pool_children() -> set[int]:
    """The decode workers this process has started: its children running servelab.decode_pool."""
    found, me = set(), str(os.getpid())
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = stat.read_text().rsplit(")", 1)[1].split()[1]
            argv = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError):
            continue
        if parent == me and b"servelab.decode_pool" in argv:
            found.add(int(stat.parent.name))
    return found


def test_refused_files_leave_no_worker_behind():
    """A file the worker refuses (damaged) is answered, and its worker serves the next one: no
    more workers than decodes at once, however many such files come."""
    damaged = _photo(640)[:5000]
    for _ in range(3 * decode_budget.MAX_CONCURRENT_DECODES):
        error, _ = _refused(damaged)
        assert error.status == 400 and "damaged" in str(error)
    assert len(_pool_children()) <= decode_budget.MAX_CONCURRENT_DECODES


def test_the_decode_workers_are_few_reused_and_see_no_secret(monkeypatch):
    """A worker per concurrent decode at most, reused (not a process per request); each one's
    environment is an allow-list, so a service's secrets stay in the service."""
    monkeypatch.setenv("TRITON_ADMIN_KEY", "not-for-the-workers")
    monkeypatch.setattr(decode_pool, "_pool", None)  # a pool of its own, started from here
    pool = decode_pool.pool()
    try:
        food11.tensor_from_bytes(_photo(640))
        before = {w.proc.pid for w in pool._idle}
        for _ in range(5):
            food11.tensor_from_bytes(_photo(640))
        assert {w.proc.pid for w in pool._idle} == before  # the same processes
        assert 1 <= len(before) <= decode_budget.MAX_CONCURRENT_DECODES
        for pid in before:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            names = {e.split(b"=", 1)[0].decode() for e in environ.split(b"\0") if e}
            assert names <= {*decode_pool.ENV_KEPT, "PYTHONPATH"}, names
            assert b"not-for-the-workers" not in environ
    finally:
        pool.close()


def test_one_request_has_a_budget_for_all_its_images(monkeypatch):
    photo = _photo(3000, progressive=True)  # about 0.1 s of CPU each
    monkeypatch.setattr(decode_budget, "MAX_REQUEST_DECODE_CPU_S", 0.15)
    with pytest.raises(food11.BadInput) as err:
        food11.tensors_from_bytes([photo] * 16)
    assert err.value.status == 413 and "CPU time" in str(err.value)
    monkeypatch.setattr(decode_budget, "MAX_REQUEST_DECODE_CPU_S", 60.0)
    assert food11.tensors_from_bytes([photo] * 2).shape == (2, 3, 224, 224)


def test_a_request_waits_for_a_decode_slot_only_so_long(monkeypatch):
    """Every worker busy (with other requests' decodes): 503 'try again' after DECODE_WAIT_S."""
    monkeypatch.setattr(decode_budget, "DECODE_WAIT_S", 0.3)
    slots = decode_pool.pool().slots
    held = [slots.acquire(timeout=5) for _ in range(decode_budget.MAX_CONCURRENT_DECODES)]
    try:
        start = time.monotonic()
        error, _ = _refused(corpus.encode(Image.new("RGB", (64, 48)), "PNG"))
        waited = time.monotonic() - start
    finally:
        for _ in held:
            slots.release()
    assert all(held) and error.status == 503 and "try again" in str(error)
    assert 0.25 < waited < 5.0
    assert food11.tensor_from_bytes(corpus.encode(Image.new("RGB", (64, 48)), "PNG")).any()


def test_the_rate_limit_logs_one_record_per_interval_with_a_count():
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    logger = logging.getLogger("test_decode_budget.queue")
    logger.propagate = False
    logger.addHandler(Keep())
    logger.addFilter(RateLimit(0.5))
    threads = [
        threading.Thread(
            target=lambda: [logger.warning("Task queue depth is %d", i) for i in range(250)]
        )
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    logger.warning("another message")
    assert len(records) == 2 and records[0].startswith("Task queue depth is")
    time.sleep(0.6)
    logger.warning("Task queue depth is %d", 7)
    assert (
        records[-1] == "Task queue depth is 7 (and 999 more like it in the last 0.5 s, not logged)"
    )
