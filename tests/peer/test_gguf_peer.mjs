// Compares `quantpack inspect --json` with @huggingface/gguf 0.4.6 (an independent GGUF parser) on
// every real GGUF fixture: the tensor table (names, ggml type ids, ne, absolute offsets) and every
// metadata key (type; scalar values exactly; arrays by element type, length and first elements).
// Env: QP_BIN_DIR, QP_PEER_DIR, QP_REAL_FIXTURES. Exit 77 when something is missing.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

import { peerRequire, requireEnv, requireFiles, skip, tally } from './peer_util.mjs';

const [binDir, peerDir, realDir] = requireEnv('QP_BIN_DIR', 'QP_PEER_DIR', 'QP_REAL_FIXTURES');
const quantpack = path.join(binDir, 'quantpack');
requireFiles(quantpack, path.join(peerDir, '@huggingface/gguf/package.json'));
const require = peerRequire(peerDir);
const peerVersion = JSON.parse(readFileSync(path.join(peerDir, '@huggingface/gguf/package.json'), 'utf8')).version;
const { gguf } = require('@huggingface/gguf');

const files = [path.join(realDir, 'stories260K.gguf')];
for (const sub of ['gguf', 'vocab']) {
  const dir = path.join(realDir, sub);
  if (existsSync(dir))
    for (const f of readdirSync(dir).sort()) if (f.endsWith('.gguf')) files.push(path.join(dir, f));
}
const present = files.filter((f) => existsSync(f));
if (present.length === 0) skip(`no GGUF fixtures in ${realDir}`);

// GGUF value type ids -> the names inspect --json uses (cli/inspect-json.md)
const TYPE_NAMES = ['u8', 'i8', 'u16', 'i16', 'u32', 'i32', 'f32', 'bool', 'string', 'array', 'u64', 'i64', 'f64'];
const HEAD = 8; // inspect --json shows the first 8 elements of arrays

const { check, finish } = tally();

// Our JSON numbers are doubles; the peer gives bigint for 64-bit integers.
function sameValue(ours, peer, type) {
  if (typeof peer === 'bigint') return typeof ours === 'number' && ours === Number(peer);
  if (type === 'f32' || type === 'f64') return ours === peer || (Number.isNaN(ours) && Number.isNaN(peer));
  return ours === peer;
}

for (const file of present) {
  const name = path.relative(realDir, file);
  let ours;
  try {
    ours = JSON.parse(execFileSync(quantpack, ['inspect', '--json', file], { maxBuffer: 1 << 28 }).toString());
  } catch (err) {
    check(false, `${name}: quantpack inspect --json failed: ${err.message}`);
    continue;
  }
  const peer = await gguf(file, { allowLocalFile: true, typedMetadata: true });
  check(ours.format === 'gguf', `${name}: format ${ours.format}`);
  check(ours.format_version === peer.typedMetadata.version.value, `${name}: version`);

  // tensors, in file order; the peer's offsets are relative to the data section
  const pt = peer.tensorInfos;
  check(ours.tensors.length === pt.length, `${name}: ${ours.tensors.length} tensors vs peer ${pt.length}`);
  const dataOffset = Number(peer.tensorDataOffset);
  let tensorMismatch = 0;
  for (let i = 0; i < Math.min(pt.length, ours.tensors.length); i++) {
    const a = ours.tensors[i];
    const b = pt[i];
    const ne = b.shape.map(Number);
    const ok =
      a.name === b.name &&
      a.ggml_type === b.dtype &&
      a.ne.length === b.n_dims &&
      a.ne.every((v, d) => v === ne[d]) &&
      a.offset === dataOffset + Number(b.offset);
    if (!ok && tensorMismatch++ < 5)
      console.error(`${name}: tensor ${i}: ours ${JSON.stringify(a)} peer ${b.name} type ${b.dtype} ne ${ne} offset ${b.offset}`);
    check(ok, `${name}: tensor ${i} '${b.name}'`);
  }

  // metadata: every key of the peer (minus its synthetic header fields), in file order
  const keys = Object.keys(peer.typedMetadata).filter((k) => !['version', 'tensor_count', 'kv_count'].includes(k));
  check(ours.metadata.length === keys.length, `${name}: ${ours.metadata.length} keys vs peer ${keys.length}`);
  check(Number(peer.typedMetadata.kv_count.value) === ours.metadata.length, `${name}: kv_count`);
  const byKey = new Map(ours.metadata.map((m) => [m.key, m]));
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i];
    const p = peer.typedMetadata[k];
    const m = byKey.get(k);
    if (!m) {
      check(false, `${name}: key '${k}' missing from inspect`);
      continue;
    }
    check(ours.metadata[i] && ours.metadata[i].key === k, `${name}: key ${i} order ('${k}')`);
    const type = TYPE_NAMES[p.type];
    check(m.type === type, `${name}: '${k}' type ${m.type} vs peer ${type}`);
    if (p.type === 9) {
      const elem = TYPE_NAMES[p.subType];
      check(m.elem_type === elem, `${name}: '${k}' element type ${m.elem_type} vs peer ${elem}`);
      check(m.count === p.value.length, `${name}: '${k}' count ${m.count} vs peer ${p.value.length}`);
      const head = p.value.slice(0, HEAD);
      check(
        Array.isArray(m.head) && m.head.length === head.length && head.every((v, j) => sameValue(m.head[j], v, elem)),
        `${name}: '${k}' first elements ${JSON.stringify(m.head)} vs peer ${JSON.stringify(head, (_, v) => (typeof v === 'bigint' ? v.toString() : v))}`,
      );
    } else {
      check(sameValue(m.value, p.value, type), `${name}: '${k}' value ${m.value} vs peer ${p.value}`);
    }
  }

  // derived facts the peer states directly
  const tokens = peer.typedMetadata['tokenizer.ggml.tokens'];
  if (tokens) check(ours.tokenizer.n_tokens === tokens.value.length, `${name}: n_tokens ${ours.tokenizer.n_tokens} vs peer ${tokens.value.length}`);
  const merges = peer.typedMetadata['tokenizer.ggml.merges'];
  check(ours.tokenizer.n_merges === (merges ? merges.value.length : 0), `${name}: n_merges`);
  const arch = peer.typedMetadata['general.architecture'];
  if (arch) check(ours.architecture.name === arch.value, `${name}: architecture name`);
  const blocks = arch && peer.typedMetadata[`${arch.value}.block_count`];
  if (blocks) check(ours.architecture.n_layers === Number(blocks.value), `${name}: n_layers`);
  console.log(`${name}: ${pt.length} tensors, ${keys.length} keys compared with @huggingface/gguf ${peerVersion}`);
}

finish();
