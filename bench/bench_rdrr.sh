#!/bin/bash
# gguf-to-rdrr throughput vs `cp` + `sha256sum` of the same bytes, in one run.
# Makes a ~1 GB synthetic GGUF (F16 tensors of random bytes, via the GGUF writer behind
# `quantpack convert`: a generated HF model scaled up is too slow, so python writes the GGUF
# directly), converts it, copies + hashes it, prints MB/s and the ratio, deletes everything.
# usage: bench/bench_rdrr.sh [BUILD_BIN_DIR] [SIZE_MB]
set -eu
B=${1:-build/bin}; MB=${2:-1024}; T=$(mktemp -d "${TMPDIR:-/tmp}/bench-rdrr.XXXXXX")
trap 'rm -rf "$T"' EXIT
python3 - "$T/big.gguf" "$MB" <<'PY'
import os, struct, sys
path, mb = sys.argv[1], int(sys.argv[2])
rows, cols = 4096, 4096                      # 32 MiB per F16 tensor
n = max(1, mb * 2**20 // (rows * cols * 2))
def s(x): b = x.encode(); return struct.pack('<Q', len(b)) + b
kv = [(b'general.architecture', 8, s('llama')), (b'general.alignment', 4, struct.pack('<I', 32))]
hdr = b'GGUF' + struct.pack('<IQQ', 3, n, len(kv))
for k, t, v in kv: hdr += struct.pack('<Q', len(k)) + k + struct.pack('<I', t) + v
off = 0
for i in range(n):
    name = f'blk.{i}.ffn_up.weight'.encode()
    hdr += struct.pack('<Q', len(name)) + name + struct.pack('<I', 2) + struct.pack('<QQ', cols, rows) + struct.pack('<I', 1) + struct.pack('<Q', off)
    off += rows * cols * 2
hdr += b'\0' * ((-len(hdr)) % 32)
with open(path, 'wb') as f:
    f.write(hdr)
    chunk = os.urandom(rows * cols * 2)
    for i in range(n): f.write(chunk[i:] + chunk[:i])
PY
SZ=$(stat -c %s "$T/big.gguf")
sync
t0=$(date +%s.%N); "$B/gguf-to-rdrr" "$T/big.gguf" "$T/out" --quiet; t1=$(date +%s.%N)
cp "$T/big.gguf" "$T/copy.gguf" && sha256sum "$T/copy.gguf" >/dev/null; t2=$(date +%s.%N)
python3 - "$SZ" "$t0" "$t1" "$t2" <<'PY'
import sys
sz, t0, t1, t2 = int(sys.argv[1]), *map(float, sys.argv[2:])
a, b = t1 - t0, t2 - t1
print(f"bytes {sz} ({sz/1e9:.2f} GB)")
print(f"gguf-to-rdrr      {a:7.2f} s  {sz/a/1e6:8.1f} MB/s  (write shards + shard/group SHA-256 + Merkle)")
print(f"cp + sha256sum    {b:7.2f} s  {sz/b/1e6:8.1f} MB/s")
print(f"ratio (ours / cp+sha256sum time) {a/b:.2f}")
PY
