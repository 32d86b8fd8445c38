#!/usr/bin/env bash
# Make docker/.env, the settings of the lab's Docker stacks, once per checkout (safe to re-run):
#   - copied from docker/.env.example, with a random JUPYTER_TOKEN and TRITON_ADMIN_KEY, readable
#     only by you;
#   - LAB_UID / LAB_GID = the owner of the checkout, so the Jupyter container saves notebooks
#     and results as that user (a checkout owned by root gets jovyan's 1000:100, and the
#     container takes ownership of the folders it writes);
#   - creates results/ and model_repository/, which the stacks mount.
# An existing docker/.env is kept; only missing LAB_UID/LAB_GID/JUPYTER_TOKEN values are added.
set -euo pipefail
cd "$(dirname "$0")"
repo=$(cd .. && pwd)

new_token() { head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
# set_if_empty KEY VALUE: give KEY a value in .env unless it has one
set_if_empty() {
  if grep -q "^$1=." .env; then return 0; fi
  if grep -q "^$1=" .env; then sed -i "s|^$1=.*|$1=$2|" .env; else echo "$1=$2" >> .env; fi
  echo "docker/.env: set $1"
}

uid=$(stat -c %u "$repo"); gid=$(stat -c %g "$repo")
if [ "$uid" -eq 0 ]; then uid=1000; gid=100; fi
if [ ! -f .env ]; then
  (umask 077 && sed -e "s|^LAB_UID=.*|LAB_UID=$uid|" -e "s|^LAB_GID=.*|LAB_GID=$gid|" .env.example > .env)
  echo "docker/.env: created from docker/.env.example"
fi
chmod 600 .env
set_if_empty JUPYTER_TOKEN "$(new_token)"
set_if_empty TRITON_ADMIN_KEY "$(new_token)"
set_if_empty LAB_UID "$uid"
set_if_empty LAB_GID "$gid"
mkdir -p "$repo/results" "$repo/model_repository"
echo "docker/.env: Jupyter runs as $(grep ^LAB_UID= .env | cut -d= -f2):$(grep ^LAB_GID= .env | cut -d= -f2); token in docker/.env (JUPYTER_TOKEN)"
