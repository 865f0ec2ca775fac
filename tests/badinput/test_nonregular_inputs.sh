#!/bin/bash
# Issue 11, item 4: a FIFO (or any non-regular file) named like a model or package file makes no
# command block: files are opened O_NONBLOCK and checked with fstat before a byte is read, so
# inspect/run/verify/convert/tokenize/inference fail at once with a message naming the FIFO. A
# symbolic link inside a package (RDRR tokenizer.model, tokenizer.json, manifest.json; a TRLM
# folder's files) is refused, even when it points at a valid file; a link given on the command
# line (as a Hugging Face cache folder has for every file) is followed.
# Every command runs under `timeout 60` (tests/sh_check.sh): exit 124 means it blocked.
set -u
B=${QP_BIN_DIR:?}; FX=${QP_FIXTURES_DIR:?}; T=${QP_TMP_DIR:?}/nonregular
[ -d "$FX/llama-tied" ] || { echo "skipped: no fixtures"; exit 77; }
rm -rf "$T"; mkdir -p "$T"
. "$(dirname "$0")/../sh_check.sh"
Q="$B/quantpack"

# --- FIFOs named like model files -------------------------------------------------------------
mkfifo "$T/model.gguf" "$T/stories.bin"
check "inspect fifo gguf" 4 "model.gguf: is a FIFO" "$Q" inspect "$T/model.gguf"
check "run fifo gguf" 4 "model.gguf: is a FIFO" "$Q" run "$T/model.gguf" -p hi -n 1
check "convert fifo" 4 "stories.bin: is a FIFO" "$Q" convert "$T/stories.bin" --to gguf --quant F32 -o "$T/o.gguf"
check "verify fifo" 4 "model.gguf: is a FIFO" "$Q" verify "$T/model.gguf" --against "$FX/llama-tied"
check "tokenize fifo json" 4 "is a FIFO" "$Q" tokenize "$T/model.gguf" hello
[ ! -e "$T/o.gguf" ] || { fail=$((fail+1)); echo "FAIL: convert of a FIFO wrote an output"; }

# an HF folder whose config.json / tokenizer.json / model.safetensors is a FIFO
for f in config.json tokenizer.json model.safetensors; do
  d="$T/hf-$f"; mkdir -p "$d"; cp "$FX/llama-tied"/* "$d/"; rm -f "$d/$f"; mkfifo "$d/$f"
  check "inspect hf with fifo $f" 4 "$f: is a FIFO" "$Q" inspect "$d"
done

# --- RDRR package: links and FIFOs inside it --------------------------------------------------
"$Q" convert "$FX/llama-tied" --to rdrr --quant F16 -o "$T/pkg" --quiet || { echo "FAIL: convert rdrr"; exit 1; }
check "rdrr ok" 0 "" "$Q" inspect "$T/pkg"
tok=$(cd "$T/pkg" && ls tokenizer.* | head -1)
[ -n "$tok" ] || { echo "FAIL: package has no tokenizer file"; exit 1; }
cp -r "$T/pkg" "$T/pkg-link"; mv "$T/pkg-link/$tok" "$T/outside-$tok"; ln -s "$T/outside-$tok" "$T/pkg-link/$tok"
check "rdrr tokenizer symlink" 4 "$tok: is a symbolic link" "$Q" inspect "$T/pkg-link"
cp -r "$T/pkg" "$T/pkg-fifo"; rm "$T/pkg-fifo/$tok"; mkfifo "$T/pkg-fifo/$tok"
check "rdrr tokenizer fifo" 4 "$tok: is a FIFO" "$Q" inspect "$T/pkg-fifo"
cp -r "$T/pkg" "$T/pkg-man"; mv "$T/pkg-man/manifest.json" "$T/outside-manifest.json"
ln -s "$T/outside-manifest.json" "$T/pkg-man/manifest.json"
check "rdrr manifest symlink" 4 "manifest.json: is a symbolic link" "$Q" inspect "$T/pkg-man"

# --- TRLM folder ------------------------------------------------------------------------------
if "$Q" convert "$FX/bitnet-float" --to trlm -o "$T/trlm" >/dev/null 2>&1; then
  check "trlm ok" 0 "" "$Q" inspect "$T/trlm"
  for f in qmodel.tensors rope.cache config.json; do
    [ -e "$T/trlm/$f" ] || continue
    cp -r "$T/trlm" "$T/trlm-$f"; mv "$T/trlm-$f/$f" "$T/outside-trlm-$f"; ln -s "$T/outside-trlm-$f" "$T/trlm-$f/$f"
    check "trlm $f symlink" 4 "$f: is a symbolic link" "$Q" inspect "$T/trlm-$f"
  done
  cp -r "$T/trlm" "$T/trlm-fifo"; rm "$T/trlm-fifo/qmodel.tensors"; mkfifo "$T/trlm-fifo/qmodel.tensors"
  check "trlm fifo" 4 "is a FIFO" "$Q" inspect "$T/trlm-fifo"
  read -r -a CFG < "$T/trlm/inference.config"
  check "inference fifo" 4 "is a FIFO" "$B/inference" "$T/trlm-fifo" --config "${CFG[@]}"
else
  fail=$((fail+1)); echo "FAIL: convert --to trlm"
fi

# --- a link given on the command line is followed (HF cache layout) ---------------------------
mkdir -p "$T/blobs" "$T/snap"
for f in "$FX/llama-tied"/*; do cp "$f" "$T/blobs/$(basename "$f").blob"; ln -s "$T/blobs/$(basename "$f").blob" "$T/snap/$(basename "$f")"; done
check "hf cache links followed" 0 "" "$Q" inspect "$T/snap"

finish
