#!/usr/bin/env bash
# Pack onnxruntime-gpu for the GPU reference machine (Python 3.12, CUDA 13 libraries, no network).
# Its wheel (255 MB; the CUDA provider library alone is 284 MB unpacked) is larger than the 64 MiB
# one device call may carry, so it goes in parts: xz-compressed (~204 MB), split into 56 MiB pieces
# (a piece plus the ~2 MB working tree stays under 64 MiB): .whl_ort/ort_site.tar.xz.part00, 01, ...
# (git-ignored). Carry one part per call, the calls close together (a warm machine keeps what
# earlier calls carried); gpu_reference/device_run.sh joins them once every part is there (SHA-256
# checked) and puts ONNX Runtime with the CUDA provider on the path.
#   bash gpu_reference/pack_onnxruntime_gpu.sh [VERSION]      (default 1.31.1: a CUDA 13 build)
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-1.31.1}
work=$(mktemp -d)
rm -rf .whl_ort && mkdir -p .whl_ort "$work/site"
plat=(--platform manylinux2014_x86_64)
for n in 28 27 17; do plat+=(--platform "manylinux_2_${n}_x86_64"); done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${plat[@]}" -d "$work" "onnxruntime-gpu==$version"
unzip -qo "$work"/onnxruntime_gpu-*.whl -d "$work/site"
tar cJf "$work/ort_site.tar.xz" -C "$work/site" .
split -b 56M -d -a 2 "$work/ort_site.tar.xz" .whl_ort/ort_site.tar.xz.part
(cd .whl_ort && sha256sum "$work/ort_site.tar.xz" | cut -d' ' -f1 > ort_site.sha256)
rm -rf "$work"
ls -l .whl_ort
echo "carry one part per device call: ${PWD##*/}/.whl_ort/ort_site.tar.xz.partNN (and ort_site.sha256 with the first)"
