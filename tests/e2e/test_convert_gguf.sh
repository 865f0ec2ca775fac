#!/usr/bin/env bash
# quantpack convert on GGUF and llama2.c sources (real stories260K fixtures):
# - Q4_K_M through the CLI is byte-identical to llama.cpp's own file (cmp);
# - --dry-run prints the plan and writes nothing;
# - an already quantized tensor is refused (exit 3, message names it) unless --allow-requantize;
#   widening it to F32 needs no flag and runs exactly as the quantized file;
# - verify of the Q4_K_M against the F32 source passes the runtime's 4-bit thresholds;
# - llama2.c checkpoint + tokenizer -> Q4_K_M runs and verifies;
# - usage errors exit 2; an unwritable output exits 4 and leaves nothing behind.
set -u
BIN="${QP_BIN_DIR:?}"; REAL="${QP_REAL_FIXTURES:-}"; TMP="${QP_TMP_DIR:-/tmp}/convert-gguf.$$"
QP="$BIN/quantpack"
SRC="$REAL/stories260K.gguf"; REF="$REAL/gguf/stories260K-Q4_K_M.llamacpp.gguf"
[ -f "$SRC" ] && [ -f "$REF" ] || { echo "skipped: real fixtures missing in '$REAL'"; exit 77; }
mkdir -p "$TMP"; trap 'rm -rf "$TMP"' EXIT
fail=0; pass=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

"$QP" convert "$SRC" --to gguf --quant Q4_K_M -o "$TMP/q4.gguf" --threads 2 2>"$TMP/err" || bad "convert: $(cat "$TMP/err")"
cmp -s "$TMP/q4.gguf" "$REF" && ok || bad "CLI Q4_K_M differs from llama.cpp's stories260K-Q4_K_M"
"$QP" convert "$SRC" --quant Q4_K_M -o "$TMP/q4-t1.gguf" --threads 1 2>/dev/null && cmp -s "$TMP/q4-t1.gguf" "$REF" && ok || bad "1 thread differs"

"$QP" convert "$SRC" --quant Q4_K_M -o "$TMP/dry.gguf" --dry-run >"$TMP/plan" 2>&1; rc=$?
[ $rc -eq 0 ] && ok || bad "dry run exit $rc"
[ ! -e "$TMP/dry.gguf" ] && ok || bad "dry run wrote a file"
grep -q "blk.2.attn_v.weight .* F32 *Q8_0" "$TMP/plan" && ok || bad "plan lacks the Q6_K->Q8_0 attn_v of layer 2: $(grep attn_v "$TMP/plan" | head -3)"
grep -q "^48 tensors" "$TMP/plan" && ok || bad "plan summary: $(tail -1 "$TMP/plan")"

"$QP" convert "$TMP/q4.gguf" --quant Q8_0 -o "$TMP/re.gguf" 2>"$TMP/err"; rc=$?
[ $rc -eq 3 ] && ok || bad "requantize without the flag: exit $rc"
grep -q "already quantized" "$TMP/err" && grep -q "allow-requantize" "$TMP/err" && grep -q "tensor '" "$TMP/err" && ok || bad "message: $(cat "$TMP/err")"
[ ! -e "$TMP/re.gguf" ] && ok || bad "refused conversion left a file"
"$QP" convert "$TMP/q4.gguf" --quant Q8_0 -o "$TMP/re.gguf" --allow-requantize 2>/dev/null && [ -s "$TMP/re.gguf" ] && ok || bad "--allow-requantize failed"
# widening to a float type loses nothing more: no flag, and the F32 file runs as the Q4_K_M one
rm -f "$TMP/wide.gguf"
"$QP" convert "$TMP/q4.gguf" --quant F32 -o "$TMP/wide.gguf" 2>"$TMP/err" && ok || bad "widening to F32 refused: $(cat "$TMP/err")"
"$QP" verify "$TMP/wide.gguf" --against "$TMP/q4.gguf" -n 8 --min-cosine 0.99999 --max-kl 1e-9 --min-top1 1 >"$TMP/wverify" 2>&1 && ok || bad "widened F32 differs: $(cat "$TMP/wverify")"

"$QP" verify "$TMP/q4.gguf" --against "$SRC" -n 16 >"$TMP/verify" 2>&1 && ok || bad "verify Q4_K_M vs F32: $(cat "$TMP/verify")"
grep "prompt" "$TMP/verify"

for q in Q6_K Q8_0 F16 BF16 F32; do
  "$QP" convert "$SRC" --quant $q -o "$TMP/$q.gguf" 2>/dev/null || bad "convert $q"
  "$QP" verify "$TMP/$q.gguf" --against "$SRC" -n 8 >"$TMP/v.$q" 2>&1 && ok || bad "verify $q: $(tail -3 "$TMP/v.$q")"
done

if [ -f "$REAL/stories260K.bin" ] && [ -f "$REAL/tok512.bin" ]; then
  "$QP" convert "$REAL/stories260K.bin" --tokenizer "$REAL/tok512.bin" --quant Q4_K_M -o "$TMP/l2c.gguf" 2>"$TMP/err" && ok || bad "llama2.c convert: $(cat "$TMP/err")"
  "$QP" run "$TMP/l2c.gguf" -p "Once upon a time" -n 8 >/dev/null 2>&1 && ok || bad "run llama2.c Q4_K_M"
  "$QP" verify "$TMP/l2c.gguf" --against "$REAL/stories260K.bin" --tokenizer "$REAL/tok512.bin" -n 16 >"$TMP/v" 2>&1 && ok || bad "verify llama2.c Q4_K_M: $(tail -3 "$TMP/v")"
fi

"$QP" convert "$SRC" -o "$TMP/x.gguf" >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "missing --quant should exit 2"
"$QP" convert "$SRC" --quant Q3_X -o "$TMP/x.gguf" >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "unknown quant should exit 2"
"$QP" convert "$SRC" --quant I2_S -o "$TMP/x.gguf" >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "I2_S of a non-BitNet model should exit 2"
"$QP" convert "$SRC" --to onnx --quant Q4_K_M -o "$TMP/x" >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "--to onnx should exit 2"
"$QP" convert "$SRC" --quant Q4_K_M -o "$TMP/no/such/dir/x.gguf" >/dev/null 2>&1; rc=$?
[ $rc -eq 4 ] && ok || bad "unwritable output: exit $rc"
[ -z "$(ls "$TMP" | grep '\.tmp\.')" ] && ok || bad "temporary files left: $(ls "$TMP")"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
