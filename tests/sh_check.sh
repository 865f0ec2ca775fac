# Shared by the shell tests: source it, call check for each case, then finish.
#   check NAME WANT_RC REGEX CMD...   runs CMD (stdin from /dev/null, under `timeout 60`: exit 124
#                                     means it blocked) and passes when its exit code is WANT_RC
#                                     and its combined output matches the bash REGEX
#   finish                            prints 'N passed, N failed' and exits 0 only when none failed
pass=0
fail=0
check() {
  local name=$1 want=$2 re=$3 out rc; shift 3
  out=$(timeout 60 "$@" 2>&1 </dev/null); rc=$?
  if [ "$rc" -eq "$want" ] && [[ $out =~ $re ]]; then pass=$((pass+1))
  else fail=$((fail+1)); echo "FAIL: $name: rc $rc (want $want): ${out:0:400}"; fi
}
finish() {
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
  exit
}
