#!/bin/bash
# Issue 11, item 1: one output rule for every command (core/outfile.md). An output that is an
# input (the same file, through a symbolic or a hard link; a folder holding the input) is refused
# even with -f; an existing output is replaced only with -f/--force; devices and FIFOs are never
# written; folder outputs (RDRR, TRLM) replace only a previous package of their kind and keep
# every file they did not write; keys are never overwritten; the fixture generator keeps foreign
# files. Each refusal exits 4 with a message naming the path and leaves the target untouched.
set -u
B=${QP_BIN_DIR:?}; FX=${QP_FIXTURES_DIR:?}; T=${QP_TMP_DIR:?}/output-rule
[ -d "$FX/llama-tied" ] || { echo "skipped: no fixtures"; exit 77; }
rm -rf "$T"; mkdir -p "$T"
. "$(dirname "$0")/../sh_check.sh"
Q="$B/quantpack"
sum() { sha256sum "$1" | cut -d' ' -f1; }

# --- files ----------------------------------------------------------------------------------------
"$Q" convert "$FX/llama-tied" --to gguf --quant F32 -o "$T/in.gguf" >/dev/null 2>&1 || { echo "FAIL: setup"; exit 1; }
h=$(sum "$T/in.gguf")
check "output = input" 4 "is the input" "$Q" convert "$T/in.gguf" --to gguf --quant Q8_0 -o "$T/in.gguf"
check "output = input, -f" 4 "is the input.*even with --force" "$Q" convert "$T/in.gguf" --to gguf --quant Q8_0 -f -o "$T/in.gguf"
ln -s "$T/in.gguf" "$T/sym.gguf"; ln "$T/in.gguf" "$T/hard.gguf"
check "output = symlink to input, -f" 4 "is the input" "$Q" convert "$T/in.gguf" --to gguf --quant Q8_0 -f -o "$T/sym.gguf"
check "output = hard link to input, -f" 4 "is the input" "$Q" convert "$T/in.gguf" --to gguf --quant Q8_0 -f -o "$T/hard.gguf"
check "input untouched" 0 "" test "$(sum "$T/in.gguf")" = "$h"
echo old > "$T/out.gguf"
check "existing output" 4 "out.gguf: already exists.*--force" "$Q" convert "$T/in.gguf" --to gguf --quant Q8_0 -o "$T/out.gguf"
check "existing output kept" 0 "" grep -qx old "$T/out.gguf"
check "existing output, -f" 0 "" "$Q" convert "$T/in.gguf" --to gguf --quant Q8_0 -f -o "$T/out.gguf"
check "replaced" 0 "" "$Q" inspect "$T/out.gguf"
check "character device" 4 "/dev/null: exists and is a character device" "$Q" convert "$T/in.gguf" --to gguf --quant Q8_0 -f -o /dev/null
mkfifo "$T/fifo.gguf"
check "FIFO output" 4 "fifo.gguf: exists and is a FIFO" "$Q" convert "$T/in.gguf" --to gguf --quant Q8_0 -f -o "$T/fifo.gguf"
check "bullet existing" 4 "already exists" "$Q" convert "$FX/llama-tied" --to bullet -o "$T/out.gguf"
check "encode existing" 4 "already exists" "$Q" encode --type q8_0 --cols 32 "$T/in.gguf" "$T/out.gguf"
check "encode onto its input, -f" 4 "is the input" "$Q" encode --type f32 --cols 1 -f "$T/in.gguf" "$T/in.gguf"

# --- keys -----------------------------------------------------------------------------------------
check "keygen" 0 "" "$Q" keygen "$T/k.key"
hk=$(sum "$T/k.key")
check "keygen again" 4 "k.key.pub: already exists; keys are never overwritten" "$Q" keygen "$T/k.key"
check "secret key unchanged" 0 "" test "$(sum "$T/k.key")" = "$hk"
echo pub > "$T/j.key.pub"
check "keygen, .pub exists" 4 "j.key.pub: already exists" "$Q" keygen "$T/j.key"
check "no half pair" 0 "" test ! -e "$T/j.key"

# --- folders ----------------------------------------------------------------------------------------
check "rdrr" 0 "" "$Q" convert "$FX/llama-tied" --to rdrr --quant F16 -o "$T/pkg" --quiet
echo mine > "$T/pkg/notes.txt"; mkdir "$T/pkg/sub"; echo deep > "$T/pkg/sub/x"
check "rdrr again" 4 "exists and is not empty" "$Q" convert "$FX/llama-tied" --to rdrr --quant F16 -o "$T/pkg" --quiet
check "rdrr -f" 0 "" "$Q" convert "$FX/llama-tied" --to rdrr --quant F32 -f -o "$T/pkg" --quiet
check "rdrr replaced" 0 "integrity ok" "$Q" verify "$T/pkg"
check "rdrr foreign files kept" 0 "" grep -qx mine "$T/pkg/notes.txt"
check "rdrr foreign folder kept" 0 "" grep -qx deep "$T/pkg/sub/x"
check "gguf-to-rdrr --replace" 0 "" "$B/gguf-to-rdrr" "$T/in.gguf" "$T/pkg" --replace
check "gguf-to-rdrr kept notes" 0 "" grep -qx mine "$T/pkg/notes.txt"
mkdir "$T/notpkg"; echo mine > "$T/notpkg/notes.txt"
check "not a package, -f" 4 "holds no RDRR package.*did not write" "$Q" convert "$FX/llama-tied" --to rdrr --quant F16 -f -o "$T/notpkg"
check "not a package untouched" 0 "" test "$(ls "$T/notpkg")" = notes.txt
check "folder holding the input, -f" 4 "holds the input" "$Q" convert "$T/pkg" --to rdrr --quant F16 -f -o "$T"
check "trlm" 0 "" "$Q" convert "$FX/bitnet-float" --to trlm -o "$T/trlm"
echo mine > "$T/trlm/notes.txt"
check "trlm again" 4 "exists and is not empty" "$Q" convert "$FX/bitnet-float" --to trlm -o "$T/trlm"
check "trlm -f" 0 "" "$Q" convert "$FX/bitnet-float" --to trlm -f -o "$T/trlm"
check "trlm kept notes" 0 "" grep -qx mine "$T/trlm/notes.txt"
check "trlm runs" 0 "" "$Q" inspect "$T/trlm"

# --- verify --receipt ------------------------------------------------------------------------------
check "receipt" 0 "receipt:" "$Q" verify "$T/out.gguf" --against "$T/in.gguf" -n 2 --receipt "$T/r.json" --min-cosine 0 --max-kl 1e9 --min-top1 0
check "receipt exists" 4 "r.json: already exists" "$Q" verify "$T/out.gguf" --against "$T/in.gguf" -n 2 --receipt "$T/r.json"
check "receipt onto the model" 4 "is the input" "$Q" verify "$T/out.gguf" --against "$T/in.gguf" -n 2 -f --receipt "$T/in.gguf"

# --- fixtures generator: regenerating keeps foreign files ------------------------------------------
if [ -x "$B/qp-gen-fixtures" ]; then
  "$B/qp-gen-fixtures" "$T/fx" >/dev/null 2>&1
  echo mine > "$T/fx/llama-tied/notes.txt"
  check "gen-fixtures again" 0 "" "$B/qp-gen-fixtures" "$T/fx"
  check "gen-fixtures kept notes" 0 "" grep -qx mine "$T/fx/llama-tied/notes.txt"
fi

check "no partial outputs left" 0 "" test -z "$(find "$T" -name '*quantpack-partial*')"
rm -rf "$T"
finish
