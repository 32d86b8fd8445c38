#!/usr/bin/env bash
# Prepare an Ubuntu 22.04 / 24.04 host (a Chameleon node or any machine with apt) for the lab's
# Docker stacks:
#   1. Docker Engine + the compose plugin, from Docker's own apt repository
#   2. the calling user in the `docker` group
#   3. with an NVIDIA GPU + driver: the NVIDIA container toolkit, registered as a Docker runtime
#      (nvidia-ctk), plus the cgroup-driver fix for the toolkit's known issue (containers lose
#      their GPUs after `systemctl daemon-reload` under the systemd cgroup driver): we merge
#      "exec-opts": ["native.cgroupdriver=cgroupfs"] into /etc/docker/daemon.json
#   4. nvtop (a GPU "top", used while the benchmarks run)
#   5. a self-check: a container sees the GPUs (or, without GPUs, a container runs at all)
#
# Every step first checks whether it is already done, so the script is safe to run again; a
# second run changes nothing. Without an NVIDIA driver it says so and sets the host up for the
# CPU-only stacks (docker/docker-compose-cpu.yaml). On a freshly booted cloud node it first waits
# for cloud-init to finish and for any other apt/dpkg (e.g. automatic updates) to let go of the
# package manager's locks, and it waits again before every apt-get (automatic updates stay on in
# Chameleon's images and may start between two steps); apt-get itself also waits for dpkg's lock.
#
# Usage: bash docker/setup_host.sh [--dry-run] [--no-self-check] [--user NAME]
#   --dry-run        print every command that would change the system, run none of them
#   --no-self-check  skip the final `docker run` check (it pulls a small image)
#   --user NAME      the account to put in the docker group (default: the one who ran sudo)
#
# For tests: SETUP_FAKE_ROOT=/some/dir makes every file the script reads or writes live under
# that directory instead of /, so tests/test_setup_host.py can run it with stub commands;
# SETUP_LOCK_TRIES and SETUP_LOCK_POLL (default 180 checks, 5 s apart) bound the wait for a busy
# package manager (apt-get's own wait for dpkg's lock is the same 15 minutes).
set -euo pipefail

ROOT="${SETUP_FAKE_ROOT:-}"
DRY_RUN=0
SELF_CHECK=1
TARGET_USER="${SUDO_USER:-${USER:-$(id -un)}}"
CHANGES=0
APT_LISTS_FRESH=0
RESTART_DOCKER=0
LOCK_TRIES="${SETUP_LOCK_TRIES:-180}"
LOCK_POLL="${SETUP_LOCK_POLL:-5}"
APT_LOCK_WAIT=$((LOCK_TRIES * LOCK_POLL))

DOCKER_KEYRING=/etc/apt/keyrings/docker.asc
DOCKER_LIST=/etc/apt/sources.list.d/docker.list
NVIDIA_KEYRING=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg
NVIDIA_LIST=/etc/apt/sources.list.d/nvidia-container-toolkit.list
DAEMON_JSON=/etc/docker/daemon.json
APT_LOCKS=(/var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock /var/cache/apt/archives/lock)
DOCKER_PACKAGES=(docker-ce docker-ce-cli containerd.io docker-buildx-plugin docker-compose-plugin)
SELF_CHECK_IMAGE=ubuntu:24.04

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY_RUN=1 ;;
    --no-self-check) SELF_CHECK=0 ;;
    --user) TARGET_USER="${2:?--user needs a name}"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown option: $1 (try --help)" >&2; exit 2 ;;
  esac
  shift
done

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

# ---------------------------------------------------------------- output and the one way to change things
say()  { printf '==> %s\n' "$*"; }
done_already() { printf '    [already done] %s\n' "$*"; }
warn() { printf '!!  %s\n' "$*" >&2; }

# run CMD...: the only path through which this script changes the system.
run() {
  CHANGES=$((CHANGES + 1))
  if [ "$DRY_RUN" -eq 1 ]; then
    printf 'DRY-RUN: %s\n' "$*"
    return 0
  fi
  printf '+ %s\n' "$*"
  "$@"
}

# as_root CMD...: run() with sudo when we are not root.
as_root() {
  if [ -n "$SUDO" ]; then run "$SUDO" "$@"; else run "$@"; fi
}

# write_file PATH LINE: (re)write a one-line root-owned file (LINE has no single quote).
write_file() {
  as_root sh -c "echo '$2' > '$ROOT$1'"
}

# ---------------------------------------------------------------- probes (read-only; tests stub the commands)
have_cmd() { command -v "$1" >/dev/null 2>&1; }
file_present() { [ -s "$ROOT$1" ]; }
pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
all_pkgs_installed() {
  local p
  for p in "$@"; do pkg_installed "$p" || return 1; done
}
group_exists() { getent group "$1" >/dev/null 2>&1; }
user_in_group() {  # $1 user, $2 group: membership as recorded in the group database
  local members
  members="$(getent group "$2" 2>/dev/null | cut -d: -f4)"
  case ",$members," in *",$1,"*) return 0 ;; *) return 1 ;; esac
}
os_field() {  # $1 = ID, VERSION_ID or VERSION_CODENAME from /etc/os-release
  local f="$ROOT/etc/os-release"
  [ -r "$f" ] || return 0
  sed -n "s/^$1=\"\{0,1\}\([^\"]*\)\"\{0,1\}$/\1/p" "$f" | head -n 1
}
gpu_count() {  # number of GPUs the NVIDIA driver reports; 0 without a driver
  have_cmd nvidia-smi || { echo 0; return 0; }
  nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true
}
# daemon_json_has KEY: does /etc/docker/daemon.json already hold our setting?
#   nvidia-runtime  -> "runtimes": {"nvidia": ...}
#   cgroupfs        -> "exec-opts" contains "native.cgroupdriver=cgroupfs"
daemon_json_has() {
  python3 - "$ROOT$DAEMON_JSON" "$1" <<'PY'
import json, os, sys
path, key = sys.argv[1], sys.argv[2]
try:
    with open(path) as f:
        cfg = json.load(f) if os.path.getsize(path) else {}
except FileNotFoundError:
    sys.exit(1)
if key == "nvidia-runtime":
    sys.exit(0 if "nvidia" in cfg.get("runtimes", {}) else 1)
sys.exit(0 if "native.cgroupdriver=cgroupfs" in cfg.get("exec-opts", []) else 1)
PY
}

# daemon_running_has KEY: has the running Docker daemon loaded our setting? (daemon.json can hold
# it while the daemon still runs with the old file, e.g. after an interrupted run)
daemon_running_has() {
  local info
  info="$(${SUDO:+"$SUDO"} docker info --format '{{json .Runtimes}} {{.CgroupDriver}}' 2>/dev/null)" || return 1
  case "$1" in
    nvidia-runtime) [[ "$info" == *'"nvidia"'* ]] ;;
    cgroupfs) [[ "$info" == *" cgroupfs" ]] ;;
  esac
}
# package_manager_busy: does another program hold apt's or dpkg's locks? (fuser, or by process
# name where psmisc's fuser is missing)
package_manager_busy() {
  local locks=("${APT_LOCKS[@]/#/$ROOT}")
  if have_cmd fuser; then
    ${SUDO:+"$SUDO"} fuser "${locks[@]}" >/dev/null 2>&1
  else
    pgrep -x 'apt|apt-get|dpkg|unattended-upgr' >/dev/null 2>&1
  fi
}

# Merge (never overwrite) the cgroup driver option into daemon.json, keeping every other key.
MERGE_CGROUPFS='import json,os,sys; p=sys.argv[1]; '\
'cfg=json.load(open(p)) if os.path.exists(p) and os.path.getsize(p) else {}; '\
'opts=[o for o in cfg.get("exec-opts",[]) if not o.startswith("native.cgroupdriver=")]; '\
'cfg["exec-opts"]=opts+["native.cgroupdriver=cgroupfs"]; os.makedirs(os.path.dirname(p),exist_ok=True); '\
'open(p,"w").write(json.dumps(cfg,indent=4)+chr(10))'

# wait_for_package_manager: until no other apt/dpkg holds the locks (or give up, saying so).
wait_for_package_manager() {
  local tries=0
  while package_manager_busy; do
    tries=$((tries + 1))
    if [ "$tries" -gt "$LOCK_TRIES" ]; then
      warn "Another program still holds the package manager (apt/dpkg) after $((LOCK_TRIES * LOCK_POLL)) s."
      warn "See what runs with: ps aux | grep -E 'apt|dpkg'. Run this script again when it has finished."
      exit 1
    fi
    [ "$tries" -eq 1 ] && echo "    another program holds the package manager (automatic updates?); waiting ..."
    sleep "$LOCK_POLL"
  done
}

# apt-get, after waiting for the package manager, and told to wait for dpkg's lock itself too
# (DPkg::Lock::Timeout, apt >= 1.9.11) should automatic updates start in between.
apt_get() {  # apt_get SUBCOMMAND ARGS...
  wait_for_package_manager
  as_root env DEBIAN_FRONTEND=noninteractive apt-get "$1" -o "DPkg::Lock::Timeout=$APT_LOCK_WAIT" "${@:2}"
}
apt_update_once() {
  [ "$APT_LISTS_FRESH" -eq 1 ] && return 0
  apt_get update -q
  APT_LISTS_FRESH=1
}
apt_install() {
  apt_update_once
  apt_get install -y -q --no-install-recommends "$@"
}

# ---------------------------------------------------------------- 0. where are we
say "Host check"
os_id="$(os_field ID)"
os_version="$(os_field VERSION_ID)"
codename="$(os_field VERSION_CODENAME)"
if ! have_cmd apt-get || [ "$os_id" != "ubuntu" ]; then
  warn "This script is for Ubuntu 22.04/24.04 (found: ${os_id:-unknown} ${os_version}). Install Docker"
  warn "Engine and the NVIDIA container toolkit by your distribution's instructions instead."
  exit 1
fi
case "$os_version" in
  22.04|24.04) echo "    Ubuntu $os_version ($codename), user for the docker group: $TARGET_USER" ;;
  *) warn "Ubuntu $os_version is not one this script was written for (22.04, 24.04); continuing." ;;
esac
[ "$DRY_RUN" -eq 1 ] && echo "    dry run: commands that change the system are printed as DRY-RUN lines, not run"

# ---------------------------------------------------------------- 0b. first boot still busy?
# A cloud node's first boot keeps installing (cloud-init, automatic security updates) for a while
# after SSH answers; apt-get fails at once while they hold the locks.
say "First-boot setup and the package manager"
if have_cmd cloud-init; then
  echo "    waiting for cloud-init to finish (returns at once when it has) ..."
  ci_status="$(cloud-init status --wait 2>/dev/null | tail -n 1)" ||
    warn "cloud-init reports a problem (${ci_status:-no status}); see 'cloud-init status --long'. Continuing."
  echo "    cloud-init: ${ci_status:-no status}"
fi
wait_for_package_manager
echo "    the package manager is free"

# ---------------------------------------------------------------- 1. Docker Engine
say "Docker Engine (from Docker's apt repository)"
if all_pkgs_installed "${DOCKER_PACKAGES[@]}"; then
  done_already "packages ${DOCKER_PACKAGES[*]}"
else
  all_pkgs_installed ca-certificates curl || apt_install ca-certificates curl
  if file_present "$DOCKER_KEYRING"; then
    done_already "Docker's signing key $DOCKER_KEYRING"
  else
    as_root install -m 0755 -d "$ROOT/etc/apt/keyrings"
    as_root curl -fsSL https://download.docker.com/linux/ubuntu/gpg -o "$ROOT$DOCKER_KEYRING"
    as_root chmod a+r "$ROOT$DOCKER_KEYRING"
  fi
  if file_present "$DOCKER_LIST"; then
    done_already "apt source $DOCKER_LIST"
  else
    arch="$(dpkg --print-architecture)"
    write_file "$DOCKER_LIST" \
      "deb [arch=$arch signed-by=$DOCKER_KEYRING] https://download.docker.com/linux/ubuntu $codename stable"
    APT_LISTS_FRESH=0
  fi
  apt_install "${DOCKER_PACKAGES[@]}"
fi

# ---------------------------------------------------------------- 2. docker group
say "User $TARGET_USER in the docker group"
if group_exists docker; then
  done_already "group docker exists"
else
  as_root groupadd -f docker
fi
if user_in_group "$TARGET_USER" docker; then
  done_already "$TARGET_USER is in group docker"
else
  as_root usermod -aG docker "$TARGET_USER"
  echo "    $TARGET_USER must log out and in again (or run 'newgrp docker') to use docker without sudo"
fi

# ---------------------------------------------------------------- 3. GPU: NVIDIA container toolkit
say "NVIDIA GPU and driver"
gpus="$(gpu_count)"
if [ "$gpus" -gt 0 ]; then
  echo "    the driver sees $gpus GPU(s):"
  nvidia-smi -L 2>/dev/null | sed 's/^/      /'
else
  warn "No NVIDIA driver or GPU found (nvidia-smi is missing or lists no GPU)."
  warn "Skipping the NVIDIA container toolkit. The stacks will run on CPU: add the CPU override file,"
  warn "  cd docker && docker compose -f docker-compose-fastapi.yaml -f docker-compose-cpu.yaml up -d --build --wait"
  warn "  cd docker && docker compose -f docker-compose-triton.yaml -f docker-compose-triton-cpu.yaml up -d --build --wait"
  warn "(on Chameleon, use the CC-Ubuntu24.04-CUDA image, which ships the driver)."
fi

if [ "$gpus" -gt 0 ]; then
  say "NVIDIA container toolkit"
  if pkg_installed nvidia-container-toolkit; then
    done_already "package nvidia-container-toolkit"
  else
    if file_present "$NVIDIA_KEYRING"; then
      done_already "NVIDIA's signing key $NVIDIA_KEYRING"
    else
      as_root sh -c "curl -fsSL https://nvidia.github.io/libnvidia-container/gpgkey | gpg --dearmor --yes -o '$ROOT$NVIDIA_KEYRING'"
    fi
    if file_present "$NVIDIA_LIST"; then
      done_already "apt source $NVIDIA_LIST"
    else
      as_root sh -c "curl -fsSL https://nvidia.github.io/libnvidia-container/stable/deb/nvidia-container-toolkit.list | sed 's#deb https://#deb [signed-by=$NVIDIA_KEYRING] https://#g' > '$ROOT$NVIDIA_LIST'"
      APT_LISTS_FRESH=0
    fi
    apt_install nvidia-container-toolkit
  fi

  say "Docker runtime 'nvidia' and the cgroup-driver fix in $DAEMON_JSON"
  if daemon_json_has nvidia-runtime; then
    done_already "runtime nvidia is registered"
  else
    as_root nvidia-ctk runtime configure --runtime=docker --config="$ROOT$DAEMON_JSON"
    RESTART_DOCKER=1
  fi
  if daemon_json_has cgroupfs; then
    done_already "exec-opts has native.cgroupdriver=cgroupfs"
  else
    as_root python3 -c "$MERGE_CGROUPFS" "$ROOT$DAEMON_JSON"
    RESTART_DOCKER=1
  fi
  if [ "$RESTART_DOCKER" -eq 0 ]; then
    if daemon_running_has nvidia-runtime && daemon_running_has cgroupfs; then
      done_already "the running Docker daemon uses runtime nvidia and the cgroupfs driver"
    else
      echo "    the running Docker daemon has not loaded $DAEMON_JSON yet"
      RESTART_DOCKER=1
    fi
  fi
fi

if [ "$RESTART_DOCKER" -eq 1 ]; then
  say "Restart Docker to load the new daemon.json"
  as_root systemctl restart docker
fi

# ---------------------------------------------------------------- 4. nvtop
say "nvtop"
if pkg_installed nvtop; then
  done_already "package nvtop"
else
  apt_install nvtop
fi

# ---------------------------------------------------------------- 4b. tools the repository's Makefile uses
# `make artifacts` builds the model files the containers serve, in a Python venv on the host.
say "make and python3-venv (for make artifacts)"
if all_pkgs_installed make python3-venv; then
  done_already "packages make python3-venv"
else
  apt_install make python3-venv
fi

# ---------------------------------------------------------------- 5. self-check
if [ "$SELF_CHECK" -eq 1 ]; then
  # sudo, because the group change above only applies to new logins
  if [ "$gpus" -gt 0 ]; then
    say "Self-check: a container sees the GPUs"
    check=(docker run --rm --gpus all "$SELF_CHECK_IMAGE" nvidia-smi)
  else
    say "Self-check: a container runs (CPU only)"
    check=(docker run --rm "$SELF_CHECK_IMAGE" true)
  fi
  if [ "$DRY_RUN" -eq 1 ]; then
    printf 'DRY-RUN: %s\n' "$SUDO${SUDO:+ }${check[*]}"
  elif ${SUDO:+"$SUDO"} "${check[@]}"; then
    echo "    self-check passed"
  else
    warn "self-check FAILED: '${check[*]}' did not work; see the output above."
    exit 1
  fi
fi

# ---------------------------------------------------------------- summary
if [ "$DRY_RUN" -eq 1 ]; then
  say "Dry run: $CHANGES change(s) would be made"
elif [ "$CHANGES" -eq 0 ]; then
  say "Nothing to do: this host was already set up (0 changes)"
else
  say "Done: $CHANGES change(s) made"
fi
echo "    next: make artifacts && bash docker/init_env.sh   (model files, docker/.env with the Jupyter token)"
# The lab's Python environment (make artifacts) takes its pins from requirements/constraints.txt;
# some of them need Python 3.11 or newer.
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  warn "make artifacts needs Python 3.11 or newer; this host's python3 is $(python3 -V 2>&1 | cut -d' ' -f2)."
  warn "Use Ubuntu 24.04 (Python 3.12), or install a newer Python and run: make artifacts PYTHON=python3.X"
fi
if [ "$gpus" -gt 0 ]; then
  echo "    GPU stacks: cd docker && docker compose -f docker-compose-fastapi.yaml up -d --build --wait"
else
  echo "    CPU stacks: cd docker && docker compose -f docker-compose-fastapi.yaml -f docker-compose-cpu.yaml up -d --build --wait"
fi
