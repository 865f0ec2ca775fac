# quantpack chat, scripted through stdin and driven through a pseudo-terminal (script -qc):
# - stdin: stdout carries the replies only (one line each), /reset forgets the conversation (the
#   same first message gets the same greedy reply), the second turn runs only its new tokens
#   (the stats line on stderr), tok/s shown;
# - the first reply equals `quantpack run` on the conversation rendered here by the shell with
#   the same ChatML template file (--chat-template FILE): an independent path (no template
#   interpreter, no session);
# - on a terminal: the "> " prompt, libedit history (up arrow + Enter resends the last line),
#   Ctrl-C stops a long reply without leaving the chat, /quit leaves with exit 0.
. "$(dirname "$0")/../sh_check.sh"
B=${QP_BIN_DIR:-build/bin}; R=${QP_REAL_FIXTURES:-/work/shared/fixtures/real}
Q="$B/quantpack"; M="$R/stories260K.gguf"
[ -f "$M" ] || { echo "skipped: $M missing"; exit 77; }
command -v script >/dev/null || { echo "skipped: script(1) is not installed"; exit 77; }
T=$(mktemp -d "${QP_TMP_DIR:-/tmp}/chat.XXXXXX" 2>/dev/null || mktemp -d)
trap 'rm -rf "$T"' EXIT
ok() { if eval "$2"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $1"; return 1; fi; }
cat >"$T/chatml.jinja" <<'EOF'
{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}
EOF
CH=("$Q" chat "$M" --chat-template "$T/chatml.jinja" -n 12 -s 1)

# 1. scripted: replies only on stdout, reset, only new tokens run on the second turn
printf 'Once upon a time\nThe dog ran\n/reset\nOnce upon a time\n/quit\nnot read\n' |
  "${CH[@]}" --system "You tell stories." >"$T/out" 2>"$T/err"
ok "scripted chat exits 0" '[ $? -eq 0 ]'
ok "three replies, one line each" '[ "$(wc -l <"$T/out")" -eq 3 ]'
ok "no prompt or echo on stdout" '! grep -q "Once upon a time\|^> " "$T/out"'
ok "/reset: the same first message, the same reply" '[ "$(sed -n 1p "$T/out")" = "$(sed -n 3p "$T/out")" ]'
ok "tok/s on stderr for each reply" '[ "$(grep -c "tok/s" "$T/err")" -eq 3 ]'
turn_stats() { sed -n "${1}p" "$T/err" | sed -E 's/^\[([0-9]+) prompt tokens \(([0-9]+) new\).*/\1 \2/'; }
read -r total1 _ <<<"$(turn_stats 1)"; read -r total new <<<"$(turn_stats 2)"
ok "turn 2 ran only its new tokens ($new of $total; turn 1 had $total1)" \
  '[ -n "$new" ] && [ "$total" -gt "$total1" ] && [ "$new" -le $((total - total1)) ]'
ok "/reset is noted on stderr" 'grep -q "conversation reset" "$T/err"'

# 2. the first reply against run on the same conversation rendered by the shell
printf -v conv '<|im_start|>system\nYou tell stories.<|im_end|>\n<|im_start|>user\nOnce upon a time<|im_end|>\n<|im_start|>assistant\n'
"$Q" run "$M" -p "$conv" -n 12 >"$T/run" 2>/dev/null
want=$(cat "$T/run"); want=${want#"$conv"}
ok "reply 1 = run on the rendered conversation ('$want')" '[ "$(sed -n 1p "$T/out")" = "$want" ]'
check "no model" 2 "no MODEL given" "$Q" chat
check "--system and -f" 2 "not both" "$Q" chat "$M" --system a -f "$T/chatml.jinja"
check "--top-p 2" 2 "--top-p wants a number in 0\.\.1" "$Q" chat "$M" --top-p 2
check "--chat-template missing file" 4 "nope.jinja" "$Q" chat "$M" --chat-template "$T/nope.jinja"

# 3. on a terminal: prompt, history, Ctrl-C stops a long reply, /quit. The feeder waits for what it
# reacts to (the prompt, the echoed line, a reply's tok/s, the stop note), so a loaded machine that
# takes seconds to open the model does not turn keys into input typed before the prompt or Ctrl-C
# into a kill at start-up. script(1) runs its command through $SHELL -c; `exec` makes chat the
# terminal's only process whatever that shell is (dash forks, and Ctrl-C killed it: exit 130).
wait_for() { # FILE PATTERN [COUNT]: until PATTERN is on COUNT lines of FILE (20 s at most)
  local i; for ((i = 0; i < 400; i++)); do
    [ "$(grep -c -- "$2" "$1" 2>/dev/null)" -ge "${3:-1}" ] && return 0; sleep 0.05; done; return 1; }
: >"$T/tty"
{ wait_for "$T/tty" '> '; printf 'Once upon a time\r'; wait_for "$T/tty" 'tok/s'; printf '\033[A\r'
  wait_for "$T/tty" 'tok/s' 2; printf '/quit\r'; sleep 0.5; } |
  timeout 60 script -qec "exec ${CH[*]}" /dev/null >"$T/tty" 2>&1
ok "terminal chat exits 0" '[ $? -eq 0 ]'
ok "terminal: the prompt is shown" 'grep -q "> " "$T/tty"'
ok "terminal: up arrow resent the line (2 replies)" '[ "$(grep -c "tok/s" "$T/tty")" -eq 2 ]'
start=$(date +%s)
: >"$T/tty2"
{ wait_for "$T/tty2" '> '; printf 'Once upon a time\r'; wait_for "$T/tty2" 'Once upon a time'; sleep 1.5
  printf '\003'; wait_for "$T/tty2" 'stopped by Ctrl-C'; printf '/quit\r'; sleep 0.5; } |
  timeout 60 script -qec "exec $Q chat $M --chat-template $T/chatml.jinja -n -1 -c 65536" /dev/null >"$T/tty2" 2>&1
rc=$?
secs=$(( $(date +%s) - start ))
ok "Ctrl-C: the reply stops and the chat goes on to /quit (exit $rc, ${secs} s)" \
  '[ $rc -eq 0 ] && grep -q "stopped by Ctrl-C" "$T/tty2" && [ $secs -lt 20 ]'
# a failure shows what each run printed (the ends of the files), so a failure on CI explains itself
if [ "${fail:-0}" -gt 0 ]; then
  for f in out err run tty tty2; do echo "== $f (end)"; tail -c 1500 "$T/$f" 2>/dev/null | cat -v; echo; done
fi
finish
