# llama.cpp's habits for run (and the generation options chat and serve share, cli/cli_gen.c):
# -m MODEL, -c/--ctx-size, -s/--seed (-1 or absent: random, shown on stderr), -f FILE, -n -1
# (until EOS or the context end), -t, --opt=value; sampling values checked (exit 2 with the
# option named). Outputs are compared between spellings of the same request (greedy and seeded
# sampling are deterministic), never with stored text.
. "$(dirname "$0")/../sh_check.sh"
B=${QP_BIN_DIR:-build/bin}; R=${QP_REAL_FIXTURES:-/work/shared/fixtures/real}
Q="$B/quantpack"; M="$R/stories260K.gguf"
[ -f "$M" ] || { echo "skipped: $M missing"; exit 77; }
T=$(mktemp -d "${QP_TMP_DIR:-/tmp}/gen_opts.XXXXXX" 2>/dev/null || mktemp -d)
trap 'rm -rf "$T"' EXIT
same() { # NAME FILE_A FILE_B
  if [ -s "$2" ] && cmp -s "$2" "$3"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $1: '$(head -c 200 "$2")' vs '$(head -c 200 "$3")'"; fi
}
"$Q" run "$M" -p "Once upon a time" -n 24 >"$T/a" 2>"$T/a.err"
"$Q" run -m "$M" --prompt="Once upon a time" --n-predict=24 -c 128 -t 1 -s 3 >"$T/b" 2>/dev/null
same "-m, -c, -t, -s, --opt=value give the same greedy text" "$T/a" "$T/b"
check "a random seed is shown" 0 "seed [0-9]+ \(random" "$Q" run "$M" -p "Once" -n 2
check "-s -1 is random too" 0 "seed [0-9]+ \(random" "$Q" run "$M" -p "Once" -n 2 -s -1
check "the stats line names the seed and the stop" 0 "seed 42, stopped: length" "$Q" run "$M" -p "Once" -n 2 -s 42
printf 'Once upon a time' >"$T/prompt.txt"
"$Q" run "$M" -f "$T/prompt.txt" -n 24 >"$T/c" 2>/dev/null
same "-f FILE is the prompt" "$T/a" "$T/c"
"$Q" run "$M" -p "Once upon a time" -n 24 --temp 0.9 -s 7 >"$T/d" 2>/dev/null
"$Q" run "$M" -p "Once upon a time" -n 24 --temperature=0.9 --seed=7 >"$T/e" 2>/dev/null
same "-s 7 repeats a sampled run" "$T/d" "$T/e"
# 5 prompt tokens (BOS + 4) and 40 positions: 35 tokens run after the prompt, the 36th sampled
check "-n -1 runs to the context end" 0 "5 prompt tokens.* 36 new tokens.*stopped: context" \
  "$Q" run "$M" -p "Once upon a time" -n -1 -c 40
check "--temp -0.5" 2 "--temp wants a finite number >= 0, not '-0.5'" "$Q" run "$M" -p a --temp -0.5
check "--top-p 0" 2 "--top-p wants a number in \(0, 1\]" "$Q" run "$M" -p a --top-p 0
check "--top-p 1.5" 2 "--top-p wants a number in 0\.\.1, not '1.5'" "$Q" run "$M" -p a --top-p 1.5
check "--top-k -1" 2 "--top-k wants an integer >= 0, not '-1'" "$Q" run "$M" -p a --top-k -1
check "-n -2" 2 "--n-predict wants an integer in -1\.\." "$Q" run "$M" -p a -n -2
check "-c 0" 2 "--ctx-size wants an integer in 1\.\." "$Q" run "$M" -p a -c 0
check "-s -2" 2 "--seed wants an integer >= -1, not '-2'" "$Q" run "$M" -p a -s -2
check "--repeat-penalty 0" 2 "--repeat-penalty wants a finite number >= " "$Q" run "$M" -p a --repeat-penalty 0
check "model twice" 2 "the model is given twice" "$Q" run "$M" -m "$M" -p a
check "no model" 2 "no MODEL given" "$Q" run -p a
check "-p and -f" 2 "give one of -p PROMPT, -f FILE or --ids" "$Q" run "$M" -p a -f "$T/prompt.txt"
check "-f missing file" 4 "nope.txt" "$Q" run "$M" -f "$T/nope.txt"
check "--help lists -c and -s" 0 "-c, --ctx-size N.*-s, --seed S" "$Q" run --help
finish
