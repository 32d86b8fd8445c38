#!/usr/bin/env bash
# System packages local mode needs, installed only when missing (safe to re-run):
#   libb64-0d   perf_analyzer (tritonclient 2.51) links against libb64.so.0d
#   wrk         independent HTTP load generator, to cross-check the notebook's Python one
#   ShellCheck  lints docker/setup_host.sh in the tests (package shellcheck)
#   python3-venv  `python3 -m venv` on Debian/Ubuntu
set -euo pipefail

packages=(libb64-0d wrk shellcheck python3-venv)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "system packages: all present (${packages[*]})"
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "Missing system packages ${missing[*]} and no apt-get here: install them with your package manager." >&2
  exit 1
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "installing system packages: ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
