#!/usr/bin/env bash
# A one-call pack for the serving experiments (execution_costs.py): only what Triton and
# perf_analyzer need on the offline GPU machine, plus py-spy to profile the Python-backend stubs.
# pack_device.sh packs the whole lab (the services, onnxruntime-gpu) in three parts, one a device
# call; this one leaves those out, so it fits one call beside the working tree. Same file names and
# layout, so maintainers/reference/device_env.sh unpacks it as it is (device.parts says 1).
#   bash maintainers/reference/pack_serving.sh DIR      -> DIR/device.tar.xz.part00, device.sha256, device.parts
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=$(realpath -m "${1:-.whl}")
work=$(mktemp -d)
mkdir -p "$dest" "$work/dl" "$work/pack/site/bin" "$work/pack/stub_numpy"
plat=(--platform any --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_5_x86_64)
for n in 35 28 27 24 17; do plat+=(--platform "manylinux_2_${n}_x86_64"); done
dl() { python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${plat[@]}" -d "$1" "${@:2}"; }
dl "$work/dl" tritonclient==2.51.0 nvidia-pytriton==0.7.0 nvidia-cuda-runtime-cu12==12.9.79 python-rapidjson \
   py-spy==0.4.3
site="$work/pack/site"
for w in "$work"/dl/*.whl; do unzip -qo "$w" -d "$site"; done
mv "$site"/tritonclient-*.data/data/bin/perf_analyzer "$site/bin/"
cp -r "$site"/tritonclient-*.data/purelib/* "$site/" && rm -rf "$site"/tritonclient-*.data
mv "$site"/py_spy-*.data/scripts/py-spy "$site/bin/" && rm -rf "$site"/py_spy-*.data
find "$site/pytriton/tritonserver/python_backend_stubs" -mindepth 1 -maxdepth 1 ! -name 3.12 -exec rm -rf {} +
rm -f "$site"/nvidia_pytriton.libs/libpython3-*.13.so*
find "$site" -name '*.a' -delete
(cd "$work" && apt-get download libb64-0d >/dev/null && dpkg -x libb64-0d_*.deb deb)
cp "$work"/deb/usr/lib/x86_64-linux-gnu/libb64.so.0d* "$site/nvidia_pytriton.libs/"
dl "$work/stub_dl" numpy==1.26.4
unzip -qo "$work"/stub_dl/numpy-*.whl -d "$work/pack/stub_numpy"
find "$work/pack/stub_numpy" -type d -name tests -prune -exec rm -rf {} +   # the stubs run no tests
rm -f "$dest"/device.*
tar cf - -C "$work/pack" . | xz -6 -T2 > "$dest/device.tar.xz.part00"
sha256sum "$dest/device.tar.xz.part00" | cut -d' ' -f1 > "$dest/device.sha256"
echo 1 > "$dest/device.parts"
rm -rf "$work"
ls -l "$dest"
