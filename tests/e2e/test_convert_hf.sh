#!/usr/bin/env bash
# quantpack convert on the generated HF fixtures (qp-gen-fixtures: llama-tied, llama-gqa-untied,
# llama-sharded, qwen2, qwen3, phi-fused, gemma, gemma2, gemma3; gemma3-mm/-mm2 against gemma3):
# - F32 and F16 outputs verify against the HF source with the runtime's default thresholds: names,
#   the q/k permutation (llama), shapes and metadata are right (max |diff| ~1e-5 for F32);
# - the GGUF key/values have llama.cpp's types (u32 counts, f32 eps/theta, bool add_bos, ...);
# - Q4_K_M verifies against the source with thresholds loosened for these tiny random models
#   (their near-flat logits make top-1 flip easily; measured cosine >= 0.92, see the log).
#   That the Q4_K_M bytes are llama.cpp's is proved in tests/peer/test_convert_vs_llama_quantize.c.
set -u
BIN="${QP_BIN_DIR:?}"; FX="${QP_FIXTURES_DIR:?}"; TMP="${QP_TMP_DIR:-/tmp}/convert-hf.$$"
QP="$BIN/quantpack"
[ -d "$FX/llama-tied" ] || { echo "skipped: generated fixtures missing in $FX"; exit 77; }
mkdir -p "$TMP"; trap 'rm -rf "$TMP"' EXIT
fail=0; pass=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

for m in llama-tied llama-gqa-untied llama-sharded qwen2 qwen3 phi-fused gemma gemma2 gemma3; do
  for q in F32 F16; do
    "$QP" convert "$FX/$m" --quant $q -o "$TMP/$m-$q.gguf" 2>"$TMP/err" || { bad "$m $q: $(cat "$TMP/err")"; continue; }
    "$QP" verify "$TMP/$m-$q.gguf" --against "$FX/$m" -n 8 >"$TMP/v" 2>&1 && ok || bad "verify $m $q: $(tail -4 "$TMP/v")"
    echo "$m $q: $(grep prompt "$TMP/v")"
  done
  "$QP" convert "$FX/$m" --quant Q4_K_M -o "$TMP/$m-q4.gguf" 2>"$TMP/err" || { bad "$m Q4_K_M: $(cat "$TMP/err")"; continue; }
  "$QP" verify "$TMP/$m-q4.gguf" --against "$FX/$m" -n 8 --min-cosine 0.9 --max-kl 0.5 --min-top1 0.3 >"$TMP/v" 2>&1 && ok || bad "verify $m Q4_K_M: $(tail -4 "$TMP/v")"
  echo "$m Q4_K_M: $(grep prompt "$TMP/v")"
  "$QP" run "$TMP/$m-q4.gguf" -p "Once upon a time" -n 4 >/dev/null 2>&1 && ok || bad "run $m Q4_K_M"
done

# metadata types as llama.cpp reads them
"$QP" inspect "$TMP/llama-gqa-untied-q4.gguf" >"$TMP/inspect" 2>&1
for kv in "general.architecture string" "llama.context_length u32" "llama.embedding_length u32" \
          "llama.block_count u32" "llama.feed_forward_length u32" "llama.attention.head_count u32" \
          "llama.attention.head_count_kv u32" "llama.rope.dimension_count u32" "llama.rope.freq_base f32" \
          "llama.attention.layer_norm_rms_epsilon f32" "tokenizer.ggml.model string" \
          "tokenizer.ggml.pre string" "tokenizer.ggml.bos_token_id u32" "tokenizer.ggml.eos_token_id u32" \
          "tokenizer.ggml.add_bos_token bool" "general.quantization_version u32" "general.file_type u32"; do
  set -- $kv
  grep -Eq "^ +$1 +$2 " "$TMP/inspect" && ok || bad "key $1 is not $2: $(grep " $1 " "$TMP/inspect")"
done
grep -Eq "tokenizer.ggml.merges +array +\[string" "$TMP/inspect" && ok || bad "no merges array"
grep -Eq "general.file_type +u32 +15" "$TMP/inspect" && ok || bad "file type 15"
grep -E "^  [a-z]" "$TMP/inspect" | tail -1 | grep -q "general.file_type" && ok || bad "general.file_type is not the last key"
# norms are F32 (llama.cpp's kernels expect F32 norms), qwen2 keeps its q/k/v biases
grep -Eq "^blk.0.attn_norm.weight +F32" "$TMP/inspect" && ok || bad "attn_norm not F32"
"$QP" inspect "$TMP/qwen2-q4.gguf" | grep -Eq "^blk.0.attn_q.bias +F32" && ok || bad "qwen2 attn_q.bias"

# issue 16: qwen3 (q/k norms, head_dim 128 over hidden 256) and phi3 (fused attn_qkv, ffn_up =
# gate|up) as llama.cpp's converter writes them (tests/peer/test_runtime_vs_llama_quant.c loads them)
"$QP" inspect "$TMP/qwen3-F16.gguf" >"$TMP/i3" 2>&1
grep -Eq "general.architecture +string +\"qwen3\"" "$TMP/i3" && ok || bad "qwen3 architecture"
grep -Eq "qwen3.attention.key_length +u32 +128" "$TMP/i3" && ok || bad "qwen3 key_length"
grep -Eq "^blk.1.attn_k_norm.weight +F32 +\[128\]" "$TMP/i3" && ok || bad "qwen3 attn_k_norm"
"$QP" inspect "$TMP/phi-fused-F16.gguf" >"$TMP/ip" 2>&1
grep -Eq "general.architecture +string +\"phi3\"" "$TMP/ip" && ok || bad "phi3 architecture"
grep -Eq "phi3.attention.sliding_window +u32 +2047" "$TMP/ip" && ok || bad "phi3 sliding_window"
grep -Eq "^blk.0.attn_qkv.weight +F16 +\[512, 256\]" "$TMP/ip" && ok || bad "phi3 attn_qkv"
grep -Eq "^blk.0.ffn_up.weight +F16 +\[1024, 256\]" "$TMP/ip" && ok || bad "phi3 ffn_up (gate|up)"
grep -q "ffn_gate" "$TMP/ip" && bad "phi3 has an ffn_gate" || ok
# refused clearly: bullet-core has no q/k norms or fused matrices; Phi-3 longrope is not computed
for m in qwen3 phi-fused; do
  "$QP" convert "$FX/$m" --to bullet -o "$TMP/$m.bullet" 2>"$TMP/err"; rc=$?
  [ $rc -eq 3 ] && grep -q "cannot be written for bullet-core" "$TMP/err" && ok || bad "$m bullet: exit $rc $(cat "$TMP/err")"
done
cp -r "$FX/phi-fused" "$TMP/phi-long"
sed -i 's/"rope_scaling": null/"rope_scaling": {"type": "longrope", "long_factor": [1], "short_factor": [1]}/' "$TMP/phi-long/config.json"
"$QP" convert "$TMP/phi-long" --quant F16 -o "$TMP/phi-long.gguf" 2>"$TMP/err"; rc=$?
[ $rc -eq 3 ] && grep -q "Phi-3 rope scaling .* is not implemented" "$TMP/err" && ok || bad "phi3 longrope: exit $rc $(cat "$TMP/err")"
[ ! -e "$TMP/phi-long.gguf" ] && ok || bad "phi3 longrope wrote an output"

# issue 16: Gemma 1/2/3 as llama.cpp's converter writes them (gemma2/gemma3 keys, four norms,
# q/k norms, tied: no output.weight); refused by name for the targets that do not take them and
# for what GGUF cannot hold
"$QP" inspect "$TMP/gemma-F16.gguf" >"$TMP/ig" 2>&1
grep -Eq "general.architecture +string +\"gemma\"" "$TMP/ig" && ok || bad "gemma architecture"
grep -Eq "gemma.attention.key_length +u32 +128" "$TMP/ig" && ok || bad "gemma key_length"
grep -Eq "^blk.1.ffn_norm.weight +F32 +\[256\]" "$TMP/ig" && ok || bad "gemma ffn_norm"
grep -q "^output.weight" "$TMP/ig" && bad "gemma has an output.weight" || ok
"$QP" inspect "$TMP/gemma2-F16.gguf" >"$TMP/ig2" 2>&1
for kv in "gemma2.attn_logit_softcapping +f32 +20" "gemma2.final_logit_softcapping +f32 +10" \
          "gemma2.attention.sliding_window +u32 +8" "general.architecture +string +\"gemma2\""; do
  grep -Eq "$kv" "$TMP/ig2" && ok || bad "gemma2 key $kv"
done
for t in post_attention_norm ffn_norm post_ffw_norm attn_norm; do
  grep -Eq "^blk.1.$t.weight +F32 +\[256\]" "$TMP/ig2" && ok || bad "gemma2 $t"
done
"$QP" inspect "$TMP/gemma3-F16.gguf" >"$TMP/ig3" 2>&1
for kv in "gemma3.rope.freq_base +f32 +1000000" "gemma3.rope.freq_base_swa +f32 +10000" \
          "gemma3.rope.scaling.type +string +\"linear\"" "gemma3.rope.scaling.factor +f32 +8" \
          "gemma3.attention.sliding_window +u32 +8" "^blk.5.attn_q_norm.weight +F32 +\[128\]"; do
  grep -Eq "$kv" "$TMP/ig3" && ok || bad "gemma3 $kv"
done
grep -q "sliding_window_pattern\|attn_logit_softcapping" "$TMP/ig3" && bad "gemma3 extra keys" || ok
for t in "bullet" "trlm"; do
  "$QP" convert "$FX/gemma2" --to $t -o "$TMP/g2-out" 2>"$TMP/err"; rc=$?
  [ $rc -eq 3 ] && grep -q "architecture 'gemma2' .* is not written as .*no Gemma graph" "$TMP/err" && ok || bad "gemma2 --to $t: exit $rc $(cat "$TMP/err")"
  [ ! -e "$TMP/g2-out" ] && ok || bad "gemma2 --to $t wrote an output"
done
# RDRR keeps the names: a Gemma 2/3 GGUF's ffn_norm is not DOPPLER's pre-FFN norm (refused, both
# paths); a Gemma 1 GGUF is written (norms 1 + w, rmsNormWeightOffset false) and its logits are
# the GGUF's (verify's verdict also weighs the tokenizer, which RDRR does not carry from a GGUF's
# byte-level BPE vocabulary)
for c in "$QP convert $TMP/gemma2-F16.gguf --to rdrr --quant F16 -o $TMP/g2-out" \
         "$BIN/gguf-to-rdrr $TMP/gemma3-F16.gguf $TMP/g2-out"; do
  $c 2>"$TMP/err"; rc=$?
  [ $rc -eq 3 ] && grep -q "pre_feedforward_layernorm" "$TMP/err" && [ ! -e "$TMP/g2-out" ] && ok || bad "$c: exit $rc $(cat "$TMP/err")"
done
"$QP" convert "$TMP/gemma-F16.gguf" --to rdrr --quant F16 -o "$TMP/g1-rdrr" --quiet 2>/dev/null && ok || bad "gemma GGUF -> rdrr"
grep -Eq '"rmsNormWeightOffset":[[:space:]]*false' "$TMP/g1-rdrr/manifest.json" && ok || bad "gemma GGUF rdrr: offset"
"$QP" verify "$TMP/g1-rdrr" --against "$TMP/gemma-F16.gguf" >"$TMP/v1" 2>&1
grep -q "cosine min 1.000000000 mean 1.000000000, max |diff| 0, .*top-1 1.0000, greedy 32/32" "$TMP/v1" && ok || bad "gemma GGUF rdrr verify: $(tail -3 "$TMP/v1")"
refuse() { # NAME FIXTURE SED MESSAGE
  rm -rf "$TMP/$1"; cp -r "$FX/$2" "$TMP/$1"; sed -i "$3" "$TMP/$1/config.json"
  "$QP" convert "$TMP/$1" --quant F16 -o "$TMP/$1.gguf" 2>"$TMP/err"; rc=$?
  [ $rc -eq 3 ] && grep -q "$4" "$TMP/err" && ok || bad "$1: exit $rc $(cat "$TMP/err")"
  [ ! -e "$TMP/$1.gguf" ] && ok || bad "$1 wrote an output"
}
refuse g3-yarn gemma3 's/"rope_type": "linear"/"rope_type": "yarn"/' "rope scaling .* is not implemented for gemma3"
refuse g2-qpas gemma2 's/"query_pre_attn_scalar": 128/"query_pre_attn_scalar": 144/' "query_pre_attn_scalar 144 differs"
refuse g1-gelu gemma 's/"hidden_activation": "gelu_pytorch_tanh"/"hidden_activation": "gelu"/' "hidden_activation 'gelu' is not supported"
# Gemma3ForConditionalGeneration (gemma3-mm: google/gemma-3-4b-it's layout; gemma3-mm2: the later
# model.language_model.* one): the text model with Gemma3TextConfig's defaults for what
# text_config leaves out is gemma3's (the same tensors): every target writes what gemma3 gives, the
# vision tower and projector (8 tensors) left out by name with the reason
for m in gemma3-mm gemma3-mm2; do
  "$QP" convert "$FX/$m" --quant F16 -o "$TMP/$m.gguf" 2>"$TMP/err" && ok || bad "$m F16: $(cat "$TMP/err")"
  [ "$(grep -c "skipped .*vision_tower\|skipped .*multi_modal_projector" "$TMP/err")" = 8 ] && \
    grep -q "text model only (llama.cpp's converter writes these to a separate mmproj file)" "$TMP/err" && ok || bad "$m skip notes: $(cat "$TMP/err")"
  # the tensor data (the last 4.9 MB) is gemma3's byte for byte; only general.name differs
  cmp -s <(tail -c 4900000 "$TMP/$m.gguf") <(tail -c 4900000 "$TMP/gemma3-F16.gguf") && ok || bad "$m GGUF tensors differ from gemma3's"
  "$QP" inspect "$TMP/$m.gguf" | grep -v "general.name\|gguf v3" >"$TMP/im"
  "$QP" inspect "$TMP/gemma3-F16.gguf" | grep -v "general.name\|gguf v3" >"$TMP/i3b"
  cmp -s "$TMP/im" "$TMP/i3b" && ok || bad "$m GGUF keys/tensors differ from gemma3's: $(diff "$TMP/im" "$TMP/i3b" | head -5)"
  "$QP" convert "$FX/$m" --to safetensors -o "$TMP/$m-st" 2>"$TMP/err" && ok || bad "$m --to safetensors: $(cat "$TMP/err")"
  grep -q "left out: .*text model only.* and 7 more" "$TMP/err" && ok || bad "$m safetensors skip note: $(cat "$TMP/err")"
  grep -q '"Gemma3ForCausalLM"' "$TMP/$m-st/config.json" && ok || bad "$m safetensors config"
  "$QP" convert "$FX/$m" --to rdrr --quant F32 -o "$TMP/$m-rdrr" 2>"$TMP/err" && ok || bad "$m --to rdrr: $(cat "$TMP/err")"
  for out in "$TMP/$m-st" "$TMP/$m-rdrr"; do
    "$QP" verify "$out" --against "$FX/gemma3" -n 4 >"$TMP/v" 2>&1
    grep -q "cosine min 1.000000000 mean 1.000000000, max |diff| 0, .*greedy 4/4" "$TMP/v" && ok || bad "verify $out vs gemma3: $(tail -3 "$TMP/v")"
  done
done
# 416 embedding rows over the 408-token tokenizer (Gemma 3's 262208 over 262145): the GGUF's token
# list is filled to the rows with [PAD<id>] (UNUSED), as convert_hf_to_gguf.py does (llama.cpp
# loads it: peer.runtime_vs_llama_quant); verify takes the padding as the same tokenizer
"$QP" convert "$FX/gemma3-mm-rows" --quant F16 -o "$TMP/g3rows.gguf" 2>"$TMP/err" && ok || bad "gemma3-mm-rows: $(cat "$TMP/err")"
"$QP" inspect "$TMP/g3rows.gguf" >"$TMP/ir" 2>&1
grep -Eq "tokenizer.ggml.tokens +array +\[string x 416\]" "$TMP/ir" && grep -Eq "tokenizer.ggml.token_type +array +\[i32 x 416\]" "$TMP/ir" && \
  grep -Eq "^token_embd.weight +F16 +\[416, 256\]" "$TMP/ir" && ok || bad "gemma3-mm-rows GGUF: $(grep -E "tokens|token_type|token_embd" "$TMP/ir")"
"$QP" verify "$TMP/g3rows.gguf" --against "$FX/gemma3-mm-rows" -n 8 >"$TMP/v" 2>&1 && ok || bad "verify gemma3-mm-rows: $(tail -3 "$TMP/v")"
[ "$("$QP" tokenize "$TMP/g3rows.gguf" "[PAD410] Once upon a time" 2>&1)" = "$("$QP" tokenize "$FX/gemma3-mm-rows" "[PAD410] Once upon a time" 2>&1)" ] && ok || bad "gemma3-mm-rows: the padding is tokenized"
refuse g3mm-yarn gemma3-mm 's/"rope_type": "linear"/"rope_type": "yarn"/' "rope scaling .* is not implemented for gemma3"
refuse g3mm-tc gemma3-mm 's/"text_config": {/"text_config": 7, "x": {/' "'text_config' is not an object"
refuse g3-types gemma3 's/"full_attention"/"sliding_attention"/' "layer_types\[5\] is not 'full_attention'"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
