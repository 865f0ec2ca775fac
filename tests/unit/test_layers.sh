#!/usr/bin/env bash
# The library's layers, lowest first: include/quantpack -> core -> encodings -> readers -> writers
# -> converters, runtime -> cli. Nothing includes or calls a layer above its own (writers include
# the on-disk definitions that live with their readers; converters and runtime are side by side
# and use neither each other). Checked twice: the #include lines of the sources, and the symbols
# every object of libquantpack.a and the cli objects take from one another (nm).
set -euo pipefail
src=${QP_SOURCE_DIR:?}
lib=${QP_BIN_DIR:?}/../libquantpack.a
cli_objs=$(find "${QP_BIN_DIR}/../CMakeFiles/quantpack.dir" -name '*.c.o' 2>/dev/null | sort)
[ -f "$lib" ] || { echo "no $lib"; exit 1; }
[ -n "$cli_objs" ] || { echo "no cli objects under ${QP_BIN_DIR}/../CMakeFiles/quantpack.dir"; exit 1; }

rank() {
  case $1 in
    include) echo 0 ;; core) echo 1 ;; encodings) echo 2 ;; readers) echo 3 ;; writers) echo 4 ;;
    converters) echo 5 ;; runtime) echo 5 ;; cli) echo 6 ;; *) echo 99 ;;
  esac
}
fail=0

# 1. includes: "layer/file.h" from a file of a lower layer, or across converters <-> runtime
while IFS=: read -r file _ inc; do
  from=${file%%/*}
  to=${inc#*\"}; to=${to%%/*}
  [ "$to" = quantpack ] && to=include
  [ "$from" = "$to" ] && continue
  rf=$(rank "$from"); rt=$(rank "$to")
  if [ "$rt" -gt "$rf" ] || { [ "$rt" -eq "$rf" ] && [ "$from" != "$to" ]; }; then
    echo "include up or across: $file includes ${inc#*\"}"
    fail=1
  fi
done < <(cd "$src" && grep -H -n '^#include "' core/*.[ch] encodings/*.[ch] readers/*.[ch] \
           writers/*.[ch] converters/*.[ch] runtime/*.[ch] cli/*.[ch] include/quantpack/*.h |
         sed 's/"\([^"]*\)".*/"\1/')

# 2. symbols: which layer defines each, which layer uses it
layer_of_obj() { # archive member or object path -> layer folder of its source
  local base; base=$(basename "$1" .c.o)
  for d in core encodings readers writers converters runtime cli; do
    [ -f "$src/$d/$base.c" ] && { echo "$d"; return; }
  done
  echo unknown
}
defs=$(mktemp); refs=$(mktemp); trap 'rm -f "$defs" "$refs"' EXIT
{ nm -A "$lib" 2>/dev/null; for o in $cli_objs; do nm -A "$o"; done; } |
  awk '{ n = split($1, a, ":"); obj = a[n - 1];  # lib.a:member.c.o:addr or file.c.o:addr
         if (NF == 3 && $2 ~ /^[TDBR]$/) print obj, $3 > "'"$defs"'";
         else if (NF == 3 && $2 == "U") print obj, $3 > "'"$refs"'" }'
declare -A def_layer
while read -r obj sym; do def_layer[$sym]=$(layer_of_obj "$obj"); done < "$defs"
declare -A seen
while read -r obj sym; do
  to=${def_layer[$sym]:-}
  [ -n "$to" ] || continue
  from=$(layer_of_obj "$obj")
  [ "$from" = "$to" ] && continue
  rf=$(rank "$from"); rt=$(rank "$to")
  if [ "$rt" -ge "$rf" ]; then
    key="$from/$(basename "$obj" .c.o) -> $to: $sym"
    [ -n "${seen[$key]:-}" ] || { echo "call up or across: $key"; seen[$key]=1; }
    fail=1
  fi
done < "$refs"

# 3. the two cli commands that used to call each other: run -> run --task only
if nm "$(printf '%s\n' $cli_objs | grep '/cmd_bullet.c.o$')" | grep -q ' U qp_cmd_run$'; then
  echo "cli/cmd_bullet.c calls qp_cmd_run (cmd_run.c calls cmd_bullet.c: one direction only)"
  fail=1
fi
[ $fail -eq 0 ] && echo "layers: ok"
exit $fail
