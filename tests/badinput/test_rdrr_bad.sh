#!/bin/bash
# Damaged RDRR directories are refused by inspect, verify and run, each with its own message:
# a corrupted shard, a renamed (missing) shard, a traversal file name, a truncated shard, a
# truncated manifest, a tampered tensor (group hash / Merkle root), and a bad signature.
set -u
B=${QP_BIN_DIR:?}; FX=${QP_FIXTURES_DIR:?}; T=${QP_TMP_DIR:?}/rdrr-bad
command -v python3 >/dev/null || { echo "skipped: python3 missing"; exit 77; }
[ -d "$FX/llama-tied" ] || { echo "skipped: no fixtures"; exit 77; }
rm -rf "$T"; mkdir -p "$T"
fail=0; pass=0
"$B/quantpack" convert "$FX/llama-tied" --to rdrr --quant F32 -o "$T/good" --shard-size 65536 --quiet || { echo "FAIL: convert"; exit 1; }
"$B/quantpack" inspect "$T/good" >/dev/null || { echo "FAIL: good dir not readable"; exit 1; }

expect() { # name dir regex : every command must fail with the message
  local name=$1 dir=$2 re=$3 cmd out rc
  for cmd in "inspect $dir" "verify $dir --against $FX/llama-tied" "run $dir -p hi -n 2"; do
    out=$("$B/quantpack" $cmd 2>&1 >/dev/null); rc=$?
    if [ $rc -ne 0 ] && [[ $out =~ $re ]]; then pass=$((pass+1))
    else fail=$((fail+1)); echo "FAIL: $name: quantpack $cmd -> rc $rc: $out"; fi
  done
}
mk() { rm -rf "$T/$1"; cp -r "$T/good" "$T/$1"; }

mk corrupt; python3 - "$T/corrupt/shard_00001.bin" <<'PY'
import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); b[100]^=0x40; open(p,'wb').write(b)
PY
expect "corrupted shard" "$T/corrupt" "shard 1 'shard_00001.bin': SHA-256 [0-9a-f]{64} does not match"

mk renamed; mv "$T/renamed/shard_00002.bin" "$T/renamed/shard_00002.old"
expect "renamed shard" "$T/renamed" "shard 2 'shard_00002.bin' is missing"

mk traversal; echo x > "$T/outside.bin"
python3 - "$T/traversal/manifest.json" <<'PY'
import json,sys; p=sys.argv[1]; m=json.load(open(p)); m['shards'][0]['filename']='../outside.bin'; json.dump(m,open(p,'w'))
PY
expect "traversal name" "$T/traversal" "file name '../outside.bin' is not a plain file name inside the directory \(refused\)"

mk short; python3 - "$T/short/shard_00000.bin" <<'PY'
import sys,os; p=sys.argv[1]; os.truncate(p, os.path.getsize(p)-10)
PY
expect "truncated shard" "$T/short" "shard 0 'shard_00000.bin' has [0-9]+ bytes, the manifest says"

mk trunc; python3 - "$T/trunc/manifest.json" <<'PY'
import sys; p=sys.argv[1]; b=open(p,'rb').read(); open(p,'wb').write(b[:len(b)//2])
PY
expect "truncated manifest" "$T/trunc" "manifest.json: not valid JSON \(truncated or damaged"

# The same tensor twice: cJSON would read the first, DOPPLER's JSON.parse the second.
mk dupkey; python3 - "$T/dupkey/manifest.json" <<'PY'
import sys; p=sys.argv[1]; b=open(p).read(); k='"model.norm.weight":'; i=b.index(k); j=b.index('}', i)+1
open(p,'w').write(b[:i] + b[i:j] + ',' + b[i:j] + b[j:])
PY
expect "duplicate tensor key" "$T/dupkey" "manifest.json: duplicate key 'model.norm.weight' in \"tensors\""

# Issue 11, item 9: a manifest version we do not know, and a shard name with an escaped NUL
# (cJSON would cut "shard_00000.bin\u0000.evil" at the NUL and read shard_00000.bin).
mk v999; python3 - "$T/v999/manifest.json" <<'PY'
import json,sys; p=sys.argv[1]; m=json.load(open(p)); m['version']=999; json.dump(m,open(p,'w'))
PY
expect "version 999" "$T/v999" "manifest \"version\" 999: this reader knows version 1 only"
mk nul; python3 - "$T/nul/manifest.json" <<'PY'
import json,sys; p=sys.argv[1]; m=json.load(open(p)); m['shards'][0]['filename']+='\x00.evil'; json.dump(m,open(p,'w'))
PY
grep -q 'bin\\u0000.evil' "$T/nul/manifest.json" || { fail=$((fail+1)); echo "FAIL: no \\u0000 written"; }
expect "escaped NUL in a shard name" "$T/nul" "manifest.json: a string holds an escaped NUL \(\\\\u0000\) at byte [0-9]+"

# A tensor changed together with its shard hash: the Merkle root catches it.
mk merkle; python3 - "$T/merkle" <<'PY'
import json,sys,hashlib; d=sys.argv[1]; m=json.load(open(d+'/manifest.json'))
t=m['tensors']['model.norm.weight']; s=m['shards'][t['shard']]; p=d+'/'+s['filename']
b=bytearray(open(p,'rb').read()); b[t['offset']]^=1; open(p,'wb').write(b)
s['hash']=s['blake3']=hashlib.sha256(b).hexdigest(); json.dump(m,open(d+'/manifest.json','w'))
PY
expect "tampered tensor" "$T/merkle" "tensor 'model.norm.weight': block Merkle root sha256:[0-9a-f]{64} does not match"

# Signature: valid, then any byte of the manifest changed.
"$B/quantpack" keygen "$T/k.key" 2>/dev/null
"$B/quantpack" convert "$FX/llama-tied" --to rdrr --quant F16 -o "$T/signed" --sign "$T/k.key" --quiet
if "$B/quantpack" verify-signature "$T/signed" --pubkey "$T/k.key.pub" >/dev/null; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: good signature"; fi
"$B/quantpack" keygen "$T/other.key" 2>/dev/null
out=$("$B/quantpack" verify-signature "$T/signed" --pubkey "$T/other.key.pub" 2>&1); rc=$?
[ $rc -eq 1 ] && [[ $out =~ "signed by a different key" ]] && pass=$((pass+1)) || { fail=$((fail+1)); echo "FAIL: other key: $rc $out"; }
sed -i 's/"modelId":/"modelId" :/' "$T/signed/manifest.json"
out=$("$B/quantpack" verify-signature "$T/signed" 2>&1); rc=$?
[ $rc -eq 1 ] && [[ $out =~ "signature does not match" ]] && pass=$((pass+1)) || { fail=$((fail+1)); echo "FAIL: tampered manifest: $rc $out"; }
[ "$(stat -c %a "$T/k.key")" = 600 ] && pass=$((pass+1)) || { fail=$((fail+1)); echo "FAIL: key mode"; }

# A failed conversion leaves nothing behind.
out=$("$B/quantpack" convert "$FX/llama-tied" --to rdrr --quant TQ2_0 -o "$T/nothing" 2>&1); rc=$?
[ $rc -ne 0 ] && [ ! -e "$T/nothing" ] && [ -z "$(ls "$T" | grep 'nothing.tmp')" ] && pass=$((pass+1)) || { fail=$((fail+1)); echo "FAIL: debris after failure ($rc $out)"; }

rm -rf "$T"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
