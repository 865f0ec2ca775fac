#!/bin/bash
# Issue 11, item 6: an interrupted conversion leaves nothing behind. SIGINT, SIGTERM and SIGHUP
# while the output is being written: the partial output (.<name>.quantpack-partial.<pid>.<n>) is
# removed and the process ends as the signal would (exit status 128 + N); a write past the file
# size limit (ulimit -f: SIGXFSZ) fails with exit 4 and no debris; a partial left by a SIGKILLed
# run is removed, with a note, by the next run that writes the same output.
# The writer is `encode` of a sparse 512 MiB input; it is stopped (SIGSTOP) once its partial file
# exists (polled, 30 s at most), then sent the signal and continued.
set -u
B=${QP_BIN_DIR:?}; T=${QP_TMP_DIR:?}/interrupted
rm -rf "$T"; mkdir -p "$T"
fail=0; pass=0
Q="$B/quantpack"
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL: $*"; }
truncate -s 512M "$T/in.f32"

partials() { ls -a "$T" | grep -c 'quantpack-partial'; }

# interrupt SIG OUT: starts the encode, stops it (SIGSTOP) once its partial output exists, sends
# SIG and lets it go on; retried when the run finished before it could be caught. Sets rc.
interrupt() {
  local sig=$1 out=$2 try pid
  for try in 1 2 3; do
    rm -f "$out"
    "$Q" encode --type q8_0 --cols 4096 "$T/in.f32" "$out" 2>"$T/err" &
    pid=$!
    for _ in $(seq 1 600); do
      [ "$(partials)" -gt 0 ] && kill -STOP $pid 2>/dev/null && break
      kill -0 $pid 2>/dev/null || break
      sleep 0.05
    done
    if [ "$(partials)" -gt 0 ]; then
      kill -$sig $pid; kill -CONT $pid 2>/dev/null
      wait $pid; rc=$?
      return 0
    fi
    kill -CONT $pid 2>/dev/null; wait $pid
  done
  rc=-1
  return 1
}

for sig in INT TERM HUP; do
  if ! interrupt $sig "$T/out.bin"; then bad "SIG$sig: the partial output was never seen"; continue; fi
  want=$((128 + $(kill -l $sig)))
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
interrupt KILL "$T/k.bin" && ok || bad "SIGKILL: the partial output was never seen"
[ "$(partials)" -gt 0 ] && ok || bad "SIGKILL: no partial left to clean"
truncate -s 1M "$T/in2.f32"
out=$("$Q" encode --type q8_0 --cols 4096 "$T/in2.f32" "$T/k.bin" 2>&1); rc=$?
[ $rc -eq 0 ] && ok || bad "run after SIGKILL: exit $rc: $out"
[[ $out =~ "removed 1 partial output of".*"interrupted run" ]] && ok || bad "run after SIGKILL: no note: $out"
[ "$(partials)" -eq 0 ] && ok || bad "run after SIGKILL: partial left: $(ls -a "$T")"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
