#!/bin/bash
# quantpack encode / decode / encode --list: sizes (I2_S with its trailer), exit codes, refusal of
# a non-finite scale, and no debris left behind on failure.
set -u
B="${QP_BIN_DIR:-build/bin}/quantpack"
T="$(mktemp -d "${QP_TMP_DIR:-/tmp}/enc_cli.XXXXXX" 2>/dev/null || mktemp -d)"
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
check() { if eval "$2"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $1" >&2; fi; }

# 2 rows x 256 columns of f32: values k/8 - 16 for k in 0..255 (exact in Q8_0: amax 16 -> d = 16/127)
command -v python3 >/dev/null || { echo "skipped: python3 is not installed"; exit 77; }
python3 - "$T/in.f32" <<'PY' || { echo "FAIL: python3 could not write the input" >&2; exit 1; }
import struct, sys
vals = [((k % 256) / 8.0 - 16.0) for k in range(512)]
open(sys.argv[1], 'wb').write(struct.pack('<512f', *vals))
PY
"$B" encode --list > "$T/list" ; check "list exits 0" '[ $? -eq 0 ]'
check "list names q4_k" 'grep -q "^q4_k .*144" "$T/list"'
check "list names i2_s with ggml 36" 'grep -qE "^i2_s +I2_S +128 +32 +2.0000 +36" "$T/list"'
check "list names bq4" 'grep -q "^bq4 " "$T/list"'

"$B" encode --type q4_k --cols 256 "$T/in.f32" "$T/o.q4k" 2>/dev/null; check "q4_k encode" '[ $? -eq 0 ]'
check "q4_k size" '[ $(stat -c %s "$T/o.q4k") -eq 288 ]'
"$B" decode --type Q4_K --cols 256 "$T/o.q4k" "$T/b.f32" 2>/dev/null; check "q4_k decode" '[ $? -eq 0 ]'
check "q4_k decoded size" '[ $(stat -c %s "$T/b.f32") -eq 2048 ]'
"$B" encode --type i2_s --cols 256 "$T/in.f32" "$T/o.i2s" 2>/dev/null; check "i2_s encode" '[ $? -eq 0 ]'
check "i2_s size n/4+32" '[ $(stat -c %s "$T/o.i2s") -eq 160 ]'
"$B" decode --type i2_s --cols 256 "$T/o.i2s" "$T/b2.f32" 2>/dev/null; check "i2_s decode" '[ $? -eq 0 ]'

"$B" encode --type nope --cols 256 "$T/in.f32" "$T/x" 2>/dev/null; check "unknown type -> 2" '[ $? -eq 2 ]'
"$B" encode --type q4_k --cols 100 "$T/in.f32" "$T/x" 2>/dev/null; check "cols not a block multiple -> 2" '[ $? -eq 2 ]'
"$B" encode --type q4_k --cols 768 "$T/in.f32" "$T/x" 2>/dev/null; check "partial row -> 3" '[ $? -eq 3 ]'
"$B" encode --type q4_k "$T/in.f32" "$T/x" 2>/dev/null; check "missing --cols -> 2" '[ $? -eq 2 ]'
"$B" decode --type q4_k --cols 256 "$T/missing" "$T/x" 2>/dev/null; check "missing input -> 4" '[ $? -eq 4 ]'
# a Q4_K block with an Inf scale is refused
cp "$T/o.q4k" "$T/bad.q4k"; printf '\x00\x7c' | dd of="$T/bad.q4k" bs=1 seek=144 conv=notrunc 2>/dev/null
"$B" decode --type q4_k --cols 256 "$T/bad.q4k" "$T/x" 2>/dev/null; check "inf scale -> 3" '[ $? -eq 3 ]'
check "no debris" '[ ! -e "$T/x" ] && [ -z "$(ls "$T" | grep tmp)" ]'
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
