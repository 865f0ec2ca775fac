#!/usr/bin/env bash
# Qwen3 TRLM as the current Trillim SDK makes it (--arch 6 QWEN3, 4 BONSAI, 5 BONSAI_TERNARY:
# converters/trillim_sdk.md). From the generated Qwen3 HF fixture (untied lm_head, per-head
# q_norm/k_norm [128], head_dim 128 != hidden/heads):
# and a tied copy (lm_head.weight removed, tie_word_embeddings true: the SDK writes no lm_head entry),
# and a copy tied in config.json that keeps lm_head.weight (the SDK drops it: no entry either),
# and copies with attention_bias (q/k/v biases: records after their weights; an o bias refused):
# - the manifest convert --to trlm writes equals, byte for byte, the one computed here in node by
#   the SDK's build_manifest rules (quantize/_manifest.py + _config.py's Qwen3 component_order:
#   sort key, padding, _quantization_target_action per arch, Bonsai quantizing embedding and
#   lm_head, _round_up(rows, 32) for action 7, one TEXT_CORE section), for QWEN3 auto (bf16),
#   QWEN3 q8_0_blocked_32, tied QWEN3 auto and q8_0, BONSAI auto (q1_0_128) and BONSAI_TERNARY
#   auto (grouped ternary): actions 0, 4, 5, 6, 7;
# - every qmodel.tensors record (kind of the action, role of the Qwen3 order, layer, shape, size by
#   the kind's block formula, data offset = the previous end aligned to 64) follows from that
#   manifest; trillim_config.json names the arch and the SDK's quantization name;
# - the TRLM runs and verifies against its source (BF16: max |diff| 0; q8_0: the 8-bit class);
# - trillim-inference with the SDK's init block (arch_type 6 / 4) gives `quantpack run --ids`'
#   ids; a wrong arch_type is refused; a Qwen3 checkpoint labelled Qwen3_5ForConditionalGeneration
#   is refused (its delta-net tensors are missing). --arch 3 itself: e2e.trillim_qwen35.
set -u
. "$(dirname "$0")/trillim_util.sh"
trillim_workdir trlm_qwen3 qwen3

# expect_manifest MODEL_DIR ARCH QUANT > bytes: the SDK's build_manifest for a single-file model
expect_manifest() {
  node - "$@" <<'EOF'
const fs = require('fs'), [dir, archS, quant] = process.argv.slice(2), arch = Number(archS);
const st = fs.realpathSync(dir) + '/model.safetensors', fd = fs.openSync(st, 'r');
const lenb = Buffer.alloc(8); fs.readSync(fd, lenb, 0, 8, 0);
const hlen = Number(lenb.readBigUInt64LE(0)), hb = Buffer.alloc(hlen); fs.readSync(fd, hb, 0, hlen, 8);
const hdr = JSON.parse(hb.toString()), start = 8 + hlen;
const cfg = JSON.parse(fs.readFileSync(dir + '/config.json'));
const r128 = (v) => Math.ceil(v / 128) * 128;
const H0 = cfg.hidden_size, I0 = cfg.intermediate_size, H = r128(H0), I = r128(I0), tie = !!cfg.tie_word_embeddings;
const order = ['input_layernorm', 'self_attn.k_proj', 'self_attn.v_proj', 'self_attn.q_proj', 'self_attn.q_norm',
  'self_attn.k_norm', 'self_attn.o_proj', 'post_attention_layernorm', 'mlp.gate_proj', 'mlp.up_proj', 'mlp.down_proj'];
const matches = (k, c) => k.endsWith('.' + c) || k.endsWith('.' + c + '.weight') || k.endsWith('.' + c + '.bias');
const skip = (k) => k.includes('rotary_emb') || k.includes('inv_freq') || (tie && k === 'lm_head.weight') || k.endsWith('_scale');
const sortKey = (k) => {
  if (k === 'model.embed_tokens.weight') return [0, -1, -1, 0];
  if (k.startsWith('lm_head.')) return [0, 0, -1, 0];
  if (k === 'model.norm.weight') return [1, -1, -1, 0];
  const m = /\.layers\.(\d+)\./.exec(k); if (!m) return [3, -1, -1, 0];
  let p = order.findIndex((c) => matches(k, c)); if (p < 0) p = order.length;
  return [2, Number(m[1]), p, k.endsWith('.bias') ? 1 : 0];
};
const cmp = (a, b) => { for (let i = 0; i < 4; i++) if (a[i] !== b[i]) return a[i] - b[i]; return 0; };
const keys = Object.keys(hdr).filter((k) => k !== '__metadata__' && !skip(k));
keys.sort((a, b) => cmp(sortKey(a), sortKey(b)));   // stable, as Python's sorted
const bonsai = arch === 4 || arch === 5;
const targetAction = (dt) => {
  if (quant === 'auto') return arch === 4 ? 4 : arch === 5 ? 5 : arch === 6 ? 0 : (dt === 'I8' || dt === 'U8') ? 3 : 1;
  return {bf16: 0, q8_0: 6, q8_0_blocked_32: 7, int8: 7, q1_0_128: 4, grouped_ternary_128: 5,
    ternary: (dt === 'I8' || dt === 'U8') ? 3 : 1}[quant];
};
const dtc = {F32: 0, F16: 1, BF16: 2, I8: 3, U8: 4};
const out = [];
const u = (v, n) => { const b = Buffer.alloc(n); if (n === 8) b.writeBigUInt64LE(BigInt(v)); else b.writeUIntLE(v, 0, n); out.push(b); };
u(1, 2); u(Buffer.byteLength(st), 2); out.push(Buffer.from(st)); u(keys.length, 4);
for (const k of keys) {
  const t = hdr[k], shape = t.shape, row = shape[0], col = shape.length >= 2 ? shape.slice(1).reduce((a, b) => a * b, 1) : 1;
  const is1d = col === 1, isEmb = k === 'model.embed_tokens.weight', isHead = k.startsWith('lm_head.');
  const q = bonsai ? !is1d : !(is1d || isEmb || isHead);
  let ps = shape.slice(), padded = false;
  ps = ps.map((d) => { if (d === I0 && I !== I0) { padded = true; return I; } if (d === H0 && H !== H0) { padded = true; return H; } return d; });
  let pr = padded ? ps[0] : row, pc = padded ? (ps.length >= 2 ? ps.slice(1).reduce((a, b) => a * b, 1) : 1) : col;
  const action = (isEmb || isHead) ? (bonsai ? targetAction(t.dtype) : 0) : q ? targetAction(t.dtype) : 0;
  if (action === 7) pr = Math.ceil(pr / 32) * 32;
  u(action, 1); u(dtc[t.dtype], 1); u(row, 4); u(col, 4); u(pr, 4); u(pc, 4); u(0, 2);
  u(start + t.data_offsets[0], 8); u(t.data_offsets[1] - t.data_offsets[0], 8); u(0, 1); u(0, 2); u(0, 8); u(0, 8);
}
u(keys.length ? 1 : 0, 4); if (keys.length) { u(1, 1); u(0, 4); u(keys.length, 4); }
process.stdout.write(Buffer.concat(out));
EOF
}

# check_records TRLM_DIR MANIFEST ARCH [bias]: every record follows from the manifest entry of its index
check_records() {
  node - "$@" <<'EOF'
const fs = require('fs'), [dir, mpath, archS, bias] = process.argv.slice(2);
const m = fs.readFileSync(mpath), f = fs.readFileSync(dir + '/qmodel.tensors');
let o = 2 + 2 + m.readUInt16LE(2); const n = m.readUInt32LE(o); o += 4;
const kindOf = [0, 1, 2, 1, 5, 6, 3, 4];                 // action -> TRLM kind (trillim_sdk.md "Bodies")
const size = (k, pr, pc) => k === 0 ? 2 * pr * pc : k === 3 || k === 4 ? pr * Math.ceil(pc / 32) * 34
  : k === 5 ? pr * Math.ceil(pc / 128) * 18 : k === 6 ? pr * Math.ceil(pc / 128) * 34 : -1;
// roles (readers/trlm.md + Q_NORM 17, K_NORM 18): embed, lm_head when present, final norm, then per layer
// with attention_bias each q/k/v bias (14 Q_BIAS, 15 K_BIAS, 16 V_BIAS) follows its weight
const layerRoles = bias ? [3, 5, 15, 6, 16, 7, 14, 17, 18, 8, 9, 10, 11, 13] : [3, 5, 6, 7, 17, 18, 8, 9, 10, 11, 13];
const per = layerRoles.length;
const errs = [];
if (f.toString('latin1', 0, 4) !== 'TRLM' || f.readUInt32LE(8) !== Number(archS) || f.readUInt32LE(20) !== n)
  errs.push(`header: arch ${f.readUInt32LE(8)}, ${f.readUInt32LE(20)} records for ${n} entries`);
const hasHead = m.readUInt32LE(o + 55 + 6) > 1, first = hasHead ? 3 : 2;
let end = 64 + 48 * n, anyNew = false;
for (let i = 0; i < n; i++) {
  const e = o + 55 * i, r = 64 + 48 * i;
  const action = m[e], rows = m.readUInt32LE(e + 2), cols = m.readUInt32LE(e + 6), pr = m.readUInt32LE(e + 10), pc = m.readUInt32LE(e + 14);
  const kind = kindOf[action]; anyNew = anyNew || kind >= 3;
  const role = i === 0 ? 0 : hasHead && i === 1 ? 1 : i === first - 1 ? 2 : layerRoles[(i - first) % per];
  const layer = i < first ? 0xFFFFFFFF : Math.floor((i - first) / per);
  const want = {kind, role, layer, rows, cols, pr, pc, off: Math.ceil(end / 64) * 64, size: size(kind, pr, pc)};
  const got = {kind: f[r], role: f[r + 1], layer: f.readUInt32LE(r + 4), rows: f.readUInt32LE(r + 8), cols: f.readUInt32LE(r + 12),
    pr: f.readUInt32LE(r + 16), pc: f.readUInt32LE(r + 20), off: Number(f.readBigUInt64LE(r + 24)), size: Number(f.readBigUInt64LE(r + 32))};
  if (JSON.stringify(want) !== JSON.stringify(got)) errs.push(`record ${i}: ${JSON.stringify(got)} != ${JSON.stringify(want)}`);
  end = want.off + want.size;
}
if ((n - first) % per) errs.push(`${n - first} layer entries, not ${per} per layer`);
if (f.length !== end) errs.push(`file ${f.length} bytes, last record ends at ${end}`);
if (f.readUInt32LE(16) !== (anyNew ? 2 : 1)) errs.push(`body version ${f.readUInt32LE(16)}`);
console.log(errs.length ? errs.slice(0, 3).join('; ') : `ok ${n}`);
EOF
}

case_() { # name src_dir arch quant sdk_quant_name arch_name [bias]
  local name=$1 src=$2 arch=$3 q=$4 qname=$5 aname=$6 bias=${7:-} D="$W/$1"
  "$BIN/quantpack" convert "$src" --to trlm --quant "$q" -o "$D" --save-manifest "$W/$name.manifest" >"$W/err" 2>&1
  check "$name: convert ($(head -c 200 "$W/err"))" "[ -s '$D/qmodel.tensors' ]"
  expect_manifest "$src" "$arch" "$q" > "$W/$name.expect"
  check "$name: manifest == the SDK's build_manifest ($(stat -c %s "$W/$name.expect") bytes)" \
    "cmp -s '$W/$name.expect' '$W/$name.manifest'"
  local rec; rec=$(check_records "$D" "$W/$name.expect" "$arch" $bias)
  check "$name: qmodel.tensors records follow from the SDK's manifest ($rec)" "[ '${rec%% *}' = ok ]"
  check "$name: trillim_config.json architecture $aname, quantization $qname" \
    "grep -q '\"architecture\": \"$aname\"' '$D/trillim_config.json' && grep -q '\"quantization\": \"$qname\"' '$D/trillim_config.json'"
}

case_ qwen3 "$FIX/qwen3" 6 auto bf16 qwen3
case_ qwen3_b32 "$FIX/qwen3" 6 q8_0_blocked_32 q8_0_blocked_32 qwen3
for a in bonsai bonsai_ternary; do
  cp -r "$FIX/qwen3" "$W/src_$a"; printf '{"architecture": " %s "}\n' "${a^^}" > "$W/src_$a/trillim_source.json"
done
# tied (Qwen3-0.6B's form): lm_head.weight removed from the fixture's safetensors, the config tied
mkdir -p "$W/src_tied"; cp "$FIX/qwen3"/*.json "$W/src_tied/"
sed -i 's/"tie_word_embeddings": false/"tie_word_embeddings": true/' "$W/src_tied/config.json"
node - "$FIX/qwen3/model.safetensors" "$W/src_tied/model.safetensors" <<'EOF'
const fs = require('fs'), [src, dst] = process.argv.slice(2), b = fs.readFileSync(src);
const hl = Number(b.readBigUInt64LE(0)), h = JSON.parse(b.slice(8, 8 + hl).toString()), ds = 8 + hl;
const nh = {}, parts = []; let off = 0;
for (const [k, v] of Object.entries(h)) {
  if (k === 'lm_head.weight') continue;
  if (k === '__metadata__') { nh[k] = v; continue; }
  const d = b.slice(ds + v.data_offsets[0], ds + v.data_offsets[1]);
  nh[k] = {dtype: v.dtype, shape: v.shape, data_offsets: [off, off + d.length]}; parts.push(d); off += d.length;
}
let t = JSON.stringify(nh); t += ' '.repeat((8 - t.length % 8) % 8);
const l = Buffer.alloc(8); l.writeBigUInt64LE(BigInt(t.length));
fs.writeFileSync(dst, Buffer.concat([l, Buffer.from(t), ...parts]));
EOF
case_ tied "$W/src_tied" 6 auto bf16 qwen3
# tied in config.json with lm_head.weight still in the safetensors: the SDK's
# _resolve_tied_embeddings reads config.json alone and _should_skip_tensor drops lm_head.weight
# (expect_manifest: no lm_head entry); the conversion says it left it out
mkdir -p "$W/src_tied_head"; cp "$FIX/qwen3"/* "$W/src_tied_head/"; cp "$W/src_tied/config.json" "$W/src_tied_head/"
case_ tied_head "$W/src_tied_head" 6 auto bf16 qwen3
check "tied_head: the conversion names the lm_head.weight it left out ($(grep -m1 'left out' "$W/err"))" \
  "grep -q 'left out.*lm_head.weight' '$W/err'"
check "tied_head: qmodel.tensors == the tied copy's (the embedding is the output)" "cmp -s '$W/tied/qmodel.tensors' '$W/tied_head/qmodel.tensors'"
case_ tied_q8 "$W/src_tied" 6 q8_0 q8_0 qwen3
case_ bonsai "$W/src_bonsai" 4 auto binary bonsai
# attention_bias (q/k/v_proj.bias BF16, attention_bias true): the SDK's _matches_component_key takes
# "<component>.bias" and sorts each bias right after its weight (bias_order 1), action BF16_RAW
# (1-D); trillim-quantize gives them roles Q/K/V_BIAS, the TRLM runs with them (verify below) and
# inference.config says QKV_BIAS 1 (the SDK runtime's has_qkv_bias = attention_bias). An o_proj
# bias (transformers' Qwen3 has one with attention_bias) the SDK would write too, but TRLM has no
# role and our runtime no such bias: refused naming it (exit 3)
add_bias() { # SRC_DIR DST_DIR [o]: SRC with BF16 biases after each q/k/v (and o) projection
  mkdir -p "$2"; cp "$1"/*.json "$2/"; sed -i 's/"attention_bias": false/"attention_bias": true/' "$2/config.json"
  node - "$1/model.safetensors" "$2/model.safetensors" "${3:-}" <<'EOF'
const fs = require('fs'), [src, dst, withO] = process.argv.slice(2), b = fs.readFileSync(src);
const hl = Number(b.readBigUInt64LE(0)), h = JSON.parse(b.slice(8, 8 + hl).toString()), ds = 8 + hl;
const nh = {}, parts = []; let off = 0, seed = 1;
const put = (k, dtype, shape, d) => { nh[k] = {dtype, shape, data_offsets: [off, off + d.length]}; parts.push(d); off += d.length; };
for (const [k, v] of Object.entries(h)) {
  if (k === '__metadata__') { nh[k] = v; continue; }
  put(k, v.dtype, v.shape, b.slice(ds + v.data_offsets[0], ds + v.data_offsets[1]));
  const m = /^(model\.layers\.\d+\.self_attn\.([qkvo])_proj)\.weight$/.exec(k);
  if (!m || (m[2] === 'o' && withO !== 'o')) continue;
  const d = Buffer.alloc(2 * v.shape[0]);
  for (let i = 0; i < v.shape[0]; i++) {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    d.writeUInt16LE(Buffer.from(new Float32Array([(seed / 2147483648 - 0.5) * 0.2]).buffer).readUInt16LE(2), 2 * i);
  }
  put(m[1] + '.bias', 'BF16', [v.shape[0]], d);
}
let t = JSON.stringify(nh); t += ' '.repeat((8 - t.length % 8) % 8);
const l = Buffer.alloc(8); l.writeBigUInt64LE(BigInt(t.length));
fs.writeFileSync(dst, Buffer.concat([l, Buffer.from(t), ...parts]));
EOF
}
add_bias "$FIX/qwen3" "$W/src_bias"
case_ bias "$W/src_bias" 6 auto bf16 qwen3 bias
check "bias: inference.config QKV_BIAS 1 ($(cat "$W/bias/inference.config"))" \
  "[ \"\$(cut -d' ' -f14 '$W/bias/inference.config')\" = 1 ]"
add_bias "$FIX/qwen3" "$W/src_obias" o
"$BIN/quantpack" convert "$W/src_obias" --to trlm -o "$W/obias" >"$W/err" 2>&1; rc=$?
check "an o_proj bias: exit 3 naming it (rc $rc: $(head -c 160 "$W/err"))" \
  "[ $rc -eq 3 ] && grep -q 'layers.0.self_attn.o_proj.bias' '$W/err' && [ ! -e '$W/obias' ]"
# no trillim_source.json: the SDK's README.md guess (_legacy_readme_bonsai_arch_type)
readme_case() { # README text, expected arch
  rm -rf "$W/src_readme" "$W/readme"; cp -r "$FIX/qwen3" "$W/src_readme"; printf '%s\n' "$1" > "$W/src_readme/README.md"
  "$BIN/quantpack" convert "$W/src_readme" --to trlm -o "$W/readme" >/dev/null 2>&1
  check "README '$1' -> arch $2" "[ \"\$(od -An -tu4 -j8 -N4 '$W/readme/qmodel.tensors' | tr -d ' ')\" = $2 ]"; }
readme_case "# Ternary-Bonsai 8B" 5
readme_case "# BONSAI: 1-bit ternary-free" 4
readme_case "# Qwen3 ternary" 6
case_ bonsai_ternary "$W/src_bonsai_ternary" 5 auto grouped-ternary bonsai_ternary

# the TRLM of the generated Qwen3 model verifies against its source
vf() { "$BIN/quantpack" verify "$W/$1" --against "$FIX/qwen3" -n 16 "${@:2}" 2>&1; }
out=$(vf qwen3 --min-cosine 0.999999 --min-top1 1)
check "qwen3 (BF16) verifies: identical ($(echo "$out" | grep -m1 cosine))" \
  "echo \"\$out\" | grep -q 'max |diff| 0,' && echo \"\$out\" | grep -q 'verdict: PASS'"
out=$("$BIN/quantpack" verify "$W/bias" --against "$W/src_bias" -n 16 2>&1)
check "qwen3 with q/k/v biases (BF16) verifies: identical ($(echo "$out" | grep -m1 cosine))" \
  "echo \"\$out\" | grep -q 'max |diff| 0,' && echo \"\$out\" | grep -q 'verdict: PASS'"
out=$(vf qwen3_b32)
check "qwen3 q8_0_blocked_32 verifies, 8-bit class ($(echo "$out" | grep -m1 cosine))" "echo \"\$out\" | grep -q 'verdict: PASS'"
out=$("$BIN/quantpack" verify "$W/tied" --against "$W/src_tied" -n 16 2>&1)
check "tied qwen3 (BF16, no lm_head record) verifies: identical ($(echo "$out" | grep -m1 cosine))" \
  "echo \"\$out\" | grep -q 'max |diff| 0,' && echo \"\$out\" | grep -q 'verdict: PASS'"
out=$("$BIN/quantpack" verify "$W/tied_q8" --against "$W/src_tied" -n 16 2>&1)
check "tied qwen3 q8_0 verifies, 8-bit class ($(echo "$out" | grep -m1 cosine))" "echo \"\$out\" | grep -q 'verdict: PASS'"
ids=$("$BIN/quantpack" run "$W/bonsai" --ids "406 11 58 149" -n 4 --temp 0 --print-ids 2>/dev/null)
check "bonsai (Q1_0_128 everywhere) runs ($ids)" "[ \$(echo $ids | wc -w) -eq 8 ]"

# trillim-inference with the SDK's init block (_build_init_block of the model the SDK's runtime
# reads: arch_type from Qwen3ForCausalLM + the bundle's architecture, hidden 256, head_dim 128...)
init() { # ARCH QUANT
  local pairs=(arch_type=$1 activation=1 hidden_dim=256 intermediate_dim=512 num_layers=2 num_heads=4
    num_kv_heads=2 vocab_size=408 head_dim=128 max_position_embeddings=256 norm_eps=1e-06
    rope_theta=1000000.0 tie_word_embeddings=0 has_qkv_bias=0 has_attn_sub_norm=0 has_ffn_sub_norm=0
    quantization=$2 eos_tokens=407)
  echo ${#pairs[@]}; printf '%s\n' "${pairs[@]}"; }
for c in "qwen3 6 bf16" "bonsai 4 binary"; do
  set -- $c
  mapfile -t T < <( { init "$2" "$3"; req 0 406,11,58,149 5; echo 0; } | timeout 60 "$BIN/trillim-inference" "$W/$1" 2>"$W/err"; echo "rc=$?" )
  R=$("$BIN/quantpack" run "$W/$1" --ids "406 11 58 149" -n 5 --temp 0 --print-ids 2>/dev/null)
  check "trillim-inference arch_type=$2 ($1): ids == run --ids, EOS, kv 9 (${T[*]}; $(head -c 200 "$W/err"))" \
    "[ '406 11 58 149 ${T[*]:0:5}' = '$R' ] && [ '${T[5]}' = 407 ] && [ '${T[6]}' = 9 ] && [ '${T[7]}' = rc=0 ]"
done
{ init 2 bf16; req 0 406 1; } | timeout 60 "$BIN/trillim-inference" "$W/qwen3" >/dev/null 2>"$W/err"; rc=$?
check "arch_type=2 for the Qwen3 TRLM: exit 3 naming arch_type (rc $rc)" "[ $rc -eq 3 ] && grep -q arch_type '$W/err'"

# from a GGUF of the same model (converters/hf_folder.md: the HF folder written first): arch 6
"$BIN/quantpack" convert "$FIX/qwen3" --to gguf --quant F16 -o "$W/q3.gguf" >/dev/null 2>&1
"$BIN/quantpack" convert "$W/q3.gguf" --to trlm -o "$W/from_gguf" >"$W/err" 2>&1
out=$("$BIN/quantpack" verify "$W/from_gguf" --against "$FIX/qwen3" -n 16 2>&1)
check "Qwen3 GGUF -> TRLM: arch 6, verifies against the HF source ($(echo "$out" | grep -m1 cosine))" \
  "[ \"\$(od -An -tu4 -j8 -N4 '$W/from_gguf/qmodel.tensors' | tr -d ' ')\" = 6 ] && echo \"\$out\" | grep -q 'verdict: PASS'"

# LoRA on Qwen3 (q out = 4 heads x 128 != hidden): the SDK's adapter bundle through lora_dir gives
# the ids of the model folder converted with the adapter beside it (v1 --lora)
peft_adapter "$W/peft" '{"self_attn.q_proj": [512, 256], "self_attn.v_proj": [256, 256], "mlp.down_proj": [256, 512]}'
"$BIN/quantpack" convert "$FIX/qwen3" --to trlm --lora "$W/peft" --adapter-only -o "$W/peft-TRNQ" >"$W/err" 2>&1
"$BIN/quantpack" convert "$FIX/qwen3" --to trlm --lora "$W/peft" -o "$W/q3_lora" >>"$W/err" 2>&1
lo() { { init 6 bf16 | sed "1s/.*/19/"; echo "lora_dir=$2"; req 0 406,11,58,149 5; echo 0; } | timeout 60 "$BIN/trillim-inference" "$1" 2>>"$W/err" | tr '\n' ' '; }
A=$(lo "$W/qwen3" "$W/peft-TRNQ"); Bm=$(lo "$W/q3_lora" "$W/q3_lora")
N=$({ init 6 bf16; req 0 406,11,58,149 5; echo 0; } | timeout 60 "$BIN/trillim-inference" "$W/qwen3" 2>/dev/null | tr '\n' ' ')
check "Qwen3 adapter bundle via lora_dir == merged folder, != base ($A / $Bm / $N; $(head -c 160 "$W/err"))" \
  "[ -n '$A' ] && [ '$A' = '$Bm' ] && [ '$A' != '$N' ]"

# refused: a Qwen3 checkpoint labelled Qwen3.5 (no delta-net tensors)
cp -r "$FIX/qwen3" "$W/src_q35"; sed -i 's/Qwen3ForCausalLM/Qwen3_5ForConditionalGeneration/' "$W/src_q35/config.json"
"$BIN/quantpack" convert "$W/src_q35" --to trlm -o "$W/q35" >/dev/null 2>"$W/err"; rc=$?
check "Qwen3 labelled Qwen3_5ForConditionalGeneration: exit 3, nothing written (rc $rc: $(head -c 160 "$W/err"))" \
  "[ $rc -eq 3 ] && [ ! -e '$W/q35' ] && grep -q 'attn_qkv' '$W/err'"
printf '{"architecture": "qwen9"}' > "$W/src_bonsai/trillim_source.json"
"$BIN/quantpack" convert "$W/src_bonsai" --to trlm -o "$W/bad_src" >/dev/null 2>"$W/err"; rc=$?
check "unknown trillim_source.json marker: exit 3 naming it (rc $rc)" "[ $rc -eq 3 ] && grep -q qwen9 '$W/err'"
rm -rf "$W"
finish
