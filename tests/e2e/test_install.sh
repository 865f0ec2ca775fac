#!/usr/bin/env bash
# issue 19: `cmake --install` into a temporary prefix gives a library others can build against.
# - the prefix holds the programs and every companion name (links), --version on each name,
#   libquantpack.so with its SONAME and libquantpack.a, every public header, quantpack.pc, the
#   CMake package, a man page for every command, bash and zsh completion;
# - libquantpack.so exports exactly the functions declared QP_API in include/quantpack/ (all
#   named qp_*), nothing of the library's internals;
# - a program outside the tree (tests/e2e/install/embed.c) built with pkg-config, and again with
#   find_package (shared, and static), converts the bundled llama-k256 model (qp-gen-fixtures)
#   to a Q8_0 GGUF and an F16 RDRR, verifies it with a receipt and generates tokens; ldd shows
#   the installed libquantpack.so.0.1.
#   Its GGUF equals `quantpack convert`'s byte for byte, its tokens equal `quantpack run
#   --print-ids`; a real GGUF converted to Q4_K_M through the shared library is byte-identical to
#   llama.cpp's own Q4_K_M file (the real fixture), as the command's is.
set -u
BIN="${QP_BIN_DIR:?}"; SRC_DIR="${QP_SOURCE_DIR:?}"; REAL="${QP_REAL_FIXTURES:-}"
BUILD="$BIN/.."; TMP="${QP_TMP_DIR:-/tmp}/install.$$"
MODEL="${QP_FIXTURES_DIR:?}/llama-k256"
STORIES="$REAL/stories260K.gguf"; STORIES_Q4="$REAL/gguf/stories260K-Q4_K_M.llamacpp.gguf"
for f in "$MODEL/config.json" "$STORIES" "$STORIES_Q4"; do
  [ -e "$f" ] || { echo "skipped: $f missing"; exit 77; }
done
for tool in pkg-config cc nm readelf ldd; do
  command -v $tool >/dev/null || { echo "skipped: no $tool"; exit 77; }
done
mkdir -p "$TMP"; trap 'rm -rf "$TMP"' EXIT
. "$SRC_DIR/tests/sh_check.sh"
P="$TMP/prefix"

check "install" 0 "Installing: .*libquantpack.so" cmake --install "$BUILD" --prefix "$P"
libdir=$(dirname "$(find "$P" -name libquantpack.so.0.1 | head -1)")
companions="trillim-quantize inference gguf-to-rdrr bullet-pack trillim-inference"
for name in quantpack qp-gen-fixtures $companions; do
  check "$name --version" 0 "^$name( \(quantpack\))? [0-9]+\.[0-9]+\.[0-9]+$" "$P/bin/$name" --version
done
for name in $companions; do
  check "$name is a link to quantpack" 0 "^quantpack$" readlink "$P/bin/$name"
done
check "SONAME" 0 "SONAME.*\[libquantpack\.so\.0\.1\]" readelf -d "$libdir/libquantpack.so"
check "static library" 0 "" test -f "$libdir/libquantpack.a"
hdrs=$(cd "$SRC_DIR/include/quantpack" && ls *.h)
check "every public header" 0 "" bash -c "cd '$P/include/quantpack' && ls $(echo $hdrs)"
check "quantpack.pc" 0 "" env PKG_CONFIG_PATH="$libdir/pkgconfig" \
  bash -c 'set -- $(pkg-config --cflags quantpack); test -f "${1#-I}/quantpack/quantpack.h"'
check "quantpack.pc --static" 0 "-lquantpack .*-lcjson.*-lsodium.*-lcrypto" env PKG_CONFIG_PATH="$libdir/pkgconfig" \
  pkg-config --libs --static quantpack
check "CMake package" 0 "" test -f "$libdir/cmake/quantpack/quantpackConfig.cmake"
# a man page for quantpack, each command of `quantpack --help` and each other name
cmds=$("$BIN/quantpack" --help | awk '/^commands:/ { c = 1; next } /^$/ { c = 0 } c { print "quantpack-" $1 }')
for page in quantpack $cmds $companions qp-gen-fixtures; do
  check "man page $page" 0 "^\.TH \"${page^^}\" 1" head -1 "$P/share/man/man1/$page.1"
done
if command -v man >/dev/null; then
  check "man renders" 0 "quantpack convert SRC --to gguf" man -l "$P/share/man/man1/quantpack-convert.1"
fi
check "bash completion" 0 "" test -f "$P/share/bash-completion/completions/quantpack" -a \
  -L "$P/share/bash-completion/completions/gguf-to-rdrr"
check "zsh completion" 0 "^#compdef quantpack" head -1 "$P/share/zsh/site-functions/_quantpack"
# the bash completion lists commands and a command's options from --help
cat >"$TMP/complete" <<'SH'
# complete PREFIX WORDS...: what the installed bash completion offers for the last word
p=$1; shift
PATH="$p/bin:$PATH"; . "$p/share/bash-completion/completions/quantpack"
COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _quantpack; printf '%s\n' "${COMPREPLY[@]}"
SH
check "completes commands" 0 "^convert$" bash "$TMP/complete" "$P" quantpack conv
check "completes options" 0 "--allow-requantize" bash "$TMP/complete" "$P" quantpack convert x --allow
check "completes companion options" 0 "--shard-size" bash "$TMP/complete" "$P" gguf-to-rdrr --sh
check "completes roundtrip" 0 "^roundtrip$" bash "$TMP/complete" "$P" quantpack roundt
check "completes a --via list" 0 "^gguf,rdrr$" bash "$TMP/complete" "$P" quantpack roundtrip x --via gguf,r

# exported symbols = the QP_API declarations of include/quantpack/, all qp_*
nm -D --defined-only "$libdir/libquantpack.so" | awk '$2 ~ /^[TDBRVW]$/ { print $3 }' | sort >"$TMP/exported"
sed -n 's/^QP_API .*[ *]\(qp_[a-z0-9_]*\)(.*/\1/p' "$SRC_DIR"/include/quantpack/*.h | sort -u >"$TMP/declared"
check "only qp_* exported" 1 "^$" grep -v '^qp_' "$TMP/exported"
check "exports = QP_API declarations" 0 "^$" diff "$TMP/exported" "$TMP/declared"
check "every public function declared QP_API" 1 "^$" bash -c \
  "grep -hE '^[A-Za-z_].*\bqp_[a-z0-9_]+\(' '$SRC_DIR'/include/quantpack/*.h | grep -vE '^(QP_API|static inline|typedef|#)'"
check "internals hidden" 1 "" grep -q "qp_gguf_writer_new\|qp_convert_gguf\b" "$TMP/exported"

# consumers, outside the tree, against the prefix only
san=""
nm -D "$libdir/libquantpack.so" | grep -q __asan_init && san="-fsanitize=address,undefined"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
check "build with pkg-config" 0 "" bash -c "cc -std=c11 -Wall -Werror $san $SRC_DIR/tests/e2e/install/embed.c \
  \$(pkg-config --cflags --libs quantpack) -Wl,-rpath,$libdir -o $TMP/embed_pc"
check "pkg-config build uses the shared library" 0 "libquantpack\.so\.0\.1 => $libdir/libquantpack\.so\.0\.1" ldd "$TMP/embed_pc"
for kind in shared static; do
  static=OFF; [ $kind = static ] && static=ON
  check "build with find_package ($kind)" 0 "" bash -c "cmake -S '$SRC_DIR/tests/e2e/install' -B '$TMP/cm-$kind' \
    -DCMAKE_PREFIX_PATH='$P' -DEMBED_STATIC=$static -DCMAKE_C_FLAGS='$san' -DCMAKE_BUILD_RPATH='$libdir' &&
    cmake --build '$TMP/cm-$kind'"
done
check "find_package build uses the shared library" 0 "libquantpack\.so\.0\.1 => $libdir/libquantpack\.so\.0\.1" ldd "$TMP/cm-shared/embed"
check "static build has no libquantpack.so" 1 "" bash -c "ldd '$TMP/cm-static/embed' | grep -q libquantpack"

# convert + verify + generate through the library; the same through the command
QP="$BIN/quantpack"; prompt="Once upon a time"
check "pkg-config consumer: GGUF Q8_0" 0 "progress: [0-9]+ ([0-9]+) of \1 tensors.*verdict: PASS" \
  "$TMP/embed_pc" "$MODEL" "$TMP/k256.gguf" gguf Q8_0 "$TMP/k256.receipt.json" 8
check "receipt written" 0 '"verdict":[[:space:]]*"pass"' cat "$TMP/k256.receipt.json"
"$QP" convert "$MODEL" --to gguf --quant Q8_0 -o "$TMP/k256-cli.gguf" 2>/dev/null
check "library GGUF = command GGUF" 0 "" cmp "$TMP/k256.gguf" "$TMP/k256-cli.gguf"
lib_ids=$("$TMP/embed_pc" "$MODEL" "$TMP/k256b.gguf" gguf Q8_0 "$TMP/r2.json" 8 | sed -n 's/^ids: //p')
check "library tokens = quantpack run --print-ids" 0 "^$lib_ids"$'\n' \
  "$QP" run "$TMP/k256.gguf" -p "$prompt" -n 8 --print-ids --threads 1 -s 0
check "find_package consumer: RDRR F16" 0 "verdict: PASS" \
  "$TMP/cm-shared/embed" "$MODEL" "$TMP/k256.rdrr" rdrr F16 "$TMP/rdrr.receipt.json" 4
check "RDRR integrity" 0 "integrity ok" "$QP" verify "$TMP/k256.rdrr"
check "pkg-config consumer: TRLM bf16" 0 "progress: [0-9]+ ([0-9]+) of \1 tensors.*verdict: PASS" \
  "$TMP/embed_pc" "$MODEL" "$TMP/k256.trlm" trlm bf16 "$TMP/trlm.receipt.json" 4
"$QP" convert "$MODEL" --to trlm --quant bf16 -o "$TMP/k256-cli.trlm" >/dev/null 2>&1
for f in qmodel.tensors rope.cache inference.config config.json; do
  check "library TRLM $f = command TRLM $f" 0 "" cmp "$TMP/k256.trlm/$f" "$TMP/k256-cli.trlm/$f"
done
check "pkg-config consumer: safetensors F16" 0 "progress: [0-9]+ ([0-9]+) of \1 tensors.*verdict: PASS" \
  "$TMP/embed_pc" "$MODEL" "$TMP/k256.st" safetensors F16 "$TMP/st.receipt.json" 4
"$QP" convert "$MODEL" --to safetensors --quant F16 -o "$TMP/k256-cli.st" >/dev/null 2>&1
for f in model.safetensors config.json generation_config.json tokenizer.json tokenizer_config.json; do
  check "library safetensors $f = command safetensors $f" 0 "" cmp "$TMP/k256.st/$f" "$TMP/k256-cli.st/$f"
done
check "static consumer: real GGUF Q4_K_M" 0 "verdict: PASS" \
  "$TMP/cm-static/embed" "$STORIES" "$TMP/stories-q4.gguf" gguf Q4_K_M "$TMP/s.receipt.json" 4
check "= llama.cpp's Q4_K_M (real fixture)" 0 "" cmp "$TMP/stories-q4.gguf" "$STORIES_Q4"
check "existing output refused without force" 1 "returned IO" \
  "$TMP/embed_pc" "$MODEL" "$TMP/k256.gguf" gguf Q8_0 "$TMP/r3.json" 1
# the README's Embed example, as written there, against the prefix
{ printf '#include <stdio.h>\n#include <quantpack/quantpack.h>\nint main(void) {\n'
  sed -n '/^## Embed/,/^## /p' "$SRC_DIR/README.md" | sed -n '/^```c$/,/^```$/p' | sed '1d;$d'
  printf 'return 0;\n}\n'; } >"$TMP/readme_example.c"
check "README example builds" 0 "" bash -c "cc -std=c11 -Wall -Werror $san '$TMP/readme_example.c' \
  \$(pkg-config --cflags --libs quantpack) -Wl,-rpath,$libdir -o '$TMP/readme_example'"
mkdir "$TMP/readme"; ln -s "$MODEL" "$TMP/readme/llama-k256"
check "README example runs" 0 '^PASS'$'\n''.*"verdict":[[:space:]]*"pass"' \
  env ASAN_OPTIONS=detect_leaks=0 bash -c "cd '$TMP/readme' && ../readme_example"
finish
