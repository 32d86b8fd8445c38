#!/usr/bin/env bash
# Build every image of the lab's two Docker stacks on this host, as the stacks' own compose files
# define them (docker/services.yaml: no image is defined twice), in the order the notebooks need
# them:
#   fastapi  the FastAPI stack (notebook 3): FastAPI with PyTorch, Flask, Jupyter
#   onnx     the FastAPI service's ONNX Runtime image (notebook 4's first switch to ONNX)
#   triton   the Triton stack (notebook 5): NVIDIA's Triton image pulled (the largest download of
#            the lab), then built; its Flask and Jupyter are the FastAPI stack's, from the cache
# A host without an NVIDIA GPU that containers can use (nvidia-smi lists one and Docker has the
# nvidia runtime, as docker/setup_host.sh sets up) gets each stack's CPU override file, as the
# notebooks tell such a host to add to its `up`.
#
# Usage (from any folder):
#   bash docker/build_images.sh           build now, in this terminal
#   bash docker/build_images.sh start     build in the background and return at once: notebook 2
#                                         starts it after the host setup; it outlives the SSH
#                                         session that started it
#   bash docker/build_images.sh wait [fastapi|onnx|triton]
#                                         wait until the background build has built that part
#                                         (every part without one) and say how it went; exit 1 if
#                                         it failed, naming the build's log (`docker compose ...
#                                         up --build` then builds what is missing, and shows why)
#
# Safe to run twice: one build at a time (a lock); a start while a build runs says so and leaves
# it running; a build run again is served by Docker's build cache (seconds). A wait where no
# build was started says so and returns at once. The log, the status and the lock are in .lab/
# of the repository (BUILD_IMAGES_DIR elsewhere); BUILD_IMAGES_POLL: seconds between a wait's
# checks (default 5); BUILD_IMAGES_LOCK_WAIT: seconds a start waits for the lock (default 5).
set -euo pipefail

cd "$(dirname "$0")"
SELF="$PWD/${0##*/}"
REPO="$(cd .. && pwd)"
STATE_DIR="${BUILD_IMAGES_DIR:-$REPO/.lab}"
LOG="$STATE_DIR/build_images.log"
STATUS="$STATE_DIR/build_images.status"
LOCK="$STATE_DIR/build_images.lock"
POLL="${BUILD_IMAGES_POLL:-5}"
LOCK_WAIT="${BUILD_IMAGES_LOCK_WAIT:-5}"
PARTS=(fastapi onnx triton)

usage() { sed -n '2,/^set -euo/p' "$SELF" | sed -e '$d' -e 's/^# \{0,1\}//'; }

describe() {
  case "$1" in
    fastapi) echo "the FastAPI stack's images (FastAPI with PyTorch, Flask, Jupyter)" ;;
    onnx) echo "the FastAPI service's ONNX Runtime image" ;;
    triton) echo "the Triton stack's images (NVIDIA's Triton image pulled, then built)" ;;
  esac
}

# The GPU test of the Docker tests (tests/docker/compose_stack.py): a GPU containers can use.
# (Each output is read whole: `... | grep -q` under pipefail fails when grep stops reading early.)
containers_see_gpu() {
  local gpus runtimes
  command -v nvidia-smi >/dev/null 2>&1 || return 1
  gpus="$(nvidia-smi -L 2>/dev/null)" && [[ "$gpus" == *"GPU "* ]] || return 1
  runtimes="$(docker info --format '{{json .Runtimes}}' 2>/dev/null)" &&
    [[ "$runtimes" == *'"nvidia"'* ]]
}

# files PART: the -f options of the compose files the stack's `up` uses on this host
files() {
  local stack=fastapi override=docker-compose-cpu.yaml
  if [ "$1" = triton ]; then stack=triton override=docker-compose-triton-cpu.yaml; fi
  printf -- '-f docker-compose-%s.yaml' "$stack"
  [ "$HARDWARE" = gpu ] || printf -- ' -f %s' "$override"
}

# build_part PART: one part, with the compose files and settings its stack's `up` uses (the
# ONNX image is the FastAPI stack's service with FASTAPI_BACKEND=onnx, as notebook 4 switches it)
build_part() {
  local -a f
  read -ra f <<<"$(files "$1")"
  case "$1" in
    onnx)
      echo "+ FASTAPI_BACKEND=onnx docker compose ${f[*]} build fastapi_server"
      FASTAPI_BACKEND=onnx docker compose "${f[@]}" build fastapi_server
      ;;
    *)
      echo "+ docker compose ${f[*]} build"
      docker compose "${f[@]}" build
      ;;
  esac
}

record() { echo "$*" >>"$STATUS"; }
clock() { printf '%(%H:%M)T' "$1"; }
took() {  # took BEGAN ENDED: seconds under two minutes, else minutes
  if [ $(($2 - $1)) -lt 120 ]; then echo "$(($2 - $1)) s"; else echo "$((($2 - $1) / 60)) min"; fi
}
building_now() {  # does a build hold the lock? (a probe's shared lock, let go at once)
  [ -e "$LOCK" ] || return 1
  ! flock -n -s "$LOCK" true
}

# build_all: every part in order, each recorded in the status as ok or failed; a failed part does
# not stop the next (the stacks build apart). Runs with the lock held by the caller.
build_all() {
  local part began failed=0
  echo "building the lab's images, $(date_line), for the $(hw_words)"
  for part in "${PARTS[@]}"; do
    began=$EPOCHSECONDS
    echo "==> $part: $(describe "$part")"
    if build_part "$part" 9>&-; then
      record "$part ok $began $EPOCHSECONDS"
      echo "==> $part: built in $((EPOCHSECONDS - began)) s"
    else
      record "$part failed $began $EPOCHSECONDS"
      echo "==> $part: FAILED after $((EPOCHSECONDS - began)) s (the lines above say why)"
      failed=1
    fi
  done
  record "end $failed $EPOCHSECONDS"
  return "$failed"
}
date_line() { printf '%(%Y-%m-%d %H:%M:%S %Z)T' "$EPOCHSECONDS"; }

# begin: take the lock (on fd 9) and start a fresh status; 1 if a build already holds it
begin() {
  mkdir -p "$STATE_DIR"
  exec 9>>"$LOCK"
  # a wait's probe holds the lock for an instant; a build for minutes
  flock -w "$LOCK_WAIT" 9 || return 1
  if ! docker info >/dev/null 2>&1; then
    echo "Docker does not answer for user ${USER:-$(id -un)}: run docker/setup_host.sh first," >&2
    echo "then log in again (membership of the docker group applies to new logins)." >&2
    exit 1
  fi
  HARDWARE=cpu
  containers_see_gpu && HARDWARE=gpu
  : >"$LOG"
  echo "start $EPOCHSECONDS $HARDWARE" >"$STATUS"
}

start() {
  if ! begin; then
    echo "The lab's images are already being built on this host (log: $LOG): nothing started."
    return 0
  fi
  # setsid: a session of its own, so the end of this SSH session does not end it; nohup: nor
  # a hang-up; every stream to the log or /dev/null, so the SSH command returns at once. The
  # build inherits fd 9, the lock, and holds it until it ends.
  HARDWARE=$HARDWARE setsid nohup bash "$SELF" --build-locked >>"$LOG" 2>&1 </dev/null &
  echo "Building the lab's images in the background on this node, for the $(hw_words) (log:"
  echo "$LOG). Notebooks 3, 4 and 5 wait for their part: bash docker/build_images.sh wait PART."
}
hw_words() {
  if [ "$HARDWARE" = gpu ]; then echo "GPUs"; else echo "CPU (no GPU that containers can use)"; fi
}

# wait_for PART: until PART (or "all") is recorded, the build has ended, or it stopped halfway
wait_for() {
  local part="$1" line said=0 since
  if ! [ -s "$STATUS" ]; then
    echo "No build of the lab's images was started on this host: \`docker compose ... up --build\`"
    echo "builds them now (several minutes the first time)."
    return 0
  fi
  read -r _ since _ <"$STATUS"  # its first line: start EPOCH HARDWARE
  while :; do
    if [ "$part" = all ]; then line=$(grep '^end ' "$STATUS" || true); else
      line=$(grep "^$part " "$STATUS" || true)
    fi
    if [ -n "$line" ]; then
      report "$part"
      return $?
    fi
    if ! building_now; then
      echo "The background build of the lab's images stopped before it built $(what "$part")"
      echo "(ended by a restart of the node, or killed). Its log: $LOG"
      tail -n 15 "$LOG" | sed 's/^/    /'
      echo "Run \`docker compose ... up --build\` as the notebook says: it builds what is missing."
      return 1
    fi
    if [ $((said % 12)) -eq 0 ]; then
      echo "waiting for the background build of $(what "$part") (started at $(clock "$since"),"
      echo "  $(((EPOCHSECONDS - since) / 60)) min ago; now: $(current)) ..."
    fi
    said=$((said + 1))
    sleep "$POLL"
  done
}
what() { if [ "$1" = all ]; then echo "the lab's images"; else describe "$1"; fi; }
current() { grep '^==> ' "$LOG" 2>/dev/null | tail -n 1 | sed 's/^==> //' || true; }

# report PART: how the part (or every part) ended; 1 if one failed
report() {
  local part="$1" name state began ended bad=0
  while read -r name state began ended; do
    [ "$part" = all ] || [ "$name" = "$part" ] || continue
    case "$name" in start | end) continue ;; esac
    if [ "$state" = ok ]; then
      echo "Built: $(describe "$name"), at $(clock "$ended") (in $(took "$began" "$ended"))."
    else
      echo "FAILED: the background build of $(describe "$name"). Its log: $LOG"
      bad=1
    fi
  done <"$STATUS"
  if [ "$bad" -eq 1 ]; then
    echo "The log's last lines:"
    tail -n 15 "$LOG" | sed 's/^/    /'
    echo "Run \`docker compose ... up --build\` as the notebook says: it builds what is missing and"
    echo "shows the error again; fix what it says (the network, the disk: \`df -h\`), run it again."
  fi
  if grep -q '^start .* cpu$' "$STATUS"; then
    echo "(built for the CPU, as this host has no GPU that containers can use: add each stack's"
    echo " CPU override file in every docker compose command, as the notebooks say)"
  fi
  return "$bad"
}

case "${1:-build}" in
  build)
    if ! begin; then
      echo "A build of the lab's images is already running on this host: waiting for it."
      wait_for all
      exit $?
    fi
    build_all 2>&1 | tee -a "$LOG"  # pipefail: the build's exit status
    ;;
  start) start ;;
  --build-locked)  # the background build start launches, holding the lock on fd 9
    build_all || true
    ;;
  wait)
    part="${2:-all}"
    case " ${PARTS[*]} all " in *" $part "*) ;; *)
      echo "unknown part: $part (one of: ${PARTS[*]})" >&2
      exit 2
      ;;
    esac
    wait_for "$part"
    ;;
  -h | --help) usage ;;
  *)
    echo "unknown command: $1 (try --help)" >&2
    exit 2
    ;;
esac
