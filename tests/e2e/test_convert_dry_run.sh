#!/usr/bin/env bash
# convert --dry-run for the targets beyond gguf/safetensors (issue 17): exit 0, OUT not created,
# a plan naming each tensor's source and target encoding (rdrr, bullet, trlm). RDRR: the plan's target encoding and
# bytes are what the conversion then stores (manifest.json dtype and size of every tensor), on
# llama.cpp's own Q4_K_M of stories260K (its Q5_0/Q8_0 fallbacks become Q4_K padded rows / F16)
# and on the F32 stories260K.gguf.
set -u
BIN="${QP_BIN_DIR:?}"; R="${QP_REAL_FIXTURES:-/work/shared/fixtures/real}"; TMP="${QP_TMP_DIR:-/tmp}/convert-dry-run.$$"
QP="$BIN/quantpack"
mkdir -p "$TMP"; trap 'rm -rf "$TMP"' EXIT
fail=0; pass=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

# plan rows "name shape... SRC DST srcbytes outbytes action" -> "name DST outbytes"
plan_rows() { awk 'NR > 1 && NF >= 6 && $0 !~ /^skipped / && $0 !~ /tensors, / {
    for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+$/ && $(i+1) ~ /^[0-9]+$/) { print $1, $(i-1), $(i+1); break } }' "$1" | sort; }

for src in "$R/stories260K.gguf" "$R/gguf/stories260K-Q4_K_M.llamacpp.gguf"; do
  [ -f "$src" ] || { bad "missing fixture $src"; continue; }
  for q in Q4_K_M F16; do
    tag="$(basename "$src").$q"
    extra=(); case "$src" in *llamacpp*) [ "$q" = Q4_K_M ] && extra=(--allow-requantize);; esac
    "$QP" convert "$src" --to rdrr --quant "$q" "${extra[@]}" -o "$TMP/out" --dry-run >"$TMP/plan" 2>"$TMP/err"
    rc=$?
    [ $rc -eq 0 ] && ok || { bad "$tag: --dry-run exit $rc: $(cat "$TMP/err")"; continue; }
    [ ! -e "$TMP/out" ] && ok || bad "$tag: --dry-run created $TMP/out"
    head -1 "$TMP/plan" | grep -q "source *target" && ok || bad "$tag: no plan header"
    grep -q "^48 tensors, " "$TMP/plan" && ok || bad "$tag: no '48 tensors' total: $(tail -1 "$TMP/plan")"
    "$QP" convert "$src" --to rdrr --quant "$q" "${extra[@]}" -o "$TMP/out" >/dev/null 2>"$TMP/err" \
      || { bad "$tag: convert failed: $(cat "$TMP/err")"; continue; }
    plan_rows "$TMP/plan" | sed 's/ Q4_K / Q4_K_M /' >"$TMP/want"
    python3 - "$TMP/out/manifest.json" >"$TMP/got" <<'PY' || bad "$tag: manifest unreadable"
import json, sys
t = json.load(open(sys.argv[1]))["tensors"]
for n in sorted(t): print(n, t[n]["dtype"], t[n]["size"])
PY
    [ "$(wc -l <"$TMP/want")" -eq 48 ] && ok || bad "$tag: $(wc -l <"$TMP/want") plan rows parsed"
    diff "$TMP/want" "$TMP/got" >"$TMP/diff" && ok || bad "$tag: plan != stored: $(head -5 "$TMP/diff")"
    rm -rf "$TMP/out"
  done
done
grep -q " Q5_0 *Q4_K " <("$QP" convert "$R/gguf/stories260K-Q4_K_M.llamacpp.gguf" --to rdrr --quant Q4_K_M \
  --allow-requantize --dry-run 2>&1) && ok || bad "plan does not name Q5_0 -> Q4_K"
"$QP" convert "$R/stories260K.gguf" --to rdrr --quant keep -o "$TMP/out" --dry-run >/dev/null 2>&1
[ $? -eq 2 ] && [ ! -e "$TMP/out" ] && ok || bad "--quant keep --dry-run not a usage error"

# bullet: every row BQ4 in bullet-core's names; the plan's names and bytes are the .bullet's (inspect),
# the source encoding named (F32; llama.cpp's Q5_0 and Q8_0 under --allow-requantize); the K/V
# repeat and FFN padding named as actions; a .bullet source is a copy of every tensor
inspect_rows() { "$QP" inspect "$1" | awk '$2 == "BQ4" { for (i = 3; i <= NF; i++) if ($i ~ /\]$/) { print $1, $2, $(i+1); break } }' | sort; }
for src in "$R/stories260K.gguf" "$R/gguf/stories260K-Q4_K_M.llamacpp.gguf" "$TMP/s.bullet"; do
  tag="bullet $(basename "$src")"
  extra=(); case "$src" in *llamacpp*) extra=(--allow-requantize);; esac
  "$QP" convert "$src" --to bullet "${extra[@]}" -o "$TMP/m.bullet" --dry-run >"$TMP/plan" 2>"$TMP/err"
  rc=$?
  [ $rc -eq 0 ] && ok || { bad "$tag: --dry-run exit $rc: $(cat "$TMP/err")"; continue; }
  [ ! -e "$TMP/m.bullet" ] && ok || bad "$tag: --dry-run created $TMP/m.bullet"
  head -1 "$TMP/plan" | grep -q "source *target" && ok || bad "$tag: no plan header"
  grep -q "^48 tensors, " "$TMP/plan" && ok || bad "$tag: no '48 tensors' total: $(tail -1 "$TMP/plan")"
  case "$src" in
    *llamacpp*) grep -q "^tok_embeddings.weight .* Q5_0 *BQ4 .* encode$" "$TMP/plan" && ok || bad "$tag: Q5_0 -> BQ4 not named"
                grep -q "^layers.0.attention.key.weight .* Q5_0 *BQ4 .* repeat-kv+encode$" "$TMP/plan" && ok || bad "$tag: K/V repeat not named";;
    *.bullet) [ "$(grep -c " BQ4 *BQ4 .* copy$" "$TMP/plan")" -eq 48 ] && ok || bad "$tag: not 48 copies";;
    *) grep -q "^layers.4.ffn.w2.weight  *\[64, 256\]  *F32  *BQ4  *44032  *10240 pad-cols+encode$" "$TMP/plan" \
         && ok || bad "$tag: ffn_down padding row: $(grep w2 "$TMP/plan" | tail -1)";;
  esac
  "$QP" convert "$src" --to bullet "${extra[@]}" -o "$TMP/m.bullet" >/dev/null 2>"$TMP/err" \
    || { bad "$tag: convert failed: $(cat "$TMP/err")"; continue; }
  plan_rows "$TMP/plan" >"$TMP/want"
  inspect_rows "$TMP/m.bullet" >"$TMP/got"
  [ "$(wc -l <"$TMP/want")" -eq 48 ] && ok || bad "$tag: $(wc -l <"$TMP/want") plan rows parsed"
  diff "$TMP/want" "$TMP/got" >"$TMP/diff" && ok || bad "$tag: plan != written: $(head -5 "$TMP/diff")"
  [ "$src" = "$R/stories260K.gguf" ] && mv "$TMP/m.bullet" "$TMP/s.bullet"
  rm -f "$TMP/m.bullet"
done
"$QP" convert "$R/gguf/stories260K-Q4_K_M.llamacpp.gguf" --to bullet -o "$TMP/m.bullet" --dry-run >/dev/null 2>"$TMP/err"
[ $? -eq 3 ] && grep -q "already quantized (Q5_0); converting it to BQ4" "$TMP/err" && ok \
  || bad "bullet --dry-run of a quantized source without --allow-requantize: $(cat "$TMP/err")"

# trlm: one row per manifest entry in the SDK's order (a GGUF source staged as an HF folder in
# TMPDIR, removed); encodings in qmodel.tensors' record order as inspect reads them, each record's
# planned bytes filling its place up to the 64-byte alignment; quantpack-trlm-plan-* not left behind
for q in auto bf16 q8_0; do
  tag="trlm $q"
  TMPDIR="$TMP" "$QP" convert "$R/stories260K.gguf" --to trlm --quant $q -o "$TMP/t" --dry-run >"$TMP/plan" 2>"$TMP/err"
  rc=$?
  [ $rc -eq 0 ] && ok || { bad "$tag: --dry-run exit $rc: $(cat "$TMP/err")"; continue; }
  [ ! -e "$TMP/t" ] && [ -z "$(ls -d "$TMP"/quantpack-trlm-plan* "$TMP"/t.* 2>/dev/null)" ] && ok || bad "$tag: --dry-run wrote $(ls "$TMP")"
  grep -q "^48 tensors, " "$TMP/plan" && ok || bad "$tag: no '48 tensors' total: $(tail -1 "$TMP/plan")"
  grep -q "^model.layers.0.self_attn.q_proj.weight  *\[64, 64\]  *F32 " "$TMP/plan" && ok || bad "$tag: q_proj row: $(grep q_proj "$TMP/plan" | head -1)"
  "$QP" convert "$R/stories260K.gguf" --to trlm --quant $q -o "$TMP/t" >/dev/null 2>"$TMP/err" \
    || { bad "$tag: convert failed: $(cat "$TMP/err")"; continue; }
  "$QP" inspect "$TMP/t" --json >"$TMP/json" || bad "$tag: inspect"
  python3 - "$TMP/plan" "$TMP/json" "$TMP/t/qmodel.tensors" <<'PY' && ok || bad "$tag: plan != written"
import json, os, sys
rows = [l.split() for l in open(sys.argv[1]) if l.startswith("model.") or l.startswith("lm_head.")]
plan = [(r[-4], int(r[-2])) for r in rows]  # target, out bytes
t = json.load(open(sys.argv[2]))["tensors"]
offs = [x["offset"] for x in t] + [os.path.getsize(sys.argv[3])]
# the reader decodes a block tensor whose rows are not whole blocks (ffn_down's 172) to F32
same = lambda p, x: p[0] == x["encoding"] or (x["encoding"] == "F32" and x["shape"][-1] % 32 != 0)
bad = [(i, p, x["encoding"], offs[i + 1] - offs[i]) for i, (p, x) in enumerate(zip(plan, t))
       if not same(p, x) or not (p[1] <= offs[i + 1] - offs[i] < p[1] + 64)]
if len(plan) != 48 or len(t) != 48 or bad:
    print(len(plan), len(t), bad[:3]); sys.exit(1)
PY
  rm -rf "$TMP/t"
done

echo "convert_dry_run: $pass passed, $fail failed"
[ $fail -eq 0 ]
