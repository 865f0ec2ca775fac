// phi-3's tokenizer.json through `quantpack tokenize` (no BOS, no special-token parsing) must give
// the same ids as @huggingface/tokenizers 0.2.0 (encode with add_special_tokens:false) on every
// string of llama.cpp's ggml-vocab-phi-3 test file and on extra strings (emoji, CJK, tabs, long
// runs, invalid UTF-8: quantpack gets the raw bytes, the peer the string Node decodes from them
// with U+FFFD replacement, which is quantpack's documented handling). Then added tokens with
// lstrip / rstrip (`--special`, HF's AddedToken whitespace absorption): phi-3's own file (rstrip on
// </s> and its chat tokens) and a copy with lstrip / both set on some of them, on strings with
// spaces, tabs, newlines and Unicode spaces around special tokens. Prints "N passed, N failed".
// Env: QP_BIN_DIR, QP_PEER_DIR, QP_REAL_FIXTURES. Exit 77 when something is missing.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

import { EXTRA_TEXTS, requireEnv, requireFiles, tally } from './peer_util.mjs';

const [binDir, peerDir, realDir] = requireEnv('QP_BIN_DIR', 'QP_PEER_DIR', 'QP_REAL_FIXTURES');
const quantpack = path.join(binDir, 'quantpack');
const peerPkg = path.join(peerDir, '@huggingface/tokenizers/package.json');
const tokJson = path.join(realDir, 'hf-tokenizers/phi-3/tokenizer.json');
const tokCfg = path.join(realDir, 'hf-tokenizers/phi-3/tokenizer_config.json');
const inpPath = path.join(realDir, 'vocab/ggml-vocab-phi-3.gguf.inp');
requireFiles(quantpack, peerPkg, tokJson, tokCfg, inpPath);
const pkg = JSON.parse(readFileSync(peerPkg, 'utf8'));
const entry = path.join(peerDir, '@huggingface/tokenizers', pkg.exports['.'].node.import);
const { Tokenizer } = await import(pathToFileURL(entry).href);
const hf = new Tokenizer(JSON.parse(readFileSync(tokJson, 'utf8')), JSON.parse(readFileSync(tokCfg, 'utf8')));

// inputs as raw bytes
const inputs = [];
const sep = '\n__ggml_vocab_test__\n';
const parts = readFileSync(inpPath, 'utf8').split(sep);
parts.pop(); // the file ends with the separator
for (const s of parts) inputs.push({ name: 'vocab', bytes: Buffer.from(s, 'utf8') });
for (const s of EXTRA_TEXTS) inputs.push({ name: 'extra', bytes: Buffer.from(s, 'utf8') });
const invalid = [
  Buffer.from([0x61, 0xff, 0x62]), // a, invalid byte, b
  Buffer.from([0x48, 0x69, 0x20, 0xe2, 0x82, 0x20, 0x6f, 0x6b]), // truncated 3-byte sequence
  Buffer.from([0xc0, 0xaf, 0x20, 0xed, 0xa0, 0x80, 0x20, 0xf4, 0x90, 0x80, 0x80]), // overlong, surrogate, > U+10FFFF
  Buffer.concat([Buffer.from('tail '), Buffer.from([0xf0, 0x9f, 0xa6])]), // cut emoji at the end
];
for (const b of invalid) inputs.push({ name: 'invalid-utf8', bytes: b });

function quantpackIds(file, bytes, extra) {
  try {
    const out = execFileSync(quantpack, ['tokenize', file, '--no-bos', ...extra, '--stdin'], {
      input: bytes,
      encoding: 'utf8',
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    return out.trim() === '' ? [] : out.trim().split(' ').map(Number);
  } catch (err) {
    return `error: ${err.stderr || err.message}`;
  }
}

function check(t, name, peer, file, bytes, extra) {
  const text = bytes.toString('utf8'); // U+FFFD for ill-formed sequences
  const want = Array.from(peer.encode(text, { add_special_tokens: false }).ids);
  const got = quantpackIds(file, bytes, extra);
  if (Array.isArray(got) && got.length === want.length && got.every((v, k) => v === want[k])) {
    t.passed++;
  } else {
    t.failed++;
    console.error(`${name} ${JSON.stringify(text).slice(0, 80)}:\n  hf        ${want.join(' ')}\n  quantpack ${Array.isArray(got) ? got.join(' ') : got}`);
  }
}

const t = tally();
for (const [i, inp] of inputs.entries()) check(t, `${inp.name} #${i}`, hf, tokJson, inp.bytes, []);

// Special tokens with whitespace around them. phi-3: rstrip on </s> and <|assistant|> ... <|end|>,
// <|user|>; none on <unk>, <s>. The copy adds lstrip to <|end|> and </s>, lstrip and rstrip to <s>.
const SPECIAL_TEXTS = [
  'a <|end|> b', 'a<|end|>\tb', '<|user|>\n hi  <|end|>\n\n<|assistant|>', 'x</s>  y', '  <unk>  z',
  'end \u00a0\u3000<|end|>\u2003\u00a0tail', '<|end|>', ' <|end|> ', '<|end|>   ', '   <|end|>',
  '<s> a </s> b <s>  c', 'q<|end|><|end|> <|end|>  r', '<|system|>\r\n sys<|end|>\r\n<|user|> x',
  'no special here  ', ' \n<|placeholder1|>\n ', 'x <unk>\t<|end|> y',
];
const strips = JSON.parse(readFileSync(tokJson, 'utf8'));
for (const a of strips.added_tokens) {
  if (a.content === '<|end|>' || a.content === '</s>') a.lstrip = true;
  if (a.content === '<s>') a.lstrip = a.rstrip = true;
}
const tmp = mkdtempSync(path.join(os.tmpdir(), 'qp-added-'));
const stripsJson = path.join(tmp, 'tokenizer.json');
writeFileSync(stripsJson, JSON.stringify(strips));
const hfStrips = new Tokenizer(strips, JSON.parse(readFileSync(tokCfg, 'utf8')));
for (const s of SPECIAL_TEXTS) {
  check(t, 'special', hf, tokJson, Buffer.from(s, 'utf8'), ['--special']);
  check(t, 'special-lstrip', hfStrips, stripsJson, Buffer.from(s, 'utf8'), ['--special']);
}
rmSync(tmp, { recursive: true, force: true });
const total = inputs.length + 2 * SPECIAL_TEXTS.length;
console.log(`tokenizer.json (phi-3) vs @huggingface/tokenizers ${pkg.version}: ${inputs.length} strings, ` +
            `${SPECIAL_TEXTS.length} with special tokens x 2 files (rstrip as shipped, lstrip added)`);
t.finish(t.passed === total);
