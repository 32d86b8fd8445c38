#!/usr/bin/env bash
# The reference run on a GPU machine with no network and no Docker (our H100 "device" machine):
# unpack what gpu_reference/pack_wheels.sh packed into .whl/, then run gpu_reference/run_reference.py.
#   bash gpu_reference/device_run.sh OUT_DIR PARTS      e.g. bash gpu_reference/device_run.sh /tmp/h100 fastapi,triton
# Measurement settings: the notebooks' defaults, with shorter perf_analyzer windows than a class
# would use (a device call is limited to 10 minutes); override any LAB_* variable from outside.
set -euo pipefail
out=$1 parts=$2
site=/tmp/lab_site stubs=/tmp/lab_stub_numpy b64=/tmp/lab_b64
if [ ! -d "$site/pytriton" ]; then
  mkdir -p "$site" "$stubs" "$b64"
  tar xJf .whl/device_site.tar.xz -C "$site"
  python3 -m pip install -q --no-deps --target "$site" .whl/*.whl
  tar xJf .whl/stub_numpy.tar.xz -C "$stubs"
  cp "$site"/nvidia_pytriton.libs/libb64.so.0d* "$b64/"   # perf_analyzer's one missing library
fi
# onnxruntime-gpu, when gpu_reference/pack_onnxruntime_gpu.sh's parts have all been carried (one per call)
ort=/tmp/lab_ort_gpu
if [ ! -d "$ort/onnxruntime" ] && [ -f .whl_ort/ort_site.sha256 ]; then
  if [ "$(cat .whl_ort/ort_site.tar.xz.part* | sha256sum | cut -d' ' -f1)" = "$(cat .whl_ort/ort_site.sha256)" ]; then
    mkdir -p "$ort" && cat .whl_ort/ort_site.tar.xz.part* | tar xJf - -C "$ort"
  else
    echo "onnxruntime-gpu: not every part is here yet ($(ls .whl_ort | grep -c part) carried): ONNX runs on the CPU"
  fi
fi
path="$site"
[ -d "$ort/onnxruntime" ] && path="$ort:$site"   # before the machine's CPU-only onnxruntime
export PYTHONPATH="$path:$PWD" PATH="$site/bin:$PATH" LD_LIBRARY_PATH="$b64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
python3 -c "import onnxruntime as o; print('onnxruntime', o.__version__, o.get_available_providers())" || true
export LAB_TRITON_PYTHONPATH="$stubs"   # numpy < 2 for the Python-backend stubs (see labstack/triton_local.py)
export LAB_PERF_INTERVAL_MS=${LAB_PERF_INTERVAL_MS:-3000} LAB_PERF_RATE_SECONDS=${LAB_PERF_RATE_SECONDS:-5}
export LAB_PERF_REQUEST_COUNT=${LAB_PERF_REQUEST_COUNT:-1000}
echo "python3: $(command -v python3) ($(python3 -V)); GPUs: $(nvidia-smi -L | wc -l)"
python3 gpu_reference/run_reference.py --out "$out" --parts "$parts"
