#!/bin/bash
# Issue 11, item 8: what inspect and convert say about a model they accept.
# - A conversion written without a tokenizer warns on stderr (gguf, rdrr, trlm), inspect's
#   problems list "no tokenizer", and `run --tokenizer FILE` on that output uses FILE (was
#   "no tokenizer in this model"); a tokenizer whose size differs from the embedding is refused.
# - NaN/Inf weights: inspect lists the tensor and the first bad element (text and --json).
# - inspect --json on a bad file prints {"error": {"status", "message", "exit_code"}} on stdout
#   and exits with that code.
set -u
B=${QP_BIN_DIR:?}; FX=${QP_FIXTURES_DIR:?}; T=${QP_TMP_DIR:?}/inspect_findings
[ -d "$FX/llama-tied" ] || { echo "skipped: no fixtures"; exit 77; }
rm -rf "$T"; mkdir -p "$T"
Q="$B/quantpack"
. "$(dirname "$0")/../sh_check.sh"

# an HF folder without tokenizer files
NT="$T/notok"; mkdir -p "$NT"
cp "$FX/llama-tied/config.json" "$FX/llama-tied/model.safetensors" "$NT/"
TOK="$FX/llama-tied/tokenizer.json"
W="written without a tokenizer"
check "convert gguf warns" 0 "$W" "$Q" convert "$NT" --to gguf --quant F32 -o "$T/nt.gguf"
check "convert rdrr warns" 0 "$W" "$Q" convert "$NT" --to rdrr --quant F32 -o "$T/nt.rdrr"
check "convert trlm warns" 0 "$W" "$Q" convert "$NT" --to trlm -o "$T/nt.trlm"
out=$("$Q" convert "$NT" --tokenizer "$TOK" --to gguf --quant F32 -o "$T/tok.gguf" 2>&1); rc=$?
if [ $rc -eq 0 ] && [[ ! $out =~ $W ]]; then pass=$((pass+1))
else fail=$((fail+1)); echo "FAIL: convert with --tokenizer: rc $rc: $out"; fi
check "inspect lists no tokenizer" 0 "problems: .*  - no tokenizer: " "$Q" inspect "$T/nt.gguf"
check "inspect json lists no tokenizer" 0 '"problems":[^]]*"no tokenizer' "$Q" inspect --json "$T/nt.gguf"
check "inspect with tokenizer: none" 0 "problems: none" "$Q" inspect "$T/tok.gguf"
check "run without tokenizer" 3 "no tokenizer" "$Q" run "$T/nt.gguf" -p "the" -n 2 --temp 0
# the same text with the tokenizer given at run time as with it inside the model
"$Q" convert "$NT" --tokenizer "$TOK" --to trlm -o "$T/tok.trlm" >/dev/null 2>&1
for m in gguf rdrr trlm; do
  twin="$T/tok.$m"; [ $m = rdrr ] && twin="$T/tok.gguf" # F32 both: same logits
  want=$("$Q" run "$twin" -p "the cat" -n 6 --temp 0 2>/dev/null)
  got=$("$Q" run "$T/nt.$m" --tokenizer "$TOK" -p "the cat" -n 6 --temp 0 2>/dev/null); rc=$?
  if [ $rc -eq 0 ] && [ -n "$want" ] && [ "$got" == "$want" ]; then pass=$((pass+1))
  else fail=$((fail+1)); echo "FAIL: run nt.$m --tokenizer: rc $rc, '$got' vs '$want'"; fi
done
# a tokenizer of another size (the real llama2.c tok512.bin, when present) is refused
T512="${QP_REAL_FIXTURES:-/nonexistent}/tok512.bin"
if [ -f "$T512" ]; then
  check "run --tokenizer of another size" 3 "tokenizer has 512 tokens" \
    "$Q" run "$T/nt.gguf" --tokenizer "$T512" -p the -n 1
fi

# NaN and Inf weights
python3 - "$FX/llama-tied" "$T/nan" <<'PY'
import json, shutil, struct, sys
src, dst = sys.argv[1], sys.argv[2]
shutil.copytree(src, dst)
b = bytearray(open(dst + "/model.safetensors", "rb").read())
n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
o = h["model.layers.1.mlp.up_proj.weight"]["data_offsets"][0] + 8 + n
b[o + 4 * 7:o + 4 * 8] = struct.pack("<f", float("nan"))
o = h["model.norm.weight"]["data_offsets"][0] + 8 + n
b[o + 4 * 3:o + 4 * 4] = struct.pack("<f", float("inf"))
open(dst + "/model.safetensors", "wb").write(b)
PY
check "inspect nan" 0 "model.layers.1.mlp.up_proj.weight.*element 7 is not finite" "$Q" inspect "$T/nan"
check "inspect inf" 0 "model.norm.weight.*element 3 is not finite" "$Q" inspect "$T/nan"
check "inspect json nan" 0 '"problems":.*up_proj.weight[^"]*element 7' "$Q" inspect --json "$T/nan"
check "convert nan refused" 3 "element 7 is not finite.*--allow-nonfinite" \
  "$Q" convert "$T/nan" --to gguf --quant Q8_0 -o "$T/nan.gguf"
[ ! -e "$T/nan.gguf" ] || { fail=$((fail+1)); echo "FAIL: convert of NaN weights wrote an output"; }

# Issue 11, item 9: a tokenizer.json with 100,000 added tokens. After the vocabulary: the same
# ids as without them. Over ids 0..: refused naming the id (printed nothing with exit 0).
python3 - "$TOK" "$T" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
for name, first in (("after", max(x["id"] for x in t["added_tokens"]) + 1), ("over", 0)):
    u = json.loads(json.dumps(t))
    u["added_tokens"] += [{"id": first + i, "content": "<extra_%d>" % i, "single_word": False,
                           "lstrip": False, "rstrip": False, "normalized": False, "special": True}
                          for i in range(100000)]
    json.dump(u, open("%s/added_%s.json" % (sys.argv[2], name), "w"))
PY
want=$("$Q" tokenize "$TOK" "hello world, the cat" 2>&1)
check "100k added tokens after the vocabulary" 0 "^$want\$" "$Q" tokenize "$T/added_after.json" "hello world, the cat"
check "100k added tokens over the vocabulary" 3 "added_tokens give id 0, model.vocab's '!', to different text '<extra_0>'" \
  "$Q" tokenize "$T/added_over.json" "hello world, the cat"

# inspect --json on failure: an error object on stdout, the same exit code
printf 'GGUF\x03\x00\x00\x00' > "$T/trunc.gguf"
echo "not a model" > "$T/junk.bin"
for f in trunc.gguf junk.bin missing.gguf; do
  out=$("$Q" inspect --json "$T/$f" 2>/dev/null); rc=$?
  if node -e '
      const o = JSON.parse(process.argv[1]); const e = o.error;
      if (!e || typeof e.status !== "string" || typeof e.message !== "string" ||
          e.exit_code !== Number(process.argv[2]) || !e.message.includes(process.argv[3])) process.exit(1);' \
      "$out" "$rc" "$f" 2>/dev/null && [ "$rc" -ne 0 ]; then pass=$((pass+1))
  else fail=$((fail+1)); echo "FAIL: inspect --json $f: rc $rc: ${out:0:300}"; fi
done

rm -rf "$T"
finish
