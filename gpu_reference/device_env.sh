#!/usr/bin/env bash
# Source this on the GPU machine (no network): it unpacks what gpu_reference/pack_wheels.sh and
# pack_onnxruntime_gpu.sh packed, once, into /tmp (the only folder a warm machine keeps between
# device calls: each call gets a fresh copy of the working tree), and sets the paths.
#   source gpu_reference/device_env.sh
site=/tmp/lab_site stubs=/tmp/lab_stub_numpy b64=/tmp/lab_b64 ort=/tmp/lab_ort_gpu ort_parts=/tmp/lab_ort_parts
if [ ! -d "$site/pytriton" ] && [ -f .whl/device_site.tar.xz ]; then
  mkdir -p "$site" "$stubs" "$b64"
  tar xJf .whl/device_site.tar.xz -C "$site"
  python3 -m pip install -q --no-deps --target "$site" .whl/*.whl
  tar xJf .whl/stub_numpy.tar.xz -C "$stubs"
  cp "$site"/nvidia_pytriton.libs/libb64.so.0d* "$b64/"   # perf_analyzer's one missing library
fi
[ -d "$site/pytriton" ] || echo "device_env: no lab packages yet: carry .whl in this call"
# onnxruntime-gpu comes in parts, one per call: keep each in /tmp until all are there
mkdir -p "$ort_parts"
cp -n .whl_ort/* "$ort_parts"/ 2>/dev/null || true
if [ ! -d "$ort/onnxruntime" ] && [ -f "$ort_parts/ort_site.sha256" ]; then
  if [ "$(cat "$ort_parts"/ort_site.tar.xz.part* | sha256sum | cut -d' ' -f1)" = "$(cat "$ort_parts/ort_site.sha256")" ]; then
    mkdir -p "$ort" && cat "$ort_parts"/ort_site.tar.xz.part* | tar xJf - -C "$ort" && rm -f "$ort_parts"/*.part*
  else
    echo "device_env: onnxruntime-gpu: $(ls "$ort_parts" | grep -c part) part(s) here so far"
  fi
fi
path="$site"
stub_path="$stubs"
if [ -d "$ort/onnxruntime" ]; then
  path="$ort:$site"             # before the machine's CPU-only onnxruntime
  stub_path="$stubs:$ort"       # the Python-backend stubs ignore PYTHONPATH: they get it this way
fi
export PYTHONPATH="$path:$PWD" PATH="$site/bin:$PATH" LD_LIBRARY_PATH="$b64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LAB_TRITON_PYTHONPATH="$stub_path"   # first on the stubs' import path (labstack/triton_local.py)
python3 -c "import onnxruntime as o; print('onnxruntime', o.__version__, o.get_available_providers())" || true
