#!/usr/bin/env bash
# The one option parser and the one exit path (cli/cli_args.c, cli/cli_common.c), for every command
# name: --help exits 0 with the usage on stdout; an unknown option exits 2 with one message naming
# the command; an overflowing number exits 2 with one message naming the option (never clamped);
# --opt=value is the same as --opt value; an allocation failure (QP_FAIL_ALLOC_AFTER=0, the test
# hook of cli/main.c) exits 4 with one message, never 3 and never silently.
set -u
B=${QP_BIN_DIR:-build/bin}; FX=${QP_FIXTURES_DIR:-build/fixtures}; R=${QP_REAL_FIXTURES:-/work/shared/fixtures/real}
[ -f "$FX/llama-tied/config.json" ] && [ -f "$FX/bitnet-float/config.json" ] || { echo "skipped: no generated fixtures"; exit 77; }
[ -f "$R/stories260K.gguf" ] || { echo "skipped: no real fixtures"; exit 77; }
T=$(mktemp -d "${QP_TMP_DIR:-/tmp}/cli_opts.XXXXXX" 2>/dev/null || mktemp -d)
SERVE_PID=
trap '[ -n "$SERVE_PID" ] && kill $SERVE_PID 2>/dev/null; rm -rf "$T"' EXIT
Q="$B/quantpack"
. "$(dirname "$0")/../sh_check.sh" # pass, fail, finish
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL: $*"; }
BIG=99999999999999999999 # > UINT64_MAX

# expect NAME RC REGEX CMD...: sh_check.sh's check with stdout and stderr apart: exit code RC,
# stderr matching REGEX, and a failure prints exactly one "quantpack: " message.
expect() {
  local name=$1 want=$2 re=$3 rc n; shift 3
  timeout 60 "$@" >"$T/out" 2>"$T/err" </dev/null; rc=$?
  n=$(grep -c '^quantpack: ' "$T/err")
  if [ "$rc" -ne "$want" ]; then bad "$name: exit $rc, want $want: $(head -c 300 "$T/err")"
  elif [ -n "$re" ] && ! grep -Eq -- "$re" "$T/err"; then bad "$name: message does not match /$re/: $(head -c 300 "$T/err")"
  elif [ "$want" -ne 0 ] && [ "$n" -ne 1 ]; then bad "$name: $n messages: $(head -c 300 "$T/err")"
  else ok; fi
}

# inputs the commands below need
python3 -c "import struct,sys; open(sys.argv[1],'wb').write(struct.pack('<256f',*[k/8-16 for k in range(256)]))" \
  "$T/in.f32" || exit 77
"$Q" encode --type q8_0 --cols 256 "$T/in.f32" "$T/in.q8" 2>/dev/null || { echo "FAIL: setup encode"; exit 1; }
"$Q" keygen "$T/k.key" 2>/dev/null || { echo "FAIL: setup keygen"; exit 1; }
"$Q" convert "$FX/llama-tied" --to rdrr --quant F16 -o "$T/rd" --sign "$T/k.key" --quiet || { echo "FAIL: setup rdrr"; exit 1; }
"$Q" convert "$FX/bitnet-float" --to trlm -o "$T/trlm" --save-manifest "$T/trlm.manifest" >/dev/null || { echo "FAIL: setup trlm"; exit 1; }
"$Q" convert "$R/stories260K.bin" --tokenizer "$R/tok512.bin" --to bullet -o "$T/a.bullet" 2>/dev/null || { echo "FAIL: setup bullet"; exit 1; }
read -r -a CFG < "$T/trlm/inference.config"
TQ_ARGS=(--manifest "$T/trlm.manifest" --arch "${CFG[0]}" --hidden-dim "${CFG[2]}"
         --intermediate-dim "${CFG[3]}" --hidden-dim-orig "${CFG[2]}" --intermediate-dim-orig "${CFG[3]}"
         --norm-eps "${CFG[10]}" --head-dim "${CFG[8]}")

# Every command name: how it is called (a valid invocation without its tail) and the tail, which
# goes after the options under test (the output, or inference's --config, which takes every word
# after it).
NAMES=(inspect convert convert-rdrr convert-trlm convert-bullet tokenize run run-task verify encode
       decode gguf-to-rdrr keygen verify-signature serve trillim-quantize inference bullet-pack roundtrip)
declare -A CALL TAIL
CALL[inspect]="$Q inspect $FX/llama-tied"
CALL[convert]="$Q convert $R/stories260K.gguf --quant Q8_0";           TAIL[convert]="-o $T/o.gguf"
CALL[convert-rdrr]="$Q convert $FX/llama-tied --to rdrr --quant F16";  TAIL[convert-rdrr]="-o $T/o.rdrr"
CALL[convert-trlm]="$Q convert $FX/bitnet-float --to trlm";            TAIL[convert-trlm]="-o $T/o.trlm"
CALL[convert-bullet]="$Q convert $R/stories260K.bin --tokenizer $R/tok512.bin --to bullet"; TAIL[convert-bullet]="-o $T/o.bullet"
CALL[tokenize]="$Q tokenize $R/stories260K.gguf hello"
CALL[run]="$Q run $R/stories260K.gguf -p hello -n 2"
CALL[run-task]="$Q run $T/a.bullet --task ner -p hello"
CALL[verify]="$Q verify $R/stories260K.gguf --against $R/stories260K.gguf -n 2"
CALL[encode]="$Q encode --type q8_0 --cols 256 $T/in.f32";             TAIL[encode]="$T/o.q8"
CALL[decode]="$Q decode --type q8_0 --cols 256 $T/in.q8";              TAIL[decode]="$T/o.f32"
CALL[gguf-to-rdrr]="$B/gguf-to-rdrr $R/stories260K.gguf";              TAIL[gguf-to-rdrr]="$T/o.g2r"
CALL[keygen]="$Q keygen";                                              TAIL[keygen]="$T/o.key"
CALL[verify-signature]="$Q verify-signature $T/rd --pubkey $T/k.key.pub"
CALL[serve]="$Q serve $T/rd"
CALL[trillim-quantize]="$B/trillim-quantize ${TQ_ARGS[*]}";            TAIL[trillim-quantize]="--output $T/o.tensors"
CALL[inference]="$B/inference $T/trlm";                                TAIL[inference]="--config ${CFG[*]}"
CALL[bullet-pack]="$B/bullet-pack $R/stories260K.bin --tokenizer $R/tok512.bin"; TAIL[bullet-pack]="-o $T/o.bullet"
CALL[roundtrip]="$Q roundtrip $R/stories260K.gguf --via gguf -n 2";     TAIL[roundtrip]="-o $T/o.rt"

# an overflowing value for a numeric option of each command ("-": the command has none)
declare -A OVER=(
  [inspect]=- [convert]="--threads $BIG" [convert-rdrr]="--shard-size $BIG" [convert-trlm]=-
  [convert-bullet]=- [tokenize]=- [run]="--seed $BIG" [run-task]="--threads $BIG" [verify]="--n-predict $BIG"
  [encode]="--cols $BIG" [decode]="--cols $BIG" [gguf-to-rdrr]="--shard-size 99999999999G"
  [keygen]=- [verify-signature]=- [serve]="--port $BIG" [trillim-quantize]="--hidden-dim $BIG"
  [inference]=- [bullet-pack]=- [roundtrip]="--n-predict $BIG")

for name in "${NAMES[@]}"; do
  read -r -a cmd <<< "${CALL[$name]}"
  read -r -a tail <<< "${TAIL[$name]:-}"
  expect "$name --help" 0 '' "${cmd[@]}" --help
  grep -q '^usage: ' "$T/out" && ok || bad "$name --help: no usage on stdout"
  # the command name the user typed heads the message (convert-rdrr -> "convert")
  expect "$name unknown option" 2 "quantpack: [a-z-]*${name%%-*}[^:]*: unknown option '--no-such-option'" \
    "${cmd[@]}" --no-such-option "${tail[@]}"
  if [ "${OVER[$name]}" != - ]; then
    read -r -a ov <<< "${OVER[$name]}"
    expect "$name ${ov[0]} overflow" 2 "${ov[0]} wants .*, not '${ov[1]}'" "${cmd[@]}" "${ov[@]}" "${tail[@]}"
  fi
  if [ "$name" != serve ]; then # serve's allocations are per connection; it keeps serving
    rm -rf "$T"/o.*
    expect "$name out of memory" 4 "NOMEM|out of memory" env QP_FAIL_ALLOC_AFTER=0 "${cmd[@]}" "${tail[@]}"
  fi
done
# inference: the overflowing number is a --config field; REST options take no '='
expect "inference --config overflow" 2 "field 3 \(hidden_dim\) wants an integer in 0\.\.2147483648, not '$BIG'" \
  "$B/inference" "$T/trlm" --config "${CFG[@]:0:2}" "$BIG" "${CFG[@]:3}"
expect "inference --config=" 2 "takes the words after it" "$B/inference" "$T/trlm" --config=1
expect "flag with a value" 2 "inspect: --json takes no value" "$Q" inspect "$FX/llama-tied" --json=yes

# --opt=value works (the same result as --opt value)
rm -rf "$T"/o.*
expect "convert --to=gguf --quant=Q8_0 --output=F" 0 '' "$Q" convert "$R/stories260K.gguf" --to=gguf --quant=Q8_0 --output="$T/o1.gguf"
"$Q" convert "$R/stories260K.gguf" --to gguf --quant Q8_0 -o "$T/o2.gguf" 2>/dev/null
cmp -s "$T/o1.gguf" "$T/o2.gguf" && ok || bad "convert with --opt=value differs from --opt value"
expect "convert --to=rdrr --shard-size=64K" 0 '' "$Q" convert "$FX/llama-tied" --to=rdrr --quant=F16 -o "$T/o.rdrr" --shard-size=64K --quiet
[ -f "$T/o.rdrr/shard_00001.bin" ] && [ "$(stat -c %s "$T/o.rdrr/shard_00000.bin")" -le 65536 ] && ok || bad "--shard-size=64K not applied"
expect "convert --to=trlm --output=" 0 '' "$Q" convert "$FX/bitnet-float" --to=trlm --output="$T/o.trlm"
expect "convert --to=bullet --tokenizer=" 0 '' "$Q" convert "$R/stories260K.bin" --tokenizer="$R/tok512.bin" --to=bullet --output="$T/o.bullet"
expect "bullet-pack --output=" 0 '' "$B/bullet-pack" "$R/stories260K.bin" --tokenizer="$R/tok512.bin" --output="$T/o2.bullet"
cmp -s "$T/o.bullet" "$T/o2.bullet" && ok || bad "bullet-pack and convert --to bullet differ"
expect "inspect --tokenizer=" 0 '' "$Q" inspect "$R/stories260K.bin" --tokenizer="$R/tok512.bin"
grep -q "512 tokens" "$T/out" && ok || bad "inspect --tokenizer=FILE: $(grep tokenizer "$T/out")"
expect "tokenize --tokenizer=" 0 '' "$Q" tokenize "$R/stories260K.bin" --tokenizer="$R/tok512.bin" -- "-hello"
a=$(cat "$T/out"); "$Q" tokenize "$R/stories260K.bin" --tokenizer "$R/tok512.bin" -- "-hello" >"$T/out2" 2>/dev/null
[ -n "$a" ] && [ "$a" = "$(cat "$T/out2")" ] && ok || bad "tokenize --opt=value: '$a' vs '$(cat "$T/out2")'"
expect "run --ids= --n-predict= --seed=" 0 '' "$Q" run "$R/stories260K.gguf" --ids="1 403" --n-predict=3 --temp=0.8 --seed=7 --print-ids
a=$(cat "$T/out"); "$Q" run "$R/stories260K.gguf" --ids "1 403" -n 3 --temp 0.8 --seed 7 --print-ids >"$T/out2" 2>/dev/null
[ "$a" = "$(cat "$T/out2")" ] && [ "$(wc -w <<< "$a")" -ge 3 ] && ok || bad "run --opt=value: '$a' vs '$(cat "$T/out2")'"
expect "run --task= (not a head of this file)" 3 "ner" "$Q" run "$T/a.bullet" --task=ner --threads=1 -p hello
expect "run --task ner refuses generation options" 2 "run --task ner: option '--n-predict' is not used by task heads" \
  "$Q" run "$T/a.bullet" --task ner -p hello -n 3
expect "verify --against= --n-predict=" 0 '' "$Q" verify "$R/stories260K.gguf" --against="$R/stories260K.gguf" --n-predict=2 --min-cosine=0.999
grep -q "class custom" "$T/out" && ok || bad "verify --min-cosine= not applied: $(head -1 "$T/out")"
expect "encode --type= --cols=" 0 '' "$Q" encode --type=q8_0 --cols=256 "$T/in.f32" "$T/o.q8"
[ "$(stat -c %s "$T/o.q8")" -eq 272 ] && ok || bad "encode --cols=256: $(stat -c %s "$T/o.q8") bytes"
expect "decode --type= --cols=" 0 '' "$Q" decode --type=q8_0 --cols=256 "$T/in.q8" "$T/o.f32"
expect "gguf-to-rdrr --shard-size=" 0 '' "$B/gguf-to-rdrr" "$R/stories260K.gguf" "$T/o.g2r" --shard-size=256K --quiet
expect "verify-signature --pubkey=" 0 '' "$Q" verify-signature "$T/rd" --pubkey="$T/k.key.pub"
grep -q "(the given key)" "$T/out" && ok || bad "verify-signature --pubkey= not applied"
expect "trillim-quantize --manifest= ..." 0 '' "$B/trillim-quantize" --manifest="$T/trlm.manifest" \
  --output="$T/o.tensors" --arch="${CFG[0]}" --hidden-dim="${CFG[2]}" --intermediate-dim="${CFG[3]}" \
  --hidden-dim-orig="${CFG[2]}" --intermediate-dim-orig="${CFG[3]}" --norm-eps="${CFG[10]}" --head-dim="${CFG[8]}"
"$Q" serve "$T/rd" --port=0 --bind=127.0.0.1 2>"$T/serve.log" & SERVE_PID=$!
for _ in $(seq 50); do grep -q "http://" "$T/serve.log" && break; sleep 0.1; done
grep -q "on http://127.0.0.1:[0-9]*/" "$T/serve.log" && ok || bad "serve --port=0 --bind=: $(cat "$T/serve.log")"
kill $SERVE_PID; wait $SERVE_PID 2>/dev/null; SERVE_PID=

# one range of --threads in every command that takes it
for c in "$Q convert $R/stories260K.gguf --quant Q8_0 -o $T/t.gguf" "$Q run $R/stories260K.gguf -p a -n 1" \
         "$Q verify $R/stories260K.gguf --against $R/stories260K.gguf -n 1"; do
  read -r -a cmd <<< "$c"
  expect "${cmd[1]} --threads 1025" 2 "--threads wants an integer in 1\.\.1024, not '1025'" "${cmd[@]}" --threads 1025
done
# floats: finite, in the row's range
expect "run --repeat-penalty 0" 2 "--repeat-penalty wants a finite number >= " "$Q" run "$R/stories260K.gguf" -p a --repeat-penalty 0
expect "run --temp inf" 2 "--temp wants a finite number >= 0, not 'inf'" "$Q" run "$R/stories260K.gguf" -p a --temp inf
expect "verify --max-kl=-1" 2 "--max-kl wants a finite number >= 0, not '-1'" "$Q" verify "$R/stories260K.gguf" --against "$R/stories260K.gguf" --max-kl=-1
expect "run --threads=1024 is taken" 0 '' "$Q" run "$R/stories260K.gguf" -p a -n 1 --threads=1024
expect "--to and --quant any case" 0 '' "$Q" convert "$FX/llama-tied" --to GGUF --quant q8_0 -o "$T/case.gguf"
expect "unknown --quant lists the valid ones" 2 "unknown --quant 'Q7_K' \(--to gguf takes F32, F16, BF16, Q8_0, Q6_K, Q4_K_M" \
  "$Q" convert "$FX/llama-tied" --to gguf --quant Q7_K -o "$T/none.gguf"
expect "IQ2_XXS refused with its reason" 2 "--quant IQ2_XXS is not supported: IQ1/IQ2/IQ3 blocks index ggml's codebook tables" \
  "$Q" convert "$FX/llama-tied" --to gguf --quant IQ2_XXS -o "$T/none.gguf"
# a model's .safetensors file (any shard) or its model.safetensors.index.json stands for its folder
# (issue 17), with a note; the output is the folder's, byte for byte
"$Q" convert "$FX/llama-tied" --to gguf --quant F16 -o "$T/folder.gguf" 2>/dev/null || bad "setup: llama-tied -> F16"
"$Q" convert "$FX/llama-sharded" --to gguf --quant F16 -o "$T/sharded.gguf" 2>/dev/null || bad "setup: llama-sharded -> F16"
expect "a model's .safetensors file: its folder" 0 "model.safetensors is a file of the Hugging Face model .*/llama-tied: converting the folder" \
  "$Q" convert "$FX/llama-tied/model.safetensors" --to gguf --quant F16 -o "$T/file.gguf"
cmp -s "$T/file.gguf" "$T/folder.gguf" && ok || bad "the .safetensors file's GGUF differs from the folder's"
expect "model.safetensors.index.json: its folder" 0 "index.json is a file of the Hugging Face model .*/llama-sharded: converting" \
  "$Q" convert "$FX/llama-sharded/model.safetensors.index.json" --to gguf --quant F16 -o "$T/index.gguf"
cmp -s "$T/index.gguf" "$T/sharded.gguf" && ok || bad "the index.json's GGUF differs from the folder's"
expect "one shard: its folder" 0 "model-00002-of-00002.safetensors is a file of the Hugging Face model" \
  "$Q" convert "$FX/llama-sharded/model-00002-of-00002.safetensors" --to gguf --quant F16 -o "$T/shard.gguf"
cmp -s "$T/shard.gguf" "$T/sharded.gguf" && ok || bad "the shard's GGUF differs from the folder's"
expect "bullet-pack takes the file too" 0 "is a file of the Hugging Face model" \
  "$B/bullet-pack" "$FX/llama-tied/model.safetensors" -o "$T/file.bullet"
expect "rdrr --quant KEEP (any case)" 0 '' "$Q" convert "$R/stories260K.gguf" --to rdrr --quant KEEP -o "$T/keep.rdrr"
check "tokenize --pieces" 0 "     1 '<s>'.*   403 '▁Once'.*   378 '▁time'" \
  "$Q" tokenize "$R/stories260K.gguf" --pieces "Once upon a time"
# verify --tokenizer serves the side without a tokenizer (the llama2.c checkpoint); an HF folder
# that has its own keeps it (tok512.bin was read as its tokenizer.model: CORRUPT)
"$Q" convert "$R/stories260K.bin" --tokenizer "$R/tok512.bin" --to safetensors -o "$T/st260" 2>/dev/null ||
  bad "setup: stories260K.bin -> safetensors"
check "verify HF folder against llama2.c with --tokenizer" 0 "verdict: PASS" \
  "$Q" verify "$T/st260" --against "$R/stories260K.bin" --tokenizer "$R/tok512.bin" -n 2
check "verify llama2.c against HF folder with --tokenizer" 0 "verdict: PASS" \
  "$Q" verify "$R/stories260K.bin" --against "$T/st260" --tokenizer "$R/tok512.bin" -n 2

# --no-repack (llama.cpp's -nr): no load-time copies of the weights (runtime.md "Repacked rows"),
# the same tokens; run names how many matrices were repacked or copied
"$Q" convert "$FX/llama-tied" --to gguf --quant F16 -o "$T/nr.gguf" >/dev/null 2>&1
nr_a=$("$Q" run "$T/nr.gguf" --ids "1 2 3" -n 6 --print-ids 2>"$T/nr1.err")
nr_b=$("$Q" run "$T/nr.gguf" --ids "1 2 3" -n 6 --print-ids -nr 2>"$T/nr2.err")
if [ -n "$nr_a" ] && [ "$nr_a" = "$nr_b" ] && grep -q '([1-9][0-9]* matrices repacked)' "$T/nr1.err" &&
   grep -q '(0 matrices repacked)' "$T/nr2.err"; then ok
else bad "--no-repack: '$nr_a' vs '$nr_b': $(cat "$T/nr1.err" "$T/nr2.err" | head -c 400)"; fi

finish
