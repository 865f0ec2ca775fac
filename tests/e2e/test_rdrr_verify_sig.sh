#!/bin/bash
# `quantpack verify RDRR_DIR [--pubkey K.pub]`: integrity (every hash) and the Ed25519 signature.
# Only --pubkey is trusted: a valid signature without it is reported "signed, key not given"; a
# signature swapped for one by another key passes untrusted (that is the point of the message)
# and fails against the real key. Bad signatures, other signers, a different K.pub lying beside
# the manifest and --pubkey on an unsigned directory exit 1; a damaged shard under a valid
# signature exits 1 with the shard's message; overlapping tensors or a tensor in two groups, 3.
set -u
B=${QP_BIN_DIR:?}; FX=${QP_FIXTURES_DIR:?}; T=${QP_TMP_DIR:?}/rdrr-verify-sig
[ -d "$FX/llama-tied" ] || { echo "skipped: no fixtures"; exit 77; }
rm -rf "$T"; mkdir -p "$T"
. "$(dirname "$0")/../sh_check.sh"
Q="$B/quantpack"

"$Q" keygen "$T/k.key" 2>/dev/null && "$Q" keygen "$T/evil.key" 2>/dev/null || { echo "FAIL: keygen"; exit 1; }
"$Q" convert "$FX/llama-tied" --to rdrr --quant F16 -o "$T/plain" --shard-size 65536 --quiet || { echo "FAIL: convert"; exit 1; }
"$Q" convert "$FX/llama-tied" --to rdrr --quant F16 -o "$T/signed" --shard-size 65536 --sign "$T/k.key" --quiet || { echo "FAIL: convert --sign"; exit 1; }
"$Q" convert "$FX/llama-tied" --to rdrr --quant F16 -o "$T/evil" --shard-size 65536 --sign "$T/evil.key" --quiet || { echo "FAIL: convert --sign evil"; exit 1; }
cmp -s "$T/signed/manifest.json" "$T/evil/manifest.json" || { echo "FAIL: manifests are not deterministic"; exit 1; }

check "unsigned" 0 "signature: none.*integrity ok: .*tensors" "$Q" verify "$T/plain"
check "unsigned + --pubkey" 1 "not signed \(no manifest.json.sig\), but --pubkey" "$Q" verify "$T/plain" --pubkey "$T/k.key.pub"
check "trusted" 0 "signature ok \(trusted\): .*signed by ed25519:$(cat "$T/k.key.pub").*integrity ok" \
  "$Q" verify "$T/signed" --pubkey "$T/k.key.pub"
check "key not given" 0 "signed, key not given: .*ed25519:$(cat "$T/k.key.pub").*pass --pubkey" "$Q" verify "$T/signed"
check "other signer" 1 "signed by a different key than the one given" "$Q" verify "$T/signed" --pubkey "$T/evil.key.pub"

# A key beside the manifest is compared but never trusted.
cp -r "$T/signed" "$T/beside"; cp "$T/k.key.pub" "$T/beside/K.pub"
check "same key beside" 0 "signed, key not given: .*equal to .*K.pub beside it, which proves no more" "$Q" verify "$T/beside"
cp "$T/evil.key.pub" "$T/beside/K.pub"
check "other key beside" 1 "not by the key .*K.pub lying beside the manifest" "$Q" verify "$T/beside"

# The attacker's signature over the same bytes: untrusted pass, trusted fail.
cp -r "$T/signed" "$T/swapped"; cp "$T/evil/manifest.json.sig" "$T/swapped/"
check "swapped, no key" 0 "signed, key not given: .*ed25519:$(cat "$T/evil.key.pub")" "$Q" verify "$T/swapped"
check "swapped, trusted" 1 "signed by a different key than the one given" "$Q" verify "$T/swapped" --pubkey "$T/k.key.pub"

# One byte of the manifest changed: the signature fails with or without a key.
cp -r "$T/signed" "$T/tampered"; sed -i 's/"modelId":/"modelId" :/' "$T/tampered/manifest.json"
check "tampered manifest" 1 "Ed25519 signature does not match the bytes of" "$Q" verify "$T/tampered"
check "tampered manifest, key" 1 "Ed25519 signature does not match the bytes of" "$Q" verify "$T/tampered" --pubkey "$T/k.key.pub"

# A malformed signature file is a failed verification too.
cp -r "$T/signed" "$T/badsig"; echo '{"algorithm":"ed25519","publicKey":"zz"}' > "$T/badsig/manifest.json.sig"
check "malformed signature" 1 "publicKey is not 64 hex digits" "$Q" verify "$T/badsig"

# Valid signature, damaged shard: the integrity check behind the signature fails.
cp -r "$T/signed" "$T/shard"
printf '\x55' | dd of="$T/shard/shard_00000.bin" bs=1 seek=200 conv=notrunc status=none
check "damaged shard" 1 "signature ok \(trusted\).*shard 0 'shard_00000.bin': SHA-256 [0-9a-f]{64} does not match" \
  "$Q" verify "$T/shard" --pubkey "$T/k.key.pub"

# Valid signature, edited side files (readers/rdrr.md "Files"): the manifest's files map hashes
# tensors.json and the tokenizer files, so an edit, a swapped-in unlisted tokenizer or a removed
# entry fails the integrity check even though manifest.json (and its signature) is untouched.
tok=$(cd "$T/signed" && ls tokenizer.json tokenizer.model 2>/dev/null | head -1)
cp -r "$T/signed" "$T/edtok"; printf ' ' >> "$T/edtok/$tok"
check "edited $tok" 3 "signature ok \(trusted\).*$tok: SHA-256 [0-9a-f]{64}, the manifest's files map says" \
  "$Q" verify "$T/edtok" --pubkey "$T/k.key.pub"
check "edited $tok, inspect" 3 "$tok: SHA-256" "$Q" inspect "$T/edtok"
check "edited $tok, run" 3 "$tok: SHA-256" "$Q" run "$T/edtok" --ids "1 2" -n 1
cp -r "$T/signed" "$T/edtj"; sed -i -E '0,/"offset":[[:space:]]*0/s//"offset": 4096/' "$T/edtj/tensors.json"; cmp -s "$T/signed/tensors.json" "$T/edtj/tensors.json" && echo 'FAIL: tensors.json not edited'
check "edited tensors.json" 3 "tensors.json: SHA-256 [0-9a-f]{64}, the manifest's files map says" \
  "$Q" verify "$T/edtj" --pubkey "$T/k.key.pub"
cp -r "$T/signed" "$T/extra"; echo '{}' > "$T/extra/tokenizer_config.json"
check "unlisted tokenizer_config.json" 3 "'tokenizer_config.json' is read but not in the manifest's files map" \
  "$Q" verify "$T/extra" --pubkey "$T/k.key.pub"
check "signed package ok" 0 "integrity ok" "$Q" verify "$T/signed" --pubkey "$T/k.key.pub"

# With --against the signature is checked before the runtime comparison.
check "against, trusted" 0 "signature ok \(trusted\)" "$Q" verify "$T/signed" --against "$FX/llama-tied" -n 2 --pubkey "$T/k.key.pub"
check "against, other signer" 1 "signed by a different key" "$Q" verify "$T/signed" --against "$FX/llama-tied" -n 2 --pubkey "$T/evil.key.pub"
check "pubkey on a non-RDRR model" 2 "--pubkey is for RDRR directories" "$Q" verify "$FX/llama-tied" --against "$FX/llama-tied" --pubkey "$T/k.key.pub"
check "no --against on a non-RDRR model" 2 "--against SRC is required" "$Q" verify "$FX/llama-tied"
# The integrity check refuses tensors sharing bytes and a tensor listed in two groups (either
# would let a small manifest make the reader hash the same bytes over and over).
cp -r "$T/plain" "$T/overlap"; python3 - "$T/overlap/manifest.json" <<'PY'
import json,sys; p=sys.argv[1]; m=json.load(open(p)); t=m['tensors']
a,b=[k for k in t if 'spans' not in t[k]][:2]; t[b]['shard']=t[a]['shard']; t[b]['offset']=t[a]['offset']
json.dump(m,open(p,'w'))
PY
check "overlapping tensors" 3 "tensors '.*' and '.*' overlap in shard [0-9]+ at offset [0-9]+" "$Q" verify "$T/overlap"
cp -r "$T/plain" "$T/twice"; python3 - "$T/twice/manifest.json" <<'PY'
import json,sys; p=sys.argv[1]; m=json.load(open(p)); g=m['groups']
names=list(g); g[names[-1]]['tensors'].append(g[names[0]]['tensors'][0]); json.dump(m,open(p,'w'))
PY
check "tensor in two groups" 3 "lists tensor '.*', already listed" "$Q" verify "$T/twice"

# verify-signature is unchanged
check "verify-signature" 0 "signature ok: .*\(the given key\)" "$Q" verify-signature "$T/signed" --pubkey "$T/k.key.pub"

rm -rf "$T"
finish
