// convert --to safetensors (converters/convert_safetensors.c), checked with peers:
//  1. llama.cpp's stories260K.gguf (F32, q/k in llama.cpp's pair order) -> safetensors F32 ->
//     GGUF F32: every tensor's bytes equal the original's, both files parsed by @huggingface/gguf;
//  2. the llama2.c checkpoint stories260K.bin (+ tok512.bin) gives the same model.safetensors
//     tensors (names, shapes, bytes) as that GGUF: both sources un-permute q/k the same way;
//  3. the folder is a Hugging Face folder: header dtypes/shapes, config.json = the GGUF's
//     hyper-parameters (read by @huggingface/gguf), generation_config ids, tokenizer.json +
//     tokenizer_config.json load in @huggingface/tokenizers 0.2.0 and give quantpack's ids on the
//     source; quantpack verify of the folder against the GGUF passes;
//  4. --quant F16 / BF16: every value is the F32 folder's value rounded to nearest (checked
//     element by element), every dtype as asked; a BF16 Hugging Face fixture keeps its bytes;
//  5. a Q4_K_M GGUF (llama.cpp's) becomes F32 without --allow-requantize (widening);
//     an unknown --quant is refused with the list (exit 2);
//  6. Gemma 1/2/3 through GGUF (norms 1 + w) and back;
//  7. Phi-3 (fused qkv / gate_up) and Mixtral (merged experts) through GGUF F32 and back: every
//     HF tensor under its HF name, max |diff| 0, config.json keys as the source's.
// Env: QP_BIN_DIR, QP_PEER_DIR, QP_REAL_FIXTURES, QP_FIXTURES_DIR, QP_TMP_DIR.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

import { peerRequire, requireEnv, requireFiles, tally } from './peer_util.mjs';

const [binDir, peerDir, realDir, fixDir, tmpRoot] =
  requireEnv('QP_BIN_DIR', 'QP_PEER_DIR', 'QP_REAL_FIXTURES', 'QP_FIXTURES_DIR', 'QP_TMP_DIR');
const quantpack = path.join(binDir, 'quantpack');
const real = (p) => path.join(realDir, p);
const gqa = path.join(fixDir, 'llama-gqa-untied');
requireFiles(quantpack, real('stories260K.gguf'), real('stories260K.bin'), real('tok512.bin'),
  real('gguf/stories260K-Q4_K_M.llamacpp.gguf'), gqa, path.join(peerDir, '@huggingface/gguf/package.json'));
const { gguf } = peerRequire(peerDir)('@huggingface/gguf');
const tokPkg = path.join(peerDir, '@huggingface/tokenizers');
const tokEntry = JSON.parse(readFileSync(path.join(tokPkg, 'package.json'), 'utf8')).exports['.'].node.import;
const { Tokenizer } = await import(pathToFileURL(path.join(tokPkg, tokEntry)).href);

const t = tally();
const tmp = mkdtempSync(path.join(tmpRoot, 'convert-safetensors-'));
const out = (n) => path.join(tmp, n);
const qp = (...args) => spawnSync(quantpack, args, { encoding: 'utf8' });
const convert = (src, to, dst, ...extra) => {
  const r = qp('convert', src, '--to', to, '-o', dst, ...extra);
  t.check(r.status === 0, `convert ${path.basename(src)} --to ${to} ${extra.join(' ')}: exit ${r.status} ${r.stderr}`);
  return r;
};

// safetensors: {name: {dtype, shape, bytes}} from the file (8-byte length, JSON header, data)
function readSafetensors(file) {
  const buf = readFileSync(file);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8'));
  const map = new Map();
  for (const [name, v] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    map.set(name, { dtype: v.dtype, shape: v.shape, bytes: buf.subarray(8 + n + v.data_offsets[0], 8 + n + v.data_offsets[1]) });
  }
  return map;
}

// GGUF tensors by name -> bytes, located by @huggingface/gguf
async function readGguf(file) {
  const g = await gguf(file, { allowLocalFile: true, typedMetadata: true });
  const buf = readFileSync(file);
  const base = Number(g.tensorDataOffset);
  const infos = [...g.tensorInfos].sort((a, b) => Number(a.offset) - Number(b.offset));
  const map = new Map();
  infos.forEach((ti, i) => {
    const start = base + Number(ti.offset);
    const end = i + 1 < infos.length ? base + Number(infos[i + 1].offset) : buf.length;
    map.set(ti.name, { type: ti.dtype, bytes: buf.subarray(start, end) });
  });
  return { meta: g.typedMetadata, tensors: map };
}

// --- 1. GGUF F32 -> safetensors F32 -> GGUF F32 -------------------------------------------
const srcGguf = real('stories260K.gguf');
convert(srcGguf, 'safetensors', out('s260.st'));
convert(out('s260.st'), 'gguf', out('s260.gguf'), '--quant', 'F32');
const a = await readGguf(srcGguf);
const b = await readGguf(out('s260.gguf'));
let same = 0;
for (const [name, ta] of a.tensors) {
  const tb = b.tensors.get(name);
  // the data section pads each tensor to 32 bytes: compare the tensor's own bytes
  const len = Math.min(ta.bytes.length, tb ? tb.bytes.length : 0);
  if (tb && ta.type === tb.type && len > 0 && Buffer.compare(ta.bytes.subarray(0, len), tb.bytes.subarray(0, len)) === 0) same++;
  else console.error(`round trip: ${name} differs`);
}
console.log(`GGUF F32 -> safetensors -> GGUF F32: ${same}/${a.tensors.size} tensors byte-identical`);
t.check(same === a.tensors.size && b.tensors.size === a.tensors.size, 'GGUF F32 round trip through safetensors');

// --- 2. llama2.c checkpoint -> the same tensors ------------------------------------------
convert(real('stories260K.bin'), 'safetensors', out('s260bin.st'), '--tokenizer', real('tok512.bin'));
const st = readSafetensors(path.join(out('s260.st'), 'model.safetensors'));
const stBin = readSafetensors(path.join(out('s260bin.st'), 'model.safetensors'));
// the checkpoint shares its classifier (tie_word_embeddings, no lm_head); llama.cpp's GGUF stores
// it as output.weight: the GGUF folder's lm_head must be the checkpoint's embedding
let binSame = 0;
for (const [name, v] of st) {
  const w = stBin.get(name === 'lm_head.weight' ? 'model.embed_tokens.weight' : name);
  if (w && w.dtype === v.dtype && JSON.stringify(w.shape) === JSON.stringify(v.shape) && Buffer.compare(w.bytes, v.bytes) === 0) binSame++;
  else console.error(`llama2.c vs GGUF folder: ${name} differs`);
}
const binCfg = JSON.parse(readFileSync(path.join(out('s260bin.st'), 'config.json'), 'utf8'));
console.log(`stories260K.bin and stories260K.gguf folders: ${binSame}/${st.size} tensors identical`);
t.check(binSame === st.size && stBin.size === st.size - 1 && binCfg.tie_word_embeddings === true,
  'llama2.c and GGUF sources give the same folder tensors');

// --- 3. the folder as Hugging Face reads it -------------------------------------------------
const cfg = JSON.parse(readFileSync(path.join(out('s260.st'), 'config.json'), 'utf8'));
const gen = JSON.parse(readFileSync(path.join(out('s260.st'), 'generation_config.json'), 'utf8'));
const m = a.meta;
t.check(cfg.architectures[0] === 'LlamaForCausalLM' && cfg.hidden_size === m['llama.embedding_length'].value &&
  cfg.num_hidden_layers === m['llama.block_count'].value && cfg.num_attention_heads === m['llama.attention.head_count'].value &&
  cfg.num_key_value_heads === m['llama.attention.head_count_kv'].value &&
  cfg.intermediate_size === m['llama.feed_forward_length'].value && cfg.vocab_size === m['tokenizer.ggml.tokens'].value.length,
  `config.json ${JSON.stringify(cfg)}`);
t.check(gen.bos_token_id === m['tokenizer.ggml.bos_token_id'].value && gen.eos_token_id === m['tokenizer.ggml.eos_token_id'].value,
  `generation_config.json ${JSON.stringify(gen)}`);
t.check([...st.values()].every((v) => v.dtype === 'F32') && st.get('model.layers.0.self_attn.k_proj.weight')?.shape.join() === '32,64',
  'F32 dtypes and HF shapes');
const hf = new Tokenizer(JSON.parse(readFileSync(path.join(out('s260.st'), 'tokenizer.json'), 'utf8')),
  JSON.parse(readFileSync(path.join(out('s260.st'), 'tokenizer_config.json'), 'utf8')));
for (const text of ['Once upon a time, there was a little girl named Lily.', 'She said: "Hi!" 123 \u00e9t\u00e9 \ud83e\udd99\n\tend']) {
  const ours = qp('tokenize', srcGguf, text).stdout.trim().split(' ').map(Number);
  const ids = Array.from(hf.encode(text).ids);
  t.check(ids.join() === ours.join(), `tokenizer.json ids: hf ${ids} vs quantpack ${ours}`);
}
const v = qp('verify', out('s260.st'), '--against', srcGguf);
t.check(v.status === 0, `verify folder against GGUF: exit ${v.status} ${v.stdout.slice(-300)} ${v.stderr}`);

// --- 4. F16 / BF16 -------------------------------------------------------------------------
const f32 = (buf, i) => buf.readFloatLE(i * 4);
function bf16ToF32(bits) {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(bits << 16 >>> 0);
  return b.readFloatLE(0);
}
function f16ToF32(h) {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 31, f = h & 1023;
  if (e === 0) return s * f * 2 ** -24;
  if (e === 31) return f ? NaN : s * Infinity;
  return s * (1 + f / 1024) * 2 ** (e - 15);
}
// nearest: |x - dec(bits)| <= |x - dec(bits +- 1)| (the neighbours in the same sign)
const nearest = (x, bits, dec) => {
  const d = Math.abs(x - dec(bits));
  return d <= Math.abs(x - dec(bits + 1)) && (bits % 0x8000 === 0 || d <= Math.abs(x - dec(bits - 1)));
};
for (const [q, dec] of [['F16', f16ToF32], ['BF16', bf16ToF32]]) {
  convert(srcGguf, 'safetensors', out(`s260.${q}`), '--quant', q.toLowerCase());
  const h = readSafetensors(path.join(out(`s260.${q}`), 'model.safetensors'));
  let ok = 0, values = 0, bad = 0;
  for (const [name, ref] of st) {
    const w = h.get(name);
    if (!w || w.dtype !== q || w.bytes.length * 2 !== ref.bytes.length) continue;
    let good = true;
    for (let i = 0; i < ref.bytes.length / 4; i++, values++) {
      if (!nearest(f32(ref.bytes, i), w.bytes.readUInt16LE(i * 2), dec)) {
        good = false;
        if (bad++ < 3) console.error(`${q} ${name}[${i}]: ${f32(ref.bytes, i)} -> ${dec(w.bytes.readUInt16LE(i * 2))}`);
      }
    }
    if (good) ok++;
  }
  console.log(`--quant ${q}: ${ok}/${st.size} tensors, ${values} values rounded to nearest`);
  t.check(ok === st.size && h.size === st.size, `--quant ${q}: every value the nearest ${q} of the F32 folder's`);
}
convert(gqa, 'safetensors', out('gqa.st'));
const orig = readSafetensors(path.join(gqa, 'model.safetensors'));
const kept = readSafetensors(path.join(out('gqa.st'), 'model.safetensors'));
let keptSame = 0;
for (const [name, v2] of orig) if (kept.get(name)?.dtype === v2.dtype && Buffer.compare(kept.get(name).bytes, v2.bytes) === 0) keptSame++;
console.log(`HF BF16 fixture -> safetensors (keep): ${keptSame}/${orig.size} tensors keep their bytes`);
t.check(keptSame === orig.size && kept.size === orig.size, 'an HF BF16 folder keeps its tensors byte for byte');

// --- 5. quantized source, bad --quant -------------------------------------------------------
convert(real('gguf/stories260K-Q4_K_M.llamacpp.gguf'), 'safetensors', out('q4.st'), '--quant', 'F32');
const bad = qp('convert', srcGguf, '--to', 'safetensors', '--quant', 'Q4_K_M', '-o', out('bad.st'));
t.check(bad.status === 2 && /F32, F16, BF16/.test(bad.stderr), `unknown --quant: exit ${bad.status} ${bad.stderr}`);

// --- 6. Gemma 1/2/3: HF (BF16) -> GGUF F32 (norms 1 + w) -> safetensors ---------------------
// The GGUF's norms, read by @huggingface/gguf, are 1 + w; the folder written from it holds w again:
// F32 values equal to the HF ones (norms within 2^-24, the rounding of 1 + w in F32), --quant BF16
// byte for byte the HF tensors but norms (a tiny w loses bits in 1 + w); config.json keeps the family's keys; quantpack verify passes.
const isNorm = (name) => name.endsWith('norm.weight');
const gemmaKeys = ['architectures', 'model_type', 'hidden_activation', 'head_dim', 'query_pre_attn_scalar',
  'attn_logit_softcapping', 'final_logit_softcapping', 'sliding_window', 'sliding_window_pattern', 'layer_types',
  'rope_local_base_freq', 'rope_scaling', 'rope_theta', 'tie_word_embeddings', 'num_key_value_heads'];
for (const fam of ['gemma', 'gemma2', 'gemma3']) {
  const src = path.join(fixDir, fam);
  convert(src, 'gguf', out(`${fam}.gguf`), '--quant', 'F32');
  convert(out(`${fam}.gguf`), 'safetensors', out(`${fam}.st`));
  convert(out(`${fam}.gguf`), 'safetensors', out(`${fam}.bf16`), '--quant', 'bf16');
  const hfT = readSafetensors(path.join(src, 'model.safetensors'));
  const g = await readGguf(out(`${fam}.gguf`));
  const back = readSafetensors(path.join(out(`${fam}.st`), 'model.safetensors'));
  const backBf16 = readSafetensors(path.join(out(`${fam}.bf16`), 'model.safetensors'));
  let equal = 0, normsPlusOne = 0, bytesSame = 0, nNorms = 0, maxNormDiff = 0;
  for (const [name, ref] of hfT) {
    const w = back.get(name), wb = backBf16.get(name);
    const n = ref.bytes.length / 2;
    const hfVal = (i) => bf16ToF32(ref.bytes.readUInt16LE(i * 2));
    if (!isNorm(name) && wb && Buffer.compare(wb.bytes, ref.bytes) === 0) bytesSame++;
    if (!w || w.dtype !== 'F32' || w.shape.join() !== ref.shape.join()) { console.error(`${fam}: ${name} missing or reshaped`); continue; }
    let good = true;
    for (let i = 0; i < n; i++) {
      const d = Math.abs(f32(w.bytes, i) - hfVal(i));
      if (isNorm(name)) maxNormDiff = Math.max(maxNormDiff, d);
      if (d > (isNorm(name) ? 2 ** -24 : 0)) good = false;
    }
    if (good) equal++;
    else console.error(`${fam}: ${name} differs`);
    if (!isNorm(name)) continue;
    nNorms++;
    // the GGUF tensor of that norm (name map: readers/name_map.h) holds 1 + w
    const ggufName = name.replace('model.norm', 'output_norm').replace(/^model\.layers\.(\d+)\./, 'blk.$1.')
      .replace('input_layernorm', 'attn_norm').replace('self_attn.q_norm', 'attn_q_norm').replace('self_attn.k_norm', 'attn_k_norm')
      .replace('pre_feedforward_layernorm', 'ffn_norm').replace('post_feedforward_layernorm', 'post_ffw_norm')
      .replace('post_attention_layernorm', fam === 'gemma' ? 'ffn_norm' : 'post_attention_norm');
    const gt = g.tensors.get(ggufName);
    let plusOne = !!gt && gt.type === 0;
    for (let i = 0; plusOne && i < n; i++) plusOne = Math.abs(f32(gt.bytes, i) - (1 + hfVal(i))) <= 2 ** -24;
    if (plusOne) normsPlusOne++;
    else console.error(`${fam}: GGUF ${ggufName} is not 1 + the HF ${name}`);
  }
  console.log(`${fam}: HF -> GGUF F32 -> safetensors: ${equal}/${hfT.size} tensors equal (norms max |diff| ${maxNormDiff}), ` +
    `--quant BF16 ${bytesSame}/${hfT.size - nNorms} non-norm tensors byte-identical, ${normsPlusOne}/${nNorms} GGUF norms 1 + w`);
  t.check(equal === hfT.size && back.size === hfT.size && !back.has('lm_head.weight'), `${fam}: the HF tensors back`);
  t.check(bytesSame === hfT.size - nNorms && normsPlusOne === nNorms && nNorms > 0, `${fam}: BF16 bytes and GGUF norms`);
  const cfgSrc = JSON.parse(readFileSync(path.join(src, 'config.json'), 'utf8'));
  const cfgOut = JSON.parse(readFileSync(path.join(out(`${fam}.st`), 'config.json'), 'utf8'));
  for (const k of gemmaKeys.filter((k2) => k2 in cfgSrc))
    t.check(JSON.stringify(cfgOut[k]) === JSON.stringify(cfgSrc[k]) ||
      (k === 'rope_scaling' && cfgOut[k]?.factor === cfgSrc[k]?.factor && cfgOut[k]?.rope_type === cfgSrc[k]?.rope_type),
      `${fam} config.json ${k}: ${JSON.stringify(cfgOut[k])} vs the source's ${JSON.stringify(cfgSrc[k])}`);
  const vg = qp('verify', out(`${fam}.st`), '--against', src);
  t.check(vg.status === 0, `${fam}: verify folder against HF: exit ${vg.status} ${vg.stdout.slice(-300)} ${vg.stderr}`);
}

// --- 7. Phi-3 (fused attn_qkv, gate+up in one ffn_up) and Mixtral (experts merged into
// ffn_*_exps by the GGUF) : HF (BF16) -> GGUF F32 -> safetensors -------------------------------
// The GGUF, read by @huggingface/gguf, holds the fused / merged tensors (so the way back has to
// name them as Phi-3's qkv_proj / gate_up_proj and split each merged tensor into per-expert
// block_sparse_moe.experts.E.w1/w2/w3); the folder holds every HF tensor under its HF name with
// its shape, each value the BF16 one (max |diff| 0), nothing else; --quant BF16 gives the HF bytes;
// config.json carries the keys transformers reads for the class, equal to the source's.
const fusedKeys = ['architectures', 'model_type', 'hidden_size', 'intermediate_size', 'num_hidden_layers',
  'num_attention_heads', 'num_key_value_heads', 'vocab_size', 'max_position_embeddings', 'rms_norm_eps',
  'rope_theta', 'hidden_act', 'tie_word_embeddings', 'attention_bias', 'bos_token_id', 'eos_token_id',
  'num_local_experts', 'num_experts_per_tok', 'sliding_window', 'original_max_position_embeddings', 'head_dim'];
for (const [fix, gguftensor, ggufShape] of [['phi-fused', 'blk.0.ffn_up.weight', (c) => [c.hidden_size, 2 * c.intermediate_size]],
  ['mixtral', 'blk.0.ffn_gate_exps.weight', (c) => [c.hidden_size, c.intermediate_size, c.num_local_experts]]]) {
  const src = path.join(fixDir, fix);
  const cfgSrc = JSON.parse(readFileSync(path.join(src, 'config.json'), 'utf8'));
  convert(src, 'gguf', out(`${fix}.gguf`), '--quant', 'F32');
  convert(out(`${fix}.gguf`), 'safetensors', out(`${fix}.st`));
  convert(out(`${fix}.gguf`), 'safetensors', out(`${fix}.bf16`), '--quant', 'BF16');
  const g = await gguf(out(`${fix}.gguf`), { allowLocalFile: true });
  const gt = g.tensorInfos.find((x) => x.name === gguftensor);
  t.check(!!gt && gt.shape.map(Number).join() === ggufShape(cfgSrc).join(),
    `${fix}: the GGUF's ${gguftensor} is ${gt ? gt.shape.join('x') : 'missing'}, want ${ggufShape(cfgSrc).join('x')}`);
  const hfT = readSafetensors(path.join(src, 'model.safetensors'));
  const back = readSafetensors(path.join(out(`${fix}.st`), 'model.safetensors'));
  const backBf16 = readSafetensors(path.join(out(`${fix}.bf16`), 'model.safetensors'));
  let equal = 0, bytesSame = 0, maxDiff = 0;
  for (const [name, ref] of hfT) {
    const w = back.get(name), wb = backBf16.get(name);
    if (wb && wb.dtype === 'BF16' && Buffer.compare(wb.bytes, ref.bytes) === 0) bytesSame++;
    if (!w || w.dtype !== 'F32' || w.shape.join() !== ref.shape.join()) { console.error(`${fix}: ${name} missing or reshaped`); continue; }
    let d = 0;
    for (let i = 0; i < ref.bytes.length / 2; i++) d = Math.max(d, Math.abs(f32(w.bytes, i) - bf16ToF32(ref.bytes.readUInt16LE(i * 2))));
    maxDiff = Math.max(maxDiff, d);
    if (d === 0) equal++;
    else console.error(`${fix}: ${name} differs by ${d}`);
  }
  const extra = [...back.keys()].filter((n) => !hfT.has(n));
  console.log(`${fix}: HF -> GGUF F32 (${gguftensor} ${gt?.shape.join('x')}) -> safetensors: ${equal}/${hfT.size} tensors ` +
    `equal (max |diff| ${maxDiff}), ${extra.length} extra; --quant BF16 ${bytesSame}/${hfT.size} byte-identical`);
  t.check(equal === hfT.size && extra.length === 0, `${fix}: every HF tensor back under its name (extra: ${extra.join(' ')})`);
  t.check(bytesSame === hfT.size, `${fix}: --quant BF16 gives the HF bytes`);
  const cfgOut = JSON.parse(readFileSync(path.join(out(`${fix}.st`), 'config.json'), 'utf8'));
  for (const k of fusedKeys.filter((k2) => k2 in cfgSrc))
    t.check(JSON.stringify(cfgOut[k]) === JSON.stringify(cfgSrc[k]),
      `${fix} config.json ${k}: ${JSON.stringify(cfgOut[k])} vs the source's ${JSON.stringify(cfgSrc[k])}`);
  const vf = qp('verify', out(`${fix}.st`), '--against', src);
  t.check(vf.status === 0, `${fix}: verify folder against HF: exit ${vf.status} ${vf.stdout.slice(-300)} ${vf.stderr}`);
}

rmSync(tmp, { recursive: true, force: true });
t.finish();
