#!/usr/bin/env bash
# Every llama-quantize file type through the CLI on the real stories260K (F32 GGUF): the output is
# written, the runtime runs it, and `quantpack verify` against the source passes the thresholds of
# the class the file falls in (runtime/runtime.md). The bytes themselves are pinned against
# llama_model_quantize by tests/peer/test_convert_vs_llama_quantize.c. Q2_K_S without an
# importance matrix is refused with exit 2 (as llama-quantize refuses it), naming the tensor.
set -u
BIN="${QP_BIN_DIR:?}"; REAL="${QP_REAL_FIXTURES:-}"; TMP="${QP_TMP_DIR:-/tmp}/convert-types.$$"
QP="$BIN/quantpack"
SRC="$REAL/stories260K.gguf"
[ -f "$SRC" ] || { echo "skipped: real fixtures missing in '$REAL'"; exit 77; }
mkdir -p "$TMP"; trap 'rm -rf "$TMP"' EXIT
fail=0; pass=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

for q in Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K \
         IQ4_NL IQ4_XS TQ1_0 TQ2_0 F16 BF16 F32 q4_k_m iq4_xs; do
    out="$TMP/$q.gguf"
    "$QP" convert "$SRC" --to gguf --quant "$q" -o "$out" 2>"$TMP/err" || { bad "$q: convert: $(cat "$TMP/err")"; continue; }
    "$QP" verify "$out" --against "$SRC" -n 16 >"$TMP/v" 2>&1; rc=$?
    [ $rc -eq 0 ] && grep -q "verdict: PASS" "$TMP/v" && ok || bad "$q: verify exit $rc: $(grep -E 'class|verdict|>' "$TMP/v" | head -4)"
    echo "$q: $(grep -oE 'class [^ ]+|cosine min [0-9.]+ mean [0-9.]+|KL mean [0-9.e-]+|top-1 [0-9.]+|greedy [0-9/]+' "$TMP/v" | head -5 | tr '\n' ' ')"
    rm -f "$out"
done

# stories260K's 64-wide rows all fall back from Q2_K to Q4_0 (nothing needs the matrix there);
# llama-k256 (256-wide rows) keeps Q2_K tensors
K256="${QP_FIXTURES_DIR:?}/llama-k256"
"$QP" convert "$K256" --quant Q2_K_S -o "$TMP/q2ks.gguf" 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && [ ! -e "$TMP/q2ks.gguf" ] && grep -q "blk.0.attn_k.weight' would be Q2_K, which needs an importance matrix" "$TMP/err" && ok ||
    bad "Q2_K_S without --imatrix: exit $rc: $(cat "$TMP/err")"

# llama-quantize's per-tensor options through the CLI (bytes pinned by the peer test): the plan
# shows them; bad values are usage errors (exit 2) that list what is accepted
"$QP" convert "$K256" --quant Q4_K_M --dry-run --output-tensor-type Q8_0 --token-embedding-type q5_k \
    --tensor-type 'BLK\.1\.ffn_down=q8_0' --tensor-type 'ffn_(up|gate)=iq4_xs' >"$TMP/plan" 2>&1; rc=$?
[ $rc -eq 0 ] && ok || bad "options dry run: exit $rc: $(cat "$TMP/plan")"
grep -qE "^output.weight .* Q8_0 " "$TMP/plan" && grep -qE "^token_embd.weight .* Q5_K " "$TMP/plan" &&
    grep -qE "^blk.1.ffn_down.weight .* Q8_0 " "$TMP/plan" && grep -qE "^blk.0.ffn_down.weight .* Q4_K " "$TMP/plan" &&
    grep -qE "^blk.0.ffn_up.weight .* IQ4_XS " "$TMP/plan" && ok || bad "options plan: $(grep -E 'output|embd|ffn' "$TMP/plan")"
"$QP" convert "$K256" --quant Q4_K_M --dry-run --pure --leave-output-tensor >"$TMP/plan" 2>&1 &&
    grep -qE "^output.weight .* BF16 *BF16 " "$TMP/plan" && grep -qE "^blk.0.attn_v.weight .* Q4_K " "$TMP/plan" &&
    ok || bad "--pure --leave-output-tensor plan: $(grep -E 'output.weight|attn_v' "$TMP/plan")"
"$QP" convert "$K256" --quant Q4_K_M -o "$TMP/x.gguf" --output-tensor-type q9_k 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "q9_k' is not a type quantpack writes to GGUF (.*q4_k" "$TMP/err" && ok || bad "bad type: $rc $(cat "$TMP/err")"
"$QP" convert "$K256" --quant Q4_K_M -o "$TMP/x.gguf" --tensor-type ffn_down 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "PATTERN=TYPE" "$TMP/err" && ok || bad "bad --tensor-type: $rc $(cat "$TMP/err")"
"$QP" convert "$K256" --quant Q4_K_M -o "$TMP/x.gguf" --tensor-type '(=q8_0' 2>"$TMP/err"; rc=$?
[ $rc -eq 2 ] && grep -q "pattern '('" "$TMP/err" && [ ! -e "$TMP/x.gguf" ] && ok || bad "bad regex: $rc $(cat "$TMP/err")"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
