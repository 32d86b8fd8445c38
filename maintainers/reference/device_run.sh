#!/usr/bin/env bash
# The reference run on a GPU machine with no network and no Docker (our H100 "device" machine):
# maintainers/reference/device_env.sh unpacks what maintainers/reference/pack_device.sh packed (its parts, one
# a call), then maintainers/reference/run_reference.py runs the parts named.
#   bash maintainers/reference/device_run.sh OUT_DIR PARTS      e.g. bash maintainers/reference/device_run.sh /tmp/h100 fastapi,triton
# Measurement settings: the notebooks' defaults, with shorter perf_analyzer windows than a class
# would use (a device call is limited to 10 minutes); override any LAB_* variable from outside.
set -euo pipefail
out=$1 which=$2   # not "parts": device_env.sh uses that name
source maintainers/reference/device_env.sh
export LAB_PERF_INTERVAL_MS=${LAB_PERF_INTERVAL_MS:-3000} LAB_PERF_RATE_SECONDS=${LAB_PERF_RATE_SECONDS:-5}
export LAB_PERF_REQUEST_COUNT=${LAB_PERF_REQUEST_COUNT:-1000}
echo "python3: $(command -v python3) ($(python3 -V)); GPUs: $(nvidia-smi -L | wc -l)"
python3 maintainers/reference/run_reference.py --out "$out" --parts "$which"
