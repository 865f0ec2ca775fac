#!/usr/bin/env bash
# Docs the code cites exist in the repository. Every tracked source, script and .md file is read
# (not the fuzz corpora, node_modules or this script) for three kinds of citation:
#  - a path that starts with a top-level folder of the repository (readers/gguf.md,
#    tests/peer/README.md, encodings/*_avx2.c): it must exist here (a '*' or {a,b} must match
#    something; a token with <placeholder> is not checked);
#  - a path into ../shared or shared/ (outside the repository): refused, the facts belong in an
#    in-repo doc; the one exception is the real fixtures' default folder ../shared/fixtures/real
#    (data read in place, configurable with QP_REAL_FIXTURES; cite its files as
#    $QP_REAL_FIXTURES/...);
#  - a bare NAME.md (enc_kquants.md): some tracked file must have that name.
# A token glued to a preceding word, '/', '.', '-' or '$' is part of something else (an upstream
# path such as ggml/include/gguf.h, or $QP_REAL_FIXTURES/oracles) and is not checked.
set -uo pipefail
src=${QP_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$src" || exit 1
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files)
else
  mapfile -t files < <(find . -type f -not -path './.git/*' -not -path './build*' | sed 's#^\./##')
fi
mapfile -t files < <(printf '%s\n' "${files[@]}" |
  grep -vE '^tests/fuzz/corpus/|/node_modules/|^tests/peer/node_modules|package-lock\.json$|^tests/unit/test_doc_refs\.sh$' |
  grep -E '\.(c|h|md|sh|mjs|json|txt|cmake)$')
[ "${#files[@]}" -gt 50 ] || { echo "only ${#files[@]} files found under $src"; exit 1; }
names=$(printf '%s\n' "${files[@]}" | sed 's#.*/##' | sort -u)
tops=$(printf '%s\n' "${files[@]}" | grep / | cut -d/ -f1 | sort -u | paste -sd'|')

fail=0 checked=0
# 1 and 2: paths from a top-level folder, and paths into shared/
while IFS= read -r hit; do
  file=${hit%%:*}; rest=${hit#*:}; line=${rest%%:*}; tok=${rest#*:}
  checked=$((checked + 1))
  case $tok in
    ../shared/fixtures/real* | shared/fixtures/real*) continue ;;
    ../* | shared/*) echo "$file:$line: cites '$tok' outside the repository"; fail=$((fail + 1)); continue ;;
    *'<'*) continue ;;
  esac
  t=${tok%/}
  case $t in
    *'{'* | *'*'*)
      ok=0
      for p in $(eval "echo $t"); do compgen -G "$p" >/dev/null && ok=1; done ;;
    *) ok=0; [ -e "$t" ] && ok=1 ;;
  esac
  [ $ok = 1 ] || { echo "$file:$line: cites '$tok', which does not exist"; fail=$((fail + 1)); }
done < <(grep -HnoP "(?<![\w./\$-])(\.\./)*(?:$tops|shared)/[\w./*<>{},+-]*[\w*>}/-]" "${files[@]}")

# 3: bare NAME.md
while IFS= read -r hit; do
  file=${hit%%:*}; rest=${hit#*:}; line=${rest%%:*}; tok=${rest#*:}
  checked=$((checked + 1))
  grep -qxF "$tok" <<<"$names" || { echo "$file:$line: cites '$tok', which no file here is called"; fail=$((fail + 1)); }
done < <(grep -HnoP '(?<![\w./$-])[\w-]+\.md\b' "${files[@]}")

echo "$checked citations in ${#files[@]} files, $fail missing or outside the repository"
[ $fail -eq 0 ]
