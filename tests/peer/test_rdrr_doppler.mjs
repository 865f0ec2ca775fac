// RDRR output against real peers: doppler-gpu 0.5.1's parseManifest (and parseTensorMap, its
// block-Merkle builder and classifyTensorRole), sha256sum(1) for every shard, Node's crypto for
// group hashes and the Ed25519 signature, @huggingface/gguf for the source tensor bytes, and
// DOPPLER's standalone LoRA adapter validator + safetensors loader.
// Cases: stories260K-Q4_K_M.llamacpp.gguf (one shard; its Q5_0/Q8_0 stored as F32), stories260K.gguf with --shard-size 4096
// (spanning tensors), HF llama-tied -> Q4_K_M (padded rows), llama-gqa-untied -> F16 multi-shard,
// a signed model, a Mixtral-style MoE (HF mixtral -> Q4_K_M: moeConfig, expert/router groups and
// roles as DOPPLER classifies them), a PEFT LoRA adapter written here and Gemma 1/2/3 (DOPPLER's
// model-config builder derives the HF config's values from our manifest).
// Env: QP_BIN_DIR, QP_PEER_DIR, QP_REAL_FIXTURES, QP_FIXTURES_DIR, QP_TMP_DIR. Exit 77 = skipped.
import { execFileSync } from 'node:child_process';
import { createHash, createPublicKey, verify as edVerify } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

import { peerRequire, requireEnv, skip, tally } from './peer_util.mjs';

const env = (k) => process.env[k];
const [binDir, peerDir, tmpRoot] = requireEnv('QP_BIN_DIR', 'QP_PEER_DIR', 'QP_TMP_DIR');
const realDir = env('QP_REAL_FIXTURES'), fixDir = env('QP_FIXTURES_DIR');
const dopplerDir = path.join(peerDir, 'doppler-gpu');
if (!existsSync(path.join(dopplerDir, 'package.json'))) skip(`doppler-gpu is not installed in ${peerDir}`);
const { parseManifest, classifyTensorRole } = await import(
  pathToFileURL(path.join(dopplerDir, 'src/tooling-exports/manifest.js')).href);
const { parseTensorMap } = await import(pathToFileURL(path.join(dopplerDir, 'src/formats/rdrr/parsing.js')).href);
const { classifyTensor, getGroupType, parseGroupExpertIndex } = await import(
  pathToFileURL(path.join(dopplerDir, 'src/formats/rdrr/classification.js')).href);
const { buildTensorBlockMerkleRoot } = await import(
  pathToFileURL(path.join(dopplerDir, 'src/formats/rdrr/integrity.js')).href);
const adapterMod = await import(pathToFileURL(path.join(dopplerDir, 'src/experimental/adapters/adapter-manifest.js')).href);
const loraLoader = await import(pathToFileURL(path.join(dopplerDir, 'src/experimental/adapters/lora-loader.js')).href);
const require = peerRequire(peerDir);
const { gguf, GGMLQuantizationType } = require('@huggingface/gguf');

const qp = path.join(binDir, 'quantpack'), g2r = path.join(binDir, 'gguf-to-rdrr');
const tmp = path.join(tmpRoot, 'rdrr-doppler');
rmSync(tmp, { recursive: true, force: true });
mkdirSync(tmp, { recursive: true });

const { check, finish } = tally();
const sha256 = (b) => createHash('sha256').update(b).digest('hex');
const run = (exe, args) => execFileSync(exe, args, { stdio: ['ignore', 'pipe', 'pipe'] });
function sha256sum(file) {
  return execFileSync('sha256sum', [file]).toString().split(/\s+/)[0];
}

// Every byte of a tensor, gathered from its shard or spans (our own reading, from the manifest).
function tensorBytes(dir, manifest, loc) {
  const spans = loc.spans ?? [{ shardIndex: loc.shard, offset: loc.offset, size: loc.size }];
  const parts = spans.map((s) => {
    const f = readFileSync(path.join(dir, manifest.shards[s.shardIndex].filename));
    return f.subarray(s.offset, s.offset + s.size);
  });
  return Buffer.concat(parts);
}

async function checkModel(label, dir, opts = {}) {
  const text = readFileSync(path.join(dir, 'manifest.json'), 'utf8');
  let m = null;
  try { m = parseManifest(text); } catch (e) { check(false, `${label}: parseManifest: ${e.message}`); return null; }
  check(true, `${label}: parseManifest accepts`);
  const raw = JSON.parse(text);
  // tensors.json through DOPPLER's tensor-map parser, and equal to the inline copy
  const tfile = readFileSync(path.join(dir, 'tensors.json'), 'utf8');
  try { parseTensorMap(tfile); check(true, 'parseTensorMap'); } catch (e) { check(false, `${label}: parseTensorMap: ${e.message}`); }
  check(JSON.stringify(JSON.parse(tfile)) === JSON.stringify(raw.tensors), `${label}: tensors.json equals the inline tensors`);
  // shards: sha256sum, size, running offsets, blake3 alias
  let running = 0;
  raw.shards.forEach((s, i) => {
    const f = path.join(dir, s.filename);
    const sum = sha256sum(f);
    check(s.index === i, `${label}: shard ${i} index`);
    check(s.filename === `shard_${String(i).padStart(5, '0')}.bin`, `${label}: shard ${i} name`);
    check(sum === s.hash && sum === s.blake3, `${label}: shard ${i} sha256sum ${sum} vs manifest ${s.hash}`);
    check(readFileSync(f).length === s.size, `${label}: shard ${i} size`);
    check(s.offset === running, `${label}: shard ${i} offset ${s.offset} != ${running}`);
    running += s.size;
  });
  check(raw.totalSize === running, `${label}: totalSize`);
  check(raw.hashAlgorithm === 'sha256', `${label}: hashAlgorithm`);
  check(raw.tensorCount === Object.keys(raw.tensors).length, `${label}: tensorCount`);
  // tensors: alignment, bounds, spans; roles as DOPPLER classifies them
  let nSpans = 0;
  for (const [name, t] of Object.entries(raw.tensors)) {
    check(t.offset % 4096 === 0, `${label}: ${name} offset ${t.offset} not 4 KiB aligned`);
    if (t.spans) {
      nSpans++;
      check(t.spans[0].shardIndex === t.shard && t.spans[0].offset === t.offset, `${label}: ${name} first span = shard/offset`);
      check(t.spans.reduce((a, s) => a + s.size, 0) === t.size, `${label}: ${name} spans sum to size`);
      for (let k = 1; k < t.spans.length; k++)
        check(t.spans[k].offset === 0 && t.spans[k].shardIndex === t.spans[k - 1].shardIndex + 1, `${label}: ${name} span ${k} continues`);
    } else {
      check(t.offset + t.size <= raw.shards[t.shard].size, `${label}: ${name} inside its shard`);
    }
    if (!opts.lora) check(t.role === classifyTensorRole(name), `${label}: ${name} role ${t.role} vs DOPPLER ${classifyTensorRole(name)}`);
  }
  if (opts.expectSpans) check(nSpans > 0, `${label}: expected spanning tensors`);
  // groups: hash recomputed here from the stored bytes, in the listed order; GGUF blk.N grouping
  const seen = new Set();
  for (const [gid, g] of Object.entries(raw.groups)) {
    const bytes = Buffer.concat(g.tensors.map((n) => tensorBytes(dir, raw, raw.tensors[n])));
    check(sha256(bytes) === g.hash, `${label}: group ${gid} hash`);
    const shards = new Set();
    for (const n of g.tensors) {
      seen.add(n);
      check(raw.tensors[n].group === gid, `${label}: ${n} group field`);
      const t = raw.tensors[n];
      (t.spans ?? [{ shardIndex: t.shard }]).forEach((s) => shards.add(s.shardIndex));
      const mm = n.match(/^blk\.(\d+)\./) ?? n.match(/layers?[._](\d+)/);
      // MoE (HF names): DOPPLER's own classifier gives layer.N.expert.M / layer.N.shared
      const moe = !n.startsWith('blk.') && /experts?[._]\d|block_sparse_moe\.gate/.test(n);
      if (moe) {
        const want = classifyTensor(n, 'mixtral');
        check(gid === want && g.type === getGroupType(gid, 'mixtral') && g.layerIndex === Number(mm[1]) &&
              (g.expertIndex ?? undefined) === parseGroupExpertIndex(gid), `${label}: ${n} in ${gid} (DOPPLER: ${want}, type ${g.type})`);
      } else if (mm) check(gid === `layer.${mm[1]}` && g.layerIndex === Number(mm[1]), `${label}: ${n} in ${gid}`);
      else if (/token_embd|embed_tokens/.test(n)) check(gid === 'embed', `${label}: ${n} in embed`);
      else if (/^output|lm_head|model\.norm/.test(n)) check(gid === 'head', `${label}: ${n} in head`);
    }
    check(JSON.stringify([...shards].sort((a, b) => a - b)) === JSON.stringify(g.shards), `${label}: group ${gid} shards`);
  }
  check(seen.size === Object.keys(raw.tensors).length, `${label}: every tensor is in a group`);
  // block Merkle roots, computed by DOPPLER's own integrity code reading our shards
  const roots = raw.integrityExtensions.blockMerkle.roots;
  for (const [name, t] of Object.entries(raw.tensors)) {
    const r = await buildTensorBlockMerkleRoot(name, t, {
      readShardRange: async (si, off, len) => readFileSync(path.join(dir, raw.shards[si].filename)).subarray(off, off + len),
    });
    check(r.root === roots[name], `${label}: ${name} Merkle root ${r.root} vs ${roots[name]}`);
  }
  return { m, raw };
}

async function checkGgufBytes(label, ggufPath, dir, raw) {
  const { tensorInfos, tensorDataOffset } = await gguf(ggufPath, { allowLocalFile: true });
  const file = readFileSync(ggufPath);
  const order = tensorInfos.map((t) => Number(t.offset)).sort((a, b) => a - b);
  check(tensorInfos.length === Object.keys(raw.tensors).length, `${label}: tensor count vs GGUF`);
  for (const ti of tensorInfos) {
    const t = raw.tensors[ti.name];
    check(!!t, `${label}: ${ti.name} kept with its GGUF name`);
    if (!t) continue;
    check(JSON.stringify(t.shape) === JSON.stringify(ti.shape.map(Number).reverse()), `${label}: ${ti.name} shape`);
    // a GGUF type DOPPLER's loader does not decode is stored as F32 and listed with its type
    // (the values: golden.rdrr_gguf_bytes against ggml's dequantization, peer.rdrr_doppler_load)
    const gtype = GGMLQuantizationType[ti.dtype];
    const change = (raw.quantizationInfo.dtypeChanges ?? []).filter((c) => c.tensor === ti.name);
    if (!['F32', 'F16', 'BF16', 'Q4_K', 'Q6_K'].includes(gtype)) {
      const n = ti.shape.reduce((a, b) => a * Number(b), 1);
      check(t.dtype === 'F32' && t.size === n * 4 && change.length === 1 && change[0].planned === gtype,
        `${label}: ${ti.name} (${gtype}) stored as F32 and listed in dtypeChanges`);
      continue;
    }
    check(change.length === 0, `${label}: ${ti.name} kept as ${gtype}`);
    const start = Number(tensorDataOffset) + Number(ti.offset);
    const got = tensorBytes(dir, raw, t);
    const want = file.subarray(start, start + got.length);
    check(got.equals(want), `${label}: ${ti.name} bytes equal the GGUF's`);
    // the stored size is exactly the GGUF tensor's extent (next offset or end, minus alignment)
    const next = order.find((o) => o > Number(ti.offset));
    const limit = next !== undefined ? next : file.length - Number(tensorDataOffset);
    check(Number(ti.offset) + t.size <= limit, `${label}: ${ti.name} size within the GGUF tensor`);
  }
}

const cases = [];
if (realDir && existsSync(path.join(realDir, 'gguf/stories260K-Q4_K_M.llamacpp.gguf'))) {
  const src = path.join(realDir, 'gguf/stories260K-Q4_K_M.llamacpp.gguf');
  const out = path.join(tmp, 's4');
  run(g2r, [src, out, '--quiet']);
  const r = await checkModel('stories260K-Q4_K_M', out);
  if (r) {
    await checkGgufBytes('stories260K-Q4_K_M', src, out, r.raw);
    // general.file_type says Q4_K_M, but its Q5_0/Q8_0 fallbacks are stored as F32: the label is
    // then the dtype most weights are stored in
    check(r.raw.quantization === 'F32' && r.raw.quantizationInfo.dtypeChanges.length === 32, 'label from the stored dtypes');
    check(r.raw.tokenizer?.type === 'sentencepiece' && existsSync(path.join(out, 'tokenizer.model')), 'tokenizer.model written');
  }
  cases.push('s4');
}
if (realDir && existsSync(path.join(realDir, 'stories260K.gguf'))) {
  const src = path.join(realDir, 'stories260K.gguf');
  const out = path.join(tmp, 'sspan');
  run(g2r, [src, out, '--shard-size', '4096', '--quiet']);
  const r = await checkModel('stories260K (4 KiB shards)', out, { expectSpans: true });
  if (r) await checkGgufBytes('stories260K (4 KiB shards)', src, out, r.raw);
  // signed copy: Ed25519 checked with Node's crypto over the exact manifest bytes
  const key = path.join(tmp, 'k.key');
  run(qp, ['keygen', key]);
  const sdir = path.join(tmp, 'signed');
  run(g2r, [src, sdir, '--sign', key, '--quiet']);
  const sig = JSON.parse(readFileSync(path.join(sdir, 'manifest.json.sig'), 'utf8'));
  const pubHex = readFileSync(key + '.pub', 'utf8').trim();
  check(sig.publicKey === pubHex, 'signature names the public key');
  const pub = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(pubHex, 'hex').toString('base64url') }, format: 'jwk' });
  const mbytes = readFileSync(path.join(sdir, 'manifest.json'));
  check(edVerify(null, mbytes, pub, Buffer.from(sig.signature, 'hex')), 'Ed25519 signature verifies (node:crypto)');
  check(!edVerify(null, Buffer.concat([mbytes, Buffer.from(' ')]), pub, Buffer.from(sig.signature, 'hex')), 'signature fails on changed bytes');
  await checkModel('signed', sdir);
  cases.push('sspan', 'signed');
}
if (fixDir && existsSync(path.join(fixDir, 'llama-tied'))) {
  const out = path.join(tmp, 'lt-q4');
  run(qp, ['convert', path.join(fixDir, 'llama-tied'), '--to', 'rdrr', '--quant', 'Q4_K_M', '-o', out, '--quiet']);
  const r = await checkModel('llama-tied Q4_K_M', out);
  if (r) {
    const q = Object.entries(r.raw.tensors).filter(([, t]) => t.dtype === 'Q4_K_M');
    check(q.length > 0, 'some Q4_K_M tensors');
    // row layout: each row padded to a multiple of 256 -> 144 bytes per 256 per row
    for (const [n, t] of q) {
      const [rows, cols] = t.shape;
      check(t.size === rows * Math.ceil(cols / 256) * 144 && t.layout === 'row', `${n}: Q4_K rows padded to 256`);
    }
    check(existsSync(path.join(out, 'tokenizer.json')) && r.raw.tokenizer?.type === 'bundled', 'tokenizer.json carried');
    check(readFileSync(path.join(out, 'tokenizer.json')).equals(readFileSync(path.join(fixDir, 'llama-tied/tokenizer.json'))), 'tokenizer.json byte-identical');
  }
  const out2 = path.join(tmp, 'gqa-f16');
  run(qp, ['convert', path.join(fixDir, 'llama-gqa-untied'), '--to', 'rdrr', '--quant', 'F16', '-o', out2, '--shard-size', '65536', '--quiet']);
  const r2 = await checkModel('llama-gqa-untied F16 (64 KiB shards)', out2, { expectSpans: true });
  if (r2) check(r2.raw.shards.length > 1, 'multi-shard');
  cases.push('lt-q4', 'gqa-f16');
}
// Mixtral-style MoE (issue 16): every check above (parseManifest with moeConfig, roles expert /
// router and groups layer.N.expert.M / layer.N.shared as DOPPLER classifies them, group hashes,
// Merkle roots), Q4_K_M here (the load test covers F16 through DOPPLER's expert loader)
if (fixDir && existsSync(path.join(fixDir, 'mixtral'))) {
  const out = path.join(tmp, 'mixtral-q4');
  run(qp, ['convert', path.join(fixDir, 'mixtral'), '--to', 'rdrr', '--quant', 'Q4_K_M', '-o', out, '--quiet']);
  const r = await checkModel('mixtral Q4_K_M (MoE)', out);
  if (r) {
    const moe = r.raw.moeConfig ?? {};
    check(moe.numExperts === 8 && moe.numExpertsPerToken === 2 && moe.expertFormat === 'mixtral', `mixtral: moeConfig ${JSON.stringify(moe)}`);
    const groups = Object.keys(r.raw.groups);
    check(groups.filter((g) => /^layer\.\d+\.expert\.\d+$/.test(g)).length === 16 && groups.includes('layer.1.shared'),
      `mixtral: 16 expert groups and the router groups (${groups.join(' ')})`);
    const roles = Object.values(r.raw.tensors).map((t) => t.role);
    check(roles.filter((x) => x === 'expert').length === 48 && roles.filter((x) => x === 'router').length === 2, 'mixtral: 48 experts, 2 routers');
  }
  cases.push('mixtral');
}

// LoRA: a PEFT adapter written here (2 layers, q_proj + v_proj, rank 4, F16 / F32)
{
  const peft = path.join(tmp, 'peft');
  mkdirSync(peft, { recursive: true });
  const hidden = 64, rank = 4;
  const tensors = [];
  let seed = 12345;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32) - 0.5;
  for (let l = 0; l < 2; l++)
    for (const mod of ['q_proj', 'v_proj']) {
      tensors.push({ name: `base_model.model.model.layers.${l}.self_attn.${mod}.lora_A.weight`, shape: [rank, hidden] });
      tensors.push({ name: `base_model.model.model.layers.${l}.self_attn.${mod}.lora_B.weight`, shape: [hidden, rank] });
    }
  const header = {}; const datas = []; let off = 0;
  for (const t of tensors) {
    const n = t.shape[0] * t.shape[1];
    const b = Buffer.alloc(n * 4);
    for (let i = 0; i < n; i++) b.writeFloatLE(rnd(), i * 4);
    header[t.name] = { dtype: 'F32', shape: t.shape, data_offsets: [off, off + b.length] };
    t.data = b; datas.push(b); off += b.length;
  }
  let hj = Buffer.from(JSON.stringify(header));
  hj = Buffer.concat([hj, Buffer.alloc((8 - (hj.length % 8)) % 8, 0x20)]);
  const len = Buffer.alloc(8); len.writeBigUInt64LE(BigInt(hj.length));
  writeFileSync(path.join(peft, 'adapter_model.safetensors'), Buffer.concat([len, hj, ...datas]));
  writeFileSync(path.join(peft, 'adapter_config.json'), JSON.stringify({ peft_type: 'LORA', r: rank, lora_alpha: 8, lora_dropout: 0.05, target_modules: ['q_proj', 'v_proj'], base_model_name_or_path: fixDir ? path.join(fixDir, 'llama-tied') : 'llama-tied' }));
  const out = path.join(tmp, 'lora');
  run(qp, ['convert', peft, '--to', 'rdrr', '-o', out, '--quiet']);
  const r = await checkModel('LoRA adapter', out, { lora: true });
  if (r) {
    check(r.raw.adapterType === 'lora' && r.raw.modelType === 'lora', 'adapterType lora');
    check(r.raw.loraConfig.rank === rank && r.raw.loraConfig.alpha === 8, 'loraConfig');
    check(JSON.stringify(r.raw.loraConfig.targetModules) === '["q_proj","v_proj"]', 'targetModules');
    for (const t of tensors) {
      const m = t.name.match(/layers\.(\d+)\.self_attn\.(\w+)\.lora_([AB])/);
      const n = `layers.${m[1]}.${m[2]}.lora_${m[3].toLowerCase()}`;
      const loc = r.raw.tensors[n];
      check(!!loc && loc.dtype === 'F32' && JSON.stringify(loc.shape) === JSON.stringify(t.shape), `${n}: F32 ${t.shape}`);
      if (loc) check(tensorBytes(out, r.raw, loc).equals(t.data), `${n}: bytes equal the PEFT tensor`);
    }
  }
  const sa = readFileSync(path.join(out, 'adapter_manifest.json'), 'utf8');
  try { adapterMod.parseManifest(sa); check(true, 'standalone adapter manifest'); }
  catch (e) { check(false, `standalone adapter manifest: ${e.message}`); }
  const sam = JSON.parse(sa);
  check(sam.checksum === sha256sum(path.join(out, sam.weightsPath)), 'standalone checksum = sha256sum of the weights');
  // DOPPLER's loader: reads the weights, checks the checksum, requires complete A/B pairs
  try {
    const data = readFileSync(path.join(out, sam.weightsPath));
    const ad = await loraLoader.loadLoRAFromSafetensors(data.buffer.slice(data.byteOffset, data.byteOffset + data.length), sam);
    check(ad.layers.size === 2, `DOPPLER loaded ${ad.layers.size} LoRA layers`);
  } catch (e) { check(false, `DOPPLER LoRA loader: ${e.message}`); }
  cases.push('lora');
}

// Gemma 1/2/3 (issue 16): HF fixtures -> RDRR F32 (gemma3 also Q4_K_M). Every check above, then
// DOPPLER's own model-config builder (parseModelConfigFromManifest) on the manifest must derive
// what the HF config.json says: q scale, soft-caps (Gemma 2's transformers defaults when absent),
// sliding window, layer types, local rope base, linear rope scaling, norms applied as 1 + w over
// the w the HF folder stores, embeddings x sqrt(hidden). Its session.perLayerInputs gate (runtime
// policy, absent from every manifest we write) is filled from DOPPLER's own gemma3 conversion
// config. quantpack verify of the package against the HF source must pass.
const { parseModelConfigFromManifest } = await import(
  pathToFileURL(path.join(dopplerDir, 'src/inference/pipelines/text/config.js')).href);
const dopplerSession = JSON.parse(readFileSync(path.join(dopplerDir,
  'src/config/conversion/gemma3/gemma-3-270m-it-f16-af32.json'), 'utf8')).session;
for (const [fam, quant] of [['gemma', 'F32'], ['gemma2', 'F32'], ['gemma3', 'F32'], ['gemma3', 'Q4_K_M']]) {
  const src = fixDir ? path.join(fixDir, fam) : null;
  if (!src || !existsSync(src)) continue;
  const out = path.join(tmp, `${fam}-${quant}`);
  run(qp, ['convert', src, '--to', 'rdrr', '--quant', quant, '-o', out, '--quiet']);
  const r = await checkModel(`${fam} ${quant}`, out);
  if (!r) continue;
  const hf = JSON.parse(readFileSync(path.join(src, 'config.json'), 'utf8'));
  const man = JSON.parse(readFileSync(path.join(out, 'manifest.json'), 'utf8'));
  man.inference.session = { ...man.inference.session, perLayerInputs: dopplerSession.perLayerInputs };
  let c = null;
  try { c = parseModelConfigFromManifest(parseManifest(JSON.stringify(man))); }
  catch (e) { check(false, `${fam}: DOPPLER's parseModelConfigFromManifest: ${e.message}`); continue; }
  const g2 = fam === 'gemma2', g3 = fam === 'gemma3';
  const capOr = (v, d) => (v === undefined ? d : v);
  const layerTypes = g3 ? hf.layer_types
    : g2 ? Array.from({ length: hf.num_hidden_layers }, (_, i) => (i % 2 ? 'full_attention' : 'sliding_attention')) : null;
  const want = {
    queryPreAttnScalar: fam === 'gemma' ? hf.head_dim : hf.query_pre_attn_scalar,
    attnLogitSoftcapping: capOr(hf.attn_logit_softcapping, g2 ? 50 : null),
    finalLogitSoftcapping: capOr(hf.final_logit_softcapping, g2 ? 30 : null),
    slidingWindow: fam === 'gemma' ? null : hf.sliding_window,
    layerTypes, rmsNormWeightOffset: true, scaleEmbeddings: true, hiddenActivation: 'gelu',
    ropeTheta: hf.rope_theta, ropeLocalTheta: g3 ? hf.rope_local_base_freq : null,
    ropeScaling: g3 && hf.rope_scaling ? { type: hf.rope_scaling.rope_type, factor: hf.rope_scaling.factor } : null,
    postFeedforwardNorm: fam !== 'gemma', queryKeyNorm: g3,
  };
  for (const [k, v] of Object.entries(want))
    check(JSON.stringify(c[k]) === JSON.stringify(v), `${fam} ${quant}: DOPPLER's ${k} ${JSON.stringify(c[k])}, HF says ${JSON.stringify(v)}`);
  let v = null;
  try { v = run(qp, ['verify', out, '--against', src]).toString(); } catch (e) { v = `exit ${e.status} ${e.stdout}`; }
  check(/verdict: PASS/.test(v), `${fam} ${quant}: verify against the HF source: ${v.slice(-200)}`);
  console.log(`${fam} ${quant}: ${v.split('\n').filter((l) => /cosine/.test(l)).slice(-1)[0]}`);
  cases.push(`${fam}-${quant}`);
}

console.log(`cases: ${cases.join(', ')}`);
finish();
