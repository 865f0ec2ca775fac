#!/bin/bash
# quantpack serve on loopback, driven by curl: "/" -> manifest, byte ranges (first, middle,
# suffix, open-ended, past the end -> 416), HEAD, CORS preflight, ETag = shard SHA-256,
# If-None-Match, If-Range, traversal -> 403, missing -> 404, 200 concurrent range requests each
# byte-checked, clean exit on SIGINT. Only 127.0.0.1 is used.
set -u
B=${QP_BIN_DIR:?}; FX=${QP_FIXTURES_DIR:?}; T=${QP_TMP_DIR:?}/serve
command -v curl >/dev/null || { echo "skipped: curl is not installed"; exit 77; }
[ -d "$FX/llama-gqa-untied" ] || { echo "skipped: no fixtures"; exit 77; }
rm -rf "$T"; mkdir -p "$T"
"$B/quantpack" convert "$FX/llama-gqa-untied" --to rdrr --quant F16 -o "$T/m" --shard-size 262144 --quiet || exit 1
echo secret > "$T/outside.txt"
. "$(dirname "$0")/serve_util.sh"
serve_start "$T/m" "$T/log"
cleanup() { kill -INT $PID 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
S0="$T/m/shard_00000.bin"; SIZE=$(stat -c %s "$S0")
H0=$(sha256sum "$S0" | cut -d' ' -f1)
C="curl -s --max-time 10"

$C -o "$T/root" -D "$T/h" "$URL/"
ok "/ is manifest.json" 'cmp -s "$T/root" "$T/m/manifest.json"'
ok "200 + json type" 'grep -q "^HTTP/1.1 200" "$T/h" && grep -qi "^Content-Type: application/json" "$T/h"'
ok "CORS on GET" 'grep -qi "^Access-Control-Allow-Origin: \*" "$T/h" && grep -qi "^Access-Control-Expose-Headers:.*Content-Range" "$T/h"'

range() { # name range-header offset length
  local nm=$1 off=$3 len=$4
  $C -o "$T/r" -D "$T/h" -H "Range: bytes=$2" "$URL/shard_00000.bin"
  dd if="$S0" bs=1M iflag=skip_bytes,count_bytes skip=$off count=$len status=none > "$T/w"
  ok "$nm: 206" 'grep -q "^HTTP/1.1 206" "$T/h"'
  ok "$nm: Content-Range" 'grep -qi "^Content-Range: bytes $off-$((off+len-1))/$SIZE" "$T/h"'
  ok "$nm: bytes" 'cmp -s "$T/r" "$T/w"'
}
range first "0-99" 0 100
range middle "100000-100999" 100000 1000
range suffix "-777" $((SIZE-777)) 777
range open "$((SIZE-5000))-" $((SIZE-5000)) 5000
range clipped "$((SIZE-10))-$((SIZE+1000))" $((SIZE-10)) 10
$C -o "$T/r" -D "$T/h" -H "Range: bytes=$SIZE-" "$URL/shard_00000.bin"
ok "past the end: 416" 'grep -q "^HTTP/1.1 416" "$T/h" && grep -qi "^Content-Range: bytes \*/$SIZE" "$T/h"'
$C -o "$T/r" -D "$T/h" "$URL/shard_00000.bin"
ok "whole shard" 'grep -q "^HTTP/1.1 200" "$T/h" && cmp -s "$T/r" "$S0" && grep -qi "^Accept-Ranges: bytes" "$T/h"'
ok "ETag = shard sha256" 'grep -qi "^ETag: \"sha256-$H0\"" "$T/h"'
$C -o /dev/null -w "%{http_code}" -H "If-None-Match: \"sha256-$H0\"" "$URL/shard_00000.bin" > "$T/code"
ok "If-None-Match -> 304" '[ "$(cat "$T/code")" = 304 ]'
$C -o "$T/r" -w "%{http_code}" -H "Range: bytes=0-9" -H "If-Range: \"sha256-0000\"" "$URL/shard_00000.bin" > "$T/code"
ok "stale If-Range -> 200 whole" '[ "$(cat "$T/code")" = 200 ] && cmp -s "$T/r" "$S0"'
dl=$($C -I -D "$T/h" -o /dev/null -w "%{size_download}" "$URL/shard_00000.bin")
ok "HEAD" 'grep -q "^HTTP/1.1 200" "$T/h" && grep -qi "^Content-Length: $SIZE" "$T/h" && [ "$dl" = 0 ]'
$C -X OPTIONS -D "$T/h" -o /dev/null -H "Origin: http://example.test" -H "Access-Control-Request-Method: GET" -H "Access-Control-Request-Headers: range" "$URL/shard_00000.bin"
ok "preflight 204 + CORS" 'grep -q "^HTTP/1.1 204" "$T/h" && grep -qi "^Access-Control-Allow-Methods: GET, HEAD, OPTIONS" "$T/h" && grep -qi "^Access-Control-Allow-Headers:.*Range" "$T/h"'
for p in "/../outside.txt" "/%2e%2e/outside.txt" "/..%2foutside.txt" "/a/../../outside.txt"; do
  code=$($C --path-as-is -o "$T/r" -w "%{http_code}" "$URL$p")
  ok "traversal $p -> 403" '[ "$code" = 403 ] && ! grep -q secret "$T/r"'
done
ln -s "$T/outside.txt" "$T/m/link.txt"
code=$($C -o "$T/r" -w "%{http_code}" "$URL/link.txt"); ok "symlink out -> 403" '[ "$code" = 403 ]'
code=$($C -o /dev/null -w "%{http_code}" "$URL/nope.bin"); ok "missing -> 404" '[ "$code" = 404 ]'
code=$($C -o /dev/null -w "%{http_code}" -X DELETE "$URL/manifest.json"); ok "DELETE -> 405" '[ "$code" = 405 ]'

# Load: 200 range requests, 50 at a time, over every shard; each response byte-checked.
N_SH=$(ls "$T/m"/shard_*.bin | wc -l)
mkdir -p "$T/load"
for i in $(seq 0 199); do
  sh=$(printf "shard_%05d.bin" $((i % N_SH))); sz=$(stat -c %s "$T/m/$sh")
  a=$(( (i * 7919) % sz )); len=$(( (i * 104729) % 65536 + 1 )); [ $((a+len)) -gt $sz ] && len=$((sz-a))
  echo "$i $sh $a $len"
done > "$T/jobs"
export URL T
xargs -P 50 -L 1 bash -c 'curl -s --max-time 20 -o "$T/load/$0" -H "Range: bytes=$2-$(($2+$3-1))" "$URL/$1"' < "$T/jobs"
bad=0
while read -r i sh a len; do
  dd if="$T/m/$sh" bs=1M iflag=skip_bytes,count_bytes skip=$a count=$len status=none | cmp -s - "$T/load/$i" || bad=$((bad+1))
done < "$T/jobs"
ok "200 concurrent ranges byte-exact ($bad bad)" '[ $bad -eq 0 ]'

kill -INT $PID
for i in $(seq 50); do kill -0 $PID 2>/dev/null || break; sleep 0.1; done
ok "SIGINT stops the server" '! kill -0 $PID 2>/dev/null'
wait $PID; rc=$?
ok "clean exit code ($rc)" '[ $rc -eq 0 ]'
trap - EXIT; rm -rf "$T"
finish
