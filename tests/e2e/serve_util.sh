# Sourced by the serve e2e scripts (B = the bin folder), with tests/sh_check.sh (pass, fail,
# finish): ok NAME CONDITION counts a check of a condition (eval'd) rather than of a command;
# serve_start DIR LOG [ARGS...] starts `quantpack serve DIR` on a free port of 127.0.0.1 and
# sets PID, URL and PORT (waits at most 5 s for it).
. "$(dirname "${BASH_SOURCE[0]}")/../sh_check.sh"
ok() { if eval "$2"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $1"; fi; }
serve_start() {
  local dir=$1 log=$2 i; shift 2
  "$B/quantpack" serve "$dir" --port 0 "$@" 2> "$log" &
  PID=$!
  for i in $(seq 50); do grep -q "http://" "$log" && break; sleep 0.1; done
  URL=$(grep -o 'http://127.0.0.1:[0-9]*' "$log" | head -1)
  [ -n "$URL" ] || { echo "FAIL: server did not start: $(cat "$log")"; kill $PID; exit 1; }
  PORT=${URL##*:}
}
# Milliseconds of a monotonic-enough clock, for durations.
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
