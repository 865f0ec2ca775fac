#!/usr/bin/env bash
# trillim-quantize as the current Trillim SDK (GitHub Trillim/Trillim, quantize/_manifest.py
# run_model_quantizer) launches it: the manifest our convert --to trlm wrote (absolute shard
# paths, so it works from any directory, in the current SDK's form: a sections block), the SDK's
# whole flag list incl. --rope-dim; arch id 3 (and 4-6 on a Llama manifest) and
# partial rotary refused by name (exit 3); YaRN tables against HF's formula and corrupt YARN
# trailers refused naming the offset. converters/trillim_sdk.md.
set -u
BIN=$(cd "${QP_BIN_DIR:-bin}" && pwd); FIX=${QP_FIXTURES_DIR:-fixtures}; TMP=${QP_TMP_DIR:-test-tmp}
[ -f "$FIX/bitnet-float/config.json" ] || { echo "skipped: no fixtures"; exit 77; }
. "$(dirname "$0")/../sh_check.sh"
ok() { if eval "$2"; then pass=$((pass+1)); else echo "FAIL: $1"; fail=$((fail+1)); fi; }
mkdir -p "$TMP"
TMP=$(cd "$TMP" && pwd); FIX=$(cd "$FIX" && pwd)
D="$TMP/trq_sdk"; rm -rf "$D" "$TMP/trq_run"; mkdir -p "$TMP/trq_run"
# convert from a relative source path: the manifest must still name absolute shards
M="$TMP/trq_sdk.manifest"; rm -f "$M"
( cd "$FIX" && "$BIN/quantpack" convert bitnet-float --to trlm -f -o "$D" --save-manifest "$M" >/dev/null ) || { echo "convert failed"; exit 1; }
# the SDK removes its manifest after quantizing (_manifest.py run_model_quantizer: finally
# _cleanup_paths): the bundle holds none
ok "no .quantize_manifest.bin in the TRLM folder" "[ ! -e '$D/.quantize_manifest.bin' ] && [ -s '$M' ]"
ok "the SDK's publish marker .trillim-quantize-complete (ready)" "grep -qx ready '$D/.trillim-quantize-complete'"
"$BIN/quantpack" convert "$FIX/bitnet-float" --to trlm -o "$TMP/trq_run/x" --save-manifest "$M" >/dev/null 2>"$TMP/trq_err"; rc=$?
ok "--save-manifest onto an existing file without -f: exit 4, nothing written (rc $rc)" \
  "[ $rc -eq 4 ] && grep -q 'exists' '$TMP/trq_err' && [ ! -e '$TMP/trq_run/x' ]"
R=${QP_REAL_FIXTURES:-}
if [ -n "$R" ] && [ -f "$R/stories260K.gguf" ]; then
  "$BIN/quantpack" convert "$R/stories260K.gguf" --to trlm -o "$TMP/trq_run/g" --save-manifest "$TMP/trq_run/g.m" >/dev/null 2>"$TMP/trq_err"; rc=$?
  ok "--save-manifest with a GGUF source (staged HF copy): exit 2 naming why (rc $rc)" \
    "[ $rc -eq 2 ] && grep -q 'staged copy' '$TMP/trq_err' && [ ! -e '$TMP/trq_run/g.m' ] && [ ! -e '$TMP/trq_run/g' ]"
  "$BIN/quantpack" convert "$R/stories260K.gguf" --to trlm -o "$TMP/trq_run/g" >/dev/null 2>&1
  ok "a GGUF source's TRLM folder holds no manifest either" "[ -s '$TMP/trq_run/g/qmodel.tensors' ] && [ ! -e '$TMP/trq_run/g/.quantize_manifest.bin' ]"
fi
first=$(od -An -tu2 -j2 -N2 "$M" | tr -d ' ')           # u16 length of shard 0's path
p0=$(dd if="$M" bs=1 skip=4 count="$first" 2>/dev/null)
ok "shard path is absolute ($p0)" "[ \"\${p0:0:1}\" = / ] && [ -f '$p0' ]"
# the SDK's command line (config of bitnet-float: hidden 128, intermediate 256 -> same padded)
read -r -a C < "$D/inference.config"
sdk_args() { echo --manifest "$1" --output "$2/qmodel.tensors" --arch "${C[0]}" --hidden-dim "${C[2]}" \
  --intermediate-dim "${C[3]}" --hidden-dim-orig "${C[2]}" --intermediate-dim-orig "${C[3]}" \
  --norm-eps "${C[10]}" --rope-output "$2/rope.cache" --rope-theta "${C[11]}" --max-pos "${C[9]}" \
  --head-dim "${C[8]}" --rope-dim "${C[8]}"; }
O="$TMP/trq_run/out"; mkdir -p "$O"
( cd / && "$BIN/trillim-quantize" $(sdk_args "$M" "$O") --tie-embeddings >/dev/null 2>"$TMP/trq_err" )
ok "trillim-quantize from / with the SDK's flags (exit $?: $(head -c 200 "$TMP/trq_err"))" "[ -s '$O/qmodel.tensors' ]"
ok "same qmodel.tensors as convert" "cmp -s '$O/qmodel.tensors' '$D/qmodel.tensors'"
ok "same rope.cache as convert" "cmp -s '$O/rope.cache' '$D/rope.cache'"
# convert writes the current SDK's form (build_manifest): the entries, then u32 n_sections = 1 and
# {u8 1 TEXT_CORE, u32 first 0, u32 count n_entries}, nothing after (no LoRA)
n_ent=$(od -An -tu4 -j$((4 + first)) -N4 "$M" | tr -d ' ')
sec_at=$((8 + first + 55 * n_ent))
ok "manifest = entries + one 9-byte section ($(stat -c %s "$M") bytes)" "[ $(stat -c %s "$M") -eq $((sec_at + 13)) ]"
ok "sections block: 1 x {TEXT_CORE, 0, $n_ent}" \
  "[ '$(od -An -tu4 -j$sec_at -N4 "$M" | tr -d ' ') $(od -An -tu1 -j$((sec_at + 4)) -N1 "$M" | tr -d ' ') $(od -An -tu4 -j$((sec_at + 5)) -N8 "$M" | tr -s ' ' | sed 's/^ //')' = '1 1 0 $n_ent' ]"
ok "the embedding (entry 0) is BF16_RAW, every projection TERNARY_QUANTIZE (--quantization auto)" \
  "[ '$(for ((i = 0; i < n_ent; i++)); do od -An -tu1 -j$((8 + first + 55 * i)) -N1 "$M"; done | tr -d ' \n')' = '$(for ((i = 0; i < n_ent; i++)); do c=$(od -An -tu4 -j$((8 + first + 55 * i + 6)) -N4 "$M" | tr -d ' '); [ $i -gt 0 ] && [ "$c" -gt 1 ] && printf 1 || printf 0; done)' ]"
M2="$TMP/trq_run/sdk.manifest"; cp "$M" "$M2"
O2="$TMP/trq_run/out2"; mkdir -p "$O2"
"$BIN/trillim-quantize" $(sdk_args "$M2" "$O2") --tie-embeddings >/dev/null 2>"$TMP/trq_err"
ok "the sections form quantizes (exit $?: $(head -c 200 "$TMP/trq_err"))" "cmp -s '$O2/qmodel.tensors' '$D/qmodel.tensors'"
# set_actions MANIFEST ACTION EMBED_TOO: every 2-D entry (cols > 1) gets ACTION (the embedding,
# entry 0, only when EMBED_TOO=1, else action 0 as the current SDK writes it); for action 7 the
# padded rows are rounded up to 32 as the SDK's _round_up does.
set_actions() {
  local M=$1 A=$2 E=$3 plen n i o cols rows pr
  plen=$(od -An -tu2 -j2 -N2 "$M" | tr -d ' ')
  n=$(od -An -tu4 -j$((4 + plen)) -N4 "$M" | tr -d ' ')
  for ((i = 0; i < n; i++)); do
    o=$((8 + plen + 55 * i))
    cols=$(od -An -tu4 -j$((o + 6)) -N4 "$M" | tr -d ' ')
    [ "$cols" -gt 1 ] || continue
    local a=$A; [ $i -eq 0 ] && [ "$E" != 1 ] && a=0
    printf "\\$(printf %03o $a)" | dd of="$M" bs=1 seek=$o conv=notrunc 2>/dev/null
    if [ "$a" = 7 ]; then
      pr=$(od -An -tu4 -j$((o + 10)) -N4 "$M" | tr -d ' '); pr=$(( (pr + 31) / 32 * 32 ))
      printf "\\$(printf %03o $((pr & 255)))\\$(printf %03o $((pr >> 8 & 255)))\\$(printf %03o $((pr >> 16 & 255)))\\000" |
        dd of="$M" bs=1 seek=$((o + 10)) conv=notrunc 2>/dev/null
    fi
  done
}
# every action the current SDK writes, on bitnet-float (exactly ternary projections, BF16 embedding
# tied): the TRLM runs, and verify against the source holds per action (converters/trillim_sdk.md
# "Measured"): BF16_RAW everywhere and TG128 projections are exact; Q8_0 / Q8_0_B32 projections
# pass the default 8-bit class; with the embedding quantized too (Bonsai's rule) Q8_0 keeps cosine
# >= 0.99; Q1_0_128 of ternary weights is not logit-preserving (it only runs here; its exactness
# on sign-valued groups is golden.trlm_sdk_actions').
act_case() { # action embed_too verify-args...
  local a=$1 em=$2; shift 2
  local O3="$TMP/trq_run/a$a$em" M3="$TMP/trq_run/m$a$em"
  rm -rf "$O3"; mkdir -p "$O3"; cp "$M2" "$M3"; set_actions "$M3" "$a" "$em"
  cp "$FIX"/bitnet-float/*.json "$O3/"
  "$BIN/trillim-quantize" $(sdk_args "$M3" "$O3") --tie-embeddings >/dev/null 2>"$TMP/trq_err"
  ok "action $a (embedding too: $em) quantizes ($(head -c 160 "$TMP/trq_err"))" "[ -s '$O3/qmodel.tensors' ]"
  local ids; ids=$("$BIN/quantpack" run "$O3" --ids "406 11 58 149" -n 6 2>/dev/null | tr -s ' \n' ' ')
  ok "action $a (embedding too: $em) runs ($ids)" "[ -n '$ids' ]"
  [ $# -gt 0 ] || return 0
  "$BIN/quantpack" verify "$O3" --against "$FIX/bitnet-float" -n 16 "$@" >"$TMP/trq_verify" 2>&1; local rc=$?
  ok "action $a (embedding too: $em) verifies $* (exit $rc: $(grep -m1 'cosine' "$TMP/trq_verify"))" "[ $rc -eq 0 ]"
}
act_case 0 1 --min-cosine 0.99999
act_case 5 0 --min-cosine 0.99999 --min-top1 1
act_case 6 0
act_case 7 0
act_case 6 1 --min-cosine 0.99 --max-kl 0.2 --min-top1 0.85
act_case 7 1 --min-cosine 0.99 --max-kl 0.2 --min-top1 0.85
act_case 4 0
act_case 4 1
act_case 5 1
# YaRN as the SDK passes it (rope_scaling {"rope_type": "yarn", "factor": 4.0,
# "original_max_position_embeddings": 64, "beta_fast": 32.0, "beta_slow": 1.0}, then the same
# without betas = HF's defaults): every rope.cache value against Hugging Face's
# _compute_yarn_parameters evaluated here in node (double, rounded to f32), the trailer fields,
# and the runtime using it (the logits move against the plain-rope TRLM).
yarn_case() { # name extra-args
  local OY="$TMP/trq_run/yarn_$1"; rm -rf "$OY"; mkdir -p "$OY"; cp "$FIX"/bitnet-float/*.json "$OY/"
  "$BIN/trillim-quantize" $(sdk_args "$M2" "$OY") --tie-embeddings $2 >/dev/null 2>"$TMP/trq_err"
  ok "yarn $1 quantizes ($(head -c 160 "$TMP/trq_err"))" "[ -s '$OY/rope.cache' ]"
  local res; res=$(node -e '
    const b = require("fs").readFileSync(process.argv[1]);
    const [factor, orig, bf, bs] = process.argv.slice(2).map(Number);
    const maxPos = b.readUInt32LE(12), dim = b.readUInt32LE(16), base = b.readDoubleLE(20), half = dim / 2;
    const corr = (rot) => (dim * Math.log(orig / (rot * 2 * Math.PI))) / (2 * Math.log(base));
    let low = Math.max(Math.floor(corr(bf)), 0), high = Math.min(Math.ceil(corr(bs)), dim - 1);
    if (low === high) high += 0.001;
    const mscale = factor <= 1 ? 1 : 0.1 * Math.log(factor) + 1;
    let worst = 0;
    for (let i = 0; i < half; i++) {
      const posFreq = Math.pow(base, (2 * i) / dim), extra = 1 / posFreq, inter = 1 / (factor * posFreq);
      const ramp = Math.min(Math.max((i - low) / (high - low), 0), 1), ef = 1 - ramp;
      const inv = inter * (1 - ef) + extra * ef;
      for (let p = 0; p < maxPos; p++) {
        const c = Math.fround(Math.cos(p * inv) * mscale), s = Math.fround(Math.sin(p * inv) * mscale);
        const at = 28 + 4 * (p * half + i);
        worst = Math.max(worst, Math.abs(b.readFloatLE(at) - c), Math.abs(b.readFloatLE(at + 4 * maxPos * half) - s));
      }
    }
    const t = 28 + 8 * maxPos * half;
    const trailer = b.toString("latin1", t, t + 4) === "YARN" && b.readUInt32LE(t + 4) === dim &&
      b.readDoubleLE(t + 8) === factor && b.readUInt32LE(t + 16) === orig && b.readDoubleLE(t + 24) === bf &&
      b.readDoubleLE(t + 32) === bs && Math.abs(b.readDoubleLE(t + 40) - mscale) < 1e-15 && b.length === t + 48;
    console.log(worst, trailer);' "$OY/rope.cache" 4.0 64 32.0 1.0 2>&1)
  ok "yarn $1: rope.cache == HF YaRN formula (max |diff|, trailer: $res)" "node -e 'const [w,t]=process.argv.slice(1);process.exit(Number(w)<=2e-7&&t===\"true\"?0:1)' $res"
  "$BIN/quantpack" verify "$OY" --against "$O2" -n 8 >"$TMP/trq_verify" 2>&1
  local diff; diff=$(grep -m1 -o 'max |diff| [0-9.e+-]*' "$TMP/trq_verify")
  ok "yarn $1: the runtime applies it (logits vs plain rope: $diff)" "[ -n '$diff' ] && [ '$diff' != 'max |diff| 0' ]"
}
cp "$FIX"/bitnet-float/*.json "$O2/"
yarn_case betas "--yarn-factor 4.0 --yarn-orig-max-pos 64 --yarn-beta-fast 32.0 --yarn-beta-slow 1.0"
yarn_case defaults "--yarn-factor 4.0 --yarn-orig-max-pos 64"
# a corrupt YARN trailer (readers/trlm.c read_yarn_trailer): each patch of the betas bundle's
# rope.cache is refused when the model is opened, exit 3, naming the file and the trailer's offset
YB="$TMP/trq_run/yarn_betas"; YT=$(( $(stat -c %s "$YB/rope.cache") - 48 ))
yarn_bad() { # name, byte offset in the trailer, bytes (printf escapes), stderr fragment
  local OB="$TMP/trq_run/yarn_bad"; rm -rf "$OB"; cp -r "$YB" "$OB"
  printf "$3" | dd of="$OB/rope.cache" bs=1 seek=$((YT + $2)) conv=notrunc 2>/dev/null
  "$BIN/quantpack" inspect "$OB" >/dev/null 2>"$TMP/trq_err"; local rc=$?
  ok "yarn trailer $1 refused (exit $rc: $(head -c 200 "$TMP/trq_err"))" \
    "[ $rc -eq 3 ] && grep -q 'rope.cache: offset $YT' '$TMP/trq_err' && grep -q '$4' '$TMP/trq_err'"; }
yarn_bad "magic" 0 'YARM' "not a YARN trailer"
yarn_bad "rope dim" 4 '\x07' "out of range"
yarn_bad "factor 0.5" 8 '\x00\x00\x00\x00\x00\x00\xe0\x3f' "factor 0.5"
yarn_bad "factor NaN" 8 '\xff\xff\xff\xff\xff\xff\xff\x7f' "out of range"
yarn_bad "original positions 0" 16 '\x00\x00\x00\x00' "original positions 0"
yarn_bad "attention factor" 40 '\x00\x00\x00\x00\x00\x00\x00\x40' "attention factor 2"
OB="$TMP/trq_run/yarn_bad"; rm -rf "$OB"; cp -r "$YB" "$OB"; truncate -s -1 "$OB/rope.cache"
"$BIN/quantpack" inspect "$OB" >/dev/null 2>"$TMP/trq_err"; rc=$?
ok "rope.cache one byte short of its trailer refused (exit $rc: $(head -c 200 "$TMP/trq_err"))" \
  "[ $rc -eq 3 ] && grep -q 'YARN trailer' '$TMP/trq_err'"
refused() { # name, extra args, stderr fragment
  "$BIN/trillim-quantize" $(sdk_args "$M2" "$O2") --tie-embeddings $2 >/dev/null 2>"$TMP/trq_err"; local rc=$?
  ok "$1 (exit $rc: $(head -c 160 "$TMP/trq_err"))" "[ $rc -eq 3 ] && grep -q '$3' '$TMP/trq_err'"; }
# 3 runs Qwen3.5 layers (e2e.trillim_qwen35), 4-6 Qwen3 layers (e2e.trillim_qwen3): this
# Llama-layout manifest fits none of them
refused "--arch 3 with a Llama-layout manifest refused" "--arch 3" "Qwen3.5 layer layouts"
for a in 4 5 6; do refused "--arch $a with a Llama-layout manifest refused" "--arch $a" "Qwen3 layer layout"; done
refused "partial rotary refused" "--rope-dim 8" "partial rotary"
"$BIN/trillim-quantize" $(sdk_args "$M2" "$O2") --arch 9 >/dev/null 2>&1; rc=$?
ok "--arch 9 is refused as usage (exit $rc)" "[ $rc -eq 2 ]"
"$BIN/trillim-quantize" $(sdk_args "$M2" "$O2") --tie-embeddings --yarn-factor 4.0 >/dev/null 2>"$TMP/trq_err"; rc=$?
ok "--yarn-factor without --yarn-orig-max-pos is a usage error (exit $rc)" "[ $rc -eq 2 ] && grep -q 'go together' '$TMP/trq_err'"
finish
