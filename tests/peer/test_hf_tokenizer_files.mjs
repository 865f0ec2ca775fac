// Hugging Face tokenizer files written from any source's vocabulary (converters/hf_tokenizer.c,
// through qp-test-hf-tokenizer write): GGUF tokenizer.ggml.* (SentencePiece llama-spm, phi-3,
// Llama 2 in a model GGUF, stories260K.gguf; byte-level gpt-2, mpt), a llama2.c tokenizer.bin
// (tok512 with stories260K.bin, the 32000-token Llama 2 export) and a SentencePiece
// tokenizer.model. For each, on a varied corpus (llama.cpp's 46 vocab test strings of the family,
// emoji, CJK, tabs/CRLF, odd spaces, code, long runs, text around special tokens):
//  - @huggingface/tokenizers 0.2.0 loading the written tokenizer.json + tokenizer_config.json
//    gives the ids quantpack's tokenizer gives on the source (special tokens parsed, as HF always
//    does), without special tokens and with them (BOS as the model adds it);
//  - quantpack reading the written tokenizer.json back gives the same ids;
//  - the config names the source's special tokens; HF decodes the ids back to the text;
// and vocabularies without a tokenizer.json form here are refused with exit 3 naming why.
// Env: QP_BIN_DIR, QP_PEER_DIR, QP_REAL_FIXTURES, QP_TMP_DIR. Exit 77 when something is missing.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

import { EXTRA_TEXTS, requireEnv, requireFiles, tally } from './peer_util.mjs';

const [binDir, peerDir, realDir, tmpRoot] = requireEnv('QP_BIN_DIR', 'QP_PEER_DIR', 'QP_REAL_FIXTURES', 'QP_TMP_DIR');
const tool = path.join(binDir, 'qp-test-hf-tokenizer');
const peerPkg = path.join(peerDir, '@huggingface/tokenizers/package.json');
const real = (p) => path.join(realDir, p);
const vocab = (name) => real(`vocab/ggml-vocab-${name}.gguf`);
requireFiles(tool, peerPkg, vocab('llama-spm'), real('stories260K.bin'), real('tokenizer.model'));
const pkg = JSON.parse(readFileSync(peerPkg, 'utf8'));
const entry = path.join(peerDir, '@huggingface/tokenizers', pkg.exports['.'].node.import);
const { Tokenizer } = await import(pathToFileURL(entry).href);

const readInp = (name) => {
  const parts = readFileSync(`${vocab(name)}.inp`, 'utf8').split('\n__ggml_vocab_test__\n');
  parts.pop(); // the file ends with the separator
  return parts;
};
const extra = [...EXTRA_TEXTS, 'Once upon a time, there was a little girl named Lily. She loved to play outside.'];
const specials = (s) => [`${s.bos}Hello${s.eos} world`, `text ${s.eos}${s.eos}  after`, `${s.unk} unknown ${s.bos}`];

const sources = [
  { name: 'gguf llama-spm', src: vocab('llama-spm'), inp: 'llama-spm' },
  { name: 'gguf phi-3', src: vocab('phi-3'), inp: 'phi-3' },
  { name: 'gguf Llama 2 model (llama-2-tiny-random)', src: real('gguf/llama-2-tiny-random.gguf'), inp: 'llama-spm' },
  { name: 'gguf stories260K', src: real('stories260K.gguf'), inp: 'llama-spm' },
  { name: 'gguf gpt-2', src: vocab('gpt-2'), inp: 'gpt-2' },
  { name: 'gguf mpt', src: vocab('mpt'), inp: 'mpt' },
  { name: 'llama2.c tok512.bin', src: real('stories260K.bin'), tok: real('tok512.bin'), inp: 'llama-spm' },
  { name: 'llama2.c tokenizer.bin', src: '-', tok: real('tokenizer.bin'), inp: 'llama-spm' },
  { name: 'SentencePiece tokenizer.model', src: '-', tok: real('tokenizer.model'), inp: 'llama-spm' },
];
const refused = [
  { name: 'gguf deepseek-coder', src: vocab('deepseek-coder'), why: "pre-tokenizer 'deepseek-coder'" },
  { name: 'gguf bert-bge', src: vocab('bert-bge'), why: 'WordPiece' },
];

const t = tally();
const tmp = mkdtempSync(path.join(tmpRoot, 'hf-tokenizer-files-'));
const withTok = (s) => (s.tok ? [s.tok] : []);
const encode = (model, tok, texts) =>
  JSON.parse(execFileSync(tool, ['encode', model, ...tok], { input: JSON.stringify(texts), encoding: 'utf8' }));
const same = (a, b) => a.length === b.length && a.every((v, k) => v === b[k]);

for (const [k, s] of sources.entries()) {
  const dir = path.join(tmp, String(k));
  mkdirSync(dir);
  const w = spawnSync(tool, ['write', s.src, dir, ...withTok(s)], { encoding: 'utf8' });
  t.check(w.status === 0, `${s.name}: write exit ${w.status} ${w.stderr}`);
  if (w.status !== 0) continue;
  const json = JSON.parse(readFileSync(path.join(dir, 'tokenizer.json'), 'utf8'));
  const cfg = JSON.parse(readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8'));
  const map = JSON.parse(readFileSync(path.join(dir, 'special_tokens_map.json'), 'utf8'));
  const hf = new Tokenizer(json, cfg);
  const sp = { bos: cfg.bos_token ?? '', eos: cfg.eos_token ?? '', unk: cfg.unk_token ?? '' };
  const texts = [...readInp(s.inp), ...extra, ...specials(sp)];
  const ours = encode(s.src, withTok(s), texts);
  const back = encode(path.join(dir, 'tokenizer.json'), [], texts);
  let agree = 0, agreeBos = 0, agreeBack = 0, decoded = 0, lossless = 0;
  for (const [i, text] of texts.entries()) {
    const plain = Array.from(hf.encode(text, { add_special_tokens: false }).ids);
    const bos = Array.from(hf.encode(text, { add_special_tokens: true }).ids);
    if (same(plain, ours.plain[i])) agree++;
    else console.error(`${s.name} #${i} ${JSON.stringify(text).slice(0, 70)}\n  hf        ${plain.join(' ')}\n  quantpack ${ours.plain[i].join(' ')}`);
    if (same(bos, ours.bos[i])) agreeBos++;
    else console.error(`${s.name} #${i} with BOS: hf ${bos.slice(0, 8).join(' ')} ... quantpack ${ours.bos[i].slice(0, 8).join(' ')} ...`);
    if (same(back.plain[i], ours.plain[i]) && same(back.bos[i], ours.bos[i])) agreeBack++;
    else console.error(`${s.name} #${i} read back: ${back.plain[i].join(' ')} vs ${ours.plain[i].join(' ')}`);
    // decoding: the texts without special tokens, whose every character has a piece or bytes
    if (i < texts.length - 3 && plain.length && !plain.includes(hf.token_to_id(sp.unk))) {
      lossless++;
      if (hf.decode(plain, { clean_up_tokenization_spaces: false }) === text) decoded++;
      else console.error(`${s.name} #${i} decode: ${JSON.stringify(hf.decode(plain, { clean_up_tokenization_spaces: false }).slice(0, 60))}`);
    }
  }
  console.log(`${s.name}: ${texts.length} strings, HF = quantpack ${agree} (with BOS ${agreeBos}), read back ${agreeBack}, HF decode ${decoded}/${lossless}; ${json.model.merges.length} merges, ${json.added_tokens.length} added tokens`);
  t.check(agree === texts.length && agreeBos === texts.length, `${s.name}: HF ids differ from quantpack's`);
  t.check(agreeBack === texts.length, `${s.name}: the written tokenizer.json read back by quantpack differs`);
  t.check(decoded === lossless && lossless > 0, `${s.name}: HF decode differs from the text`);
  t.check(sp.bos !== '' && map.bos_token?.content === sp.bos && map.eos_token?.content === sp.eos,
    `${s.name}: special tokens ${JSON.stringify(sp)} vs special_tokens_map ${JSON.stringify(map)}`);
  t.check(json.model.vocab[sp.bos] === hf.token_to_id(sp.bos) && ours.bos[0][0] === hf.token_to_id(sp.bos) || !cfg.add_bos_token,
    `${s.name}: BOS id`);
}
for (const s of refused) {
  const dir = path.join(tmp, s.name.replace(/\W/g, '_'));
  mkdirSync(dir);
  const w = spawnSync(tool, ['write', s.src, dir], { encoding: 'utf8' });
  t.check(w.status === 3 && w.stderr.includes(s.why), `${s.name}: refused with exit 3 naming ${s.why} (got ${w.status} ${w.stderr})`);
}
rmSync(tmp, { recursive: true, force: true });
console.log(`tokenizer files vs @huggingface/tokenizers ${pkg.version}: ${sources.length} sources`);
t.finish();
