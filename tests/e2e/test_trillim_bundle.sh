#!/usr/bin/env bash
# trillim_config.json as the current Trillim SDK writes it (quantize/_output.py write_model_metadata,
# _bundle_metadata.py compute_base_model_config_hash; json.dumps(indent=2) + "\n", ensure_ascii):
# the expected bytes are built here in node from the SDK's rules (JSON.stringify with Python's
# ASCII escapes, SHA-256 of the sorted compact identity object), never from our output. Cases:
# bitnet-float (auto = "ternary"), a llama folder with a non-ASCII _name_or_path, an AutoTokenizer
# auto_map (remote_code true), text_config folded into the hash, each --quant's name and the
# manifest's actions for it. Then the reader: the bundle's fields as metadata, a v1 folder without
# trillim_config.json still runs, bad bundles refused (exit 3 naming the field), and
# trillim-inference's quantization= checked against the bundle. converters/trillim_sdk.md.
set -u
BIN=${QP_BIN_DIR:-bin}; FIX=${QP_FIXTURES_DIR:-fixtures}; TMP=${QP_TMP_DIR:-test-tmp}
[ -f "$FIX/bitnet-float/config.json" ] || { echo "skipped: no fixtures"; exit 77; }
. "$(dirname "$0")/trillim_util.sh"
mkdir -p "$TMP"; W="$TMP/trb"; rm -rf "$W"; mkdir -p "$W"

# expected FOLDER QUANT_NAME ARCH_NAME REMOTE: the SDK's payload for the HF folder's config.json
expected() {
  node - "$@" <<'EOF'
const fs = require('fs'), crypto = require('crypto');
const [dir, quant, arch, remote] = process.argv.slice(2);
const raw = JSON.parse(fs.readFileSync(dir + '/config.json', 'utf8'));
// canonicalize_model_config: text_config's keys win, architectures from the top level first
const tc = raw.text_config && typeof raw.text_config === 'object' && Object.keys(raw.text_config).length ? raw.text_config : null;
const cfg = tc ? {...raw, ...tc, architectures: 'architectures' in raw ? raw.architectures : tc.architectures} : raw;
const get = k => (k in cfg ? cfg[k] : null);
const heads = cfg.num_attention_heads, kv = 'num_key_value_heads' in cfg ? cfg.num_key_value_heads : heads;
const id = {architectures: 'architectures' in cfg ? cfg.architectures : [], hidden_size: get('hidden_size'),
  intermediate_size: get('intermediate_size'), num_attention_heads: heads, num_hidden_layers: get('num_hidden_layers'),
  num_key_value_heads: kv, vocab_size: get('vocab_size')};
const sorted = Object.keys(id).sort().reduce((o, k) => (o[k] = id[k], o), {});
const ascii = s => s.replace(/[\u007f-\uffff]/g, c => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
const hash = crypto.createHash('sha256').update(ascii(JSON.stringify(sorted))).digest('hex');
const payload = {trillim_version: '0.11.0', format_version: 5, type: 'model', quantization: quant,
  source_model: typeof raw._name_or_path === 'string' ? raw._name_or_path : '', architecture: arch,
  platforms: ['x86_64', 'aarch64'], base_model_config_hash: hash, remote_code: remote === 'true'};
process.stdout.write(ascii(JSON.stringify(payload, null, 2)) + '\n');
EOF
}
same_bundle() { # LABEL OUT_DIR HF_DIR QUANT ARCH REMOTE
  expected "$3" "$4" "$5" "$6" > "$W/expected.json"
  check "$1: trillim_config.json == the SDK's bytes ($(head -c 300 "$2/trillim_config.json" | tr '\n' ' '))" \
    "cmp -s '$W/expected.json' '$2/trillim_config.json'"
}
conv() { "$BIN/quantpack" convert "$@" -f >/dev/null 2>"$W/err"; }

conv "$FIX/bitnet-float" --to trlm -o "$W/bf"
same_bundle "bitnet-float, auto" "$W/bf" "$FIX/bitnet-float" ternary bitnet false

# a llama folder with a non-ASCII name, an AutoTokenizer reference and a text_config
L="$W/llama_src"; cp -r "$FIX/llama-tied" "$L"
node -e '
const fs = require("fs"), p = process.argv[1];
const c = JSON.parse(fs.readFileSync(p + "/config.json"));
c._name_or_path = "Trillim/Ünï-\"q\"-😀";
c.text_config = {vocab_size: c.vocab_size, architectures: ["Other"], num_key_value_heads: c.num_key_value_heads || c.num_attention_heads};
fs.writeFileSync(p + "/config.json", JSON.stringify(c, null, 1));
const t = fs.existsSync(p + "/tokenizer_config.json") ? JSON.parse(fs.readFileSync(p + "/tokenizer_config.json")) : {};
t.auto_map = {AutoTokenizer: ["tokenization_x.XTokenizer", null]};
fs.writeFileSync(p + "/tokenizer_config.json", JSON.stringify(t));' "$L"
for q in "q1_0_128 binary" "grouped_ternary_128 grouped-ternary" "int8 q8_0_blocked_32" "bf16 bf16" "q8_0 q8_0"; do
  set -- $q
  conv "$L" --to trlm --quant "$1" -o "$W/l_$1" --save-manifest "$W/l_$1.manifest"
  check "llama --quant $1 converts ($(head -c 200 "$W/err"))" "[ -s '$W/l_$1/qmodel.tensors' ]"
  same_bundle "llama --quant $1" "$W/l_$1" "$L" "$2" llama true
done
# the manifest's actions for a --quant: entry 0 (embedding) and 1-D entries BF16_RAW, every other
# 2-D entry the target's action; q8_0_blocked_32 rounds padded rows up to 32
actions() { # MANIFEST -> "action:padded_rows" per entry
  node -e '
const b = require("fs").readFileSync(process.argv[1]); let o = 2 + 2 + b.readUInt16LE(2);
const n = b.readUInt32LE(o); o += 4; const out = [];
for (let i = 0; i < n; i++, o += 55) out.push(b[o] + ":" + b.readUInt32LE(o + 2 + 4) + ":" + b.readUInt32LE(o + 2 + 8));
console.log(out.join(" "));' "$1"; }
for q in "q1_0_128 4" "grouped_ternary_128 5" "int8 7" "q8_0 6" "bf16 0"; do
  set -- $q
  A=$(actions "$W/l_$1.manifest")
  ok_acts=$(echo "$A" | tr ' ' '\n' | awk -F: -v a="$2" 'NR == 1 { if ($1 != 0) bad = 1; next }
    $2 == 1 { if ($1 != 0) bad = 1; next } { if ($1 != a) bad = 1; if (a == 7 && $3 % 32) bad = 1 }
    END { print bad ? "no" : "yes" }')
  check "--quant $1: embedding and 1-D BF16_RAW, projections action $2 ($A)" "[ $ok_acts = yes ]"
done
ids=$("$BIN/quantpack" run "$W/l_int8" --ids "1 2 3" -n 4 --temp 0 --print-ids 2>"$W/err")
check "the q8_0_blocked_32 TRLM runs ($ids $(head -c 200 "$W/err"))" "[ -n '$ids' ]"

# the reader: the bundle as metadata; a v1 folder without it; bad bundles
check "inspect shows the bundle's quantization" \
  "'$BIN/quantpack' inspect '$W/bf' | grep -q 'trillim.quantization.*\"ternary\"'"
cp -r "$W/bf" "$W/v1"; rm "$W/v1/trillim_config.json"
R0=$("$BIN/quantpack" run "$W/bf" --ids "406 11 58" -n 4 --temp 0 --print-ids 2>/dev/null)
R1=$("$BIN/quantpack" run "$W/v1" --ids "406 11 58" -n 4 --temp 0 --print-ids 2>/dev/null)
check "a v1 folder (no trillim_config.json) runs the same ids ($R1)" "[ -n '$R0' ] && [ '$R0' = '$R1' ]"
bad_bundle() { # LABEL NODE_EXPR MESSAGE
  rm -rf "$W/bad"; cp -r "$W/bf" "$W/bad"
  node -e "const fs=require('fs'),p=process.argv[1];let j=JSON.parse(fs.readFileSync(p));$2;fs.writeFileSync(p,typeof j==='string'?j:JSON.stringify(j))" \
    "$W/bad/trillim_config.json"
  "$BIN/quantpack" run "$W/bad" --ids "406" -n 1 >/dev/null 2>"$W/err"; local rc=$?
  check "$1: exit 3 naming it (exit $rc: $(head -c 240 "$W/err"))" "[ $rc -eq 3 ] && grep -q -- \"$3\" '$W/err'"
}
bad_bundle "format_version 3" "j.format_version=3" "format_version"
bad_bundle "format_version missing" "delete j.format_version" "format_version"
bad_bundle "an adapter bundle as the model" "j.type='lora_adapter'" "LoRA adapter bundle"
bad_bundle "architecture llama on a BitNet file" "j.architecture='llama'" "architecture 'llama'"
bad_bundle "quantization not a string" "j.quantization=5" "'quantization'"
bad_bundle "hash not hex" "j.base_model_config_hash='xyz'" "base_model_config_hash"
bad_bundle "not JSON" "j='{'" "not valid JSON"

# the activation is config.json's hidden_act as the SDK's runtime maps it (not forced for BitNet)
act_case() { # HIDDEN_ACT EXPECT(relu2|silu|refused)
  rm -rf "$W/act"; cp -r "$W/bf" "$W/act"
  node -e 'const fs=require("fs"),p=process.argv[1]+"/config.json";const c=JSON.parse(fs.readFileSync(p));c.hidden_act=process.argv[2];fs.writeFileSync(p,JSON.stringify(c))' "$W/act" "$1"
  "$BIN/quantpack" inspect "$W/act" >"$W/out" 2>"$W/err"; local rc=$?
  if [ "$2" = refused ]; then
    check "hidden_act $1 refused (exit $rc: $(head -c 200 "$W/err"))" "[ $rc -eq 3 ] && grep -q \"hidden_act '$1'\" '$W/err'"
  else
    check "hidden_act $1 on a BitNet TRLM runs $2 ($(grep -o 'activation [a-z0-9]*' "$W/out"))" "[ $rc -eq 0 ] && grep -q 'activation $2 ' '$W/out'"
  fi; }
act_case SiLU silu; act_case relu_sqr relu2; act_case swish silu; act_case gelu refused
# trillim-inference: quantization= is the bundle's quantization (the SDK reads it from there)
init() { # QUANT
  local pairs=(arch_type=1 activation=0 hidden_dim=128 intermediate_dim=256 num_layers=2 num_heads=4
    num_kv_heads=2 vocab_size=408 head_dim=32 max_position_embeddings=64 norm_eps=1e-05
    rope_theta=500000.0 tie_word_embeddings=1 has_qkv_bias=0 has_attn_sub_norm=1 has_ffn_sub_norm=1
    "quantization=$1" eos_tokens=407)
  echo ${#pairs[@]}; printf '%s\n' "${pairs[@]}"; }
req='8
kv_position=0
tokens=406,11,58
temperature=0
top_k=50
top_p=0.9
repetition_penalty=1.0
rep_penalty_lookback=64
max_tokens=3'
for m in "bf ternary 0" "bf '' 0" "v1 binary 0" "bf binary 3"; do
  eval "set -- $m"
  { init "$2"; echo "$req"; } | timeout 60 "$BIN/trillim-inference" "$W/$1" >"$W/out" 2>"$W/err"; rc=$?
  check "trillim-inference $1 quantization='$2': exit $3 (got $rc: $(head -c 200 "$W/err"))" \
    "[ $rc -eq $3 ] && { [ $3 -ne 0 ] || [ \$(wc -l < '$W/out') -eq 5 ]; } && { [ $3 -eq 0 ] || grep -q \"quantization 'binary'\" '$W/err'; }"
done
finish
