#!/usr/bin/env bash
# LoRA as the current Trillim SDK ships it (converters/trillim_sdk.md "LoRA adapter bundles"):
# `convert MODEL --to trlm --lora PEFT --adapter-only -o OUT` is `trillim quantize MODEL ADAPTER`
# (quantize/_entrypoint.py: with an adapter only the adapter bundle is written). Checked against
# the SDK's code, evaluated here in node:
# - the adapter-only manifest (_manifest.py build_manifest skip_model=True: one shard, the
#   adapter's absolute path; 0 entries; 0 sections; the LoRA block of _build_lora_entries);
# - the folder (copy_adapter_support_files: the adapter's files without its weights,
#   tokenizer_config.json rewritten without tokenizer_class; qmodel.lora; trillim_config.json of
#   write_adapter_metadata, byte for byte; no manifest, no .unused-qmodel.tensors, no model);
# - trillim-inference with the SDK engine's exchange (_build_init_block with lora_dir, two turns
#   with the delta after kv_position, stop `0`): the same ids as v1's `inference --lora BUNDLE`
#   and as the model folder converted with the LoRA merged, different from the base model's;
#   an adapter bundle of another base model (config hash) and one without a hash refused, exit 3;
#   --adapter-only without --lora or with --quant refused, exit 2.
set -u
. "$(dirname "$0")/trillim_util.sh"
trillim_workdir trlm_lora_bundle bitnet-float
P="$W/peft"; peft_adapter "$P" || { echo "FAIL: adapter"; exit 1; }
# a PEFT folder as `save_pretrained` leaves it, with files the SDK copies and skips
node -e 'const fs = require("fs"), p = process.argv[1] + "/adapter_config.json", j = JSON.parse(fs.readFileSync(p));
j.base_model_name_or_path = "org/bitnet-float"; fs.writeFileSync(p, JSON.stringify(j));' "$P"
printf '{"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 256, "extra": [1, 2.5, {}], "unicode": "\\u00e9"}' > "$P/tokenizer_config.json"
printf 'an adapter\n' > "$P/README.md"; printf 'x' > "$P/adapter_model.bin"; mkdir -p "$P/checkpoint-1"; printf 'x' > "$P/old.tmp"
# subfolders: the SDK's rglob copies their files (its skip rule on each file's name at any depth,
# nothing under __pycache__, config/tokenizer_config.json rewritten at the top level only; an
# empty folder is not made: shutil.copy2 makes a destination's parents per file)
mkdir -p "$P/extra/deep" "$P/extra/__pycache__" "$P/__pycache__"
printf 'notes\n' > "$P/extra/notes.txt"; printf '{"tokenizer_class": "X"}' > "$P/extra/tokenizer_config.json"
printf '{{ messages }}' > "$P/extra/deep/chat_template.jinja"; printf 'x' > "$P/extra/adapter_model.bin"
printf 'x' > "$P/extra/qmodel.lora"; printf 'x' > "$P/extra/a.pyc"; printf 'x' > "$P/extra/__pycache__/n.txt"
printf 'x' > "$P/__pycache__/m.cpython-312.pyc"
# an adapter's own tokenizer and chat template (a fine-tune that added tokens): copied as they are
printf '{"version": "1.0"}' > "$P/tokenizer.json"; printf '{%% for m in messages %%}{{ m.content }}{%% endfor %%}' > "$P/chat_template.jinja"

B="$W/peft-TRNQ"
"$BIN/quantpack" convert "$FIX/bitnet-float" --to trlm --lora "$P" --adapter-only -o "$B" --save-manifest "$W/ad.manifest" >"$W/out" 2>&1
check "convert --adapter-only ($(head -c 200 "$W/out"))" "[ -s '$B/qmodel.lora' ]"
check "bundle files: the adapter's (no weights, no .tmp, no empty folder) + qmodel.lora + trillim_config.json + the SDK's publish marker ($(ls -A "$B" | tr '\n' ' '))" \
  "[ '$(ls -A "$B" | tr '\n' ' ')' = '.trillim-quantize-complete README.md adapter_config.json chat_template.jinja extra qmodel.lora tokenizer.json tokenizer_config.json trillim_config.json ' ]"
check "the adapter's tokenizer.json and chat_template.jinja copied as they are" \
  "cmp -s '$P/tokenizer.json' '$B/tokenizer.json' && cmp -s '$P/chat_template.jinja' '$B/chat_template.jinja'"
F=$(cd "$B/extra" && find . | LC_ALL=C sort | tr '\n' ' ')
check "subfolder files as the SDK's rglob copies them ($F)" \
  "[ '$F' = '. ./deep ./deep/chat_template.jinja ./notes.txt ./tokenizer_config.json ' ]"
check "a subfolder's files copied as they are (tokenizer_config.json not rewritten there)" \
  "cmp -s '$P/extra/tokenizer_config.json' '$B/extra/tokenizer_config.json' && cmp -s '$P/extra/deep/chat_template.jinja' '$B/extra/deep/chat_template.jinja'"
check "README.md and adapter_config.json copied as they are" "cmp -s '$P/README.md' '$B/README.md' && cmp -s '$P/adapter_config.json' '$B/adapter_config.json'"

# the SDK's adapter-only manifest, trillim_config.json and sanitized tokenizer_config.json
node - "$FIX/bitnet-float" "$P" "$W" <<'EOF' || echo "FAIL: node expectations"
const fs = require('fs'), crypto = require('crypto'), [model, peft, w] = process.argv.slice(2);
const cfg = JSON.parse(fs.readFileSync(model + '/config.json')), ac = JSON.parse(fs.readFileSync(peft + '/adapter_config.json'));
const st = fs.realpathSync(peft) + '/adapter_model.safetensors', b = fs.readFileSync(st);
const hl = Number(b.readBigUInt64LE(0)), hdr = JSON.parse(b.slice(8, 8 + hl).toString()), start = 8 + hl;
const T = ['self_attn.k_proj', 'self_attn.v_proj', 'self_attn.q_proj', 'self_attn.o_proj', 'mlp.gate_proj', 'mlp.up_proj', 'mlp.down_proj'];
const dt = {F32: 0, F16: 1, BF16: 2, I8: 3, U8: 4}, out = [];
const u = (v, n) => { const x = Buffer.alloc(n); if (n === 8) x.writeBigUInt64LE(BigInt(v)); else x.writeUIntLE(v, 0, n); out.push(x); };
u(1, 2); u(Buffer.byteLength(st), 2); out.push(Buffer.from(st)); u(0, 4); u(0, 4);     // shards; 0 entries; 0 sections
u(cfg.num_hidden_layers, 4); u(T.length, 4);
const r = ac.r, alpha = ac.lora_alpha ?? r, scale = Buffer.alloc(8); scale.writeDoubleLE(alpha / (ac.use_rslora ? Math.sqrt(r) : r)); out.push(scale);
const key = (l, t, p) => [`base_model.model.model.layers.${l}.${t}.lora_${p}.weight`, `model.layers.${l}.${t}.lora_${p}.weight`].find((k) => k in hdr);
for (let l = 0; l < cfg.num_hidden_layers; l++)
  for (const t of T) {
    const ka = key(l, t, 'A'), kb = key(l, t, 'B');
    if (!ka || !kb) { u(0, 1); continue; }
    u(1, 1);
    for (const k of [ka, kb]) { const i = hdr[k]; u(dt[i.dtype], 1); u(i.shape[0], 4); u(i.shape[1], 4); u(0, 2); u(start + i.data_offsets[0], 8); u(i.data_offsets[1] - i.data_offsets[0], 8); }
  }
fs.writeFileSync(w + '/expect.manifest', Buffer.concat(out));
// compute_base_model_config_hash: sort_keys, compact separators
const id = {architectures: cfg.architectures, hidden_size: cfg.hidden_size, intermediate_size: cfg.intermediate_size,
  num_attention_heads: cfg.num_attention_heads, num_hidden_layers: cfg.num_hidden_layers,
  num_key_value_heads: cfg.num_key_value_heads ?? cfg.num_attention_heads, vocab_size: cfg.vocab_size};
const hash = crypto.createHash('sha256').update(JSON.stringify(id)).digest('hex');
const meta = {trillim_version: '0.11.0', format_version: 5, type: 'lora_adapter', quantization: 'ternary',
  source_model: ac.base_model_name_or_path, architecture: 'bitnet', platforms: ['x86_64', 'aarch64'],
  base_model_config_hash: hash, remote_code: false};
fs.writeFileSync(w + '/expect.trillim_config.json', JSON.stringify(meta, null, 2) + '\n');
// _write_json(_sanitize_adapter_tokenizer_loader_fields(payload)); json.dumps escapes non-ASCII
const tc = JSON.parse(fs.readFileSync(peft + '/tokenizer_config.json')); delete tc.tokenizer_class;
const ascii = (s) => s.replace(/[\u0080-\uffff]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
fs.writeFileSync(w + '/expect.tokenizer_config.json', ascii(JSON.stringify(tc, null, 2)) + '\n');
EOF
check "adapter-only manifest == build_manifest(skip_model=True) ($(stat -c %s "$W/expect.manifest") bytes)" "cmp -s '$W/expect.manifest' '$W/ad.manifest'"
check "trillim_config.json == write_adapter_metadata's ($(tr -d '\n' < "$B/trillim_config.json" | head -c 120))" \
  "cmp -s '$W/expect.trillim_config.json' '$B/trillim_config.json'"
check "tokenizer_config.json == the SDK's sanitized rewrite" "cmp -s '$W/expect.tokenizer_config.json' '$B/tokenizer_config.json'"

# the model, and the model with the LoRA in its own folder (the v1 form)
"$BIN/quantpack" convert "$FIX/bitnet-float" --to trlm -o "$W/base" >/dev/null 2>&1
"$BIN/quantpack" convert "$FIX/bitnet-float" --to trlm --lora "$P" -o "$W/merged" >/dev/null 2>&1
check "qmodel.lora of the bundle == the one written beside the model" "cmp -s '$B/qmodel.lora' '$W/merged/qmodel.lora'"
init() { # LORA_DIR (empty: none)
  local pairs=(arch_type=1 activation=0 hidden_dim=128 intermediate_dim=256 num_layers=2 num_heads=4
    num_kv_heads=2 vocab_size=408 head_dim=32 max_position_embeddings=256 norm_eps=1e-05
    rope_theta=500000.0 tie_word_embeddings=1 has_qkv_bias=0 has_attn_sub_norm=1 has_ffn_sub_norm=1
    quantization=ternary eos_tokens=407)
  [ -n "$1" ] && pairs+=("lora_dir=$1")
  echo ${#pairs[@]}; printf '%s\n' "${pairs[@]}"; }
ex() { { init "$2"; req 0 406,11,58,149 5; req 9 5,17 3; echo 0; } | timeout 60 "$BIN/trillim-inference" "$1" 2>"$W/err" | tr '\n' ' '; echo "rc=${PIPESTATUS[1]}"; }
L=$(ex "$W/base" "$B"); N=$(ex "$W/base" ""); M=$(ex "$W/merged" "$W/merged")
V=$( { printf '4\n1\n0\n50\n0.9\n1.0\n64\n5\n'; printf '%s\n' 406 11 58 149; printf '2\n0\n0\n50\n0.9\n1.0\n64\n3\n5\n17\n0\n'; } |
     timeout 60 "$BIN/inference" "$W/base" --config $(cat "$W/base/inference.config") --lora "$B" | tr '\n' ' ')
check "lora_dir=BUNDLE: 5 ids + EOS + kv 9, 3 ids + EOS + kv 14, exit 0 ($L)" \
  "[ \$(echo '$L' | wc -w) -eq 13 ] && [[ '$L' == *' 407 14 rc=0' ]]"
check "the same lines as v1 inference --lora BUNDLE ($V)" "[ '${V}rc=0' = '$L' ]"
check "the same lines as the model folder with qmodel.lora beside it ($M)" "[ '$M' = '$L' ]"
check "different from the base model's ($N)" "[ '$N' != '$L' ]"

# refusals: another base model, a bundle without its hash, the CLI's adapter-only rules
"$BIN/quantpack" convert "$FIX/qwen3" --to trlm -o "$W/other" >/dev/null 2>&1
{ printf '%s\n' 19 arch_type=6 activation=1 hidden_dim=256 intermediate_dim=512 num_layers=2 num_heads=4 num_kv_heads=2 \
  vocab_size=408 head_dim=128 max_position_embeddings=256 norm_eps=1e-06 rope_theta=1000000.0 tie_word_embeddings=0 \
  has_qkv_bias=0 has_attn_sub_norm=0 has_ffn_sub_norm=0 quantization=bf16 eos_tokens=407 "lora_dir=$B"; req 0 406 1; } |
  timeout 60 "$BIN/trillim-inference" "$W/other" >/dev/null 2>"$W/err"; rc=$?
check "the bundle on another base model: exit 3, adapter/model mismatch (rc $rc)" "[ $rc -eq 3 ] && grep -q 'adapter/model mismatch' '$W/err'"
cp -r "$B" "$W/nohash"; sed -i '/base_model_config_hash/d' "$W/nohash/trillim_config.json"
{ init "$W/nohash"; req 0 406 1; } | timeout 60 "$BIN/trillim-inference" "$W/base" >/dev/null 2>"$W/err"; rc=$?
check "a bundle without base_model_config_hash: exit 3 (rc $rc)" "[ $rc -eq 3 ] && grep -q 'base_model_config_hash' '$W/err'"
# _read_adapter_metadata's refusals (a tensor the model has no slot for is not silently dropped)
peft_adapter "$W/p_head" '{"self_attn.q_proj": [128, 128], "lm_head": [408, 128]}'
"$BIN/quantpack" convert "$FIX/bitnet-float" --to trlm --lora "$W/p_head" --adapter-only -o "$W/x0" >/dev/null 2>"$W/err"; rc=$?
check "an adapter tensor outside the 7 targets: exit 3 naming it (rc $rc)" "[ $rc -eq 3 ] && grep -q 'lm_head.lora_A' '$W/err' && [ ! -e '$W/x0' ]"
peft_adapter "$W/p_tm"; sed -i 's/"down_proj"\]/"down_proj","embed_tokens"]/' "$W/p_tm/adapter_config.json"
"$BIN/quantpack" convert "$FIX/bitnet-float" --to trlm --lora "$W/p_tm" --adapter-only -o "$W/x0" >/dev/null 2>"$W/err"; rc=$?
check "target_modules naming embed_tokens: exit 3 (rc $rc)" "[ $rc -eq 3 ] && grep -q 'embed_tokens' '$W/err'"
"$BIN/quantpack" convert "$FIX/bitnet-float" --to trlm --adapter-only -o "$W/x1" >/dev/null 2>"$W/err"; rc=$?
check "--adapter-only without --lora: exit 2 (rc $rc)" "[ $rc -eq 2 ] && [ ! -e '$W/x1' ]"
"$BIN/quantpack" convert "$FIX/bitnet-float" --to trlm --lora "$P" --adapter-only --quant q8_0 -o "$W/x2" >/dev/null 2>"$W/err"; rc=$?
check "--adapter-only with --quant: exit 2, as the SDK's quantize() (rc $rc)" "[ $rc -eq 2 ] && grep -q 'base model' '$W/err' && [ ! -e '$W/x2' ]"
"$BIN/quantpack" convert "$FIX/bitnet-float" --to trlm --lora "$P" --adapter-only -f -o "$W/merged" >/dev/null 2>"$W/err"; rc=$?
check "-f onto a model folder holding qmodel.lora: exit 4, the model kept (rc $rc)" \
  "[ $rc -eq 4 ] && grep -q 'folder of its own' '$W/err' && grep -q '\"type\": \"model\"' '$W/merged/trillim_config.json'"
"$BIN/quantpack" convert "$FIX/bitnet-float" --to trlm --lora "$P" --adapter-only -o "$B" >/dev/null 2>"$W/err"; rc=$?
check "an existing bundle is not replaced without -f (rc $rc)" "[ $rc -eq 4 ]"
"$BIN/quantpack" convert "$FIX/bitnet-float" --to trlm --lora "$P" --adapter-only -f -o "$B" >/dev/null 2>"$W/err"; rc=$?
check "-f replaces it (rc $rc)" "[ $rc -eq 0 ] && cmp -s '$W/expect.trillim_config.json' '$B/trillim_config.json'"
rm -rf "$W"
finish
