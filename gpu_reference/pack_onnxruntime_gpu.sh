#!/usr/bin/env bash
# Pack onnxruntime-gpu for the GPU reference machine (Python 3.12, CUDA 13 libraries, no network).
# Its CUDA provider library carries kernels for six GPU generations (284 MB); prune_fatbin.py
# blanks all but the reference GPU's (sm_90, H100/H200) in place, so the xz archive is ~70 MB
# instead of ~204 MB, split into 34 MiB parts (a part plus .whl's leftovers stays under the
# 64 MiB a device call carries): .whl_ort/ort_site.tar.xz.part00, 01 (git-ignored). Carry one
# part per call, the calls close together; gpu_reference/device_env.sh keeps each in /tmp and
# joins them once every part is there (SHA-256 checked).
#   bash gpu_reference/pack_onnxruntime_gpu.sh [VERSION] [SM]   (default 1.31.1, a CUDA 13 build; 90)
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-1.31.1} sm=${2:-90}
work=$(mktemp -d)
rm -rf .whl_ort && mkdir -p .whl_ort "$work/site"
plat=(--platform manylinux2014_x86_64)
for n in 28 27 17; do plat+=(--platform "manylinux_2_${n}_x86_64"); done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${plat[@]}" -d "$work" "onnxruntime-gpu==$version"
unzip -qo "$work"/onnxruntime_gpu-*.whl -d "$work/site"
python3 gpu_reference/prune_fatbin.py "$work/site/onnxruntime/capi/libonnxruntime_providers_cuda.so" "$sm"
tar cJf "$work/ort_site.tar.xz" -C "$work/site" .
split -b 34M -d -a 2 "$work/ort_site.tar.xz" .whl_ort/ort_site.tar.xz.part
(cd .whl_ort && sha256sum "$work/ort_site.tar.xz" | cut -d' ' -f1 > ort_site.sha256)
rm -rf "$work"
ls -l .whl_ort
echo "carry one part per device call: .whl_ort/ort_site.tar.xz.partNN (and ort_site.sha256 with the first)"
