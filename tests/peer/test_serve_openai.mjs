// quantpack serve MODEL against the official openai npm client (7.57.0, pinned peer) on
// 127.0.0.1 (a free port; the server is killed at the end even on failure): /v1/models, a
// completion, the same completion streamed, stop strings, seeded sampling, a streamed chat
// completion and its next turn, bad requests (400 from the client's own error classes), a
// refused API key (401), /health, three requests at once (queued, each answered as alone), and a
// prompt shutdown on SIGTERM; then an RDRR folder (gguf-to-rdrr): its files and the API on one
// port. Expected texts come from `quantpack run` on the same prompt (an
// independent path: no server, no JSON); for chat, on the conversation rendered by
// @huggingface/jinja (pinned peer) from the template file the server is given; token counts
// from `quantpack tokenize`; never from stored strings.
// Env: QP_BIN_DIR, QP_PEER_DIR, QP_REAL_FIXTURES. Exit 77 = skipped.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

import { peerRequire, requireEnv, skip, tally } from './peer_util.mjs';

const [binDir, peerDir, realDir] = requireEnv('QP_BIN_DIR', 'QP_PEER_DIR', 'QP_REAL_FIXTURES');
const model = path.join(realDir, 'stories260K.gguf');
if (!existsSync(model)) skip(`${model} is missing`);
if (!existsSync(path.join(peerDir, 'openai', 'package.json'))) skip(`openai is not installed in ${peerDir}`);
const require = peerRequire(peerDir);
const OpenAI = require('openai').default ?? require('openai');
const quantpack = path.join(binDir, 'quantpack');
const jinjaEntry = path.join(peerDir, '@huggingface/jinja/dist/index.js');
if (!existsSync(jinjaEntry)) skip(`@huggingface/jinja is not installed in ${peerDir}`);
const { Template } = await import(pathToFileURL(jinjaEntry).href);
const tmp = mkdtempSync(path.join(process.env.QP_TMP_DIR || tmpdir(), 'serve-openai-'));
process.on('exit', () => rmSync(tmp, { recursive: true, force: true }));
// ChatML, as Qwen's tokenizer_config.json writes it (a model without its own template)
const chatml = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
const templateFile = path.join(tmp, 'chatml.jinja');
writeFileSync(templateFile, chatml);
const t = tally();
const KEY = 'sk-test-quantpack';

// `quantpack run` text after the prompt (run prints the prompt, the reply, then a newline).
const runText = (prompt, args) => {
  const out = execFileSync(quantpack, ['run', model, '-p', prompt, ...args], { stdio: ['ignore', 'pipe', 'ignore'] })
    .toString();
  t.check(out.startsWith(prompt) && out.endsWith('\n'), `run output frames the reply: ${JSON.stringify(out)}`);
  return out.slice(prompt.length, -1);
};
const nTokens = (text) =>
  execFileSync(quantpack, ['tokenize', model, text]).toString().trim().split(/\s+/).length;

const server = spawn(quantpack, ['serve', model, '--port', '0', '--api-key', KEY, '-c', '256', '--verbose',
  '--chat-template', templateFile],
  { stdio: ['ignore', 'ignore', 'pipe'] });
let log = '';
server.stderr.on('data', (d) => { log += d.toString(); });
const exited = new Promise((resolve) => server.on('exit', (code, sig) => resolve({ code, sig })));
process.on('exit', () => { try { server.kill('SIGKILL'); } catch { /* gone */ } });

try {
  let url = null;
  for (let i = 0; i < 100 && !url; i++) {
    await new Promise((r) => setTimeout(r, 100));
    url = (log.match(/http:\/\/127\.0\.0\.1:\d+/) || [null])[0];
  }
  if (!url) throw new Error(`server did not start: ${log}`);
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: KEY, maxRetries: 0, timeout: 60000 });
  const prompt = 'Once upon a time';

  // models
  const models = await client.models.list();
  t.check(models.data.length === 1 && models.data[0].id === 'stories260K.gguf' && models.data[0].object === 'model',
    `models: ${JSON.stringify(models.data)}`);

  // a greedy completion equals run's text; usage counts from tokenize
  const want = runText(prompt, ['-n', '24']);
  const c = await client.completions.create({ model: 'stories260K.gguf', prompt, max_tokens: 24, temperature: 0 });
  t.check(c.choices[0].text === want, `completion ${JSON.stringify(c.choices[0].text)} vs run ${JSON.stringify(want)}`);
  t.check(c.choices[0].finish_reason === 'length', `finish_reason ${c.choices[0].finish_reason}`);
  t.check(c.usage.prompt_tokens === nTokens(prompt) && c.usage.completion_tokens === 24 &&
    c.usage.total_tokens === c.usage.prompt_tokens + 24, `usage ${JSON.stringify(c.usage)}`);
  t.check(c.object === 'text_completion' && /^cmpl-/.test(c.id), `object/id ${c.object} ${c.id}`);

  // streamed: the same text in pieces, then the finish reason and the usage chunk
  const stream = await client.completions.create({ model: 'x', prompt, max_tokens: 24, temperature: 0, stream: true,
    stream_options: { include_usage: true } });
  let streamed = '', chunks = 0, finish = null, usage = null;
  for await (const ch of stream) {
    chunks++;
    if (ch.choices.length) {
      streamed += ch.choices[0].text;
      if (ch.choices[0].finish_reason) finish = ch.choices[0].finish_reason;
    }
    if (ch.usage) usage = ch.usage;
  }
  t.check(streamed === want && chunks > 5, `stream (${chunks} chunks) ${JSON.stringify(streamed)}`);
  t.check(finish === 'length' && usage && usage.completion_tokens === 24, `stream end ${finish} ${JSON.stringify(usage)}`);

  // stop: the text before the first occurrence, finish_reason stop
  const word = ' little';
  const cut = want.indexOf(word);
  t.check(cut > 0, `run's text has '${word}'`);
  const s = await client.completions.create({ model: 'x', prompt, max_tokens: 24, temperature: 0, stop: [word, '@@'] });
  t.check(s.choices[0].text === want.slice(0, cut) && s.choices[0].finish_reason === 'stop',
    `stop: ${JSON.stringify(s.choices[0])}`);

  // seeded sampling repeats and equals run with the same seed
  const hot = runText(prompt, ['-n', '16', '--temp', '1', '-s', '42']);
  const h1 = await client.completions.create({ model: 'x', prompt, max_tokens: 16, temperature: 1, seed: 42 });
  t.check(h1.choices[0].text === hot, `seed 42: ${JSON.stringify(h1.choices[0].text)} vs run ${JSON.stringify(hot)}`);

  // a streamed chat completion equals run on the conversation rendered by @huggingface/jinja
  const render = (msgs) => new Template(chatml).render({ messages: msgs, add_generation_prompt: true });
  const chatStream = async (msgs, n) => {
    const st = await client.chat.completions.create({ model: 'x', messages: msgs, max_tokens: n, temperature: 0,
      stream: true, stream_options: { include_usage: true } });
    let text = '', role = null, fin = null, use = null, k = 0;
    for await (const ch of st) {
      k++;
      if (ch.choices.length) {
        role = role ?? ch.choices[0].delta.role;
        text += ch.choices[0].delta.content ?? '';
        fin = ch.choices[0].finish_reason ?? fin;
      }
      if (ch.usage) use = ch.usage;
      t.check(ch.object === 'chat.completion.chunk' && /^chatcmpl-/.test(ch.id), `chunk ${ch.object} ${ch.id}`);
    }
    return { text, role, fin, use, k };
  };
  const conv = [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'Once upon a time' }];
  const rendered1 = render(conv);
  const want1 = runText(rendered1, ['-n', '16']);
  const r1 = await chatStream(conv, 16);
  t.check(r1.text === want1 && r1.role === 'assistant' && r1.fin === 'length' && r1.k > 5,
    `chat: ${JSON.stringify(r1)} vs run ${JSON.stringify(want1)}`);
  t.check(r1.use && r1.use.prompt_tokens === nTokens(rendered1) && r1.use.completion_tokens === 16,
    `chat usage ${JSON.stringify(r1.use)}`);
  // the next turn (the server's KV cache keeps the conversation) equals run on the whole of it
  const conv2 = [...conv, { role: 'assistant', content: r1.text }, { role: 'user', content: 'The dog ran' }];
  const want2 = runText(render(conv2), ['-n', '12']);
  const r2 = await client.chat.completions.create({ model: 'x', messages: conv2, max_tokens: 12, temperature: 0 });
  t.check(r2.choices[0].message.content === want2 && r2.choices[0].message.role === 'assistant' &&
    r2.object === 'chat.completion', `chat turn 2: ${JSON.stringify(r2.choices[0])} vs ${JSON.stringify(want2)}`);
  await new Promise((r) => setTimeout(r, 300)); // the server's stderr line, through the pipe
  t.check(/chatcmpl-\d+: \d+ prompt tokens \((\d+) reused\)/.test(log) &&
    [...log.matchAll(/chatcmpl-\d+: (\d+) prompt tokens \((\d+) reused\)/g)].at(-1)[2] > 20,
    `turn 2 reused the cache: ${log.split('\n').filter((l) => /chatcmpl/.test(l)).join(' | ')}`);

  // three at once: queued, each equals its answer alone
  const prompts = ['Once upon a time', 'The dog', 'Lily was'];
  const alone = prompts.map((p) => runText(p, ['-n', '12']));
  const together = await Promise.all(prompts.map((p) =>
    client.completions.create({ model: 'x', prompt: p, max_tokens: 12, temperature: 0 })));
  t.check(together.every((r, i) => r.choices[0].text === alone[i]),
    `parallel: ${JSON.stringify(together.map((r) => r.choices[0].text))} vs ${JSON.stringify(alone)}`);

  // bad requests: the client's BadRequestError (400) with our message
  const bad = async (what, body, re) => {
    try {
      await client.completions.create({ model: 'x', ...body });
      t.check(false, `${what}: accepted`);
    } catch (e) {
      t.check(e instanceof OpenAI.BadRequestError && e.status === 400 && re.test(e.message), `${what}: ${e.status} ${e.message}`);
    }
  };
  await bad('temperature -1', { prompt, temperature: -1 }, /temperature/);
  await bad('top_p 0', { prompt, top_p: 0 }, /top_p/);
  await bad('max_tokens a string', { prompt, max_tokens: 'many' }, /max_tokens/);
  await bad('no prompt', {}, /prompt/);
  await bad('prompt over the context', { prompt: 'Once upon a time '.repeat(200) }, /context/);
  await bad('n = 2', { prompt, n: 2 }, /'n'/);
  try {
    await client.chat.completions.create({ model: 'x', messages: [{ content: 'no role' }] });
    t.check(false, 'chat without a role: accepted');
  } catch (e) {
    t.check(e instanceof OpenAI.BadRequestError && /role/.test(e.message), `chat without a role: ${e.status} ${e.message}`);
  }

  // the API key
  const wrong = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'sk-wrong', maxRetries: 0 });
  try {
    await wrong.models.list();
    t.check(false, 'wrong key accepted');
  } catch (e) {
    t.check(e instanceof OpenAI.AuthenticationError && e.status === 401, `wrong key: ${e.status} ${e.message}`);
  }
  const health = await fetch(`${url}/health`);
  t.check(health.status === 200 && (await health.json()).status === 'ok', '/health without a key');
  const nf = await fetch(`${url}/v1/nothing`, { headers: { Authorization: `Bearer ${KEY}` } });
  t.check(nf.status === 404, `/v1/nothing: ${nf.status}`);

  // SIGTERM: prompt exit 0
  const t0 = Date.now();
  server.kill('SIGTERM');
  const { code } = await exited;
  const ms = Date.now() - t0;
  t.check(code === 0 && ms < 3000 && /serve stopped \(SIGTERM\)/.test(log), `SIGTERM: exit ${code} after ${ms} ms`);
  console.log(`SIGTERM exit after ${ms} ms`);
} catch (e) {
  t.check(false, `${e.stack || e}\nserver log:\n${log}`);
}

// An RDRR folder: its files under their paths and the API under /v1/ on the same port.
const rdrr = path.join(tmp, 'stories-rdrr');
execFileSync(path.join(binDir, 'gguf-to-rdrr'), [model, rdrr], { stdio: 'ignore' });
const srv2 = spawn(quantpack, ['serve', rdrr, '--port', '0'], { stdio: ['ignore', 'ignore', 'pipe'] });
let log2 = '';
srv2.stderr.on('data', (d) => { log2 += d.toString(); });
process.on('exit', () => { try { srv2.kill('SIGKILL'); } catch { /* gone */ } });
try {
  let url = null;
  for (let i = 0; i < 100 && !url; i++) {
    await new Promise((r) => setTimeout(r, 100));
    url = (log2.match(/http:\/\/127\.0\.0\.1:\d+/) || [null])[0];
  }
  if (!url) throw new Error(`server did not start: ${log2}`);
  const man = await fetch(`${url}/manifest.json`);
  const manText = await man.text();
  t.check(man.status === 200 && manText === readFileSync(path.join(rdrr, 'manifest.json'), 'utf8'),
    `RDRR: /manifest.json ${man.status}`);
  const c2 = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'none', maxRetries: 0 });
  const ms = await c2.models.list();
  t.check(ms.data[0].id === 'stories-rdrr', `RDRR: model id ${ms.data[0].id}`);
  const want = execFileSync(quantpack, ['run', rdrr, '-p', 'Once upon a time', '-n', '10'], { stdio: ['ignore', 'pipe', 'ignore'] })
    .toString().slice('Once upon a time'.length, -1);
  const r = await c2.completions.create({ model: 'x', prompt: 'Once upon a time', max_tokens: 10 });
  t.check(r.choices[0].text === want, `RDRR completion ${JSON.stringify(r.choices[0].text)} vs run ${JSON.stringify(want)}`);
} catch (e) {
  t.check(false, `${e.stack || e}\nserver log:\n${log2}`);
}
srv2.kill('SIGINT');
t.finish();
