// Unigram tokenizer.json files (model.type "Unigram", T5 / SentencePiece style) through quantpack
// must give the ids @huggingface/tokenizers 0.2.0 gives. A unigram vocabulary is generated here
// from the corpus (the "▁"-prefixed words and their NFKC forms: every code point but a few left out
// everywhere, so unknown runs happen, and a pseudo-random ~45% of 2..6-code-point substrings, with
// random float32 scores), with <pad> </s> <unk> and <extra_id_0> special, <mark> not special, in
// three pipelines:
//  t5       normalizer Precompiled (a charsmap built here in SentencePiece's Darts-clone layout,
//           mapping what the peer's Precompiled does to this corpus: whitespace to " ", NFKC of
//           fullwidth letters, comma and the "fi" ligature, e + U+0301 to é), pre_tokenizer
//           WhitespaceSplit + Metaspace (prepend always): readers/hf_config.c reads it as the
//           charsmap + remove_extra_whitespaces + dummy prefix;
//  never    Metaspace(prepend_scheme never) only: no dummy prefix;
//  prepend  normalizer Prepend("▁") + Replace(" ", "▁"): the dummy prefix.
// For each: (1) quantpack over the tokenizer.json, special tokens parsed (HF always splits added
// tokens), no BOS; (2) the same after `quantpack convert` of a tiny Llama folder around it into a
// GGUF (tokenizer.ggml.model "t5"), tokenized from the GGUF; (3) the HF files quantpack writes from
// that GGUF (converters/hf_tokenizer.c) loaded by @huggingface/tokenizers: all equal to
// encode(text, {add_special_tokens: false}) on the tokenizer.json.
// Env: QP_BIN_DIR, QP_PEER_DIR, QP_TMP_DIR. Exit 77 when something is missing.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

import { requireEnv, requireFiles, tally, writeTinyLlama } from './peer_util.mjs';

const [binDir, peerDir, tmpRoot] = requireEnv('QP_BIN_DIR', 'QP_PEER_DIR', 'QP_TMP_DIR');
const quantpack = path.join(binDir, 'quantpack');
const tool = path.join(binDir, 'qp-test-hf-tokenizer');
const peerPkg = path.join(peerDir, '@huggingface/tokenizers/package.json');
requireFiles(quantpack, tool, peerPkg);
const pkg = JSON.parse(readFileSync(peerPkg, 'utf8'));
const entry = path.join(peerDir, '@huggingface/tokenizers', pkg.exports['.'].node.import);
const { Tokenizer } = await import(pathToFileURL(entry).href);

const SP = '\u2581';
const corpus = [
  'Hello World! It\'s a test of the unigram model.',
  'translate English to German: The house is wonderful.',
  'summarize: studies have shown that owning a dog is good for you',
  '   leading and trailing   ',
  'runs   of    spaces\tand\ttabs\nand\r\nnewlines\n\n end',
  '1 12 123 1234 12345 3.14159 1,000,000 2024-11-26',
  '你好世界，这是一个测试。日本語のテキスト',
  '🦙 llama 🚀🚀 rockets ❤️ emoji',
  'Crème brûlée café cafe\u0301 naïve',
  '\uff21\uff22\uff23 full width, \ufb01ne ligature, ideographic\u3000space, nb\u00a0sp, em\u2003sp',
  'an <extra_id_0> sentinel and <mark> mark, <extra_id_0>x<mark>y',
  'Q Qa aQ QQ',
  'MixedCASEwithDIGITS123abc456DEF',
  '',
  'a',
];

let rng = 0x9e3779b9;
const rnd = () => {
  rng ^= rng << 13; rng >>>= 0;
  rng ^= rng >>> 17;
  rng ^= rng << 5; rng >>>= 0;
  return rng / 4294967296;
};
const score = () => Math.fround(-1 - rnd() * 12);
const LEFT_OUT = new Set(['🦙', '🚀', '界', 'Q']);

function buildVocab() {
  const vocab = [['<pad>', 0], ['</s>', 0], ['<unk>', 0], ['<extra_id_0>', 0], ['<mark>', 0], [SP, -2.5]];
  const seen = new Set(vocab.map((v) => v[0]));
  const add = (p, s) => { if (!seen.has(p)) { seen.add(p); vocab.push([p, s]); } };
  for (const text of corpus) {
    for (const form of [text, text.normalize('NFKC')]) {
      for (const word of form.match(/\S+/g) ?? []) {
        const cps = Array.from(SP + word);
        for (let a = 0; a < cps.length; a++) {
          if (LEFT_OUT.has(cps[a])) continue;
          add(cps[a], Math.fround(score() - 4));
          for (let k = 2; k <= 6 && a + k <= cps.length && !LEFT_OUT.has(cps[a + k - 1]); k++)
            if (rnd() < 0.45) add(cps.slice(a, a + k).join(''), score());
        }
      }
    }
  }
  return vocab;
}

// SentencePiece's precompiled_charsmap: u32 size of the units, Darts-clone XOR double array units
// (label bits 0..7, has_leaf bit 8, offset = position ^ base in bits 10..30; value units bit 31 |
// replacement offset), NUL-terminated replacements.
function buildCharsmap(rules) {
  const nodes = [{ kids: new Map(), rule: -1 }];
  rules.forEach(([key], r) => {
    let at = 0;
    for (const b of Buffer.from(key)) {
      if (!nodes[at].kids.has(b)) { nodes.push({ kids: new Map(), rule: -1 }); nodes[at].kids.set(b, nodes.length - 1); }
      at = nodes[at].kids.get(b);
    }
    nodes[at].rule = r;
  });
  const strings = [];
  const replAt = [];
  let sl = 0;
  for (const [, repl] of rules) { replAt.push(sl); const b = Buffer.from(`${repl}\0`); strings.push(b); sl += b.length; }
  const units = new Uint32Array(8192);
  const used = new Uint8Array(8192);
  const pos = [0];
  used[0] = 1;
  let top = 0;
  for (const [nd] of nodes.map((n, i) => [i])) {
    const labels = [...nodes[nd].kids.keys()];
    let base = 1;
    while ((nodes[nd].rule >= 0 && used[base]) || labels.some((c) => used[base ^ c] || (base ^ c) === 0)) base++;
    units[pos[nd]] = (units[pos[nd]] | ((pos[nd] ^ base) << 10) | (nodes[nd].rule >= 0 ? 1 << 8 : 0)) >>> 0;
    if (nodes[nd].rule >= 0) { used[base] = 1; units[base] = (0x80000000 | replAt[nodes[nd].rule]) >>> 0; }
    for (const c of labels) { const q = base ^ c; used[q] = 1; units[q] = c; pos[nodes[nd].kids.get(c)] = q; }
    top = Math.max(top, (base | 0xff) + 1);
  }
  // nodes are numbered in insertion order, so a child always comes after its parent
  const head = Buffer.alloc(4);
  head.writeUInt32LE(top * 4);
  return Buffer.concat([head, Buffer.from(units.buffer, 0, top * 4), ...strings]);
}

const T5_RULES = [['\t', ' '], ['\n', ' '], ['\r', ' '], ['\u00a0', ' '], ['\u3000', ' '], ['\u2003', ' '],
  ['\uff21', 'A'], ['\uff22', 'B'], ['\uff23', 'C'], ['\ufb01', 'fi'], ['\uff0c', ','], ['e\u0301', '\u00e9']];

function tokenizerJson(vocab, form) {
  const added = ['<pad>', '</s>', '<unk>', '<extra_id_0>', '<mark>'].map((content, id) => ({
    id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: content !== '<mark>',
  }));
  const metaspace = (scheme) => ({ type: 'Metaspace', replacement: SP, prepend_scheme: scheme, split: true });
  const pipelines = {
    t5: {
      normalizer: { type: 'Precompiled', precompiled_charsmap: buildCharsmap(T5_RULES).toString('base64') },
      pre_tokenizer: { type: 'Sequence', pretokenizers: [{ type: 'WhitespaceSplit' }, metaspace('always')] },
    },
    never: { normalizer: null, pre_tokenizer: metaspace('never') },
    prepend: {
      normalizer: { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: SP },
        { type: 'Replace', pattern: { String: ' ' }, content: SP }] },
      pre_tokenizer: null,
    },
  };
  return {
    version: '1.0', truncation: null, padding: null, added_tokens: added, ...pipelines[form],
    post_processor: null, decoder: metaspace('always'),
    model: { type: 'Unigram', unk_id: 2, vocab, byte_fallback: false },
  };
}

const ours = (src) =>
  JSON.parse(execFileSync(tool, ['encode', src], { input: JSON.stringify(corpus), maxBuffer: 1 << 26 }).toString()).plain;
const hfIds = (tok) => corpus.map((text) => Array.from(tok.encode(text, { add_special_tokens: false }).ids));

const t = tally();
const tmp = mkdtempSync(path.join(tmpRoot, 'tokenizer_ugm_hf_'));
const vocab = buildVocab();
for (const form of ['t5', 'never', 'prepend']) {
  const folder = path.join(tmp, form);
  writeTinyLlama(folder, vocab.length);
  const json = path.join(folder, 'tokenizer.json');
  writeFileSync(json, JSON.stringify(tokenizerJson(vocab, form)));
  writeFileSync(path.join(folder, 'tokenizer_config.json'), '{}');
  const want = hfIds(new Tokenizer(JSON.parse(readFileSync(json, 'utf8')), {}));
  const gguf = path.join(tmp, `${form}.gguf`);
  execFileSync(quantpack, ['convert', folder, '--to', 'gguf', '--quant', 'F32', '-o', gguf]);
  const back = path.join(tmp, `${form}.hf`);
  mkdirSync(back);
  execFileSync(tool, ['write', gguf, back]);
  const got = {
    'tokenizer.json': ours(json),
    'converted GGUF': ours(gguf),
    'HF files written from the GGUF': hfIds(new Tokenizer(JSON.parse(readFileSync(path.join(back, 'tokenizer.json'), 'utf8')),
      JSON.parse(readFileSync(path.join(back, 'tokenizer_config.json'), 'utf8')))),
  };
  let pass = 0;
  for (const [i, text] of corpus.entries()) {
    for (const what of Object.keys(got)) {
      const ids = got[what][i];
      const same = ids.length === want[i].length && ids.every((v, k) => v === want[i][k]);
      if (same) pass++;
      t.check(same, `${form} ${what} string ${i} ${JSON.stringify(text).slice(0, 50)}: HF [${want[i].slice(0, 16)}] quantpack [${ids.slice(0, 16)}]`);
    }
  }
  const tok = JSON.parse(execFileSync(quantpack, ['inspect', gguf, '--json']).toString()).tokenizer;
  t.check(tok.model === 't5' && tok.n_tokens === vocab.length, `${form}: GGUF tokenizer ${tok.model}/${tok.n_tokens}`);
  console.log(`${form}: ${pass}/${3 * corpus.length} equal to @huggingface/tokenizers (tokenizer.json, converted GGUF, HF files written from the GGUF), ${vocab.length} pieces`);
}
rmSync(tmp, { recursive: true, force: true });
t.finish();
