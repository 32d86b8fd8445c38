#!/usr/bin/env bash
# Pack everything the GPU reference machine lacks (it has Python 3.12, torch, numpy, pandas; no
# network) into parts that a device call each can carry (64 MiB a call, working tree included;
# the tree grows with every reference page, so three parts by default, PACK_PARTS to change): the
# lab's service packages, Triton 2.51 from the nvidia-pytriton wheel (its Python 3.12 stub only),
# perf_analyzer and libb64, numpy < 2 for the Python-backend stubs, and onnxruntime-gpu with its
# CUDA provider's kernels for other GPUs than sm_90 blanked (prune_fatbin.py). Output:
# .whl/device.tar.xz.part00, part01, ..., device.sha256 and device.parts (git-ignored). Carry one
# part a call, the last with device.sha256 and device.parts, the calls close together;
# maintainers/reference/device_env.sh keeps each in /tmp and unpacks once all are there.
#   bash maintainers/reference/pack_device.sh [SM]        (default 90: H100, H200)
set -euo pipefail
cd "$(dirname "$0")/../.."
sm=${1:-90}
work=$(mktemp -d)
rm -rf .whl && mkdir -p .whl "$work/dl" "$work/pack/site/bin" "$work/pack/stub_numpy" "$work/pack/ort"
plat=(--platform any --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
for n in 35 28 27 24 17; do plat+=(--platform "manylinux_2_${n}_x86_64"); done
dl() { python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${plat[@]}" -d "$1" "${@:2}"; }
dl "$work/dl" fastapi==0.165.0 starlette==1.10.0 pydantic==2.14.3 pydantic-core==2.50.4 uvicorn==0.54.0 \
   flask==3.1.3 werkzeug==3.1.9 gunicorn==27.0.1 waitress==3.0.2 tritonclient==2.51.0 nvidia-pytriton==0.7.0 \
   nvidia-cuda-runtime-cu12==12.9.79 python-rapidjson itsdangerous blinker annotated-types typing-inspection \
   gevent==26.9.0 greenlet==3.5.6 zope.event==6.2 zope.interface==8.7 brotli==1.2.1 setuptools==80.9.0 \
   opentelemetry-api==1.45.2 typing_extensions==4.16.0 prometheus-client==0.26.0
# tritonclient.http's client (Flask, the notebooks): 2.0.2, the newest tritonclient 2.51 names, has
# no Python 3.12 wheel; 2.0.12 is the same API
dl "$work/dl" geventhttpclient==2.0.12
site="$work/pack/site"
for w in "$work"/dl/*.whl; do unzip -qo "$w" -d "$site"; done
mv "$site"/tritonclient-*.data/data/bin/perf_analyzer "$site/bin/"
cp -r "$site"/tritonclient-*.data/purelib/* "$site/" && rm -rf "$site"/tritonclient-*.data
find "$site/pytriton/tritonserver/python_backend_stubs" -mindepth 1 -maxdepth 1 ! -name 3.12 -exec rm -rf {} +
rm -f "$site"/nvidia_pytriton.libs/libpython3-*.13.so*   # only the removed 3.13 stub needs it
find "$site" -name '*.a' -delete   # static libraries: nothing links at run time
(cd "$work" && apt-get download libb64-0d >/dev/null && dpkg -x libb64-0d_*.deb deb)
cp "$work"/deb/usr/lib/x86_64-linux-gnu/libb64.so.0d* "$site/nvidia_pytriton.libs/"
# numpy < 2 for the Python-backend stubs only (pytriton 0.7.0's stub corrupts BYTES inputs with
# numpy 2): the device run puts it first on the stubs' path with LAB_TRITON_PYTHONPATH
dl "$work/stub_dl" numpy==1.26.4
unzip -qo "$work"/stub_dl/numpy-*.whl -d "$work/pack/stub_numpy"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 -d "$work/ort_dl" "onnxruntime-gpu==1.31.1"
unzip -qo "$work"/ort_dl/onnxruntime_gpu-*.whl -d "$work/pack/ort"
python3 maintainers/reference/prune_fatbin.py "$work/pack/ort/onnxruntime/capi/libonnxruntime_providers_cuda.so" "$sm"
tar cJf "$work/device.tar.xz" -C "$work/pack" .
split -n "${PACK_PARTS:-3}" -d -a 2 "$work/device.tar.xz" .whl/device.tar.xz.part
sha256sum "$work/device.tar.xz" | cut -d' ' -f1 > .whl/device.sha256
echo "${PACK_PARTS:-3}" > .whl/device.parts
rm -rf "$work"
ls -l .whl
