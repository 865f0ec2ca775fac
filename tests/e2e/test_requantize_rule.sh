#!/usr/bin/env bash
# One requantize rule for every target (issue 17, converters/recipe.h qp_recipe_check_requantize):
# a quantized source tensor stored as another quantized encoding needs --allow-requantize (exit 3
# naming the tensor and both encodings, nothing written); widening to F16/F32 never does.
# Targets: rdrr (the encoding its dtype rule stores), bullet (BQ4 for every tensor) and trlm (the
# encoding the SDK's action stores).
# Source: llama.cpp's own Q4_K_M of stories260K (its 64-wide rows are Q5_0 and Q8_0 there).
set -u
BIN="${QP_BIN_DIR:?}"; R="${QP_REAL_FIXTURES:-/work/shared/fixtures/real}"; TMP="${QP_TMP_DIR:-/tmp}/requantize-rule.$$"
QP="$BIN/quantpack"; SRC="$R/gguf/stories260K-Q4_K_M.llamacpp.gguf"
mkdir -p "$TMP"; trap 'rm -rf "$TMP"' EXIT
fail=0; pass=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
[ -f "$SRC" ] || { echo "FAIL: missing $SRC"; exit 1; }

# rdrr --quant Q4_K_M: DOPPLER has no Q5_0 decoder, so Q5_0 would become Q4_K (padded rows)
for dry in "" --dry-run; do
  "$QP" convert "$SRC" --to rdrr --quant Q4_K_M -o "$TMP/out" $dry >/dev/null 2>"$TMP/err"
  rc=$?
  [ $rc -eq 3 ] && ok || bad "rdrr Q4_K_M $dry: exit $rc, want 3"
  grep -q "tensor 'token_embd.weight' is already quantized (Q5_0); converting it to Q4_K .*--allow-requantize" "$TMP/err" \
    && ok || bad "rdrr Q4_K_M $dry: message: $(cat "$TMP/err")"
  [ ! -e "$TMP/out" ] && ok || bad "rdrr Q4_K_M $dry: wrote $TMP/out"
done
"$QP" convert "$SRC" --to rdrr --quant Q4_K_M --allow-requantize -o "$TMP/out" >/dev/null 2>"$TMP/err" \
  && [ -f "$TMP/out/manifest.json" ] && ok || bad "rdrr Q4_K_M --allow-requantize: $(cat "$TMP/err")"
rm -rf "$TMP/out"
for q in F16 F32; do
  "$QP" convert "$SRC" --to rdrr --quant $q -o "$TMP/out" >/dev/null 2>"$TMP/err" && ok \
    || bad "rdrr $q (widening) refused: $(cat "$TMP/err")"
  rm -rf "$TMP/out"
done

# bullet: every tensor is BQ4, so any quantized source tensor needs the flag (convert and bullet-pack)
for cmd in "quantpack convert --to bullet" bullet-pack; do
  "$BIN"/$cmd "$SRC" -o "$TMP/m.bullet" >/dev/null 2>"$TMP/err"
  rc=$?
  [ $rc -eq 3 ] && ok || bad "$cmd: exit $rc, want 3"
  grep -q "tensor 'token_embd.weight' is already quantized (Q5_0); converting it to BQ4 .*--allow-requantize" "$TMP/err" \
    && ok || bad "$cmd: message: $(cat "$TMP/err")"
  [ ! -e "$TMP/m.bullet" ] && ok || bad "$cmd: wrote $TMP/m.bullet"
  "$BIN"/$cmd "$SRC" --allow-requantize -o "$TMP/m.bullet" >/dev/null 2>"$TMP/err" && [ -s "$TMP/m.bullet" ] \
    && ok || bad "$cmd --allow-requantize: $(cat "$TMP/err")"
  rm -f "$TMP/m.bullet"
done
"$QP" convert "$R/stories260K.gguf" --to bullet -o "$TMP/m.bullet" >/dev/null 2>"$TMP/err" && ok \
  || bad "bullet from F32 refused: $(cat "$TMP/err")"

# trlm: the SDK's quantizing actions (ternary by default, q8_0, ...) on llama.cpp's Q5_0 rows need
# the flag; --quant bf16 stores BF16_RAW only (widening: no flag)
for dry in "" --dry-run; do
  "$QP" convert "$SRC" --to trlm -o "$TMP/t" $dry >/dev/null 2>"$TMP/err"
  rc=$?
  [ $rc -eq 3 ] && ok || bad "trlm $dry: exit $rc, want 3"
  grep -q "tensor 'model.layers.0.self_attn.k_proj.weight' is already quantized (Q5_0); converting it to TRLM_T2 .*--allow-requantize" "$TMP/err" \
    && ok || bad "trlm $dry: message: $(cat "$TMP/err")"
  [ -z "$(ls -d "$TMP"/t* 2>/dev/null)" ] && ok || bad "trlm $dry: left $(ls -d "$TMP"/t*)"
done
"$QP" convert "$SRC" --to trlm --quant q8_0 -o "$TMP/t" >/dev/null 2>"$TMP/err"
[ $? -eq 3 ] && grep -q "(Q5_0); converting it to Q8_0 " "$TMP/err" && ok || bad "trlm q8_0: $(cat "$TMP/err")"
"$QP" convert "$SRC" --to trlm --quant bf16 -o "$TMP/t" >/dev/null 2>"$TMP/err" && [ -f "$TMP/t/qmodel.tensors" ] \
  && ok || bad "trlm bf16 (widening) refused: $(cat "$TMP/err")"
rm -rf "$TMP/t"
"$QP" convert "$SRC" --to trlm --allow-requantize -o "$TMP/t" >/dev/null 2>"$TMP/err" && [ -f "$TMP/t/qmodel.tensors" ] \
  && ok || bad "trlm --allow-requantize: $(cat "$TMP/err")"
rm -rf "$TMP/t"

echo "requantize_rule: $pass passed, $fail failed"
[ $fail -eq 0 ]
