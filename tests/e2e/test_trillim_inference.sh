#!/usr/bin/env bash
# `trillim-inference MODEL_DIR`, the current Trillim SDK's protocol (components/llm/_engine.py:
# _build_init_block, _build_request_block, the read loop), on a TRLM conversion of the bitnet-float
# fixture. Blocks are written as the SDK writes them (key order, Python's str() of floats). Checked
# line by line: init, turn 1, turn 2 sending the delta after the cached prefix (kv_position),
# a reset (kv_position 0), a rewind to a shorter common prefix, an empty delta, max_tokens and
# context-end stops ending with the first EOS id (not cached), LoRA through lora_dir (== v1's
# --lora), the optional keys, the April 2026 `reset=` form, quitting, and malformed blocks (exit
# 3 with a message, never a hang). Token ids are checked against `quantpack run --ids` on the
# same folder (an independent run through the runtime's own prompt path) and against v1.
set -u
BIN=${QP_BIN_DIR:-bin}; FIX=${QP_FIXTURES_DIR:-fixtures}; TMP=${QP_TMP_DIR:-test-tmp}
[ -f "$FIX/bitnet-float/config.json" ] || { echo "skipped: no fixtures"; exit 77; }
. "$(dirname "$0")/trillim_util.sh"
mkdir -p "$TMP"
D="$TMP/trlm_ti"
"$BIN/quantpack" convert "$FIX/bitnet-float" --to trlm -f -o "$D" >/dev/null || { echo "convert failed"; exit 1; }
EOS=407
# _build_init_block: 18 pairs in this order, then the optional ones (num_threads only when set)
init() { # MAXPOS EOS_LIST [extra pairs...]
  local mp=$1 eos=$2; shift 2
  local pairs=(arch_type=1 activation=0 hidden_dim=128 intermediate_dim=256 num_layers=2 num_heads=4
    num_kv_heads=2 vocab_size=408 head_dim=32 max_position_embeddings=$mp norm_eps=1e-05
    rope_theta=500000.0 tie_word_embeddings=1 has_qkv_bias=0 has_attn_sub_norm=1 has_ffn_sub_norm=1
    quantization=ternary eos_tokens=$eos "$@")
  echo ${#pairs[@]}; printf '%s\n' "${pairs[@]}"; }
# _build_request_block (greedy: temperature 0; the SDK's other defaults)
req() { # KV TOKENS(comma list) MAX_TOKENS
  printf '8\nkv_position=%s\ntokens=%s\ntemperature=0\ntop_k=50\ntop_p=0.9\nrepetition_penalty=1.0\nrep_penalty_lookback=64\nmax_tokens=%s\n' "$1" "$2" "$3"; }
ti() { timeout 60 "$BIN/trillim-inference" "$D" "$@"; }
qrun() { "$BIN/quantpack" run "$D" --ids "$1" -n "$2" --temp 0 --print-ids 2>/dev/null; }
csv() { echo "$*" | tr ' ' ','; }

P="406 11 58 149"; Q="5 17"
mapfile -t T < <( { init 256 $EOS; req 0 "$(csv $P)" 5; } | ti; echo "rc=$?" )
G1="${T[*]:0:5}"
check "turn 1: 5 ids, EOS $EOS appended, kv_position 9, exit 0 at EOF (${T[*]})" \
  "[ ${#T[@]} -eq 8 ] && [ '${T[5]}' = $EOS ] && [ '${T[6]}' = 9 ] && [ '${T[7]}' = rc=0 ]"
R1=$(qrun "$P" 5)
check "turn 1 ids == quantpack run --ids ($R1)" "[ '$R1' = '$P $G1' ]"
# turn 2: the SDK keeps (prompt + generated)[:9] and sends the delta after the common prefix
mapfile -t T2 < <( { init 256 $EOS; req 0 "$(csv $P)" 5; req 9 "$(csv $Q)" 3; req 0 "$(csv $P)" 5; echo 0; } | ti; echo "rc=$?" )
G2="${T2[*]:7:3}"
R2=$(qrun "$P $G1 $Q" 3)
check "turn 2 (kv_position 9 + 2 tokens): 3 ids, EOS, kv 14 (${T2[*]:7:5})" \
  "[ '${T2[10]}' = $EOS ] && [ '${T2[11]}' = 14 ]"
check "turn 2 ids == quantpack run --ids over the whole history ($R2)" "[ '$R2' = '$P $G1 $Q $G2' ]"
check "kv_position 0 resets: turn 3 == turn 1, then '0' exits 0" \
  "[ '${T2[*]:12:7}' = '${T[*]:0:7}' ] && [ '${T2[19]}' = rc=0 ] && [ ${#T2[@]} -eq 20 ]"
# the same exchange through v1 gives the same ids
V=$( { printf '4\n1\n0\n50\n0.9\n1.0\n64\n5\n'; printf '%s\n' $P; printf '2\n0\n0\n50\n0.9\n1.0\n64\n3\n'; printf '%s\n' $Q; echo 0; } |
     timeout 60 "$BIN/inference" "$D" --config $(cat "$D/inference.config") | tr '\n' ' ')
check "v1 gives the same lines ($V)" "[ '$V' = '${T2[*]:0:12} ' ]"
# rewind: the new prompt shares only P with the cache (P G1 ...): kv_position 4, delta Q
mapfile -t T3 < <( { init 256 $EOS; req 0 "$(csv $P)" 5; req 4 "$(csv $Q)" 3; req 4 "" 5; } | ti )
R3=$(qrun "$P $Q" 3)
check "rewind to kv_position 4: ids == run --ids P Q ($R3), kv 9" \
  "[ '$R3' = '$P $Q ${T3[*]:7:3}' ] && [ '${T3[10]}' = $EOS ] && [ '${T3[11]}' = 9 ]"
check "empty delta (kv_position 4, tokens=): the last kept token is rerun, turn 1 again" \
  "[ '${T3[*]:12:7}' = '${T[*]:0:7}' ]"
# max_tokens 0 = unlimited, bounded by max_position_embeddings 16: 12 cached + 1 printed, EOS
mapfile -t U < <( { init 16 $EOS; req 0 "$(csv $P)" 0; } | ti )
RU=$(qrun "$P" 13)
check "context end: 13 ids, EOS, kv 16 (${#U[@]} lines)" "[ ${#U[@]} -eq 15 ] && [ '${U[13]}' = $EOS ] && [ '${U[14]}' = 16 ]"
check "context end ids == run --ids -n 13" "[ '$RU' = '$P ${U[*]:0:13}' ]"
# EOS generated: printed once, nothing appended (declare turn 1's first id an EOS too)
mapfile -t E < <( { init 256 "$EOS,${T[0]}"; req 0 "$(csv $P)" 0; } | ti )
check "an EOS id ends the response, not doubled (${E[*]})" "[ ${#E[@]} -eq 2 ] && [ '${E[0]}' = '${T[0]}' ] && [ '${E[1]}' = 5 ]"
# optional init keys: threads and DarkNet's runtime quantization hints do not change the ids
mapfile -t O < <( { init 256 $EOS num_threads=1; req 0 "$(csv $P)" 5; } | ti )
check "num_threads accepted, same ids" "[ '${O[*]}' = '${T[*]:0:7}' ]"
# DarkNet's runtime requantization keys: refused naming the key and the value
for kv in lora_quant=q8 unembed_quant=q4 model_quant=int8 model_quant=q8_0; do
  { init 256 $EOS "$kv"; req 0 "$(csv $P)" 5; } | ti >/dev/null 2>"$TMP/ti_rq_err"; rc=$?
  check "$kv refused: exit 3 naming it (exit $rc: $(head -c 160 "$TMP/ti_rq_err"))" "[ $rc -eq 3 ] && grep -q -- '$kv is not supported' '$TMP/ti_rq_err'"
done
# the April 2026 client sent reset= instead of kv_position=
mapfile -t A < <( { init 256 $EOS; printf '8\nreset=1\ntokens=%s\ntemperature=0\ntop_k=50\ntop_p=0.9\nrepetition_penalty=1.0\nrep_penalty_lookback=64\nmax_tokens=5\n' "$(csv $P)"; } | ti )
check "reset=1 (April 2026 form) == kv_position=0" "[ '${A[*]}' = '${T[*]:0:7}' ]"
# LoRA: lora_dir is a folder holding qmodel.lora, separate from the model
peft_adapter "$TMP/ti_peft" || { echo "cannot write the PEFT adapter"; exit 1; }
DL="$TMP/trlm_ti_lora"; AD="$TMP/trlm_ti_adapter"
"$BIN/quantpack" convert "$FIX/bitnet-float" --to trlm -f -o "$DL" --lora "$TMP/ti_peft" >/dev/null || { echo "convert --lora failed"; exit 1; }
rm -rf "$AD"; mkdir -p "$AD"; cp "$DL/qmodel.lora" "$AD/"
L=$( { init 256 $EOS lora_dir=$AD; req 0 "$(csv $P)" 6; req 10 "$(csv $Q)" 3; } | ti | tr '\n' ' ')
LV=$( { printf '4\n1\n0\n50\n0.9\n1.0\n64\n6\n'; printf '%s\n' $P; printf '2\n0\n0\n50\n0.9\n1.0\n64\n3\n'; printf '%s\n' $Q; } |
      timeout 60 "$BIN/inference" "$DL" --lora --config $(cat "$D/inference.config") | tr '\n' ' ')
check "lora_dir == v1 --lora on the model folder ($L)" "[ -n '$LV' ] && [ '$L' = '$LV' ]"
L3=$(echo $L | cut -d' ' -f1-3)
check "the adapter changes the ids ($L3 vs ${T[*]:0:3})" "[ '$L3' != '${T[*]:0:3}' ]"
# malformed blocks: exit 3 and a message, never a hang
bad() { # name, stdin text, expected stderr fragment[, exit code (3)]
  printf -- "$2" | ti >/dev/null 2>"$TMP/ti_err"; local rc=$?
  check "$1 (exit $rc: $(head -c 120 "$TMP/ti_err"))" "[ $rc -eq ${4:-3} ] && grep -q -- \"$3\" '$TMP/ti_err'"; }
I=$(init 256 $EOS | sed 's/%/%%/g' | awk '{printf "%s\\n", $0}')
R="8\nkv_position=0\ntokens=406,11\ntemperature=0\ntop_k=50\ntop_p=0.9\nrepetition_penalty=1.0\nrep_penalty_lookback=64\nmax_tokens=2\n"
bad "no init block" '' "before the init block"
bad "count line not a number" 'eighteen\n' "count line"
bad "init block cut short" '18\narch_type=1\n' "unexpected end of input in the init block"
bad "a line without =" "${I/activation=0/activation 0}" "not key=value"
bad "unknown key" "${I/activation=0/activations=0}" "unknown key 'activations'"
bad "key twice" "${I/activation=0/arch_type=1}" "given twice"
bad "missing eos_tokens" "${I/eos_tokens=407/num_threads=1}" "'eos_tokens' is missing"
bad "hidden_dim not the model's" "${I/hidden_dim=128/hidden_dim=256}" "hidden_dim is 256"
bad "norm_eps not a number" "${I/norm_eps=1e-05/norm_eps=small}" "norm_eps wants"
bad "eos_tokens malformed" "${I/eos_tokens=407/eos_tokens=407,,2}" "eos_tokens"
bad "empty model_quant" "19${I#18}model_quant=\n" "model_quant is empty"
bad "lora_dir without qmodel.lora" "$(init 256 $EOS lora_dir=$TMP/no_adapter | awk '{printf "%s\\n", $0}')" "no_adapter/qmodel.lora: cannot open" 4
bad "token outside the vocabulary" "$I${R/406,11/406,408}" "not an id in 0..407"
bad "tokens list malformed" "$I${R/406,11/406,,11}" "not a list of ids"
bad "kv_position past the cache" "$I${R/kv_position=0/kv_position=3}" "kv_position 3 is outside 0..0"
bad "kv_position and reset both" "${I}9${R#8}reset=1\n" "one of them"
bad "neither kv_position nor reset" "${I}7${R#8\\nkv_position=0}" "one of them"
bad "unknown request key" "$I${R/kv_position=0/reset_all=1}" "unknown key 'reset_all'"
bad "negative max_tokens" "$I${R/max_tokens=2/max_tokens=-1}" "max_tokens wants"
bad "request cut short" "$I""8\nkv_position=0\n" "unexpected end of input in the request"
bad "more tokens than positions" "${I/max_position_embeddings=256/max_position_embeddings=2}${R/406,11/406,11,58}" "more than 2 ids"
bad "overlong line" "${I/quantization=ternary/quantization=$(head -c 5000 /dev/zero | tr '\0' x)}" "longer than"
timeout 60 "$BIN/trillim-inference" "$D" extra </dev/null >/dev/null 2>&1
check "a second argument is a usage error" "[ $? -eq 2 ]"
timeout 60 "$BIN/trillim-inference" --help | grep -q kv_position
check "--help names the protocol" "[ $? -eq 0 ]"
finish
