// Setup shared by the Node peer tests (test_*.mjs): the environment tests/CMakeLists.txt sets,
// skipping (exit 77) when something is missing, loading CommonJS peers from QP_PEER_DIR, and the
// check tally whose closing line is "N passed, N failed".
import { existsSync } from 'node:fs';
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
