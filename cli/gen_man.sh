#!/usr/bin/env bash
# Man pages from --help: gen_man.sh BIN_DIR OUT_DIR writes OUT_DIR/NAME.1 for quantpack, each
# command `quantpack --help` lists (quantpack-CMD.1), each companion name linked in BIN_DIR and
# qp-gen-fixtures. The text of a page is the program's own --help, so a page never disagrees
# with the program it documents; a --help that fails fails the build. Run by cmake at build time.
set -euo pipefail
bin=${1:?BIN_DIR}
out=${2:?OUT_DIR}
mkdir -p "$out"
version=$("$bin/quantpack" --version | awk '{print $2}')
companions="trillim-quantize inference gguf-to-rdrr bullet-pack trillim-inference"
exits='0 ok, 1 verification failed, 2 usage error, 3 bad or unsupported input, 4 I/O error or out
of memory, 5 internal error. Every failure prints one message on stderr naming the file, the
tensor and the byte offset.'

roff_text() { # plain text -> roff lines shown as they are (no fill, escapes neutral)
  sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"
}

# page NAME SUMMARY COMMAND...: NAME.1 from the output of COMMAND... --help
page() {
  local name=$1 summary=$2; shift 2
  local help
  help=$("$@" --help)
  {
    printf '.TH "%s" 1 "" "quantpack %s" "quantpack manual"\n' "${name^^}" "$version"
    printf '.SH NAME\n%s \\- %s\n' "$(printf '%s' "$name" | roff_text)" "$(printf '%s' "$summary" | roff_text)"
    printf '.SH DESCRIPTION\n.nf\n'
    printf '%s\n' "$help" | roff_text
    printf '.fi\n.SH EXIT STATUS\n%s\n' "$exits"
    printf '.SH SEE ALSO\n'
    [ "$name" = quantpack ] || printf '.BR quantpack (1),\n'
    printf 'README.md of the quantpack sources (Install, Embed, Commands).\n'
  } > "$out/$name.1.tmp"
  mv "$out/$name.1.tmp" "$out/$name.1"
}

usage=$("$bin/quantpack" --help)
page quantpack "convert, package, run and verify language models" "$bin/quantpack"
# "commands:" lines, then "companion names" lines: two spaces, a name, spaces, the summary
section=
while IFS= read -r line; do
  case $line in
    commands:*) section=cmd; continue ;;
    companion*) section=companion; continue ;;
    '') section=; continue ;;
  esac
  [[ $line =~ ^\ \ ([a-z][a-z0-9-]*)\ +(.*)$ ]] || continue
  name=${BASH_REMATCH[1]} summary=${BASH_REMATCH[2]}
  case $section in
    cmd) page "quantpack-$name" "$summary" "$bin/quantpack" "$name" ;;
    companion) declare "summary_${name//-/_}=$summary" ;;
  esac
done <<< "$usage"
for name in $companions; do
  var="summary_${name//-/_}"
  page "$name" "${!var:-a command name of the quantpack program}" "$bin/$name"
done
page qp-gen-fixtures "write the bundled synthetic test models" "$bin/qp-gen-fixtures"
