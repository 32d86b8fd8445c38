#!/usr/bin/env bash
# Pack what the GPU reference run needs on a machine with no network and its own Python 3.12
# (torch, numpy, pandas there already): the lab's service packages, Triton 2.51 from the
# nvidia-pytriton wheel (Python 3.12 stub only), perf_analyzer and libb64, numpy < 2 for the
# Python-backend stub. Output: .whl/ (git-ignored), under the 64 MiB a device call may carry.
#   bash gpu_reference/pack_wheels.sh; the device command lines are in docs/results/h100/notes.md
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
rm -rf .whl && mkdir -p .whl "$work/dl" "$work/site/bin"
plat=(--platform any --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
for n in 35 28 27 24 17; do plat+=(--platform "manylinux_2_${n}_x86_64"); done
dl() { python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${plat[@]}" -d "$1" "${@:2}"; }
dl "$work/dl" fastapi==0.165.0 starlette==1.10.0 pydantic==2.14.3 pydantic-core==2.50.4 uvicorn==0.54.0 \
   flask==3.1.3 werkzeug==3.1.9 gunicorn==27.0.1 waitress==3.0.2 tritonclient==2.51.0 nvidia-pytriton==0.7.0 \
   nvidia-cuda-runtime-cu12==12.9.79 python-rapidjson itsdangerous blinker annotated-types typing-inspection \
   gevent==26.9.0 greenlet==3.5.6 zope.event==6.2 zope.interface==8.7 brotli==1.2.1 setuptools==80.9.0
# tritonclient.http's client (Flask, the notebooks): 2.0.2, the newest tritonclient 2.51 names, has
# no Python 3.12 wheel; 2.0.12 is the same API
dl "$work/dl" geventhttpclient==2.0.12
for w in "$work"/dl/*.whl; do unzip -qo "$w" -d "$work/site"; done
mv "$work"/site/tritonclient-*.data/data/bin/perf_analyzer "$work/site/bin/"
cp -r "$work"/site/tritonclient-*.data/purelib/* "$work/site/" && rm -rf "$work"/site/tritonclient-*.data
find "$work/site/pytriton/tritonserver/python_backend_stubs" -mindepth 1 -maxdepth 1 ! -name 3.12 -exec rm -rf {} +
find "$work/site" -name '*.a' -delete   # static libraries: nothing links at run time
(cd "$work" && apt-get download libb64-0d >/dev/null && dpkg -x libb64-0d_*.deb deb)
cp "$work"/deb/usr/lib/x86_64-linux-gnu/libb64.so.0d* "$work/site/nvidia_pytriton.libs/"
tar cJf .whl/device_site.tar.xz -C "$work/site" .
dl .whl opentelemetry-api==1.45.2 typing_extensions==4.16.0
# numpy < 2 for the Python-backend stubs only (pytriton 0.7.0's stub corrupts BYTES inputs with
# numpy 2): the device run puts it first on the stubs' path with LAB_TRITON_PYTHONPATH
dl "$work/stub_dl" numpy==1.26.4
mkdir -p "$work/stub" && unzip -qo "$work"/stub_dl/numpy-*.whl -d "$work/stub"
tar cJf .whl/stub_numpy.tar.xz -C "$work/stub" .   # xz: a third smaller than the wheel
rm -rf "$work"
du -ch .whl/* | tail -1
