"""servelab.serving.tuned_runtime on the CPU: both input formats give the lab's model answers.

(fp16 and CUDA graphs need a GPU: they are checked on the GPU machine by
maintainers/reference/run_reference.py, whose notebook 7 compares the tuned model with the fp32 one
on the same images.)
"""

import numpy as np
import pytest
from PIL import Image

from servelab import food11
from servelab.paths import MODEL_PTH
from servelab.serving import tuned_runtime
from servelab.serving.runtimes import TorchClassifier


def pixels(path) -> np.ndarray:
    img = food11.load_image(path.read_bytes()).resize(
        (food11.INPUT_SIZE, food11.INPUT_SIZE), Image.BILINEAR
    )
    return np.asarray(img, dtype=np.uint8)


@pytest.fixture(scope="module")
def reference(built_artifacts, test_images):
    x = np.stack([food11.tensor_from_bytes(p.read_bytes()) for p in test_images])
    return x, TorchClassifier(MODEL_PTH, device="cpu")(x)


def close(a, b, reference_logits) -> bool:
    spread = float(reference_logits.max() - reference_logits.min())
    return np.abs(a - b).max() <= 1e-4 * spread and (a.argmax(1) == b.argmax(1)).all()


@pytest.mark.slow  # runs the model on a batch: seconds, more on a busy machine
def test_fp32_input_matches_the_pytorch_runtime(reference):
    x, expected = reference
    runtime = tuned_runtime.TunedClassifier(MODEL_PTH, device="cpu", max_batch=16)
    assert close(runtime(x), expected, expected)
    # the requests of one execute() call arrive as separate arrays
    assert close(runtime.run([x[:1], x[1:3], x[3:]]), expected, expected)


@pytest.mark.slow  # runs the model on a batch: seconds, more on a busy machine
def test_uint8_pixels_normalised_by_the_runtime_match(reference, test_images):
    _, expected = reference
    runtime = tuned_runtime.TunedClassifier(
        MODEL_PTH, device="cpu", input_format="uint8_nhwc", max_batch=8
    )
    got = runtime(np.stack([pixels(p) for p in test_images]))
    assert close(got, expected, expected)


def test_batch_larger_than_max_is_refused(reference):
    runtime = tuned_runtime.TunedClassifier(MODEL_PTH, device="cpu", max_batch=2)
    with pytest.raises(ValueError, match="max_batch 2"):
        runtime(reference[0][:3])


@pytest.mark.parametrize(
    "option", [{"precision": "fp16"}, {"cuda_graphs": True}, {"compiled": True}]
)
def test_gpu_only_options_are_refused_on_cpu(option):
    with pytest.raises(ValueError, match="GPU"):
        tuned_runtime.TunedClassifier(MODEL_PTH, device="cpu", **option)


def test_tensors_already_on_the_device_give_the_same_logits(reference):
    """run_on_device() (inputs handed over through DLPack) stacks the requests on the device
    itself; on a CPU instance that is the same arithmetic as run()."""
    import torch

    x, expected = reference
    runtime = tuned_runtime.TunedClassifier(MODEL_PTH, device="cpu", max_batch=16)
    parts = [torch.from_numpy(x[:1]), torch.from_numpy(x[1:3]), torch.from_numpy(x[3:])]
    assert close(runtime.run_on_device(parts), expected, expected)
    with pytest.raises(ValueError, match="max_batch"):
        tuned_runtime.TunedClassifier(MODEL_PTH, device="cpu", max_batch=2).run_on_device(parts)


def test_graph_buckets_pad_at_most_twice():
    sizes = tuned_runtime.buckets(256)
    assert sizes[0] == 1 and sizes[-1] == 256
    assert all(b / a <= 2 for a, b in zip(sizes, sizes[1:]))
    assert tuned_runtime.buckets(16) == [1, 2, 4, 8, 16] and tuned_runtime.buckets(10) == [
        1,
        2,
        4,
        8,
        10,
    ]
    assert tuned_runtime.buckets(1) == [1]


def test_graph_buckets_with_a_step_pad_less_than_the_step():
    """graph_step k: powers of two below k, then every multiple of k; step 1: every size."""
    assert tuned_runtime.buckets(64, 8) == [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]
    assert tuned_runtime.buckets(64, 1) == list(range(1, 65))
    assert tuned_runtime.buckets(20, 8) == [1, 2, 4, 8, 16, 20]
    for step in (1, 3, 8):
        sizes = tuned_runtime.buckets(64, step)
        padded = [min(s for s in sizes if s >= n) - n for n in range(1, 65)]
        assert max(padded) < step, (step, max(padded))
    # the powers of two pad a batch of 46 to 64: the waste the step removes
    assert min(s for s in tuned_runtime.buckets(64) if s >= 46) == 64
    with pytest.raises(ValueError, match="step"):
        tuned_runtime.buckets(64, -1)


def test_the_stub_clock_splits_an_execution_into_its_phases(tmp_path):
    """stub_profile: the phases of each execution add up, and two readings' difference is what
    ran between them (per execution and per instance)."""
    import time as clock_time

    from servelab.serving import stub_profile

    runtime = tuned_runtime.TunedClassifier(MODEL_PTH, device="cpu", max_batch=8)
    # the clock is under test, not the model (the tests above run it): a stand-in of the same
    # shapes keeps run()'s stage and device phases, without 7 CPU batches of MobileNetV2 (10 s)
    runtime.model = lambda batch: batch.mean(dim=(2, 3)).repeat(1, 4)[:, :11]
    x = np.random.default_rng(3).integers(0, 255, (5, 3, 224, 224)).astype(np.float32) / 255
    clocks = [stub_profile.StubClock(tmp_path, f"inst_{i}") for i in range(2)]
    before = stub_profile.read(tmp_path)
    for clock in clocks:
        for _ in range(3):
            clock.start()
            clock_time.sleep(0.002)
            clock.mark("inputs")
            runtime.run([x[:2], x[2:]], clock)
            clock.mark("responses")
            clock.end(requests=2, images=5)
        clock.write()
    got = stub_profile.between(before, stub_profile.read(tmp_path))
    assert got["executions"] == 6 and got["requests"] == 12 and got["images"] == 30
    assert got["instances"] == 2 and got["mean_batch"] == 2 and got["mean_padded_batch"] == 5
    ms = got["ms_per_execution"]
    assert ms["inputs"] >= 2.0 and ms["device"] > 0 and ms["stage"] > 0
    assert got["execute_ms_per_execution"] == pytest.approx(
        sum(v for k, v in ms.items() if k != "between")
    )
    # only the executions after a reading count in the next difference
    mid = stub_profile.read(tmp_path)
    clocks[0].start()
    runtime.run([x[:1]], clocks[0])
    clocks[0].mark("responses")
    clocks[0].end(requests=1, images=1)
    clocks[0].write()
    assert stub_profile.between(mid, stub_profile.read(tmp_path))["executions"] == 1


def test_the_limit_over_several_gpus_sums_each_path_and_batch():
    """raw_limit --device all: the GPUs measured at the same time, each (path, batch) summed."""
    from servelab.serving import raw_limit

    def gpu(rate_b1, rate_b8):
        rows = [
            {"path": "p", "batch": 1, "images_per_s": rate_b1},
            {"path": "p", "batch": 8, "images_per_s": rate_b8},
        ]
        return {
            "device_name": "H200",
            "torch": "2",
            "rows": rows,
            "same_classes": {},
            "limit": max(rows, key=lambda r: r["images_per_s"]),
        }

    both = raw_limit.combine([gpu(10.0, 100.0), gpu(12.0, 90.0)])
    assert both["device_name"] == "2 x H200"
    assert {(r["batch"], r["images_per_s"]) for r in both["rows"]} == {(1, 22.0), (8, 190.0)}
    assert raw_limit.best(both["rows"])["images_per_s"] == 190.0
    assert [g["images_per_s"] for g in both["per_gpu_limit"]] == [100.0, 90.0]


def test_direct_inputs_register_shared_memory_once_and_refuse_the_rest():
    """pinned_shm.ShmRegions: a request's array in /dev/shm is page-locked once (its whole
    mapping), later arrays in the same mapping need no new registration, and memory that is not
    shared memory, or that the driver refused, takes the stacking path."""
    from servelab.serving import pinned_shm

    maps = (
        "7f0000000000-7f0000100000 rw-s 00000000 00:1a 12 /dev/shm/triton_python_backend_shm_0\n"
        "7f0000200000-7f0000300000 rw-p 00000000 00:00 0 \n"
        "7f0000400000-7f0000500000 rw-s 00000000 00:1a 13 /dev/shm/refused\n"
        "7f0000600000-7f0000700000 r-xp 00000000 08:01 99 /usr/lib/libcudart.so.13\n"
    )
    calls = []

    def register(address, size):
        calls.append((address, size))
        return 1 if address == 0x7F0000400000 else 0  # the driver refuses this one (error 1)

    regions = pinned_shm.ShmRegions(register, read_maps=lambda: maps)
    shm = 0x7F0000000000
    assert regions.covers(shm + 4096, 150_528) and regions.covers(shm + 200_000, 150_528)
    assert calls == [(shm, 0x100000)]  # registered once, whole mapping
    assert not regions.covers(0x7F0000200000, 10)  # anonymous memory: not shared
    assert not regions.covers(shm + 0x100000 - 10, 100)  # runs past the mapping's end
    assert not regions.covers(0x7F0000400010, 10) and not regions.covers(0x7F0000400010, 10)
    assert calls == [(shm, 0x100000), (0x7F0000400000, 0x100000)]  # a refusal is not retried
    assert not regions.covers(0x1000, 10)  # not mapped at all
    assert regions.reasons[-1] == "0x1000 is in no mapping of this process"
    assert any("returned 1" in r for r in regions.reasons)
    assert any("not shared memory" in r for r in regions.reasons)
    assert pinned_shm.mappings(maps)[3] == (
        0x7F0000600000,
        0x7F0000700000,
        "/usr/lib/libcudart.so.13",
    )


def test_direct_inputs_need_a_gpu_and_graphs():
    with pytest.raises(ValueError, match="GPU instance|cuda_graphs"):
        tuned_runtime.TunedClassifier(MODEL_PTH, device="cpu", max_batch=2, direct_inputs=True)


def test_direct_copies_go_one_after_the_other_into_the_graph_input():
    """DirectCopier.copy: one host-to-device copy a request, each at the end of the one before,
    of that request's own bytes, on the stream given; nothing at all when one request is not in
    page-locked shared memory (the caller then stacks the batch)."""
    from servelab.serving import pinned_shm

    class Lib:
        def __init__(self):
            self.calls = []

        def cudaMemcpyAsync(self, dst, src, size, kind, stream):  # noqa: N802 - CUDA's name
            self.calls.append((dst, src, size, kind, stream))
            return 0

    parts = [np.zeros((n, 224, 224, 3), np.uint8) for n in (1, 3, 2)]
    copier = pinned_shm.DirectCopier.__new__(pinned_shm.DirectCopier)
    copier._lib = Lib()
    inside = {p.ctypes.data for p in parts}
    copier.regions = pinned_shm.ShmRegions(lambda a, s: 0, read_maps=lambda: "")
    copier.regions.covers = lambda address, size: address in inside
    assert copier.copy(parts, destination=1000, stream=7)
    item = 224 * 224 * 3
    assert copier._lib.calls == [
        (1000, parts[0].ctypes.data, item, pinned_shm.HOST_TO_DEVICE, 7),
        (1000 + item, parts[1].ctypes.data, 3 * item, pinned_shm.HOST_TO_DEVICE, 7),
        (1000 + 4 * item, parts[2].ctypes.data, 2 * item, pinned_shm.HOST_TO_DEVICE, 7),
    ]
    copier._lib.calls.clear()
    outside = np.zeros((1, 224, 224, 3), np.uint8)
    assert not copier.copy([parts[0], outside], destination=1000, stream=7)
    assert copier._lib.calls == []  # checked before any copy is issued
    strided = np.zeros((2, 224, 224, 6), np.uint8)[..., ::2]
    inside.add(strided.ctypes.data)
    assert not copier.copy([strided], destination=1000, stream=7)
    assert "not C-contiguous" in copier.regions.reasons[-1]
