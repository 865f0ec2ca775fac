#!/usr/bin/env bash
# A .bullet as a conversion source (issue 17): --to gguf, safetensors, rdrr and trlm. BQ4 decodes
# exactly, so widening (F32/F16 targets, norms kept as F32) needs no flag and verify against the
# .bullet passes its float thresholds; Q4_K_M (and trlm's ternary) re-encode BQ4 and need
# --allow-requantize (exit 3 naming the tensor, BQ4 and the target encoding, nothing written).
# The source carries a sentiment task head (bullet-pack --heads), which no other format has a
# place for: left out with a note naming it (converters/recipes.md "Every tensor accounted for").
# bullet-core's own integration_tiny.bullet (biases its runtime never reads) converts to a GGUF
# whose logits equal the .bullet's. llama.cpp loading such a GGUF: peer.runtime_vs_llama_quant.
set -u
BIN="${QP_BIN_DIR:?}"; R="${QP_REAL_FIXTURES:-/work/shared/fixtures/real}"; TMP="${QP_TMP_DIR:-/tmp}/convert-from-bullet.$$"
QP="$BIN/quantpack"
mkdir -p "$TMP"; trap 'rm -rf "$TMP"' EXIT
fail=0; pass=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
for f in "$R/stories260K.gguf" "$R/bullet/integration_tiny.bullet"; do
  [ -f "$f" ] || { echo "FAIL: missing $f"; exit 1; }
done

# the source: stories260K as .bullet with a sentiment head [2, 64]
python3 - "$TMP/heads.safetensors" <<'EOF'
import json, struct, sys
w = [((r * 31 + c * 17) % 23 - 11) / 40.0 for r in range(2) for c in range(64)]
data = struct.pack('<%df' % len(w), *w)
hdr = {"__metadata__": {"sentiment_labels": "negative,positive"},
       "sentiment_head.weight": {"dtype": "F32", "shape": [2, 64], "data_offsets": [0, len(data)]}}
h = json.dumps(hdr).encode()
h += b' ' * ((8 - len(h) % 8) % 8)
open(sys.argv[1], 'wb').write(struct.pack('<Q', len(h)) + h + data)
EOF
SRC="$TMP/s.bullet"
"$BIN/bullet-pack" "$R/stories260K.gguf" --heads gen,sentiment --head-weights "$TMP/heads.safetensors" \
  -o "$SRC" >/dev/null 2>"$TMP/err" || { echo "FAIL: setup bullet-pack: $(cat "$TMP/err")"; exit 1; }

HEAD_NOTE="sentiment_head.weight.*a .bullet task head: only the generative model is converted"
# converts SRC with the rest of the arguments to OUT; exit 0 and the head's note on stderr
convert_ok() {
  local tag="$1" out="$2"; shift 2
  "$QP" convert "$SRC" "$@" -o "$out" >/dev/null 2>"$TMP/err" && ok || { bad "$tag: $(cat "$TMP/err")"; return 1; }
  grep -q "$HEAD_NOTE" "$TMP/err" && ok || bad "$tag: no note for the task head: $(cat "$TMP/err")"
}
# verify OUT against the .bullet with the default thresholds of OUT's class; prints the class
verify_ok() {
  "$QP" verify "$2" --against "$SRC" -n 16 >"$TMP/verify" 2>&1 && ok || bad "$1: verify: $(tail -3 "$TMP/verify")"
  grep -q "class $3 " "$TMP/verify" && ok || bad "$1: verify class is not $3: $(grep class "$TMP/verify")"
}
# a refusal: exit 3 naming the tensor, BQ4 and the target encoding, OUT not written
refused() {
  local tag="$1" out="$2" want="$3"; shift 3
  "$QP" convert "$SRC" "$@" -o "$out" >/dev/null 2>"$TMP/err"
  local rc=$?
  [ $rc -eq 3 ] && ok || bad "$tag: exit $rc, want 3"
  grep -q "tensor '[a-z_.0-9]*' is already quantized (BQ4); converting it to $want .*--allow-requantize" "$TMP/err" \
    && ok || bad "$tag: message: $(cat "$TMP/err")"
  [ ! -e "$out" ] && ok || bad "$tag: wrote $out"
}

# GGUF: F32 and F16 widen (norms F32); Q4_K_M needs the flag
for q in F32 F16; do
  convert_ok "gguf $q" "$TMP/$q.gguf" --to gguf --quant $q || continue
  "$QP" inspect "$TMP/$q.gguf" | grep -q "^output_norm.weight  *F32 " && ok || bad "gguf $q: output_norm not F32"
  verify_ok "gguf $q" "$TMP/$q.gguf" "$([ $q = F32 ] && echo f32 || echo 16-bit)"
done
"$QP" convert "$SRC" --to gguf --quant F16 --dry-run >"$TMP/plan" 2>/dev/null
grep -q "^skipped sentiment_head.weight .*a .bullet task head" "$TMP/plan" && ok || bad "gguf --dry-run: head not listed as skipped"
refused "gguf Q4_K_M" "$TMP/q4.gguf" Q8_0 --to gguf --quant Q4_K_M
convert_ok "gguf Q4_K_M --allow-requantize" "$TMP/q4.gguf" --to gguf --quant Q4_K_M --allow-requantize \
  && verify_ok "gguf Q4_K_M" "$TMP/q4.gguf" 4-bit

# safetensors (decoded to F32) and RDRR (F16; canonical GGUF names, which DOPPLER reads)
convert_ok "safetensors" "$TMP/st" --to safetensors && verify_ok safetensors "$TMP/st" f32
convert_ok "rdrr F16" "$TMP/r16" --to rdrr --quant F16 && verify_ok "rdrr F16" "$TMP/r16" 16-bit
grep -q '"token_embd.weight"' "$TMP/r16/manifest.json" && ! grep -q '"tok_embeddings.weight"' "$TMP/r16/manifest.json" \
  && ok || bad "rdrr: not stored under GGUF names"
refused "rdrr Q4_K_M" "$TMP/r4" Q5_0 --to rdrr --quant Q4_K_M
convert_ok "rdrr Q4_K_M --allow-requantize" "$TMP/r4" --to rdrr --quant Q4_K_M --allow-requantize

# TRLM: ternary re-encodes BQ4; bf16 widens
refused "trlm" "$TMP/t" TRLM_T2 --to trlm
convert_ok "trlm bf16" "$TMP/t" --to trlm --quant bf16 && { [ -f "$TMP/t/qmodel.tensors" ] && ok || bad "trlm bf16: no qmodel.tensors"; }
"$QP" convert "$SRC" --to trlm --quant bf16 --dry-run >"$TMP/plan" 2>/dev/null
grep -q "^skipped sentiment_head.weight .*a .bullet task head" "$TMP/plan" && grep -q "^48 tensors, .* 1 source tensors skipped" "$TMP/plan" \
  && ok || bad "trlm --dry-run: head not listed as skipped: $(tail -2 "$TMP/plan")"

# bullet-core's integration_tiny.bullet: 11 biases left out, logits equal (max |diff| 0)
"$QP" convert "$R/bullet/integration_tiny.bullet" --to gguf --quant F32 -o "$TMP/it.gguf" >/dev/null 2>"$TMP/err" \
  && ok || bad "integration_tiny: $(cat "$TMP/err")"
[ "$(grep -c "skipped .*\.bias: a .bullet bias: bullet-core's runtime never reads it" "$TMP/err")" -eq 11 ] \
  && ok || bad "integration_tiny: not 11 bias notes: $(cat "$TMP/err")"
"$QP" verify "$TMP/it.gguf" --against "$R/bullet/integration_tiny.bullet" -n 8 >"$TMP/verify" 2>&1 \
  && grep -q "max |diff| 0," "$TMP/verify" && ok || bad "integration_tiny: verify: $(tail -3 "$TMP/verify")"

echo "convert_from_bullet: $pass passed, $fail failed"
[ $fail -eq 0 ]
