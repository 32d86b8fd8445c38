"""Copy the requests' inputs to the GPU straight from the Python backend's shared memory.

The Python backend hands each request's input to model.py as a view of its shared-memory region
(/dev/shm/...). TunedClassifier.run stacks those views into one pinned buffer first (one memcpy
of the whole batch: 1.5 ms of a 14.4 ms execution cycle on the H100 for ~52 images of 150 KB,
docs/results/h100/execution_costs/), because the GPU's copy engine reads only page-locked memory
asynchronously. Page-locking the shared-memory region itself once (cudaHostRegister) lets the copy
engine read each request where it lies: one cudaMemcpyAsync a request, issued through ctypes
(about a microsecond each), and no copy through the CPU.

A region that cannot be registered (not shared memory, or the call fails) is remembered and its
requests take the stacking path: correctness never depends on the registration. The copies are
complete before run() returns (it waits for the logits), so the backend may reuse the region.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

HOST_TO_DEVICE = 1  # cudaMemcpyHostToDevice
REGISTER_DEFAULT = 0  # cudaHostRegisterDefault


def mappings(maps_text: str) -> list[tuple[int, int, str]]:
    """(start, end, path) of each mapping in a /proc/<pid>/maps text."""
    out = []
    for line in maps_text.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 5:
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        out.append((start, end, fields[5].strip() if len(fields) > 5 else ""))
    return out


class ShmRegions:
    """Which address ranges are page-locked shared memory, registering a region on first sight."""

    def __init__(self, register, read_maps=lambda: Path("/proc/self/maps").read_text()):
        self._register = register  # (address, size) -> 0 when the region is now page-locked
        self._read_maps = read_maps
        self.locked: list[tuple[int, int]] = []
        self.refused: list[tuple[int, int]] = []
        self.reasons: list[str] = []  # why the first refused addresses were refused

    def covers(self, address: int, size: int) -> bool:
        """True when [address, address + size) lies in a page-locked shared-memory region (it is
        registered now if it is shared memory not seen before)."""
        end = address + size
        if any(a <= address and end <= b for a, b in self.locked):
            return True
        if any(a <= address < b for a, b in self.refused):
            return False
        for start, stop, path in mappings(self._read_maps()):
            if start <= address < stop:
                if end > stop:
                    why = f"{size} bytes at {address:#x} run past the end of {path or 'a mapping'}"
                elif not path.startswith("/dev/shm/"):
                    why = f"{address:#x} is in {path or 'anonymous memory'}, not shared memory"
                else:
                    code = self._register(start, stop - start)
                    if code == 0:
                        self.locked.append((start, stop))
                        return True
                    why = f"cudaHostRegister({path}, {stop - start} bytes) returned {code}"
                self.refused.append((start, stop))
                self._say(why)
                return False
        self._say(f"{address:#x} is in no mapping of this process")
        return False

    def _say(self, why: str) -> None:
        if len(self.reasons) < 5:
            self.reasons.append(why)


def _cudart() -> ctypes.CDLL:
    """The CUDA runtime PyTorch has loaded into this process (found by its path in our maps)."""
    for _, _, path in mappings(Path("/proc/self/maps").read_text()):
        if "libcudart.so" in Path(path).name:
            lib = ctypes.CDLL(path)
            lib.cudaMemcpyAsync.argtypes = [
                ctypes.c_void_p,
                ctypes.c_void_p,
                ctypes.c_size_t,
                ctypes.c_int,
                ctypes.c_void_p,
            ]
            lib.cudaHostRegister.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
            return lib
    raise RuntimeError("no libcudart in this process: load PyTorch's CUDA first")


class DirectCopier:
    """Issues one host-to-device copy per request from page-locked shared memory."""

    def __init__(self):
        self._lib = _cudart()
        self.regions = ShmRegions(
            lambda address, size: self._lib.cudaHostRegister(address, size, REGISTER_DEFAULT)
        )

    def copy(self, parts, destination: int, stream: int) -> bool:
        """Copy the C-contiguous arrays `parts`, one after the other, to device address
        `destination` on `stream`; False (and nothing copied) when one of them is not in
        page-locked shared memory."""
        for p in parts:
            if not p.flags.c_contiguous:
                self.regions._say(f"an input of shape {p.shape} is not C-contiguous")
                return False
            if not self.regions.covers(p.ctypes.data, p.nbytes):
                return False
        offset = 0
        for p in parts:
            error = self._lib.cudaMemcpyAsync(
                destination + offset, p.ctypes.data, p.nbytes, HOST_TO_DEVICE, stream
            )
            if error:
                raise RuntimeError(f"cudaMemcpyAsync failed with CUDA error {error}")
            offset += p.nbytes
        return True
