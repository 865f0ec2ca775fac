#!/usr/bin/env bash
# quantpack convert on the BitNet fixtures (qp-gen-fixtures bitnet-float: projections exactly
# ternary q * alpha in BF16; bitnet-packed: the same weights packed U8 + weight_scale):
# - I2_S, TQ2_0, TQ1_0 outputs run (quantpack run) and verify against the float source with the
#   runtime's ternary thresholds (the runtime quantizes activations to int8 for ternary weights,
#   so logits differ from the float source by that, not by the weights);
# - the packed checkpoint gives byte-identical GGUFs to the float one (unpacking is exact);
# - I2_S tensors are GGUF type 36 with general.file_type 40, arch bitnet;
# - --dry-run shows the seven projections ternary and the rest float; QK256 is refused clearly;
# - the ternary weights are exact: each output converted back to F32 (--allow-requantize decodes
#   I2_S with its per-tensor scale, TQ with its block scales) is byte-identical to the HF source
#   converted straight to F32 (alpha is a power of two, so even the f16 block scales are exact).
set -u
BIN="${QP_BIN_DIR:?}"; FX="${QP_FIXTURES_DIR:?}"; TMP="${QP_TMP_DIR:-/tmp}/convert-bitnet.$$"
QP="$BIN/quantpack"
[ -d "$FX/bitnet-float" ] && [ -d "$FX/bitnet-packed" ] || { echo "skipped: BitNet fixtures missing in $FX"; exit 77; }
mkdir -p "$TMP/f" "$TMP/p"; trap 'rm -rf "$TMP"' EXIT
# same folder name for both, so general.name matches
ln -s "$FX/bitnet-float" "$TMP/f/model"; ln -s "$FX/bitnet-packed" "$TMP/p/model"
fail=0; pass=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

for q in I2_S TQ2_0 TQ1_0; do
  "$QP" convert "$TMP/f/model" --quant $q -o "$TMP/float-$q.gguf" 2>"$TMP/err" || { bad "float $q: $(cat "$TMP/err")"; continue; }
  "$QP" convert "$TMP/p/model" --quant $q -o "$TMP/packed-$q.gguf" 2>"$TMP/err" || { bad "packed $q: $(cat "$TMP/err")"; continue; }
  cmp -s "$TMP/float-$q.gguf" "$TMP/packed-$q.gguf" && ok || bad "$q: packed and float checkpoints give different files"
  "$QP" run "$TMP/float-$q.gguf" -p "Once upon a time" -n 8 >/dev/null 2>"$TMP/err" && ok || bad "run $q: $(cat "$TMP/err")"
  "$QP" verify "$TMP/float-$q.gguf" --against "$FX/bitnet-float" -n 8 >"$TMP/v" 2>&1 && ok || bad "verify $q: $(tail -4 "$TMP/v")"
  echo "$q: $(grep prompt "$TMP/v")"
done

"$QP" convert "$TMP/f/model" --quant F32 -o "$TMP/float-F32.gguf" 2>/dev/null || bad "float F32"
for q in I2_S TQ2_0 TQ1_0; do
  "$QP" convert "$TMP/float-$q.gguf" --quant F32 --allow-requantize -o "$TMP/back-$q.gguf" 2>"$TMP/err" || bad "decode $q: $(cat "$TMP/err")"
  cmp -s "$TMP/back-$q.gguf" "$TMP/float-F32.gguf" && ok || bad "$q decoded to F32 differs from the source's F32"
done

"$QP" inspect "$TMP/float-I2_S.gguf" >"$TMP/inspect" 2>&1
grep -Eq "general.architecture +string +\"bitnet\"" "$TMP/inspect" && ok || bad "arch is not bitnet"
grep -Eq "general.file_type +u32 +40" "$TMP/inspect" && ok || bad "file type is not 40"
grep -Eq "^blk.0.attn_q.weight +I2_S" "$TMP/inspect" && ok || bad "attn_q is not I2_S: $(grep attn_q "$TMP/inspect")"
grep -Eq "^blk.1.ffn_down.weight +I2_S" "$TMP/inspect" && ok || bad "ffn_down is not I2_S"
grep -Eq "^token_embd.weight +F32" "$TMP/inspect" && ok || bad "token_embd is not F32 (BF16 widened)"
grep -Eq "^blk.0.attn_sub_norm.weight +F32" "$TMP/inspect" && ok || bad "attn_sub_norm missing or not F32"

"$QP" convert "$TMP/p/model" --quant TQ2_0 --dry-run >"$TMP/plan" 2>&1 && ok || bad "dry run"
[ "$(grep -c 'unpack+encode' "$TMP/plan")" -eq 14 ] && ok || bad "14 packed projections expected: $(grep -c unpack "$TMP/plan")"
"$QP" convert "$TMP/f/model" --quant QK256 -o "$TMP/qk.gguf" >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 3 ] && [ ! -e "$TMP/qk.gguf" ] && ok || bad "QK256 should be refused with exit 3: $rc $(cat "$TMP/err")"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
