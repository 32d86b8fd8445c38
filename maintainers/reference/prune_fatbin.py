"""Blank the GPU code a shared library carries for other GPUs than the one it will run on.

    python3 maintainers/reference/prune_fatbin.py LIB.so SM
        e.g. python3 maintainers/reference/prune_fatbin.py ... libonnxruntime_providers_cuda.so 90

Why: onnxruntime-gpu's CUDA provider (284 MB) holds compiled kernels (cubins) for sm_75, 80, 86,
89, 90 and 120; the reference GPU is an H100 (sm_90), and a device call carries 64 MiB. Zeroing
the other cubins' bytes in place keeps every offset and header of the file as it was (the CUDA
runtime picks the entry for its GPU by the headers), and xz compresses the zeros to nothing:
the packed provider shrinks from about 204 MB to about 70 MB. PTX entries are kept.
"""

from __future__ import annotations

import struct
import sys

FATBIN_MAGIC = 0xBA55ED50
ELF_CUBIN = 2  # entry kind: 1 = PTX text, 2 = ELF cubin


def fatbin_section(data: bytes) -> tuple[int, int]:
    """(offset, size) of the .nv_fatbin section of a 64-bit little-endian ELF file."""
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    names_off = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 0x18)[0]
    for i in range(shnum):
        header = shoff + i * shentsize
        name_at = names_off + struct.unpack_from("<I", data, header)[0]
        name = data[name_at : data.index(b"\0", name_at)]
        if name == b".nv_fatbin":
            offset, size = struct.unpack_from("<QQ", data, header + 0x18)
            return offset, size
    raise ValueError("no .nv_fatbin section: not a CUDA library")


def prune(data: bytearray, keep_sm: int) -> dict[int, int]:
    """Zero every cubin not built for keep_sm; return {sm: bytes} of what was zeroed."""
    offset, size = fatbin_section(data)
    pos, end, zeroed = offset, offset + size, {}
    while pos + 16 <= end:
        magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", data, pos)
        if magic != FATBIN_MAGIC:
            pos += 8  # fatbins are 8-byte aligned inside the section
            continue
        entry, last = pos + header_size, pos + header_size + fat_size
        while entry < last:
            kind, _ver, entry_header, padded = struct.unpack_from("<HHII", data, entry)
            sm = struct.unpack_from("<I", data, entry + 28)[0]
            if kind == ELF_CUBIN and sm != keep_sm:
                start = entry + entry_header
                data[start : start + padded] = bytes(padded)
                zeroed[sm] = zeroed.get(sm, 0) + padded
            entry += entry_header + padded
        pos = last
    return zeroed


def main() -> None:
    path, keep_sm = sys.argv[1], int(sys.argv[2])
    with open(path, "rb") as f:
        data = bytearray(f.read())
    zeroed = prune(data, keep_sm)
    with open(path, "wb") as f:
        f.write(data)
    print(
        f"{path}: kept sm_{keep_sm}; blanked "
        + ", ".join(f"sm_{sm} {size / 1e6:.1f} MB" for sm, size in sorted(zeroed.items()))
    )


if __name__ == "__main__":
    main()
