#!/usr/bin/env bash
# The conversion progress line (issue 17: "the same progress line for every target"): for each
# convert target (gguf, rdrr, trlm, bullet, safetensors) on a pseudo-terminal (script -qec), the
# line "[k/N] name pct% X MB/s" is rewritten in place (\r) and ends with "[N/N] ... 100.0%" and
# a newline, N = the tensors of the target's --dry-run plan, name a tensor of the plan or of the
# source; with stderr not a terminal nothing of it is written; a run shorter than a second stays
# quiet on a terminal too. QP_PROGRESS_AFTER=0 (cli/cli.h) shows the line from the first tensor,
# so the bundled models, converted in milliseconds, show it.
# script(1) runs its command through $SHELL -c (CI has no SHELL): `exec` makes quantpack the
# terminal's only process whatever that shell is (tests/e2e/test_chat.sh).
set -u
BIN="${QP_BIN_DIR:?}"; FX="${QP_FIXTURES_DIR:?}"
T="${QP_TMP_DIR:-/tmp}/convert-progress.$$"
Q="$BIN/quantpack"; M="$FX/llama-tied"
command -v script >/dev/null || { echo "skipped: script(1) is not installed"; exit 77; }
mkdir -p "$T"; trap 'rm -rf "$T"' EXIT
fail=0; pass=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

# the source's tensor names (its safetensors header)
names_src=$(grep -ao '"[a-z_.0-9]*weight"' "$M/model.safetensors" | tr -d '"')
for to in gguf rdrr trlm bullet safetensors; do
  case $to in
    gguf) out="$T/m.gguf"; args=(--to gguf --quant F32) ;;
    rdrr) out="$T/m-rdrr"; args=(--to rdrr --quant F32) ;;
    bullet) out="$T/m.bullet"; args=(--to bullet) ;;
    *) out="$T/m-$to"; args=(--to "$to") ;;
  esac
  "$Q" convert "$M" "${args[@]}" -o "$out" --dry-run >"$T/$to.plan" 2>&1
  n=$(sed -nE 's/^([0-9]+) tensors, .*/\1/p' "$T/$to.plan")
  [ -n "$n" ] && [ "$n" -gt 1 ] && ok || { bad "$to: no tensor count in the plan: $(tail -2 "$T/$to.plan")"; continue; }

  # 1. a terminal: the line from the first tensor, in place, to [n/n] 100.0% and a newline
  QP_PROGRESS_AFTER=0 timeout 60 script -qec "exec $Q convert $M ${args[*]} -o $out" /dev/null \
    >"$T/$to.tty" 2>&1
  rc=$?
  [ $rc -eq 0 ] && ok || bad "$to: exit $rc on a terminal: $(cat -v "$T/$to.tty")"
  tty=$(tr '\r' '\n' <"$T/$to.tty")
  [ "$(grep -c '^\[[0-9]*/[0-9]*\] ' <<<"$tty")" -ge 2 ] && grep -q $'\r\[1/' "$T/$to.tty" \
    && ok || bad "$to: no line rewritten in place from [1/$n]: $(cat -v "$T/$to.tty")"
  last=$(grep -E "^\[$n/$n\] [^ ]+ +100\.0% +[0-9]+\.[0-9] MB/s *\$" <<<"$tty" | tail -1)
  [ -n "$last" ] && ok || bad "$to: no final '[$n/$n] name 100.0% X MB/s' line: $(cat -v "$T/$to.tty")"
  grep -qE "\[$n/$n\] [^\r]*MB/s"$'\r?\n' "$T/$to.tty" && ok \
    || bad "$to: the final line does not end with a newline: $(cat -v "$T/$to.tty")"
  ! grep -qE "^\[[0-9]+/([0-9]+)\]" <<<"$(grep -vE "^\[[0-9]+/$n\]" <<<"$tty")" && ok \
    || bad "$to: a line counts other than $n tensors: $(cat -v "$T/$to.tty")"
  name=$(awk '{print $2}' <<<"$last")
  if [ -n "$name" ]; then
    { grep -qF -- "$name" "$T/$to.plan" || grep -qxF -- "$name" <<<"$names_src"; } && ok \
      || bad "$to: '$name' is no tensor of the plan or the source"
  fi
  mbs=$(awk '{print $(NF-1)}' <<<"$last")
  awk -v v="${mbs:-0}" 'BEGIN { exit !(v > 0) }' && ok || bad "$to: MB/s '$mbs' is not > 0"

  # 2. not a terminal: nothing of the line, even with the hook
  QP_PROGRESS_AFTER=0 "$Q" convert "$M" "${args[@]}" -o "$out" -f >"$T/$to.out" 2>"$T/$to.err"
  rc=$?
  [ $rc -eq 0 ] && ok || bad "$to: exit $rc to a file: $(cat "$T/$to.err")"
  ! grep -q 'MB/s' "$T/$to.err" && ! grep -q $'\r' "$T/$to.err" && ! grep -q 'MB/s' "$T/$to.out" \
    && ok || bad "$to: progress written to a file: $(cat -v "$T/$to.err")"

  # 3. a terminal, no hook: this run lasts milliseconds, under the quiet second
  timeout 60 script -qec "exec $Q convert $M ${args[*]} -o $out -f" /dev/null >"$T/$to.quiet" 2>&1
  rc=$?
  [ $rc -eq 0 ] && ! grep -q 'MB/s' "$T/$to.quiet" && ok \
    || bad "$to: a short run on a terminal (exit $rc) was not quiet: $(cat -v "$T/$to.quiet")"
done

# the hook takes 0..60 seconds only; anything else keeps the quiet second
QP_PROGRESS_AFTER=-1 timeout 60 script -qec "exec $Q convert $M --to gguf --quant F32 -o $T/h.gguf" \
  /dev/null >"$T/hook.tty" 2>&1
[ $? -eq 0 ] && ! grep -q 'MB/s' "$T/hook.tty" && ok || bad "QP_PROGRESS_AFTER=-1 was used: $(cat -v "$T/hook.tty")"

echo "convert progress: $pass passed, $fail failed"
[ $fail -eq 0 ]
