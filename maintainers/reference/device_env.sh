#!/usr/bin/env bash
# Source this on the GPU machine (no network), from the repository root: it keeps the parts of
# maintainers/reference/pack_device.sh carried by this call in /tmp (the only folder a warm machine keeps
# between device calls: each call gets a fresh copy of the working tree), unpacks them once all
# are there (device.parts, carried with the last, says how many), and sets the paths: the lab's
# packages and onnxruntime-gpu first on PYTHONPATH, numpy < 2 and onnxruntime-gpu first for the
# Python-backend stubs, the model files in /tmp.
#   source maintainers/reference/device_env.sh
parts=/tmp/lab_parts dev=/tmp/lab_device
mkdir -p "$parts"
cp -n .whl/device.* "$parts"/ 2>/dev/null || true
have=$(find "$parts" -name 'device.tar.xz.part*' | wc -l)
want=$(cat "$parts/device.parts" 2>/dev/null || echo "?")
if [ ! -d "$dev/site/pytriton" ] && [ -f "$parts/device.sha256" ] && [ "$have" = "$want" ]; then
  if [ "$(cat "$parts"/device.tar.xz.part* | sha256sum | cut -d' ' -f1)" = "$(cat "$parts/device.sha256")" ]; then
    mkdir -p "$dev" && cat "$parts"/device.tar.xz.part* | tar xJf - -C "$dev" && rm -f "$parts"/*.part*
    cp "$dev"/site/nvidia_pytriton.libs/libb64.so.0d* "$dev/site/bin/"   # perf_analyzer's one missing library
  else
    echo "device_env: the $have parts do not match device.sha256: carry them all again"
  fi
fi
[ -d "$dev/site/pytriton" ] || echo "device_env: $have of $want parts here: not unpacked yet"
# Ray Serve's own parts (maintainers/reference/pack_ray.sh, carried in .whl/ray/), kept and unpacked alike
ray=/tmp/lab_ray
cp -n .whl/ray/ray.* "$parts"/ 2>/dev/null || true
have_ray=$(find "$parts" -name 'ray.tar.xz.part*' | wc -l)
want_ray=$(cat "$parts/ray.parts" 2>/dev/null || echo "?")
if [ ! -d "$ray/site/ray" ] && [ -f "$parts/ray.sha256" ] && [ "$have_ray" = "$want_ray" ]; then
  if [ "$(cat "$parts"/ray.tar.xz.part* | sha256sum | cut -d' ' -f1)" = "$(cat "$parts/ray.sha256")" ]; then
    mkdir -p "$ray" && cat "$parts"/ray.tar.xz.part* | tar xJf - -C "$ray" && rm -f "$parts"/ray.tar.xz.part*
  else
    echo "device_env: the $have_ray Ray parts do not match ray.sha256: carry them all again"
  fi
fi
if [ "$have_ray" != 0 ] || [ -f "$parts/ray.parts" ]; then
  [ -d "$ray/site/ray" ] || echo "device_env: $have_ray of $want_ray Ray parts here: not unpacked yet"
fi
export PYTHONPATH="$dev/ort:$dev/site:$ray/site:$PWD" PATH="$dev/site/bin:$PATH"
export LD_LIBRARY_PATH="$dev/site/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LAB_TRITON_PYTHONPATH="$dev/stub_numpy:$dev/ort"   # the stubs ignore PYTHONPATH (labstack/triton_local.py)
export LAB_ARTIFACTS_DIR=/tmp/lab_artifacts PYTHONUNBUFFERED=1   # the model files outlive the call
python3 -c "import onnxruntime as o; print('onnxruntime', o.__version__, o.get_available_providers())" 2>/dev/null || true
