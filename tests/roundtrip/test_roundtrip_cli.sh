#!/usr/bin/env bash
# quantpack roundtrip (issue 17, cli/roundtrip.md): every --via format on the bundled llama-tied
# (F32) and llama-gqa-untied (BF16) and, when the real fixtures exist, stories260K.gguf and the
# llama2.c stories260K.bin; the report's paths, hops and proofs; cases that must fail (a tampered
# intermediate, a lossy path claimed lossless, a lossy path under its class's thresholds, a format
# that cannot hold the model); usage errors; --keep and the output rule; nothing left in TMPDIR.
set -u
BIN="${QP_BIN_DIR:?}"; FX="${QP_FIXTURES_DIR:?}"; R="${QP_REAL_FIXTURES:-/work/shared/fixtures/real}"
TMP="${QP_TMP_DIR:-/tmp}/roundtrip-cli.$$"
QP="$BIN/quantpack"
mkdir -p "$TMP/tmpdir"; trap 'rm -rf "$TMP"' EXIT
export TMPDIR="$TMP/tmpdir"
fail=0; pass=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
# rt NAME WANT_RC ARGS...: runs roundtrip, output in $TMP/NAME.out, checks the exit code
rt() {
  local name=$1 want=$2; shift 2
  "$QP" roundtrip "$@" >"$TMP/$name.out" 2>&1
  local rc=$?
  [ $rc -eq "$want" ] && ok || bad "$name: exit $rc, want $want: $(cat "$TMP/$name.out")"
}
# row NAME REGEX: a line of NAME's output matches the (extended) regex
row() { grep -qE -- "$2" "$TMP/$1.out" && ok || bad "$1: no line matching '$2' in: $(cat "$TMP/$1.out")"; }
# json FILE EXPR: a JavaScript expression over the parsed report r is true
json() { node -e 'const r = JSON.parse(require("fs").readFileSync(process.argv[1])); process.exit(eval(process.argv[2]) ? 0 : 1)' "$1" "$2" \
           && ok || bad "$1: $2 is false"; }
no_leftovers() { [ -z "$(ls -A "$TMPDIR")" ] && ok || bad "$1: left in TMPDIR: $(ls -A "$TMPDIR")"; }

ALL=gguf,rdrr,trlm,bullet,safetensors
# random weights: 4-bit BQ4 keeps the argmax far above chance (1/408), not the trained 0.9
RANDOM_LOSSY=(--min-cosine 0.7 --max-kl 2.5 --min-top1 0.2)

# 1. llama-tied (F32): every format; gguf, rdrr, safetensors lossless (same bytes), trlm and
#    bullet verified
rt tied 0 "$FX/llama-tied" --via "$ALL" -o "$TMP/tied" "${RANDOM_LOSSY[@]}"
for f in gguf rdrr safetensors; do
  row tied "^$f +F32 +SRC -> $f +tensors\+verify +pass +20 tensors equal: .*; verify identical: "
  row tied "^$f +F32 +$f -> safetensors +tensors +pass +20 tensors equal: 20 same bytes"
done
# GGUF "llama" stores q/k rows as adjacent pairs: 2 layers x (attn_q, attn_k) compared reordered
row tied "^gguf +F32 +SRC -> gguf +tensors\+verify +pass +20 tensors equal: 16 same bytes, 0 same F32 values, 4 q/k reordered"
row tied "^rdrr +F32 +SRC -> rdrr +tensors\+verify +pass +20 tensors equal: 20 same bytes, 0 same F32 values, 0 q/k reordered"
row tied "^trlm +bf16 +trlm -> safetensors +verify +pass +custom: "
row tied "^bullet +- +bullet -> safetensors +verify +pass +custom: "
J="$TMP/tied/roundtrip.json"
json "$J" 'r.schema === "quantpack.roundtrip.report" && r.schema_version === 1 && r.verdict === "pass"'
json "$J" 'r.source.format === "safetensors" && r.back.format === "safetensors" && r.back.quant === "F32" && !("note" in r.back)'
json "$J" 'r.paths.map(p => p.via).join() === "gguf,rdrr,trlm,bullet,safetensors" && r.paths.every(p => p.hops.length === 2)'
json "$J" 'r.paths.map(p => p.lossless).join() === "true,true,false,false,true"'
json "$J" 'r.paths.filter(p => p.lossless).every(p => p.hops[0].proof === "tensors+verify" && p.hops[0].tensors.compared === 20 && p.hops[1].proof === "tensors" && p.hops[1].tensors.compared === 20)'
json "$J" 'r.paths[0].hops[0].tensors.qk_rows_reordered === 4 && r.paths[0].hops[1].tensors.same_bytes === 20'
json "$J" 'r.paths.filter(p => !p.lossless).every(p => p.hops.every(h => h.proof === "verify"))'
json "$J" 'r.paths.every(p => p.hops[0].receipt.schema === "quantpack.verify.receipt" && p.hops[0].receipt.verdict === "pass")'
json "$J" 'r.paths[3].hops[1].receipt.thresholds.class === "custom" && r.paths[3].hops[1].thresholds.min_top1 === 0.2'
json "$J" 'r.intermediates === null'
no_leftovers tied

# 2. llama-gqa-untied (BF16): F32 intermediates hold the same values (not bytes); trlm bf16 keeps
#    the BF16 tensors as they were (identical class)
rt bf16 0 "$FX/llama-gqa-untied" --via gguf,rdrr,trlm,safetensors
row bf16 "^gguf +F32 +SRC -> gguf +tensors\+verify +pass +30 tensors equal: 0 same bytes, 24 same F32 values, 6 q/k reordered"
row bf16 "^gguf +F32 +gguf -> safetensors +tensors +pass +30 tensors equal: 0 same bytes, 30 same F32 values"
row bf16 "^trlm +bf16 +trlm -> safetensors +verify +pass +identical: "
# BF16 of the F32 llama-tied, default thresholds: its own class "bf16" (runtime.md "verify":
# 8 significant bits, 64x F16's error; it failed "16-bit" at mean cosine 0.99984, KL 0.0021);
# F16 stays "16-bit"
rt bf16cls 0 "$FX/llama-tied" --via trlm,safetensors:BF16,gguf:BF16,gguf:F16
for f in "trlm +bf16" "safetensors +BF16" "gguf +BF16"; do
  row bf16cls "^$f +SRC -> [a-z]+ +verify +pass +bf16: cosine 0\.999[89]"
done
row bf16cls "^gguf +F16 +SRC -> gguf +verify +pass +16-bit: cosine 0\.99999"
# Phi-3 (fused qkv / gate_up) and Mixtral (experts merged into ffn_*_exps by the GGUF): back to
# HF names, every tensor equal (hop 1 of the MoE is verify only: its GGUF holds other tensors)
rt fused 0 "$FX/phi-fused" --via gguf
row fused "^gguf +F32 +gguf -> safetensors +tensors +pass +15 tensors equal: 0 same bytes, 15 same F32 values"
rt moe 0 "$FX/mixtral" --via gguf
row moe "^gguf +F32 +SRC -> gguf +verify +pass +f32: "
row moe "^gguf +F32 +gguf -> safetensors +tensors +pass +65 tensors equal: 0 same bytes, 65 same F32 values"
# Gemma: norms are w in the HF folder, 1 + w (rounded to F32) in a GGUF: that path is not claimed
# lossless (verify both hops; the tensor proof failed on blk.0.attn_norm.weight), safetensors is
rt gemma 0 "$FX/gemma2" --via gguf,safetensors
row gemma "^gguf +F32 +SRC -> gguf +verify +pass +f32: "
row gemma "^gguf +F32 +gguf -> safetensors +verify +pass +f32: "
row gemma "^safetensors +F32 +safetensors -> safetensors +tensors +pass +24 tensors equal"
# Qwen3.5: norms 1 + w and ssm_a = -exp(A_log) in a GGUF: HF via gguf is verified (it failed the
# tensor proof on the first norm), HF via safetensors still compared tensor by tensor
rt q35 0 "$FX/qwen35" --via gguf,safetensors
row q35 "^gguf +F32 +SRC -> gguf +verify +pass +f32: "
row q35 "^gguf +F32 +gguf -> safetensors +verify +pass +f32: "
row q35 "^safetensors +F32 +safetensors -> safetensors +tensors +pass +56 tensors equal"
# the packed BitNet checkpoint (U8 + weight_scale): every writer folds the scale into floats, so
# no path is lossless (names change): verified both hops (the GGUF tensor proof failed on the
# missing weight_scale; the safetensors folder held the U8 codes as [out/4, in] floats)
rt packed 0 "$FX/bitnet-packed" --via gguf,safetensors
for f in gguf safetensors; do row packed "^$f +F32 +SRC -> $f +verify +pass +f32: cosine 1\.0"; done
rt bf16q 0 "$FX/llama-gqa-untied" --via gguf:BF16,safetensors --quant BF16
# GGUF BF16 keeps the 7 norms F32 (llama.cpp's rule): equal values, not bytes
row bf16q "^gguf +BF16 +SRC -> gguf +tensors\+verify +pass +30 tensors equal: 17 same bytes, 7 same F32 values, 6 q/k reordered"
row bf16q "^gguf +BF16 +gguf -> safetensors +tensors +pass "
row bf16q "^safetensors +BF16 +safetensors -> safetensors +tensors +pass +30 tensors equal: 0 same bytes"

# 3. the check can fail
# a tampered intermediate: one mantissa bit of the first tensor of the GGUF, below what verify
# sees (its part of hop 1 still matches 32/32 greedy tokens); both tensor proofs name it
QP_ROUNDTRIP_TAMPER=gguf rt tamper 1 "$FX/llama-tied" --via gguf,safetensors -o "$TMP/tamper"
row tamper "^gguf +F32 +SRC -> gguf +tensors\+verify +FAIL +tensor '[a-z_.0-9]+': element 0 differs: .*; verify identical: .*greedy 32/32"
row tamper "^gguf +F32 +gguf -> safetensors +tensors +FAIL +tensor '[a-z_.0-9]+': element 0 differs: "
row tamper "^safetensors +F32 +safetensors -> safetensors +tensors +pass "
json "$TMP/tamper/roundtrip.json" 'r.verdict === "fail" && r.paths[0].hops[0].receipt.verdict === "pass" && r.paths[0].hops.every(h => h.verdict === "fail" && /element 0 differs/.test(h.tensors.difference))'
# a lossy path claimed lossless: Q8_0 cannot give the F32 tensors back
QP_ROUNDTRIP_CLAIM_LOSSLESS=1 rt claim 1 "$FX/llama-tied" --via gguf:Q8_0 "${RANDOM_LOSSY[@]}"
row claim "^gguf +Q8_0 +SRC -> gguf +tensors\+verify +FAIL +tensor '[a-z_.0-9]+': element [0-9]+ differs: "
row claim "^gguf +Q8_0 +gguf -> safetensors +tensors +FAIL +tensor 'token_embd.weight': element 0 differs: "
# a lossy path under its class's own thresholds (4-bit BQ4 on random weights)
rt strict 1 "$FX/llama-tied" --via bullet
row strict "^bullet +- +SRC -> bullet +verify +FAIL +4-bit: .*top-1 agreement [0-9.]+ < 0.9"
# a format that cannot hold the model: that path is an error (exit 3), the others still run
rt qwen2 3 "$FX/qwen2" --via bullet,gguf -o "$TMP/qwen2"
row qwen2 "^bullet +- +SRC -> bullet +- +error +.*cannot be written for bullet-core"
row qwen2 "^gguf +F32 +gguf -> safetensors +tensors +pass "
json "$TMP/qwen2/roundtrip.json" 'r.verdict === "error" && r.paths[0].hops.length === 1 && r.paths[1].hops.length === 2'
# every projection biased (attention_bias, mlp_bias): GGUF holds the biases (q/k ones reordered
# with their rows, and back), TRLM and .bullet refuse them by name
rt bias 3 "$FX/llama-bias" --via gguf,trlm,bullet -o "$TMP/bias"
row bias "^gguf +F32 +SRC -> gguf +tensors\+verify +pass +35 tensors equal: .*8 q/k reordered"
row bias "^gguf +F32 +gguf -> safetensors +tensors +pass "
row bias "^trlm .* error +.*mlp.down_proj.bias: .*TRLM has no role for it"
row bias "^bullet .* error +.*cannot be written for bullet-core"
# Llama 3.1's rope_scaling llama3 (llama-rope3): GGUF holds it as rope_freqs.weight (computed, the
# one tensor the source lacks), the GGUF -> HF hop writes the rope_scaling back (derived from the
# factors) and runs as the source does, where without it it would not; TRLM, .bullet and RDRR
# refuse it by name; an ill-formed llama3 rope_scaling is bad input
rt rope3 3 "$FX/llama-rope3" --via gguf,trlm,bullet,rdrr -o "$TMP/rope3"
row rope3 "^gguf +F32 +SRC -> gguf +tensors\+verify +pass +21 tensors equal: .*greedy 32/32"
row rope3 "^gguf +F32 +gguf -> safetensors +tensors +pass "
for f in trlm bullet rdrr; do row rope3 "^$f .* error +.*Llama 3.1 rope scaling .*is not written as "; done
"$QP" convert "$FX/llama-rope3" --quant F16 -o "$TMP/rope3.gguf" >/dev/null 2>&1 &&
  "$QP" convert "$TMP/rope3.gguf" --to safetensors -o "$TMP/rope3-hf" >/dev/null 2>&1 && ok || bad "rope3: GGUF -> HF"
node -e 'const r = JSON.parse(require("fs").readFileSync(process.argv[1])).rope_scaling;
  process.exit(r && r.rope_type === "llama3" && r.factor === 8 && r.low_freq_factor === 1 &&
               r.high_freq_factor === 4 && r.original_max_position_embeddings === 64 ? 0 : 1)' \
  "$TMP/rope3-hf/config.json" && ok || bad "rope3: config.json rope_scaling not llama3 8/1/4/64"
"$QP" verify "$TMP/rope3-hf" --against "$FX/llama-rope3" >/dev/null 2>&1 && ok || bad "rope3: HF export fails verify"
node -e 'const fs = require("fs"), p = process.argv[1], c = JSON.parse(fs.readFileSync(p));
  c.rope_scaling = null; fs.writeFileSync(p, JSON.stringify(c))' "$TMP/rope3-hf/config.json"
"$QP" verify "$TMP/rope3-hf" --against "$FX/llama-rope3" >/dev/null 2>&1
[ $? -eq 1 ] && ok || bad "rope3: the HF export without rope_scaling still passes verify"
cp -r "$FX/llama-rope3" "$TMP/rope3-bad"
node -e 'const fs = require("fs"), p = process.argv[1], c = JSON.parse(fs.readFileSync(p));
  delete c.rope_scaling.low_freq_factor; fs.writeFileSync(p, JSON.stringify(c))' "$TMP/rope3-bad/config.json"
"$QP" inspect "$TMP/rope3-bad" >"$TMP/rope3-bad.out" 2>&1
[ $? -eq 3 ] && grep -q "rope_scaling (llama3): 'low_freq_factor'" "$TMP/rope3-bad.out" && ok ||
  bad "rope3-bad: $(cat "$TMP/rope3-bad.out")"
no_leftovers failures

# 4. usage and the output rule
rt nofmt 2 "$FX/llama-tied" --via gguf,foo
row nofmt "'foo' is not a format \(gguf, rdrr, trlm, bullet, safetensors\)"
rt novia 2 "$FX/llama-tied"
rt bulletq 2 "$FX/llama-tied" --via bullet:Q4_0
rt badq 2 "$FX/llama-tied" --via gguf:Q9_9
row badq "unknown quant 'Q9_9'"
rt nosrc 4 "$TMP/no-such-model" --via gguf -o "$TMP/nosrc"
[ ! -e "$TMP/nosrc" ] && ok || bad "a run without a report left its report folder"
rt help 0 --help
row help "--via FMT\[,FMT\.\.\.\]"
rt keep 0 "$FX/llama-tied" --via gguf,rdrr --keep -o "$TMP/keep"
[ -f "$TMP/keep/intermediates/via-1-gguf.gguf" ] && [ -f "$TMP/keep/intermediates/via-2-rdrr/manifest.json" ] \
  && [ -f "$TMP/keep/intermediates/back-2-from-rdrr/model.safetensors" ] \
  && ok || bad "--keep: intermediates missing: $(ls -R "$TMP/keep")"
json "$TMP/keep/roundtrip.json" 'r.intermediates.endsWith("/keep/intermediates")'
rt keep2 4 "$FX/llama-tied" --via gguf --keep -o "$TMP/keep"
row keep2 "exists"
rt keep3 0 "$FX/llama-tied" --via gguf --keep -f -o "$TMP/keep"
[ ! -e "$TMP/keep/intermediates/via-2-rdrr" ] && ok || bad "-f: the previous intermediates stayed"
no_leftovers keep

# 5. signals: SIGTERM mid-run removes the intermediates (exit 143); what a SIGKILL leaves is
#    removed by the next run (core/outfile.md). The signal goes as soon as the staging folder is
#    in TMPDIR (the run has started writing, whatever the machine's load); 16 paths, each
#    verifying 256 tokens, keep it going well past that on an idle machine.
LONG=$(printf 'gguf,rdrr,trlm,safetensors,%.0s' 1 2 3 4); LONG=${LONG%,}
for sig in TERM KILL; do
  "$QP" roundtrip "$FX/llama-tied" --via "$LONG" -t 1 -n 256 >"$TMP/sig.out" 2>&1 &
  pid=$!
  for ((i = 0; i < 2000; i++)); do [ -n "$(ls -A "$TMPDIR")" ] && break; sleep 0.005; done
  kill -$sig $pid
  wait $pid
  rc=$?
  want=$((128 + $(kill -l $sig)))
  [ $rc -eq $want ] && ok || bad "SIG$sig: exit $rc, want $want: $(cat "$TMP/sig.out")"
  [ $sig = TERM ] && no_leftovers "SIGTERM"
done
rt after_kill 0 "$FX/llama-tied" --via gguf
no_leftovers "the run after a SIGKILL"

# 6. the real stories260K: GGUF F32 and the llama2.c checkpoint (back to GGUF F32, said so)
if [ -d "$R" ]; then
  rt stories 0 "$R/stories260K.gguf" --via gguf,rdrr,trlm,safetensors -o "$TMP/stories"
  for f in gguf rdrr safetensors; do row stories "^$f +F32 +$f -> gguf +tensors +pass +48 tensors equal: 48 same bytes"; done
  # the HF folder holds q/k as halves: 5 layers x 2 compared through the permutation
  row stories "^safetensors +F32 +SRC -> safetensors +tensors\+verify +pass +48 tensors equal: 38 same bytes, 0 same F32 values, 10 q/k reordered; verify identical: "
  row stories "^trlm +bf16 +trlm -> gguf +verify +pass +bf16: "
  json "$TMP/stories/roundtrip.json" 'r.verdict === "pass" && r.source.format === "gguf" && r.back.format === "gguf"'
  rt llama2c 0 "$R/stories260K.bin" --tokenizer "$R/tok512.bin" --via gguf,rdrr,trlm,safetensors -o "$TMP/llama2c"
  row llama2c "^note: SRC's kind has no F32 writer: back to GGUF F32"
  for f in gguf rdrr safetensors; do row llama2c "^$f +F32 +$f -> gguf +tensors +pass +47 tensors equal: 47 same bytes"; done
  json "$TMP/llama2c/roundtrip.json" 'r.verdict === "pass" && r.source.format === "llama2c" && /no F32 writer/.test(r.back.note)'
  # .bullet (BQ4) of the trained model at main_job.sh's trained thresholds: both hops pass once a
  # .bullet converts to GGUF (issue 17, "a .bullet as a source for every target"); until that
  # lands the back conversion is refused (BQ4 cannot be stored in GGUF: exit 3), and only then
  "$QP" roundtrip "$R/stories260K.bin" --tokenizer "$R/tok512.bin" --via bullet --min-cosine 0.95 \
    --max-kl 0.1 --min-top1 0.85 >"$TMP/stories_bullet.out" 2>&1
  rc=$?
  row stories_bullet "^bullet +- +SRC -> bullet +verify +pass +custom: "
  if grep -q "BQ4 cannot be stored in GGUF" "$TMP/stories_bullet.out"; then
    [ $rc -eq 3 ] && ok || bad "stories_bullet: exit $rc, want 3 (back conversion refused)"
  else
    [ $rc -eq 0 ] && ok || bad "stories_bullet: exit $rc: $(cat "$TMP/stories_bullet.out")"
    row stories_bullet "^bullet +- +bullet -> gguf +verify +pass +custom: "
  fi
  no_leftovers stories
fi

echo "roundtrip_cli: $pass passed, $fail failed"
[ $fail -eq 0 ]
