// Setup shared by the Node peer tests (test_*.mjs): the environment tests/CMakeLists.txt sets,
// skipping (exit 77) when something is missing, loading CommonJS peers from QP_PEER_DIR, and the
// check tally whose closing line is "N passed, N failed", and a tiny Llama folder to convert.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

export const SKIP = 77;

export function skip(why) {
  console.error(`skipped: ${why}`);
  process.exit(SKIP);
}

// The values of the named environment variables, in order; skips unless all are set.
export function requireEnv(...names) {
  const values = names.map((n) => process.env[n]);
  if (values.some((v) => !v))
    skip(`${names.slice(0, -1).join(', ')} and ${names[names.length - 1]} must be set`);
  return values;
}

// Skips at the first path that does not exist.
export function requireFiles(...files) {
  for (const f of files) if (!existsSync(f)) skip(`${f} is missing`);
}

// require() resolving packages installed in peerDir (its node_modules layout).
export const peerRequire = (peerDir) => createRequire(path.join(peerDir, 'noop.js'));

// check(ok, what) counts a check and prints "FAIL: what" when it fails; finish(ok) prints the
// closing line and exits 1 when a check failed (or ok is false), else 0.
export function tally() {
  const t = { passed: 0, failed: 0 };
  t.check = (ok, what) => {
    if (ok) t.passed++;
    else {
      t.failed++;
      console.error(`FAIL: ${what}`);
    }
  };
  t.finish = (ok = true) => {
    console.log(`${t.passed} passed, ${t.failed} failed`);
    process.exit(t.failed || !ok ? 1 : 0);
  };
  return t;
}

// Varied text for tokenizer comparisons: emoji (modifiers, ZWJ, flags), CJK, tabs and CRLF, odd
// spaces, code, accents and scripts, a long run, numbers, edge spaces, plain prose.
export const EXTRA_TEXTS = [
  'Emoji: 👍🏽 👨‍👩‍👧‍👦 🇯🇵 ❤️ and 🦙 llamas',
  '中文分词测试：我爱北京天安门。日本語のテキスト、한국어 텍스트',
  '\tTabs\tand\t\ttabs\n\tindented\r\nCRLF line\r\n',
  'Mixed    spaces   and\u00a0no-break\u2003em space\u3000ideographic',
  'code: for (int i = 0; i < n; i++) { x[i] += y[i] * 2; } // done',
  'Ünïcödé àccents, ß, Ω, Ж, ع, ह, ไทย',
  'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa',
  'Numbers 1234567890 3.14159 -42 1e10 0x1F',
  ' leading and trailing spaces ',
  'Once upon a time, there was a little girl named Lily.',
];

// A tiny Llama (width 8, one layer, zero weights) whose vocabulary is nVocab long: the model folder
// `quantpack convert` needs around a tokenizer.
export function writeTinyLlama(folder, nVocab) {
  mkdirSync(folder);
  const config = {
    architectures: ['LlamaForCausalLM'], model_type: 'llama', vocab_size: nVocab, hidden_size: 8,
    intermediate_size: 16, num_hidden_layers: 1, num_attention_heads: 1, num_key_value_heads: 1,
    max_position_embeddings: 64, rms_norm_eps: 1e-5, rope_theta: 10000, tie_word_embeddings: true,
    torch_dtype: 'float32',
  };
  writeFileSync(path.join(folder, 'config.json'), JSON.stringify(config));
  const l = 'model.layers.0.';
  const shapes = {
    'model.embed_tokens.weight': [nVocab, 8], [`${l}input_layernorm.weight`]: [8],
    [`${l}self_attn.q_proj.weight`]: [8, 8], [`${l}self_attn.k_proj.weight`]: [8, 8],
    [`${l}self_attn.v_proj.weight`]: [8, 8], [`${l}self_attn.o_proj.weight`]: [8, 8],
    [`${l}post_attention_layernorm.weight`]: [8], [`${l}mlp.gate_proj.weight`]: [16, 8],
    [`${l}mlp.up_proj.weight`]: [16, 8], [`${l}mlp.down_proj.weight`]: [8, 16], 'model.norm.weight': [8],
  };
  const header = {};
  let off = 0;
  for (const [name, shape] of Object.entries(shapes)) {
    const n = shape.reduce((a, b) => a * b, 1) * 4;
    header[name] = { dtype: 'F32', shape, data_offsets: [off, off + n] };
    off += n;
  }
  let h = Buffer.from(JSON.stringify(header));
  h = Buffer.concat([h, Buffer.alloc((8 - (h.length % 8)) % 8, 0x20)]);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(h.length));
  writeFileSync(path.join(folder, 'model.safetensors'), Buffer.concat([len, h, Buffer.alloc(off)]));
}
