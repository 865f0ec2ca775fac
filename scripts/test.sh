#!/usr/bin/env bash
# The whole test suite: a Release build and an ASan+UBSan build, each running every ctest test
# (unit, golden, roundtrip, badinput, fuzz-replay, e2e, peer). Run scripts/setup.sh first.
# Usage: scripts/test.sh [-L LABEL]   (extra arguments go to ctest)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc)
status=0
for cfg in release asan; do
  build="$root/build-test-$cfg"
  flags=(-DCMAKE_BUILD_TYPE=Release)
  [ "$cfg" = asan ] && flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DQP_SANITIZE=ON)
  echo "== $cfg build" >&2
  cmake -S "$root" -B "$build" "${flags[@]}" >/dev/null
  cmake --build "$build" -j"$jobs" >/dev/null
  echo "== $cfg tests" >&2
  (cd "$build" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     ctest -j"$jobs" --output-on-failure "$@") || status=1
done
exit $status
