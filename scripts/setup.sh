#!/usr/bin/env bash
# Installs what quantpack needs to build and test on Debian (run as root), then builds it.
#   Debian: cmake pkg-config gcc libcjson-dev libsodium-dev zlib1g-dev libssl-dev libmicrohttpd-dev
#           (serve), libedit-dev (chat line editing), clang (fuzzing),
#           curl (the serve tests)
#   npm (tests only, pinned in tests/peer/package-lock.json): tests/peer/README.md
# Usage: scripts/setup.sh [BUILD_DIR]   (default build/)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}

pkgs=(cmake pkg-config gcc make libcjson-dev libsodium-dev zlib1g-dev libssl-dev libmicrohttpd-dev libedit-dev clang curl)
command -v node >/dev/null 2>&1 || pkgs+=(nodejs npm)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -d "$root/tests/peer/node_modules/@node-llama-cpp/linux-x64" ] ||
   [ "$root/tests/peer/package-lock.json" -nt "$root/tests/peer/node_modules/.package-lock.json" ]; then
  echo "setup: installing npm test peers (pinned)" >&2
  # `npm ci` refuses this lock file: npm leaves other platforms' optional packages of
  # doppler-gpu's dependency doe-gpu out of it. `npm install --no-save` installs exactly the
  # locked versions and never rewrites the lock file.
  (cd "$root/tests/peer" && npm install --ignore-scripts --no-save --no-audit --no-fund --loglevel=error >/dev/null)
fi

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)"
