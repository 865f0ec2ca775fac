#!/bin/bash
# quantpack serve against hostile folders and clients (issue 11 item 5), on loopback only, every
# loop bounded in count and time: FIFOs in the folder answer 403 at once and pin nothing;
# symlinks (file or folder), folders and dot paths at any level are refused; If-None-Match is an
# exact entity-tag list comparison (a value that merely contains the ETag gives 200); oversized
# headers and GET bodies are refused; 420 slowloris connections (one header byte every 3 s, from
# 11 source addresses of 127/8) neither starve a normal client nor outlive the 10 s request
# deadline, and a client address over its limit of 64 is refused; SIGTERM while 600 connections
# saturate the server ends it within 1.5 s.
set -u
B=${QP_BIN_DIR:?}; FX=${QP_FIXTURES_DIR:?}; T=${QP_TMP_DIR:?}/serve_hostile
command -v curl >/dev/null || { echo "skipped: curl is not installed"; exit 77; }
[ -d "$FX/llama-gqa-untied" ] || { echo "skipped: no fixtures"; exit 77; }
SLOW=$B/qp-test-slow-client
[ -x "$SLOW" ] || { echo "FAIL: no $SLOW"; exit 1; }
rm -rf "$T"; mkdir -p "$T"
"$B/quantpack" convert "$FX/llama-gqa-untied" --to rdrr --quant F16 -o "$T/m" --shard-size 262144 --quiet || exit 1
. "$(dirname "$0")/serve_util.sh"
mkfifo "$T/m/pipe.bin"; mkdir "$T/m/sub" "$T/m/.staging"; mkfifo "$T/m/sub/shard_00000.bin"
echo dotsecret > "$T/m/.staging/shard_00000.bin"; echo dotsecret > "$T/m/sub/.partial"
ln -s . "$T/m/loop"; ln -s manifest.json "$T/m/alias.json"
serve_start "$T/m" "$T/log"
cleanup() { kill -KILL $PID 2>/dev/null; for p in ${SLOW_PIDS:-}; do kill $p 2>/dev/null; done; rm -rf "$T"; }
trap cleanup EXIT
C="curl -s --max-time 10"
S0="$T/m/shard_00000.bin"; H0=$(sha256sum "$S0" | cut -d' ' -f1)

# FIFOs: 40 requests, 20 at a time, each answered 403 well before curl's 5 s limit.
t0=$(now_ms)
for i in $(seq 20); do echo /pipe.bin; echo /sub/shard_00000.bin; done |
  xargs -P 20 -I{} curl -s --max-time 5 -o /dev/null -w "%{http_code}\n" "$URL{}" > "$T/codes"
ms=$(( $(now_ms) - t0 ))
ok "40 FIFO requests -> 403 ($(sort "$T/codes" | uniq -c | tr -s ' \n' ' '), $ms ms)" \
   '[ "$(grep -c "^403$" "$T/codes")" = 40 ] && [ $ms -lt 4000 ]'
code=$($C -o "$T/r" -w "%{http_code}" "$URL/manifest.json")
ok "served after the FIFOs" '[ "$code" = 200 ] && cmp -s "$T/r" "$T/m/manifest.json"'

for p in /.staging/shard_00000.bin /%2estaging/shard_00000.bin /sub/.partial /sub/%2Epartial \
         /./manifest.json /.staging/ /sub /loop/manifest.json /alias.json /sub%2f..%2fmanifest.json; do
  code=$($C --path-as-is -o "$T/r" -w "%{http_code}" "$URL$p")
  ok "$p -> 403 ($code)" '[ "$code" = 403 ] && ! grep -q dotsecret "$T/r"'
done
code=$($C -o /dev/null -w "%{http_code}" "$URL/sub/%00x"); ok "encoded NUL -> 400 ($code)" '[ "$code" = 400 ]'

# If-None-Match: RFC 9110 weak comparison over a well-formed list; "*" matches any file.
E="\"sha256-$H0\""
while IFS='|' read -r want value; do
  code=$($C -o /dev/null -w "%{http_code}" -H "If-None-Match: $value" "$URL/shard_00000.bin")
  ok "If-None-Match: $value -> $want ($code)" '[ "$code" = "$want" ]'
done <<EOF
304|$E
304|W/$E
304|"a", $E , "b"
304|*
200|x$E
200|${E}x
200|"sha256-${H0}0"
200|"sha256-${H0:0:32}"
200|"a" $E
200|$E, "unterminated
200|W/"sha256-${H0}" W/"x"
EOF
code=$($C -o /dev/null -w "%{http_code}" -H 'If-None-Match: "a"' -H "If-None-Match: $E" "$URL/shard_00000.bin")
ok "two If-None-Match lines, second equal -> 304 ($code)" '[ "$code" = 304 ]'
code=$($C -o "$T/r" -w "%{http_code}" -H "Range: bytes=0-9" -H "If-Range: W/$E" "$URL/shard_00000.bin")
ok "weak If-Range -> 200 whole ($code)" '[ "$code" = 200 ] && cmp -s "$T/r" "$S0"'
code=$($C -o "$T/r" -w "%{http_code}" -H "Range: bytes=0-9" -H "If-Range: $E" "$URL/shard_00000.bin")
ok "strong If-Range -> 206 ($code)" '[ "$code" = 206 ] && [ "$(stat -c %s "$T/r")" = 10 ]'

big=$(head -c 40000 /dev/zero | tr '\0' a)
code=$($C -o /dev/null -w "%{http_code}" -H "X-Big: $big" "$URL/manifest.json")
ok "40 KB of headers -> 431 ($code)" '[ "$code" = 431 ]'
code=$($C -o /dev/null -w "%{http_code}" -X GET --data-binary @"$T/m/manifest.json" "$URL/manifest.json")
ok "GET with a body -> 413 ($code)" '[ "$code" = 413 ]'

# Slowloris: 320 connections from 10 addresses (32 each) and 100 from one address (64 allowed).
"$SLOW" "$PORT" 320 3000 25 127.0.0.1{0,1,2,3,4,5,6,7,8,9} > "$T/slow_a" & SLOW_PIDS=$!
"$SLOW" "$PORT" 100 3000 25 127.0.0.3 > "$T/slow_b" & SLOW_PIDS="$SLOW_PIDS $!"
sleep 2
worst=0; served=0
for i in $(seq 5); do
  t0=$(now_ms)
  code=$($C --interface 127.0.0.2 -o "$T/r" -w "%{http_code}" -H "Range: bytes=0-65535" "$URL/shard_00000.bin")
  ms=$(( $(now_ms) - t0 )); [ $ms -gt $worst ] && worst=$ms
  [ "$code" = 206 ] && [ "$(stat -c %s "$T/r")" = 65536 ] && served=$((served+1))
  sleep 1.5
done
echo "normal client during 420 slow connections: $served/5 served, slowest $worst ms"
ok "normal client served 5/5 during 420 slow connections ($served, slowest $worst ms)" '[ $served = 5 ] && [ $worst -lt 2000 ]'
wait $SLOW_PIDS; SLOW_PIDS=
read -r _ oa _ ra _ ca _ sa _ ma < "$T/slow_a"; read -r _ ob _ rb _ cb _ sb _ mb < "$T/slow_b"
echo "slow clients: $(cat "$T/slow_a"); $(cat "$T/slow_b")"
ok "320 slow connections cut by the deadline ($ca closed, $sa open, longest $ma ms)" \
   '[ "$oa" = 320 ] && [ "$ca" = 320 ] && [ "$sa" = 0 ] && [ "$ma" -lt 13000 ]'
ok "one address over its limit: refused ($rb) or cut ($cb), none left ($sb)" \
   '[ "$ob" = 100 ] && [ "$rb" -ge 30 ] && [ "$sb" = 0 ] && [ "$mb" -lt 13000 ]'

# SIGTERM while saturated: 600 slow connections from 20 addresses (the limit is 512) and 4
# downloads throttled to 20 KB/s.
for i in 1 2 3 4; do curl -s --max-time 20 --limit-rate 20k -o /dev/null "$URL/shard_00000.bin" & done
"$SLOW" "$PORT" 600 3000 15 $(for i in $(seq 20); do echo 127.0.1.$i; done) > "$T/slow_c" & SLOW_PIDS=$!
sleep 2
code=$(curl -s --max-time 2 --interface 127.0.0.2 -o /dev/null -w "%{http_code}" "$URL/manifest.json")
echo "normal client while saturated: $code (000 expected: 512 connections open, the rest queued)"
t0=$(now_ms); kill -TERM $PID
for i in $(seq 100); do kill -0 $PID 2>/dev/null || break; sleep 0.02; done
ms=$(( $(now_ms) - t0 ))
echo "SIGTERM while saturated: exit after $ms ms"
ok "SIGTERM while saturated: exit in $ms ms" '! kill -0 $PID 2>/dev/null && [ $ms -lt 1500 ]'
wait $PID; rc=$?
ok "exit code 0 ($rc)" '[ $rc = 0 ]'
wait $SLOW_PIDS; SLOW_PIDS=
echo "saturating clients: $(cat "$T/slow_c")"
read -r _ oc _ rc2 _ cc _ sc _ mc < "$T/slow_c"
ok "every connection closed at shutdown ($sc open, longest $mc ms)" '[ "$sc" = 0 ] && [ "$mc" -lt 8000 ]'
wait
trap - EXIT; rm -rf "$T"
finish
