#!/bin/bash
# Issue 11, item 6: an interrupted conversion leaves nothing behind. SIGINT, SIGTERM and SIGHUP
# while the output is being written: the partial output (.<name>.quantpack-partial.<pid>.<n>) is
# removed and the process ends as the signal would (exit status 128 + N); a write past the file
# size limit (ulimit -f: SIGXFSZ) fails with exit 4 and no debris; a partial left by a SIGKILLed
# run is removed, with a note, by the next run that writes the same output.
# The writer is `encode` of a sparse 512 MiB input (the output is written for a while); the
# signal is sent once the partial file exists (polled, 30 s at most).
set -u
B=${QP_BIN_DIR:?}; T=${QP_TMP_DIR:?}/interrupted
rm -rf "$T"; mkdir -p "$T"
fail=0; pass=0
Q="$B/quantpack"
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL: $*"; }
truncate -s 512M "$T/in.f32"

partials() { ls -a "$T" | grep -c 'quantpack-partial'; }

for sig in INT TERM HUP; do
  rm -f "$T/out.bin"
  "$Q" encode --type q8_0 --cols 4096 "$T/in.f32" "$T/out.bin" 2>"$T/err" &
  pid=$!
  seen=0
  for _ in $(seq 1 300); do
    [ "$(partials)" -gt 0 ] && { seen=1; break; }
    kill -0 $pid 2>/dev/null || break
    sleep 0.1
  done
  kill -$sig $pid 2>/dev/null
  wait $pid; rc=$?
  want=$((128 + $(kill -l $sig)))
  if [ $seen -eq 0 ]; then bad "SIG$sig: the partial output never appeared (rc $rc)"; continue; fi
  [ $rc -eq $want ] && ok || bad "SIG$sig: exit $rc, want $want"
  [ "$(partials)" -eq 0 ] && ok || bad "SIG$sig: partial output left: $(ls -a "$T")"
  [ ! -e "$T/out.bin" ] && ok || bad "SIG$sig: an output appeared under the final name"
done

# SIGXFSZ: ulimit -f 64 (KiB) is far below the 144 MiB output
rc=$( (ulimit -f 64; "$Q" encode --type q8_0 --cols 4096 "$T/in.f32" "$T/small.bin" 2>"$T/err"; echo $?) )
[ "$rc" = 4 ] && ok || bad "ulimit -f: exit $rc, want 4 ($(cat "$T/err"))"
grep -q "File too large" "$T/err" && ok || bad "ulimit -f: message: $(cat "$T/err")"
[ "$(partials)" -eq 0 ] && [ ! -e "$T/small.bin" ] && ok || bad "ulimit -f: debris: $(ls -a "$T")"

# SIGKILL leaves the partial; the next run writing the same output removes it and says so
"$Q" encode --type q8_0 --cols 4096 "$T/in.f32" "$T/k.bin" 2>/dev/null &
pid=$!
for _ in $(seq 1 300); do [ "$(partials)" -gt 0 ] && break; sleep 0.1; done
kill -KILL $pid 2>/dev/null; wait $pid 2>/dev/null
[ "$(partials)" -gt 0 ] && ok || bad "SIGKILL: no partial to clean (the run ended first?)"
truncate -s 1M "$T/in2.f32"
out=$("$Q" encode --type q8_0 --cols 4096 "$T/in2.f32" "$T/k.bin" 2>&1); rc=$?
[ $rc -eq 0 ] && ok || bad "run after SIGKILL: exit $rc: $out"
[[ $out =~ "removed 1 partial output of".*"interrupted run" ]] && ok || bad "run after SIGKILL: no note: $out"
[ "$(partials)" -eq 0 ] && ok || bad "run after SIGKILL: partial left: $(ls -a "$T")"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
