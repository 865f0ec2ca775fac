#!/usr/bin/env bash
# Trillim protocol v1 through pipes: `inference DIR --config ...` on a TRLM conversion of the
# bitnet-float fixture. Several requests in one process, continue vs reset, kv_position
# arithmetic, continuation equals one request over the whole history, EOS stop, max_tokens stop,
# the max-positions bound with max_tokens 0, malformed lines and early EOF (non-zero exit with a
# message, never a hang), clean EOF between requests, the repetition penalty looking back into
# the previous request of the session (and not past a reset); a stop without EOS (max_tokens,
# context end) ends with the first EOS id, which the SDK client waits for; both --lora forms
# with a separate adapter folder (the SDK's `--config ... --lora DIR`, Trillim's PROTOCOL note's `--lora DIR
# --config ...`) equal the model-folder `--lora` (checked against a merged model by
# golden.trlm_parity); greedy ids equal `quantpack run --ids` on the same folder.
set -u
. "$(dirname "$0")/trillim_util.sh"
BIN=${QP_BIN_DIR:-bin}; FIX=${QP_FIXTURES_DIR:-fixtures}; TMP=${QP_TMP_DIR:-test-tmp}
[ -f "$FIX/bitnet-float/config.json" ] || { echo "skipped: no fixtures"; exit 77; }
mkdir -p "$TMP"
D="$TMP/trlm_proto"
"$BIN/quantpack" convert "$FIX/bitnet-float" --to trlm -f -o "$D" >/dev/null || { echo "convert failed"; exit 1; }
read -r -a CFG < "$D/inference.config"
# config with field 10 (max positions) and the EOS list replaced: cfg MAXPOS N_EOS EOS...
cfg() { local mp=$1; shift; echo "${CFG[@]:0:9} $mp ${CFG[@]:10:7} $*"; }
run() { timeout 60 "$BIN/inference" "$D" --config $1; }
req() { # n reset max tokens...
  local n=$1 r=$2 m=$3; shift 3; printf '%s\n%s\n0\n0\n1\n1\n64\n%s\n' "$n" "$r" "$m"; printf '%s\n' "$@"; }

P="406 11 58 149"; Q="5 17"
# 1: two requests in one process (continue), then a reset request
out=$( { req 4 1 5 $P; req 2 0 3 $Q; req 4 1 5 $P; echo 0; } | run "$(cfg 256 0)" ); rc=$?
mapfile -t L <<< "$out"
check "exit 0 after '0'" "[ $rc -eq 0 ]"
check "16 output lines (5+1, 3+1, 5+1)" "[ ${#L[@]} -eq 16 ]"
check "kv_position after request 1 = 4 + 5" "[ '${L[5]}' = 9 ]"
check "kv_position after continuing = 9 + 2 + 3" "[ '${L[9]}' = 14 ]"
check "reset reproduces request 1" "[ '${L[*]:0:6}' = '${L[*]:10:6}' ]"
G1="${L[*]:0:5}"; G2="${L[*]:6:3}"
# 2: the continuation equals one request over the whole history (every emitted token is cached)
out2=$( { req 11 1 3 $P $G1 $Q; echo 0; } | run "$(cfg 256 0)" )
mapfile -t M <<< "$out2"
check "continuation == single request over P+gen+Q ($G2 vs ${M[*]:0:3})" "[ '${M[*]:0:3}' = '$G2' ] && [ '${M[3]}' = 14 ]"
# 3: EOS stop (the first generated token declared EOS): it is printed, then kv_position
first=${L[0]}
out3=$( { req 4 1 0 $P; echo 0; } | run "$(cfg 256 2 407 $first)" )
mapfile -t E <<< "$out3"
check "EOS stops after the EOS token (${E[*]})" "[ ${#E[@]} -eq 2 ] && [ '${E[0]}' = '$first' ] && [ '${E[1]}' = 5 ]"
# 4: max_tokens 0 = unlimited, bounded by max positions (16): 12 cached + 1 emitted at the end
out4=$( { req 4 1 0 $P; echo 0; } | run "$(cfg 16 0)" )
mapfile -t U <<< "$out4"
U4=("${U[@]}")
check "unlimited stops at max positions (${#U[@]} lines, kv ${U[-1]})" "[ ${#U[@]} -eq 14 ] && [ '${U[-1]}' = 16 ]"
# 5: clean EOF between requests -> exit 0; early EOF inside a request -> non-zero, message
{ req 4 1 2 $P; } | run "$(cfg 256 0)" >/dev/null 2>&1; check "EOF between requests exits 0" "[ $? -eq 0 ]"
printf '4\n1\n0\n' | run "$(cfg 256 0)" >/dev/null 2>"$TMP/proto_err"; rc=$?
check "EOF mid-request: non-zero exit ($rc), not a timeout" "[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q 'end of input' '$TMP/proto_err'"
# 6: malformed lines
bad() { # name, input, expected stderr fragment
  printf -- "$2" | run "$(cfg 256 0)" >/dev/null 2>"$TMP/proto_err"; local rc=$?
  check "$1 (exit $rc: $(head -c 120 "$TMP/proto_err"))" "[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q '$3' '$TMP/proto_err'"; }
bad "non-numeric num_tokens" 'abc\n' "not an integer"
bad "negative num_tokens" '-3\n' "outside"
bad "reset flag 2" '1\n2\n0\n0\n1\n1\n64\n1\n5\n' "reset_flag"
bad "token id out of vocabulary" '1\n1\n0\n0\n1\n1\n64\n1\n99999\n' "outside the vocabulary"
bad "non-numeric temperature" '1\n1\nhot\n0\n1\n1\n64\n1\n5\n' "temperature"
bad "prompt past max positions" '300\n' "outside"
bad "overlong line" "$(head -c 400 /dev/zero | tr '\0' 7)\n" "too long"
# 8: repetition penalty across requests: the sampler's history is the session's cached tokens
reqp() { # n reset max penalty tokens... (greedy, lookback 64)
  local n=$1 r=$2 m=$3 rp=$4; shift 4; printf '%s\n%s\n0\n0\n1\n%s\n64\n%s\n' "$n" "$r" "$rp" "$m"; printf '%s\n' "$@"; }
R=5
mapfile -t N0 < <( { reqp 4 1 5 1 $P; reqp 1 0 4 1 5; echo 0; } | run "$(cfg 256 0)" )
mapfile -t N1 < <( { reqp 4 1 5 1 $P; reqp 1 0 4 $R 5; echo 0; } | run "$(cfg 256 0)" )
H1="${N0[*]:0:5}"; t0=${N0[6]}; t1=${N1[6]}
# without a penalty the continued request's first token repeats a token of request 1 (not its own
# prompt "5"), so only a history reaching into request 1 can change it
check "unpenalized continuation starts with a token of request 1 ($t0 in $P $H1)" \
  "[ '$t0' != 5 ] && [[ ' $P $H1 ' == *' $t0 '* ]]"
check "penalty $R in the continued request changes it ($t0 -> $t1)" "[ -n '$t1' ] && [ '$t1' != '$t0' ]"
mapfile -t S1 < <( { reqp 10 1 4 $R $P $H1 5; echo 0; } | run "$(cfg 256 0)" )
check "penalized continuation == one penalized request over the whole history (${N1[*]:6:4} vs ${S1[*]:0:4})" \
  "[ '${N1[*]:6:5}' = '${S1[*]:0:5}' ]"
# reset 1 clears the history with the cache: after request 1, a reset request equals a fresh process
mapfile -t X1 < <( { reqp 4 1 5 1 $P; reqp 1 1 4 $R $t0; echo 0; } | run "$(cfg 256 0)" )
mapfile -t X2 < <( { reqp 1 1 4 $R $t0; echo 0; } | run "$(cfg 256 0)" )
check "reset clears the penalty history (${X1[*]:6:5} vs ${X2[*]:0:5})" "[ '${X1[*]:6:5}' = '${X2[*]:0:5}' ]"
# 7: a config that does not describe the model
timeout 60 "$BIN/inference" "$D" --config ${CFG[0]} ${CFG[1]} 256 "${CFG[@]:3}" </dev/null >/dev/null 2>"$TMP/proto_err"
check "wrong hidden_dim in --config is refused" "[ $? -ne 0 ] && grep -q hidden_dim '$TMP/proto_err'"
timeout 60 "$BIN/inference" "$D" --config 1 0 128 </dev/null >/dev/null 2>&1
check "truncated --config is a usage error" "[ $? -eq 2 ]"
# 9: a stop without EOS ends with the first EOS id (not cached), then kv_position
EOS=407
mapfile -t T < <( { req 4 1 5 $P; req 2 0 3 $Q; echo 0; } | run "$(cfg 256 1 $EOS)" )
check "max_tokens 5: 5 ids, EOS $EOS, kv 9 (${T[*]:0:7})" "[ '${T[*]:0:5}' = '$G1' ] && [ '${T[5]}' = $EOS ] && [ '${T[6]}' = 9 ]"
check "the appended EOS is not cached: continuing gives the same ids (${T[*]:7:5})" \
  "[ '${T[*]:7:3}' = '$G2' ] && [ '${T[10]}' = $EOS ] && [ '${T[11]}' = 14 ] && [ ${#T[@]} -eq 12 ]"
mapfile -t U < <( { req 4 1 0 $P; echo 0; } | run "$(cfg 16 1 $EOS)" )
check "context end (16) with max_tokens 0: 13 ids, EOS, kv 16 (${#U[@]} lines)" \
  "[ ${#U[@]} -eq 15 ] && [ '${U[13]}' = $EOS ] && [ '${U[14]}' = 16 ] && [ '${U[*]:0:13}' = '${U4[*]:0:13}' ]"
# 10: the greedy ids against an independent run of the same folder
R0=$("$BIN/quantpack" run "$D" --ids "$P" -n 13 --temp 0 --print-ids 2>/dev/null)
check "greedy ids == quantpack run --ids ($R0)" "[ '$R0' = '$P ${U[*]:0:13}' ]"
# 11: LoRA from a separate adapter folder, both argument orders, == the model-folder --lora
peft_adapter "$TMP/trlm_peft" || { echo "cannot write the PEFT adapter"; exit 1; }
DL="$TMP/trlm_proto_lora"; AD="$TMP/trlm_proto_adapter"
"$BIN/quantpack" convert "$FIX/bitnet-float" --to trlm -f -o "$DL" --lora "$TMP/trlm_peft" >/dev/null || { echo "convert --lora failed"; exit 1; }
rm -rf "$AD"; mkdir -p "$AD"; cp "$DL/qmodel.lora" "$AD/"
lreq() { { req 4 1 6 $P; req 2 0 3 $Q; echo 0; } }
base=$(lreq | run "$(cfg 256 0)")
flag=$(lreq | timeout 60 "$BIN/inference" "$DL" --lora --config $(cfg 256 0))
sdk=$(lreq | timeout 60 "$BIN/inference" "$D" --config $(cfg 256 0) --lora "$AD")
proto=$(lreq | timeout 60 "$BIN/inference" "$D" --lora "$AD" --config $(cfg 256 0))
check "the adapter changes the output" "[ -n '$flag' ] && [ '$flag' != '$base' ]"
check "SDK form --config ... --lora DIR == model-folder --lora" "[ '$sdk' = '$flag' ]"
check "Trillim's PROTOCOL note form --lora DIR --config == model-folder --lora" "[ '$proto' = '$flag' ]"
timeout 60 "$BIN/inference" "$D" --config $(cfg 256 0) --lora "$TMP/no_such_adapter" </dev/null >/dev/null 2>"$TMP/proto_err"; rc=$?
check "a missing adapter folder is named ($(head -c 100 "$TMP/proto_err"))" "[ $rc -ne 0 ] && grep -q no_such_adapter '$TMP/proto_err'"
timeout 60 "$BIN/inference" "$D" --config $(cfg 256 0) extra </dev/null >/dev/null 2>"$TMP/proto_err"
check "a stray word after the EOS ids is a usage error" "[ $? -eq 2 ] && grep -q extra '$TMP/proto_err'"
finish
