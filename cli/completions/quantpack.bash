# bash completion for quantpack, its companion names and qp-gen-fixtures (installed as
# share/bash-completion/completions/NAME). Commands and options are read from the programs' own
# --help when completing, so they always match the installed version.
_quantpack() {
  local cur=${COMP_WORDS[COMP_CWORD]} prog=${COMP_WORDS[0]} words
  local -a cmd=("$prog")
  if [[ ${prog##*/} == quantpack ]]; then
    if ((COMP_CWORD == 1)); then
      words=$("$prog" --help 2>/dev/null |
              awk '/^commands:/ { c = 1; next } /^$/ { c = 0 } c && /^  [a-z]/ { print $1 }')
      mapfile -t COMPREPLY < <(compgen -W "$words --help --version" -- "$cur")
      return
    fi
    cmd+=("${COMP_WORDS[1]}")
  fi
  case ${COMP_WORDS[COMP_CWORD - 1]} in
    --to) mapfile -t COMPREPLY < <(compgen -W "gguf rdrr trlm bullet safetensors" -- "$cur"); return ;;
    --via) # a comma-separated list: the word after the last comma
      local listed=; [[ $cur == *,* ]] && listed=${cur%,*},
      mapfile -t COMPREPLY < <(compgen -P "$listed" -W "gguf rdrr trlm bullet safetensors" -- "${cur##*,}")
      return ;;
    --quant | -q)
      mapfile -t COMPREPLY < <(compgen -W "Q4_K_M Q6_K Q8_0 F16 BF16 F32 I2_S TQ1_0 TQ2_0 QK256 keep" \
                               -- "$cur")
      return ;;
  esac
  if [[ $cur == -* ]]; then
    words=$("${cmd[@]}" --help 2>/dev/null | grep -o -- '--[a-z][a-z0-9-]*' | sort -u)
    mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
  fi # otherwise nothing: -o default completes file names
}
complete -o default -F _quantpack quantpack trillim-quantize inference gguf-to-rdrr bullet-pack \
  trillim-inference qp-gen-fixtures
