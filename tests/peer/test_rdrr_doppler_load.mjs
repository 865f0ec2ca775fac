// Every RDRR package quantpack writes, loaded by doppler-gpu 0.5.1's own loader and tokenizer.
//
// What DOPPLER code runs, and how (no GPU or browser here: Node has no WebGPU adapter):
// - Tensors: DOPPLER's DopplerLoader (src/loader/doppler-loader.js) with its ShardCache given a
//   custom shard loader that reads our shard files (setCustomShardLoader, verify on: every shard is
//   SHA-256-checked against the manifest before any byte is used; a tampered shard must be refused),
//   the manifest through its parseManifest, tensor locations through its buildTensorLocations
//   (src/loader/shard-resolver.js), then loader.loadTensor(name, toGPU=false): its tensor reader
//   (spans assembled) and loadTensorToCPU, the CPU dispatch of its loader rules. That path decodes
//   F32/F16/BF16 itself and hands Q4_K_M/Q6_K back as raw blocks; Q4_K_M blocks are then decoded by
//   the CPU reference its loader uses on CPU-reference backends (src/converter/quantizer.js
//   dequantizeQ4KM, or dequantizeQ4KMRowWise when the row length is not a multiple of 256, the
//   choice of getQ4KCpuReferenceContext). DOPPLER has no CPU Q6_K decoder (only its WGSL kernel),
//   so for Q6_K the test checks the raw bytes DOPPLER returns, and the shape contract of that
//   kernel (whole 256-element blocks, size = elements / 256 * 210), and our decoding NaN-free.
//   Any other dtype is a failure: DOPPLER's rules would read it as F32 words.
// - Whole load: for packages whose dtypes its CPU fallback materializes (F32/F16/BF16), the
//   complete DopplerLoader.load(): embeddings, every layer, final norm and LM head, with
//   verifyHashes on. It needs a WebGPU device only through init(); the test skips init (a truthy
//   heapManager) and records "no f16, no subgroups, no device" in DOPPLER's shared device state,
//   so each tensor takes the loader's own "GPU device not available; falling back to CPU" path.
//   Packages with Q4_K_M/Q6_K are not loaded whole: that CPU fallback returns raw blocks its
//   layer loader drops (DOPPLER's behaviour: its Q4_K/Q6_K decoding is GPU or GPU-buffer bound).
// - Ours: the stored bytes of each tensor decoded by `quantpack decode` (padding stripped).
//   F32/F16/BF16/Q4_K_M: DOPPLER's floats must equal ours bit for bit; all: no NaN.
// - Tokenizer: DOPPLER's Tokenizer.initialize(manifest) with the package's tokenizer.model or
//   tokenizer.json, compared with `quantpack tokenize DIR` on a few prompts (ids equal), and its
//   vocabulary size equal to manifest.tokenizer.vocabSize (no fallback vocabulary).
// Packages: llama-tied F32 and Q4_K_M (padded rows), llama-k256 Q4_K_M (Q4_K + Q6_K), qwen2 F16
// with a chat template added, llama-gqa-untied F16 in 64 KiB shards (spanning tensors),
// gguf-to-rdrr of stories260K.gguf (4 KiB shards, spanning) and of llama.cpp's
// stories260K-Q4_K_M GGUF (Q5_0/Q8_0 stored as exact F32), stories260K.gguf -> RDRR Q4_K_M (the
// issue's case: Q8_0 fallbacks -> F16), mixtral F16 (Mixtral-style MoE: DOPPLER's expert loader
// on every expert), gemma / gemma2 / gemma3 F32 (loaded whole: DOPPLER's layer loader finds every
// Gemma norm under our names), and a PEFT LoRA adapter.
// Env: QP_BIN_DIR, QP_PEER_DIR, QP_TMP_DIR, QP_FIXTURES_DIR, QP_REAL_FIXTURES. Exit 77 = skipped.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

import { requireEnv, skip, tally } from './peer_util.mjs';

const [binDir, peerDir, tmpRoot] = requireEnv('QP_BIN_DIR', 'QP_PEER_DIR', 'QP_TMP_DIR');
const realDir = process.env.QP_REAL_FIXTURES, fixDir = process.env.QP_FIXTURES_DIR;
const dop = path.join(peerDir, 'doppler-gpu');
if (!existsSync(path.join(dop, 'package.json'))) skip(`doppler-gpu is not installed in ${peerDir}`);
const imp = (p) => import(pathToFileURL(path.join(dop, 'src', p)).href);

// DOPPLER logs through console; keep only its warnings and errors.
const { setLogLevel } = await imp('debug/index.js').catch(() => ({}));
if (typeof setLogLevel === 'function') setLogLevel('warn');
await imp('gpu/device.js');
const devState = globalThis.__dopplerGpuDeviceState;
if (!devState) skip('doppler-gpu 0.5.1 device state not found (the loader layout changed)');
devState.kernelCapabilities = { hasF16: false, hasSubgroups: false, hasSubgroupsF16: false, hasTimestampQuery: false };
const { DopplerLoader } = await imp('loader/doppler-loader.js');
const { parseManifest } = await imp('formats/rdrr/index.js');
const { buildTensorLocations } = await imp('loader/shard-resolver.js');
const { dequantizeQ4KM, dequantizeQ4KMRowWise } = await imp('converter/quantizer.js');
const { Tokenizer } = await imp('inference/tokenizer.js');
const { isCpuWeightBuffer } = await imp('gpu/weight-buffer.js');
const { convertF16ToF32CPU } = await imp('loader/tensors/tensor-loader.js');

const qp = path.join(binDir, 'quantpack'), g2r = path.join(binDir, 'gguf-to-rdrr');
const tmp = path.join(tmpRoot, 'rdrr-doppler-load');
rmSync(tmp, { recursive: true, force: true });
mkdirSync(tmp, { recursive: true });
const { check, finish } = tally();
const run = (exe, args) => execFileSync(exe, args, { stdio: ['ignore', 'pipe', 'pipe'] });

const DECODE_TYPE = { F32: 'f32', F16: 'f16', BF16: 'bf16', Q4_K_M: 'q4_k', Q4_K: 'q4_k', Q6_K: 'q6_k' };
const BLOCK = { Q4_K_M: [256, 144], Q4_K: [256, 144], Q6_K: [256, 210] };

function tensorBytes(dir, raw, loc) {
  const spans = loc.spans ?? [{ shardIndex: loc.shard, offset: loc.offset, size: loc.size }];
  return Buffer.concat(spans.map((s) =>
    readFileSync(path.join(dir, raw.shards[s.shardIndex].filename)).subarray(s.offset, s.offset + s.size)));
}

// Our decoding of a stored tensor: `quantpack decode`, rows zero-padded to 256 stripped.
function ourDecode(dir, raw, name, loc) {
  const bytes = tensorBytes(dir, raw, loc);
  const cols = loc.shape[loc.shape.length - 1];
  const n = loc.shape.reduce((a, b) => a * b, 1), rows = n / cols;
  const blk = BLOCK[loc.dtype];
  const pcols = blk ? Math.ceil(cols / blk[0]) * blk[0] : cols;
  const inF = path.join(tmp, 'dec.in'), outF = path.join(tmp, 'dec.f32');
  writeFileSync(inF, bytes);
  rmSync(outF, { force: true }); // decode never replaces an existing output
  run(qp, ['decode', '--type', DECODE_TYPE[loc.dtype], '--cols', String(pcols), inF, outF]);
  const all = readFileSync(outF);
  const f = new Float32Array(all.buffer, all.byteOffset, all.length / 4);
  if (pcols === cols) return Float32Array.from(f);
  const out = new Float32Array(n);
  for (let r = 0; r < rows; r++) out.set(f.subarray(r * pcols, r * pcols + cols), r * cols);
  return out;
}

function shardLoader(dir, raw, tamper = -1) {
  return async (i) => {
    const b = Buffer.from(readFileSync(path.join(dir, raw.shards[i].filename)));
    if (i === tamper) b[b.length >> 1] ^= 1;
    return new Uint8Array(b.buffer, b.byteOffset, b.length);
  };
}

function newLoader(dir, raw, manifest, tamper = -1) {
  const L = new DopplerLoader();
  L.setCustomShardLoader(shardLoader(dir, raw, tamper), { verify: true });
  L.setTensorsJsonLoader(async () => readFileSync(path.join(dir, 'tensors.json'), 'utf8'));
  L.setManifest(manifest);
  return L;
}

const bitsEqual = (a, b) => a.length === b.length &&
  Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
const hasNaN = (f) => f.some((x) => Number.isNaN(x));

async function checkTensors(label, dir, raw, manifest) {
  const L = newLoader(dir, raw, manifest);
  const locs = await buildTensorLocations(manifest, {
    hasCustomLoader: true, loadTensorsJson: async () => readFileSync(path.join(dir, 'tensors.json'), 'utf8'),
  });
  for (const [n, l] of locs) L.tensorLocations.set(n, l);
  check(locs.size === Object.keys(raw.tensors).length, `${label}: DOPPLER resolves ${locs.size} tensor locations`);
  const byType = {};
  for (const [name, loc] of Object.entries(raw.tensors)) {
    byType[loc.dtype] = (byType[loc.dtype] ?? 0) + 1;
    if (!DECODE_TYPE[loc.dtype]) { check(false, `${label}: ${name}: dtype ${loc.dtype} has no DOPPLER decoder`); continue; }
    let got;
    try { got = await L.loadTensor(name, false); } catch (e) { check(false, `${label}: ${name}: DOPPLER loadTensor: ${e.message}`); continue; }
    const ours = ourDecode(dir, raw, name, loc);
    check(!hasNaN(ours), `${label}: ${name}: our decoding has NaN`);
    const n = loc.shape.reduce((a, b) => a * b, 1), cols = loc.shape[loc.shape.length - 1];
    if (loc.dtype === 'Q6_K') {
      const bytes = tensorBytes(dir, raw, loc);
      check(Buffer.from(got.buffer, got.byteOffset, got.byteLength).equals(bytes), `${label}: ${name}: Q6_K bytes via DOPPLER's reader`);
      check(cols % 256 === 0 && loc.size === n / 256 * 210, `${label}: ${name}: Q6_K in whole 256-blocks (DOPPLER's kernel has no row padding)`);
      continue;
    }
    if (loc.dtype === 'Q4_K_M' || loc.dtype === 'Q4_K') {
      const rowwise = loc.shape.length >= 2 && (loc.layout ?? 'row') === 'row' && cols % 256 !== 0;
      const q = got instanceof Uint8Array ? got : new Uint8Array(got);
      got = rowwise ? dequantizeQ4KMRowWise(q, loc.shape) : dequantizeQ4KM(q, Math.ceil(loc.size / 144), loc.shape);
    }
    check(got instanceof Float32Array && got.length === n, `${label}: ${name}: DOPPLER gives ${got?.length} floats, want ${n}`);
    check(!hasNaN(got), `${label}: ${name}: DOPPLER's decoding has NaN`);
    if (got instanceof Float32Array && got.length === n && !bitsEqual(got, ours)) {
      let k = 0;
      while (k < n && Object.is(got[k], ours[k])) k++;
      check(false, `${label}: ${name} (${loc.dtype}): DOPPLER ${got[k]} vs ours ${ours[k]} at ${k}`);
    } else check(true, 'equal');
  }
  console.log(`${label}: ${Object.entries(byType).map(([k, v]) => `${k} x${v}`).join(', ')}`);
  return byType;
}

// DopplerLoader.load(): the whole model, CPU fallback, hashes verified.
async function checkWholeLoad(label, dir, raw, manifest, layerKeys = []) {
  const L = newLoader(dir, raw, manifest);
  L.heapManager = {}; // init() would ask for a WebGPU device; nothing else needs it here
  L.gpuCapabilities = { hasF16: false, hasSubgroups: false };
  try {
    await L.load(manifest.modelId, { verifyHashes: true });
  } catch (e) { check(false, `${label}: DOPPLER load(): ${e.message}`); return; }
  const nl = raw.architecture.numLayers;
  check(L.layers.size === nl, `${label}: DOPPLER loaded ${L.layers.size} of ${nl} layers`);
  // DOPPLER keeps an F16 embedding (and a tied LM head) as a range-backed CPU source: read it
  // whole through that source
  const whole = async (x) => {
    if (!isCpuWeightBuffer(x) || typeof x.data?.loadRange !== 'function') return x;
    const n = x.shape.reduce((a, b) => a * b, 1), f16 = x.dtype === 'f16';
    const b = new Uint8Array(await x.data.loadRange(0, n * (f16 ? 2 : 4)));
    return f16 ? convertF16ToF32CPU(new Uint16Array(b.buffer, b.byteOffset, n)) : new Float32Array(b.buffer, b.byteOffset, n);
  };
  const arrays = [await whole(L.embeddings), L.finalNorm, await whole(L.lmHead)];
  for (const w of L.layers.values()) arrays.push(...Object.values(w).filter((v) => v instanceof Float32Array));
  check(arrays.every((a) => a instanceof Float32Array && a.length > 0 && !hasNaN(a)), `${label}: whole load gives NaN-free float weights`);
  // the layer weights DOPPLER must find by name (Gemma 2/3's four norms, q/k norms)
  for (const [i, w] of [...L.layers.entries()])
    for (const k of layerKeys) check(w?.[k] instanceof Float32Array, `${label}: layer ${i}: DOPPLER found ${k}`);
  console.log(`${label}: DOPPLER load() complete: ${L.layers.size} layers, ${arrays.length} arrays`);
}

const PROMPTS = ['Once upon a time', 'Hello world! The cat sat on the mat.', '  two spaces, a\ttab and 42 apples', 'caf\u00e9 na\u00efve \u65e5\u672c'];

async function checkTokenizer(label, dir, raw) {
  const tk = raw.tokenizer;
  check(!!tk, `${label}: manifest.tokenizer`);
  if (!tk) return;
  for (const k of ['bosTokenId', 'eosTokenId', 'addBosToken', 'addEosToken'])
    check(k in tk, `${label}: manifest.tokenizer.${k}`);
  if (tk.type === 'sentencepiece') check('unkTokenId' in tk, `${label}: manifest.tokenizer.unkTokenId (DOPPLER's SentencePiece requires unk)`);
  const t = new Tokenizer();
  try {
    await t.initialize(raw, {
      loadTokenizerModel: async () => { const b = readFileSync(path.join(dir, tk.sentencepieceModel ?? 'tokenizer.model')); return b.buffer.slice(b.byteOffset, b.byteOffset + b.length); },
      loadTokenizerJson: async () => readFileSync(path.join(dir, tk.file ?? 'tokenizer.json'), 'utf8'),
    });
  } catch (e) { check(false, `${label}: DOPPLER tokenizer: ${e.message}`); return; }
  check(t.getVocabSize() === tk.vocabSize, `${label}: DOPPLER vocabulary ${t.getVocabSize()} tokens, manifest ${tk.vocabSize}`);
  for (const p of PROMPTS) {
    const theirs = Array.from(t.encode(p));
    const ours = run(qp, ['tokenize', dir, p]).toString().trim().split(/\s+/).map(Number);
    if (tk.type !== 'sentencepiece') {
      check(JSON.stringify(theirs) === JSON.stringify(ours), `${label}: "${p}": DOPPLER [${theirs}] vs ours [${ours}]`);
      continue;
    }
    // DOPPLER's own SentencePiece behaviour (src/inference/tokenizers/sentencepiece.js and
    // rules/converter/tokenizer.rules.json): a model whose pieces have scores is segmented as
    // unigram (Viterbi over the scores) whatever TrainerSpec.model_type says, so a Llama BPE model
    // splits differently ("Once" -> 441 416 331 instead of 403), and no dummy prefix is added
    // when the text starts with a space. Ours follow SentencePiece BPE (= llama2.c's oracle ids).
    // What must agree: BOS as the manifest says, no unk, and the same text under DOPPLER's decoder.
    const bos = tk.addBosToken ? [tk.bosTokenId] : [];
    check(JSON.stringify(theirs.slice(0, bos.length)) === JSON.stringify(bos) &&
          JSON.stringify(ours.slice(0, bos.length)) === JSON.stringify(bos), `${label}: "${p}": BOS per addBosToken`);
    check(!theirs.includes(tk.unkTokenId), `${label}: "${p}": DOPPLER gave unk`);
    check(t.decode(theirs) === t.decode(ours), `${label}: "${p}": DOPPLER decodes its ids to "${t.decode(theirs)}", ours to "${t.decode(ours)}"`);
    if (JSON.stringify(theirs) !== JSON.stringify(ours)) spmDiffs.push(`${label}: "${p}": DOPPLER [${theirs}] ours [${ours}]`);
  }
}
const spmDiffs = [];

async function checkPackage(label, dir, opts = {}) {
  const text = readFileSync(path.join(dir, 'manifest.json'), 'utf8');
  const raw = JSON.parse(text);
  let manifest;
  try { manifest = parseManifest(text); } catch (e) { check(false, `${label}: parseManifest: ${e.message}`); return null; }
  const byType = await checkTensors(label, dir, raw, manifest);
  if (Object.keys(byType).every((d) => ['F32', 'F16', 'BF16'].includes(d)) && !opts.lora)
    await checkWholeLoad(label, dir, raw, parseManifest(text), opts.layerKeys);
  if (!opts.lora) await checkTokenizer(label, dir, raw);
  return { raw, byType };
}

const cases = [];
const convert = (src, out, ...args) => run(qp, ['convert', src, '--to', 'rdrr', '-o', out, '--quiet', ...args]);

if (fixDir && existsSync(path.join(fixDir, 'llama-tied'))) {
  const lt = path.join(fixDir, 'llama-tied');
  convert(lt, path.join(tmp, 'lt-f32'), '--quant', 'F32');
  const r1 = await checkPackage('llama-tied F32', path.join(tmp, 'lt-f32'));
  if (r1) check(Object.keys(r1.byType).join() === 'F32', 'llama-tied F32: only F32');
  convert(lt, path.join(tmp, 'lt-q4'), '--quant', 'Q4_K_M');
  const r2 = await checkPackage('llama-tied Q4_K_M', path.join(tmp, 'lt-q4'));
  if (r2) {
    check(r2.byType.Q4_K_M > 0 && !r2.byType.Q8_0, 'llama-tied Q4_K_M: Q4_K_M tensors, no Q8_0');
    const ch = r2.raw.quantizationInfo.dtypeChanges ?? [];
    check(ch.length > 0 && ch.every((c) => c.planned !== c.stored && c.reason && r2.raw.tensors[c.tensor]?.dtype === c.stored),
      'llama-tied Q4_K_M: quantizationInfo.dtypeChanges names each changed tensor');
  }
  convert(path.join(fixDir, 'llama-k256'), path.join(tmp, 'k256-q4'), '--quant', 'Q4_K_M');
  const r3 = await checkPackage('llama-k256 Q4_K_M', path.join(tmp, 'k256-q4'));
  if (r3) check(r3.byType.Q4_K_M > 0 && r3.byType.Q6_K > 0, 'llama-k256: Q4_K_M and Q6_K');
  convert(path.join(fixDir, 'llama-gqa-untied'), path.join(tmp, 'gqa-f16'), '--quant', 'F16', '--shard-size', '65536');
  const r4 = await checkPackage('llama-gqa-untied F16 (64 KiB shards)', path.join(tmp, 'gqa-f16'));
  if (r4) check(r4.raw.shards.length > 1 && Object.values(r4.raw.tensors).some((t) => t.spans), 'gqa F16: several shards, spanning tensors');
  // qwen2 with a chat template in tokenizer_config.json (a copy of the fixture)
  const qsrc = path.join(tmp, 'qwen2-chat');
  cpSync(path.join(fixDir, 'qwen2'), qsrc, { recursive: true });
  const tcfg = JSON.parse(readFileSync(path.join(qsrc, 'tokenizer_config.json'), 'utf8'));
  tcfg.chat_template = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}";
  writeFileSync(path.join(qsrc, 'tokenizer_config.json'), JSON.stringify(tcfg));
  convert(qsrc, path.join(tmp, 'qwen2-f16'), '--quant', 'F16');
  const r5 = await checkPackage('qwen2 F16 (chat template)', path.join(tmp, 'qwen2-f16'));
  if (r5) {
    check(r5.raw.tokenizer.chatTemplate === tcfg.chat_template, 'qwen2: tokenizer.chatTemplate is the source template');
    check(r5.raw.inference.chatTemplate.type === 'chatml' && r5.raw.inference.chatTemplate.enabled === true, 'qwen2: inference.chatTemplate chatml');
  }
  cases.push('llama-tied F32/Q4_K_M', 'llama-k256', 'gqa F16 spans', 'qwen2 chat');
}

// Mixtral-style MoE (issue 16; readers/rdrr.md "Mixture of experts"): the HF per-expert tensors
// pass through, grouped layer.N.expert.E / layer.N.shared with moeConfig {8, 2, "mixtral"}.
// DOPPLER's parser and loader must see a MoE model (isMoE, its expert groups) and its expert
// loader (loadExpert: the Mixtral-style w1/w3/w2 names) must give every expert's gate/up/down
// equal bit for bit to our decoding of the same bytes; our runtime must run the package
// (`quantpack verify` against the HF source passes, 16-bit class).
async function checkMoE(label, dir) {
  const text = readFileSync(path.join(dir, 'manifest.json'), 'utf8');
  const raw = JSON.parse(text);
  let manifest;
  try { manifest = parseManifest(text); } catch (e) { check(false, `${label}: parseManifest: ${e.message}`); return; }
  const ne = raw.moeConfig?.numExperts, nl = raw.architecture.numLayers;
  check(ne === 8 && raw.moeConfig.numExpertsPerToken === 2 && raw.moeConfig.expertFormat === 'mixtral',
    `${label}: moeConfig ${JSON.stringify(raw.moeConfig)}`);
  const L = newLoader(dir, raw, manifest);
  const locs = await buildTensorLocations(manifest, {
    hasCustomLoader: true, loadTensorsJson: async () => readFileSync(path.join(dir, 'tensors.json'), 'utf8'),
  });
  for (const [n, l] of locs) L.tensorLocations.set(n, l);
  L.isMoE = L.manifest && (L.manifest.moeConfig?.numExperts ?? 0) > 1;
  check(L.isMoE === true, `${label}: DOPPLER sees a MoE model`);
  let experts = 0;
  for (let l = 0; l < nl; l++) {
    const g = raw.groups[`layer.${l}.shared`];
    check(g && g.tensors.length === 1 && raw.tensors[g.tensors[0]].role === 'router', `${label}: layer ${l} router group`);
    for (let x = 0; x < ne; x++) {
      const grp = raw.groups[`layer.${l}.expert.${x}`];
      check(grp && grp.type === 'expert' && grp.layerIndex === l && grp.expertIndex === x && grp.tensors.length === 3,
        `${label}: group layer.${l}.expert.${x}`);
      let w;
      try { w = await L.loadExpert(l, x); } catch (e) { check(false, `${label}: DOPPLER loadExpert(${l}, ${x}): ${e.message}`); continue; }
      for (const [k, wn] of [['gate', 'w1'], ['up', 'w3'], ['down', 'w2']]) {
        const name = `model.layers.${l}.block_sparse_moe.experts.${x}.${wn}.weight`;
        let got = w?.[k];
        if (isCpuWeightBuffer(got)) got = got.data;
        if (got instanceof Uint16Array) got = convertF16ToF32CPU(got);
        const ours = ourDecode(dir, raw, name, raw.tensors[name]);
        check(got instanceof Float32Array && bitsEqual(got, ours), `${label}: expert ${l}.${x} ${k} (${name}): DOPPLER's expert loader = ours`);
      }
      experts++;
    }
  }
  console.log(`${label}: DOPPLER loaded ${experts} experts (moeConfig ${JSON.stringify(raw.moeConfig)})`);
}

if (fixDir && existsSync(path.join(fixDir, 'mixtral'))) {
  const src = path.join(fixDir, 'mixtral'), out = path.join(tmp, 'mixtral-f16');
  convert(src, out, '--quant', 'F16');
  const r = await checkPackage('mixtral F16 (MoE)', out);
  if (r) check(Object.values(r.raw.tensors).filter((t) => t.role === 'expert').length === 2 * 8 * 3, 'mixtral: 48 expert tensors');
  await checkMoE('mixtral F16 (MoE)', out);
  let verdict = '';
  try { verdict = run(qp, ['verify', out, '--against', src, '-n', '8']).toString(); } catch (e) { verdict = String(e.stdout ?? e.message); }
  check(/verdict: PASS/.test(verdict), `mixtral: quantpack verify RDRR vs HF: ${verdict.trim().split('\n').pop()}`);
  cases.push('mixtral MoE');
}

// Gemma 1/2/3 (issue 16): F32 packages of the HF fixtures, loaded whole; DOPPLER must find Gemma
// 2/3's post-attention, pre- and post-FFN norms (and Gemma 3's q/k norms) under our names.
for (const [fam, keys] of [['gemma', ['inputNorm', 'postAttentionNorm']],
  ['gemma2', ['inputNorm', 'postAttentionNorm', 'preFeedforwardNorm', 'postFeedforwardNorm']],
  ['gemma3', ['inputNorm', 'postAttentionNorm', 'preFeedforwardNorm', 'postFeedforwardNorm', 'qNorm', 'kNorm']]]) {
  if (!fixDir || !existsSync(path.join(fixDir, fam))) continue;
  const out = path.join(tmp, `${fam}-f32`);
  convert(path.join(fixDir, fam), out, '--quant', 'F32');
  await checkPackage(`${fam} F32`, out, { layerKeys: keys });
  cases.push(fam);
}

if (realDir && existsSync(path.join(realDir, 'stories260K.gguf'))) {
  const src = path.join(realDir, 'stories260K.gguf');
  run(g2r, [src, path.join(tmp, 's32'), '--shard-size', '4096', '--quiet']);
  const r1 = await checkPackage('gguf-to-rdrr stories260K (4 KiB shards)', path.join(tmp, 's32'));
  if (r1) check(Object.values(r1.raw.tensors).some((t) => t.spans), 'stories260K 4 KiB: spanning tensors');
  convert(src, path.join(tmp, 'sq4'), '--quant', 'Q4_K_M');
  const r2 = await checkPackage('stories260K -> RDRR Q4_K_M', path.join(tmp, 'sq4'));
  if (r2) {
    check(!r2.byType.Q8_0 && r2.raw.tensors['output.weight'].dtype === 'F16', 'stories260K Q4_K_M: output.weight F16 instead of Q8_0');
    check(r2.raw.quantizationInfo.lmHead === 'f16', 'stories260K Q4_K_M: quantizationInfo.lmHead f16');
  }
  cases.push('stories260K');
}
const llq = realDir && path.join(realDir, 'gguf/stories260K-Q4_K_M.llamacpp.gguf');
if (llq && existsSync(llq)) {
  run(g2r, [llq, path.join(tmp, 'llq')]);
  const r = await checkPackage('gguf-to-rdrr llama.cpp Q4_K_M', path.join(tmp, 'llq'));
  if (r) {
    const ch = r.raw.quantizationInfo.dtypeChanges ?? [];
    check(ch.length === 32 && ch.every((c) => ['Q5_0', 'Q8_0'].includes(c.planned) && c.stored === 'F32'),
      `llama.cpp Q4_K_M: ${ch.length} Q5_0/Q8_0 tensors listed as stored F32`);
  }
  cases.push('llama.cpp Q4_K_M');
}

// the loader's hash check is on: one flipped byte in a shard is refused
{
  const dir = path.join(tmp, existsSync(path.join(tmp, 's32')) ? 's32' : 'lt-f32');
  if (existsSync(dir)) {
    const text = readFileSync(path.join(dir, 'manifest.json'), 'utf8'), raw = JSON.parse(text);
    const L = newLoader(dir, raw, parseManifest(text), 0);
    const locs = await buildTensorLocations(L.manifest, { hasCustomLoader: true, loadTensorsJson: async () => readFileSync(path.join(dir, 'tensors.json'), 'utf8') });
    for (const [n, l] of locs) L.tensorLocations.set(n, l);
    const first = Object.entries(raw.tensors).find(([, t]) => t.shard === 0)[0];
    let msg = '';
    try { await L.loadTensor(first, false); } catch (e) { msg = e.message; }
    check(/hash mismatch/i.test(msg), `tampered shard 0 refused by DOPPLER's hash check (${msg || 'loaded'})`);
  }
}

// LoRA: a PEFT adapter written here, every tensor through DOPPLER's loader
{
  const peft = path.join(tmp, 'peft');
  mkdirSync(peft, { recursive: true });
  const hidden = 64, rank = 4, header = {}, datas = [];
  let off = 0, seed = 7;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32) - 0.5;
  for (let l = 0; l < 2; l++)
    for (const mod of ['q_proj', 'v_proj'])
      for (const [ab, shape] of [['A', [rank, hidden]], ['B', [hidden, rank]]]) {
        const b = Buffer.alloc(shape[0] * shape[1] * 4);
        for (let i = 0; i < b.length / 4; i++) b.writeFloatLE(rnd(), i * 4);
        header[`base_model.model.model.layers.${l}.self_attn.${mod}.lora_${ab}.weight`] = { dtype: 'F32', shape, data_offsets: [off, off + b.length] };
        datas.push(b); off += b.length;
      }
  let hj = Buffer.from(JSON.stringify(header));
  hj = Buffer.concat([hj, Buffer.alloc((8 - (hj.length % 8)) % 8, 0x20)]);
  const len = Buffer.alloc(8); len.writeBigUInt64LE(BigInt(hj.length));
  writeFileSync(path.join(peft, 'adapter_model.safetensors'), Buffer.concat([len, hj, ...datas]));
  writeFileSync(path.join(peft, 'adapter_config.json'), JSON.stringify({ peft_type: 'LORA', r: rank, lora_alpha: 8, target_modules: ['q_proj', 'v_proj'], base_model_name_or_path: 'llama-tied' }));
  run(qp, ['convert', peft, '--to', 'rdrr', '-o', path.join(tmp, 'lora'), '--quiet']);
  const r = await checkPackage('LoRA adapter', path.join(tmp, 'lora'), { lora: true });
  if (r) check(r.byType.F32 === 8, 'LoRA: 8 F32 tensors');
  cases.push('lora');
}

if (spmDiffs.length) console.log(`SentencePiece ids that differ by DOPPLER's unigram rule (documented above):\n  ${spmDiffs.slice(0, 4).join('\n  ')}${spmDiffs.length > 4 ? `\n  ... ${spmDiffs.length} in all` : ''}`);
console.log(`cases: ${cases.join(', ')}`);
finish();
