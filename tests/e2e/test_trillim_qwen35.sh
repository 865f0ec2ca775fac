#!/usr/bin/env bash
# Qwen3.5 TRLM as the current Trillim SDK makes it (--arch 3 QWEN35: converters/trillim_sdk.md,
# readers/trlm.md roles 19-27). From the generated qwen35 fixture (Qwen3_5ForConditionalGeneration:
# config under text_config, tensors under model.language_model., layers 0-2 gated delta-net, 3
# full attention with q_proj = query + gate, RoPE on 32 of 128 dimensions):
# - the manifest convert --to trlm writes equals, byte for byte, the one computed here in node by
#   the SDK's rules (quantize/_manifest.py + _config.py's qwen3_5forconditionalgeneration
#   component_order: _matches_component_key, _processing_sort_key, canonicalize_model_config,
#   col = prod(shape[1:]) so conv1d [1024, 1, 4] is 1024 x 4, "auto" ternary for every tensor with
#   col > 1 but the embedding / lm_head; model.visual.* and mtp.* dropped);
# - every qmodel.tensors record (kind of the action, role from the tensor's HF name, layer, shape,
#   size, offset) follows from that manifest; rope.cache holds the 32 rotated dimensions;
# - the TRLM runs and verifies against its source (bf16: max |diff| 0; q8_0: the 8-bit class;
#   ternary / auto: the low-bit class, numbers printed);
# - a copy with a vision tower and an MTP block gives the same qmodel.tensors;
# - trillim-inference with the SDK's init block (arch_type 3) gives `quantpack run --ids`' ids,
#   also over a delta, a reset and a rewind into the recurrent state (the prefix replayed).
set -u
. "$(dirname "$0")/trillim_util.sh"
trillim_workdir trlm_qwen35 qwen35

# expect SRC QUANT MANIFEST_OUT ROLES_OUT: the SDK's build_manifest bytes, and "role layer" per entry
expect() {
  node - "$@" <<'EOF'
const fs = require('fs'), [dir, quant, mout, rout] = process.argv.slice(2);
const st = fs.realpathSync(dir) + '/model.safetensors', b = fs.readFileSync(st);
const hlen = Number(b.readBigUInt64LE(0)), hdr = JSON.parse(b.slice(8, 8 + hlen).toString()), start = 8 + hlen;
const raw = JSON.parse(fs.readFileSync(dir + '/config.json'));
const merge = (a, o) => { const r = {...a}; for (const [k, v] of Object.entries(o))
  r[k] = (r[k] && typeof r[k] === 'object' && !Array.isArray(r[k]) && v && typeof v === 'object' && !Array.isArray(v)) ? merge(r[k], v) : v; return r; };
const tc = raw.text_config, cfg = (tc && Object.keys(tc).length) ? merge(Object.fromEntries(Object.entries(raw).filter(([k]) => k !== 'text_config')), tc) : raw;
if (raw.architectures) cfg.architectures = raw.architectures;
const r128 = (v) => Math.ceil(v / 128) * 128;
const H0 = cfg.hidden_size, I0 = cfg.intermediate_size, H = r128(H0), I = r128(I0), tie = !!cfg.tie_word_embeddings;
const order = ['input_layernorm', 'linear_attn.A_log', 'linear_attn.conv1d.weight', 'linear_attn.dt_bias',
  'linear_attn.in_proj_a.weight', 'linear_attn.in_proj_b.weight', 'linear_attn.in_proj_qkv.weight',
  'linear_attn.in_proj_z.weight', 'linear_attn.norm.weight', 'linear_attn.out_proj.weight', 'self_attn.k_norm.weight',
  'self_attn.q_norm.weight', 'self_attn.k_proj', 'self_attn.v_proj', 'self_attn.q_proj', 'self_attn.o_proj',
  'post_attention_layernorm', 'mlp.gate_proj', 'mlp.up_proj', 'mlp.down_proj'];
// TRLM roles of the components (readers/trlm.md): 3 attn_norm, 19-27 the delta-net, 18 k_norm,
// 17 q_norm, 5 k, 6 v, 7 q, 8 o, 9 ffn_norm, 10 gate, 11 up, 13 down
const roleOf = [3, 19, 20, 21, 22, 23, 24, 25, 26, 27, 18, 17, 5, 6, 7, 8, 9, 10, 11, 13];
const EMB = 'model.language_model.embed_tokens.weight', NORM = 'model.language_model.norm.weight';
const matches = (k, c) => k.endsWith('.' + c) || (!/(\.weight|\.bias|A_log|dt_bias)$/.test(c) &&
  (k.endsWith('.' + c + '.weight') || k.endsWith('.' + c + '.bias')));
const skip = (k) => k.includes('rotary_emb') || k.includes('inv_freq') || (tie && k === 'lm_head.weight') ||
  k.endsWith('_scale') || k.startsWith('model.visual.') || k.startsWith('mtp.');
const sortKey = (k) => {
  if (k === EMB) return [0, -1, -1, 0];
  if (k.startsWith('lm_head.')) return [0, 0, -1, 0];
  if (k === NORM) return [1, -1, -1, 0];
  const m = /\.layers\.(\d+)\./.exec(k); if (!m) return [3, -1, -1, 0];
  let p = order.findIndex((c) => matches(k, c)); if (p < 0) p = order.length;
  return [2, Number(m[1]), p, k.endsWith('.bias') ? 1 : 0];
};
const cmp = (a, c) => { for (let i = 0; i < 4; i++) if (a[i] !== c[i]) return a[i] - c[i]; return 0; };
const keys = Object.keys(hdr).filter((k) => k !== '__metadata__' && !skip(k));
keys.sort((a, c) => cmp(sortKey(a), sortKey(c)));
const targetAction = (dt) => ({auto: (dt === 'I8' || dt === 'U8') ? 3 : 1, bf16: 0, q8_0: 6, q8_0_blocked_32: 7,
  q1_0_128: 4, grouped_ternary_128: 5, ternary: (dt === 'I8' || dt === 'U8') ? 3 : 1})[quant];
const dtc = {F32: 0, F16: 1, BF16: 2, I8: 3, U8: 4};
const out = [], roles = [];
const u = (v, n) => { const x = Buffer.alloc(n); if (n === 8) x.writeBigUInt64LE(BigInt(v)); else x.writeUIntLE(v, 0, n); out.push(x); };
u(1, 2); u(Buffer.byteLength(st), 2); out.push(Buffer.from(st)); u(keys.length, 4);
const prod = (a) => a.reduce((x, y) => x * y, 1);
for (const k of keys) {
  const t = hdr[k], shape = t.shape, row = shape[0], col = shape.length >= 2 ? prod(shape.slice(1)) : 1;
  const is1d = col === 1, isEmb = k === EMB, isHead = k.startsWith('lm_head.');
  let padded = false;
  const ps = shape.map((d) => { if (d === I0 && I !== I0) { padded = true; return I; } if (d === H0 && H !== H0) { padded = true; return H; } return d; });
  let pr = padded ? ps[0] : row; const pc = padded ? (ps.length >= 2 ? prod(ps.slice(1)) : 1) : col;
  const action = (isEmb || isHead || is1d) ? 0 : targetAction(t.dtype);
  if (action === 7) pr = Math.ceil(pr / 32) * 32;
  u(action, 1); u(dtc[t.dtype], 1); u(row, 4); u(col, 4); u(pr, 4); u(pc, 4); u(0, 2);
  u(start + t.data_offsets[0], 8); u(t.data_offsets[1] - t.data_offsets[0], 8); u(0, 1); u(0, 2); u(0, 8); u(0, 8);
  const m = /\.layers\.(\d+)\./.exec(k);
  roles.push(isEmb ? [0, -1] : isHead ? [1, -1] : k === NORM ? [2, -1] : [roleOf[order.findIndex((c) => matches(k, c))], Number(m[1])]);
}
u(keys.length ? 1 : 0, 4); if (keys.length) { u(1, 1); u(0, 4); u(keys.length, 4); }
fs.writeFileSync(mout, Buffer.concat(out)); fs.writeFileSync(rout, JSON.stringify(roles));
EOF
}

# check_records TRLM_DIR MANIFEST ROLES: every record follows from its manifest entry and role
check_records() {
  node - "$@" <<'EOF'
const fs = require('fs'), [dir, mpath, rpath] = process.argv.slice(2);
const m = fs.readFileSync(mpath), f = fs.readFileSync(dir + '/qmodel.tensors'), roles = JSON.parse(fs.readFileSync(rpath));
let o = 2 + 2 + m.readUInt16LE(2); const n = m.readUInt32LE(o); o += 4;
const kindOf = [0, 1, 2, 1, 5, 6, 3, 4];
const size = (k, pr, pc) => k === 0 ? 2 * pr * pc : k === 1 ? pr * Math.ceil(pc / 4) + 4 : k === 3 || k === 4 ? pr * Math.ceil(pc / 32) * 34
  : k === 5 ? pr * Math.ceil(pc / 128) * 18 : k === 6 ? pr * Math.ceil(pc / 128) * 34 : -1;
const errs = [];
if (f.toString('latin1', 0, 4) !== 'TRLM' || f.readUInt32LE(8) !== 3 || f.readUInt32LE(20) !== n)
  errs.push(`header: arch ${f.readUInt32LE(8)}, ${f.readUInt32LE(20)} records for ${n} entries`);
let end = 64 + 48 * n;
for (let i = 0; i < n; i++) {
  const e = o + 55 * i, r = 64 + 48 * i;
  const action = m[e], rows = m.readUInt32LE(e + 2), cols = m.readUInt32LE(e + 6), pr = m.readUInt32LE(e + 10), pc = m.readUInt32LE(e + 14);
  const kind = kindOf[action];
  const want = {kind, role: roles[i][0], layer: roles[i][1] < 0 ? 0xFFFFFFFF : roles[i][1], rows, cols, pr, pc, off: Math.ceil(end / 64) * 64};
  const got = {kind: f[r], role: f[r + 1], layer: f.readUInt32LE(r + 4), rows: f.readUInt32LE(r + 8), cols: f.readUInt32LE(r + 12),
    pr: f.readUInt32LE(r + 16), pc: f.readUInt32LE(r + 20), off: Number(f.readBigUInt64LE(r + 24))};
  const sz = Number(f.readBigUInt64LE(r + 32)), wsz = size(kind, pr, pc);
  if (JSON.stringify(want) !== JSON.stringify(got) || (wsz >= 0 && sz !== wsz))
    errs.push(`record ${i}: ${JSON.stringify(got)} size ${sz} != ${JSON.stringify(want)} size ${wsz}`);
  end = got.off + sz;
}
console.log(errs.length ? errs.slice(0, 3).join('; ') : `ok ${n}`);
EOF
}

vf() { "$BIN/quantpack" verify "$W/$1" --against "$FIX/qwen35" -n 16 2>&1; }
case_() { # name src quant sdk_quant_name verify_class
  local name=$1 src=$2 q=$3 qname=$4 D="$W/$1"
  "$BIN/quantpack" convert "$src" --to trlm --quant "$q" -o "$D" --save-manifest "$W/$name.manifest" >"$W/err" 2>&1
  check "$name: convert ($(head -c 200 "$W/err"))" "[ -s '$D/qmodel.tensors' ]"
  expect "$src" "$q" "$W/$name.expect" "$W/$name.roles"
  check "$name: manifest == the SDK's build_manifest ($(stat -c %s "$W/$name.expect") bytes)" \
    "cmp -s '$W/$name.expect' '$W/$name.manifest'"
  local rec; rec=$(check_records "$D" "$W/$name.expect" "$W/$name.roles")
  check "$name: qmodel.tensors records follow from the SDK's manifest ($rec)" "[ '${rec%% *}' = ok ]"
  check "$name: trillim_config.json architecture qwen35, quantization $qname" \
    "grep -q '\"architecture\": \"qwen35\"' '$D/trillim_config.json' && grep -q '\"quantization\": \"$qname\"' '$D/trillim_config.json'"
  local out; out=$(vf "$name")
  echo "$name: $(echo "$out" | grep -m1 'prompt 1')"
  check "$name: verify against the HF source: class $5, PASS" \
    "echo \"\$out\" | grep -q 'class $5' && echo \"\$out\" | grep -q 'verdict: PASS'"
}

case_ bf16 "$FIX/qwen35" bf16 bf16 identical
check "bf16: max |diff| 0 against the source" "vf bf16 | grep -q 'max |diff| 0,'"
case_ q8_0 "$FIX/qwen35" q8_0 q8_0 8-bit
case_ auto "$FIX/qwen35" auto ternary low-bit
check "auto: conv1d and in_proj_a/b are ternary records (kind 1) like the other 2-D weights" \
  "node -e \"const f=require('fs').readFileSync('$W/auto/qmodel.tensors');const n=f.readUInt32LE(20);let ok=0;
   for(let i=0;i<n;i++){const r=64+48*i;if([20,22,23].includes(f[r+1])&&f[r]===1)ok++;}process.exit(ok===9?0:1)\""
# rope.cache: TRRC, max_pos 256, the rotated 32 dimensions, theta 1e7
check "rope.cache: head_dim field 32 (the rotated part), theta 1e7" \
  "[ \"\$(od -An -tu4 -j12 -N8 '$W/bf16/rope.cache' | tr -s ' ')\" = ' 256 32' ] && [ \"\$(od -An -tf8 -j20 -N8 '$W/bf16/rope.cache' | tr -d ' ')\" = 10000000 ]"

# a vision tower and an MTP block beside the text model: dropped (determine_language_model_only)
mkdir -p "$W/src_mm"; cp "$FIX/qwen35"/*.json "$W/src_mm/"
node - "$FIX/qwen35/model.safetensors" "$W/src_mm/model.safetensors" <<'EOF'
const fs = require('fs'), [src, dst] = process.argv.slice(2), b = fs.readFileSync(src);
const hl = Number(b.readBigUInt64LE(0)), h = JSON.parse(b.slice(8, 8 + hl).toString()), ds = 8 + hl;
const nh = {}, parts = []; let off = 0;
const add = (k, dtype, shape, d) => { nh[k] = {dtype, shape, data_offsets: [off, off + d.length]}; parts.push(d); off += d.length; };
add('model.visual.blocks.0.attn.qkv.weight', 'BF16', [8, 16], Buffer.alloc(256, 1));
for (const [k, v] of Object.entries(h)) {
  if (k === '__metadata__') { nh[k] = v; continue; }
  add(k, v.dtype, v.shape, b.slice(ds + v.data_offsets[0], ds + v.data_offsets[1]));
}
add('mtp.fc.weight', 'BF16', [256, 512], Buffer.alloc(256 * 512 * 2, 2));
add('mtp.layers.0.mlp.gate_proj.weight', 'BF16', [512, 256], Buffer.alloc(256 * 512 * 2, 3));
let t = JSON.stringify(nh); t += ' '.repeat((8 - t.length % 8) % 8);
const l = Buffer.alloc(8); l.writeBigUInt64LE(BigInt(t.length));
fs.writeFileSync(dst, Buffer.concat([l, Buffer.from(t), ...parts]));
EOF
case_ mm "$W/src_mm" bf16 bf16 identical
check "mm: qmodel.tensors == the text-only source's" "cmp -s '$W/bf16/qmodel.tensors' '$W/mm/qmodel.tensors'"

# A GGUF qwen35 source (the HF fixture through convert --to gguf F32, which adds 1 to the norms
# but ssm_norm, stores -exp(A_log), squeezes conv1d and tiles the value heads: linear_num_key_heads
# 2, value heads 4). --to safetensors undoes each: every text tensor comes back under its HF name
# and shape (model.language_model.X -> model.X, Qwen3_5ForCausalLM), max |diff| 0 but A_log (the
# F32 rounding of log(exp), <= 1.2e-7) and the (1 + w) norms (the F32 rounding of 1 + w, <= 6e-8);
# the folder verifies against the source. --to trlm bf16 of the GGUF gives the HF-sourced bf16
# TRLM's qmodel.tensors but for norm bytes (that rounding) and verifies with max |diff| 0.
"$BIN/quantpack" convert "$FIX/qwen35" --to gguf --quant f32 -o "$W/q35.gguf" >/dev/null 2>&1
"$BIN/quantpack" convert "$W/q35.gguf" --to safetensors -o "$W/q35_hf" >"$W/err" 2>&1
check "gguf -> safetensors: written ($(head -c 200 "$W/err"))" "[ -s '$W/q35_hf/model.safetensors' ]"
cat >"$W/cmpst.js" <<'EOF'
const fs = require('fs');
const rd = (p) => { const b = fs.readFileSync(p), n = Number(b.readBigUInt64LE(0)); return [b, JSON.parse(b.slice(8, 8 + n)), 8 + n]; };
const f32 = (b, t, s) => { const d = b.slice(s + t.data_offsets[0], s + t.data_offsets[1]), w = t.dtype === 'F32' ? 4 : 2, o = new Float32Array(d.length / w);
  for (let i = 0; i < o.length; i++) o[i] = w === 4 ? d.readFloatLE(4 * i) : t.dtype === 'BF16' ? new Float32Array(new Uint32Array([d.readUInt16LE(2 * i) << 16]).buffer)[0] : NaN;
  return o; };
const [sb, sh, ss] = rd(process.argv[2]), [ob, oh, os] = rd(process.argv[3]);
const errs = [], bound = (k) => k.endsWith('.A_log') ? 1.2e-7 : /norm\.weight$/.test(k) && !k.includes('linear_attn.norm') ? 6e-8 : 0;
let n = 0, worst = 0;
for (const k of Object.keys(sh).filter((k) => k !== '__metadata__')) {
  const hk = k.replace('model.language_model.', 'model.'), t = oh[hk];
  if (!t || JSON.stringify(t.shape) !== JSON.stringify(sh[k].shape)) { errs.push(`${hk}: ${t ? t.shape : 'missing'} vs ${sh[k].shape}`); continue; }
  const a = f32(sb, sh[k], ss), c = f32(ob, t, os);
  let m = 0; for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - c[i]));
  if (!(m <= bound(hk))) errs.push(`${hk}: max |diff| ${m}`);
  worst = Math.max(worst, m); n++;
}
const extra = Object.keys(oh).filter((k) => k !== '__metadata__').length - n;
console.log(errs.length || extra ? `${errs.slice(0, 3).join('; ')} extra ${extra}` : `ok ${n} tensors, max |diff| ${worst}`);
EOF
cmpst=$(node "$W/cmpst.js" "$FIX/qwen35/model.safetensors" "$W/q35_hf/model.safetensors")
check "gguf -> safetensors: every text tensor back (${cmpst})" "[ '${cmpst%% *}' = ok ]"
"$BIN/quantpack" convert "$FIX/qwen35" --to safetensors -o "$W/q35_hf2" >/dev/null 2>&1
cmpst=$(node "$W/cmpst.js" "$FIX/qwen35/model.safetensors" "$W/q35_hf2/model.safetensors")
check "HF -> safetensors: every text tensor back, exact (${cmpst})" "[ '$cmpst' = 'ok 56 tensors, max |diff| 0' ]"
check "gguf -> safetensors: config.json Qwen3_5ForCausalLM / qwen3_5_text with the delta-net keys" \
  "node -e \"const c=require('$W/q35_hf/config.json');process.exit(c.architectures[0]==='Qwen3_5ForCausalLM'&&c.model_type==='qwen3_5_text'&&
    c.linear_num_key_heads===2&&c.linear_num_value_heads===4&&c.linear_key_head_dim===128&&c.linear_value_head_dim===128&&
    c.linear_conv_kernel_dim===4&&c.full_attention_interval===4&&c.layer_types.join()==='linear_attention,linear_attention,linear_attention,full_attention'&&
    c.attn_output_gate===true&&c.partial_rotary_factor===0.25&&c.rope_parameters.partial_rotary_factor===0.25?0:1)\""
out=$("$BIN/quantpack" verify "$W/q35_hf" --against "$FIX/qwen35" -n 16 2>&1)
check "gguf -> safetensors: verify against the HF source PASS, max |diff| 0 ($(echo "$out" | grep -m1 'prompt 1'))" \
  "echo \"\$out\" | grep -q 'verdict: PASS' && echo \"\$out\" | grep -q 'max |diff| 0,'"
# an ssm_a element >= 0 is no -exp(A_log): --to safetensors refuses it (exit 3, naming the tensor)
cp "$W/q35.gguf" "$W/q35_bad.gguf"
"$BIN/quantpack" inspect "$W/q35.gguf" --json 2>/dev/null | node -e "
const fs=require('fs'),j=JSON.parse(fs.readFileSync(0)),t=j.tensors.find((t)=>t.name==='blk.1.ssm_a'),fd=fs.openSync('$W/q35_bad.gguf','r+'),b=Buffer.alloc(4);
b.writeFloatLE(0.5);fs.writeSync(fd,b,0,4,t.offset+8);fs.closeSync(fd)"
"$BIN/quantpack" convert "$W/q35_bad.gguf" --to safetensors -o "$W/q35_bad_hf" >"$W/err" 2>&1; rc=$?
check "gguf with ssm_a 0.5 -> safetensors: exit 3 naming blk.1.ssm_a element 2, nothing written (rc $rc: $(head -c 200 "$W/err"))" \
  "[ $rc -eq 3 ] && grep -q 'blk.1.ssm_a: element 2 is 0.5' '$W/err' && [ ! -e '$W/q35_bad_hf' ]"
"$BIN/quantpack" convert "$W/q35.gguf" --to trlm --quant bf16 -o "$W/gguf_bf16" >"$W/err" 2>&1
check "gguf -> trlm bf16: written ($(head -c 200 "$W/err"))" "[ -s '$W/gguf_bf16/qmodel.tensors' ]"
out=$(vf gguf_bf16)
echo "gguf_bf16: $(echo "$out" | grep -m1 'prompt 1')"
check "gguf -> trlm bf16: verify against the HF source: class identical, PASS, max |diff| 0" \
  "echo \"\$out\" | grep -q 'class identical' && echo \"\$out\" | grep -q 'verdict: PASS' && echo \"\$out\" | grep -q 'max |diff| 0,'"
same=$(node -e "
const fs=require('fs'),a=fs.readFileSync('$W/gguf_bf16/qmodel.tensors'),b=fs.readFileSync('$W/bf16/qmodel.tensors'),n=a.readUInt32LE(20);
if(a.length!==b.length||a.subarray(0,64+48*n).compare(b.subarray(0,64+48*n))){console.log('records differ');process.exit(0)}
const norm=[2,3,9,17,18];let d=0,bad=0;for(let i=0;i<a.length;i++)if(a[i]!==b[i]){d++;
 let inNorm=false;for(let r=0;r<n;r++){const p=64+48*r,o=Number(a.readBigUInt64LE(p+24)),z=Number(a.readBigUInt64LE(p+32));if(i>=o&&i<o+z&&norm.includes(a[p+1]))inNorm=true}
 if(!inNorm)bad++}
console.log(bad?'bytes outside norms differ: '+bad:'ok '+d+' norm bytes differ')")
check "gguf -> trlm bf16: qmodel.tensors == the HF-sourced bf16 but norm bytes ($same)" "[ '${same%% *}' = ok ]"

# trillim-quantize --arch 3 on a Qwen3 manifest: refused naming the Qwen3.5 layer layouts
"$BIN/quantpack" convert "$FIX/qwen3" --to trlm -o "$W/qwen3" --save-manifest "$W/qwen3.manifest" >/dev/null 2>&1
"$BIN/trillim-quantize" --manifest "$W/qwen3.manifest" --output "$W/x/qmodel.tensors" --arch 3 \
  --hidden-dim 256 --intermediate-dim 512 --hidden-dim-orig 256 --intermediate-dim-orig 512 --norm-eps 1e-06 \
  --head-dim 128 >/dev/null 2>"$W/err"; rc=$?
check "--arch 3 with a Qwen3 manifest: exit 3 naming the Qwen3.5 layouts (rc $rc: $(head -c 160 "$W/err"))" \
  "[ $rc -eq 3 ] && grep -q 'Qwen3.5 layer layouts' '$W/err'"

# trillim-inference with the SDK's init block (_build_init_block of the qwen35 folder)
init() {
  local pairs=(arch_type=3 activation=1 hidden_dim=256 intermediate_dim=512 num_layers=4 num_heads=2
    num_kv_heads=1 vocab_size=408 head_dim=128 max_position_embeddings=256 norm_eps=1e-06
    rope_theta=10000000.0 tie_word_embeddings=0 has_qkv_bias=0 has_attn_sub_norm=0 has_ffn_sub_norm=0
    quantization=$1 eos_tokens=407)
  echo ${#pairs[@]}; printf '%s\n' "${pairs[@]}"; }
for c in "bf16 bf16" "auto ternary"; do
  set -- $c
  mapfile -t T < <( { init "$2"; req 0 406,11,58,149 5; echo 0; } | timeout 60 "$BIN/trillim-inference" "$W/$1" 2>"$W/err"; echo "rc=$?" )
  R=$("$BIN/quantpack" run "$W/$1" --ids "406 11 58 149" -n 5 --temp 0 --print-ids 2>/dev/null)
  check "trillim-inference arch_type=3 ($1): ids == run --ids (${T[*]}; $R; $(head -c 200 "$W/err"))" \
    "[ '406 11 58 149 ${T[*]:0:5}' = '$R' ] && [ '${T[-1]}' = rc=0 ]"
done
# four turns on one process: a delta (kv 7 + 2 tokens), a reset (kv 0), a rewind into the cache
# (kv 3: the recurrent state cannot rewind, the prefix is replayed); each turn's ids == run --ids
# of its whole sequence
T=$({ init bf16; req 0 406,11,58,149 3; req 7 20,21 3; req 0 406,11,58,149 3; req 3 77 2; echo 0; } |
  timeout 60 "$BIN/trillim-inference" "$W/bf16" 2>"$W/err" | tr '\n' ' ')
r() { "$BIN/quantpack" run "$W/bf16" --ids "$1" -n "$2" --temp 0 --print-ids 2>/dev/null | cut -d' ' -f$3-; }
t1=$(r '406 11 58 149' 3 5)
E="$t1 407 7 $(r "406 11 58 149 $t1 20 21" 3 10) 407 12 $t1 407 7 $(r '406 11 58 77' 2 5) 407 6 "
check "trillim-inference arch_type=3: delta, reset and rewind turns == run --ids ($T / $E; $(head -c 160 "$W/err"))" "[ '$T' = '$E' ]"
# LoRA on Qwen3.5 (the SDK's LORA_TARGETS; the delta-net layers 0-2 have no q/k/v/o, so the
# adapter holds down_proj of layers 0-1): the adapter bundle through lora_dir gives the ids of the
# folder converted with the adapter beside it, and not the base model's
peft_adapter "$W/peft" '{"mlp.down_proj": [256, 512]}'
"$BIN/quantpack" convert "$FIX/qwen35" --to trlm --lora "$W/peft" --adapter-only -o "$W/peft-TRNQ" >"$W/err" 2>&1
"$BIN/quantpack" convert "$FIX/qwen35" --to trlm --lora "$W/peft" -o "$W/q35_lora" >>"$W/err" 2>&1
lo() { { init ternary | sed "1s/.*/19/"; echo "lora_dir=$2"; req 0 406,11,58,149 5; echo 0; } |
  timeout 60 "$BIN/trillim-inference" "$1" 2>>"$W/err" | tr '\n' ' '; }
A=$(lo "$W/auto" "$W/peft-TRNQ"); M=$(lo "$W/q35_lora" "$W/q35_lora")
N=$({ init ternary; req 0 406,11,58,149 5; echo 0; } | timeout 60 "$BIN/trillim-inference" "$W/auto" 2>>"$W/err" | tr '\n' ' ')
check "Qwen3.5 adapter bundle via lora_dir == merged folder, != base ($A / $M / $N; $(head -c 160 "$W/err"))" \
  "[ -n '$A' ] && [ '$A' = '$M' ] && [ '$A' != '$N' ]"
rm -rf "$W"
finish
