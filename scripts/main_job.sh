#!/usr/bin/env bash
# The main job: on the bundled (generated) models, and on the real stories260K when
# ../shared/fixtures/real exists, read every input and run every step that exists so far.
# Usage: scripts/main_job.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
real=${QP_REAL_FIXTURES:-$root/../shared/fixtures/real}
qp="$build/bin/quantpack"
out="$build/main-job"
mkdir -p "$out"

step() { printf '\n== %s\n' "$*"; }

step "generating the bundled synthetic models into $build/fixtures"
"$build/bin/qp-gen-fixtures" "$build/fixtures"

for m in "$build"/fixtures/*/; do
  step "inspect ${m%/}"
  "$qp" inspect "${m%/}" | tail -n 4
done

if [ -d "$real" ]; then
  step "inspect the real stories260K (llama2.c and GGUF)"
  "$qp" inspect "$real/stories260K.bin" --tokenizer "$real/tok512.bin" | head -n 12
  "$qp" inspect "$real/stories260K.gguf" | head -n 12
  for f in "$real"/gguf/*.gguf "$real"/vocab/*.gguf "$real"/safetensors/*.safetensors; do
    step "inspect $f"
    "$qp" inspect "$f" | tail -n 3
  done
else
  step "no real fixtures at $real: skipping stories260K"
fi
step "main job done"
