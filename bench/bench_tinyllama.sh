#!/bin/bash
# The issue-14 bench in one command: random models of TinyLlama-1.1B's shape (dim 2048, 22
# layers, ffn 5632, 32 heads, 4 KV heads, vocab 32000) written as F16 GGUF by qp-bench-decode
# --write (streamed tensor by tensor) and converted by `quantpack convert` to Q8_0 and Q4_K_M, plus
# BitNets of the same shape: llama.cpp's "bitnet" (float activations) converted to TQ2_0, and
# microsoft/BitNet's "bitnet-b1.58" (int8 activations; the architecture I2_S is written for)
# converted to I2_S. Each model runs through qp-bench-decode (ours vs llama.cpp, prompt and decode
# tok/s, fraction of the measured read bandwidth) at 1 and 2 threads; I2_S runs against
# llama.cpp's TQ2_0 model (llama.cpp has no I2_S and no bitnet-b1.58). Files live in a temporary folder under $TMPDIR (about
# 6 GB at the peak), deleted at the end. The machine load is printed with every line.
# usage: bench/bench_tinyllama.sh [BUILD_BIN_DIR] [MODELS...]   (MODELS: F16 Q8_0 Q4_K_M I2_S
#        TQ2_0, default all; QP_BENCH_THREADS="1 2", QP_BENCH_ARGS="--prompt 64 --gen 32",
#        QP_BENCH_LAYERS=22: fewer layers for a quicker look; QP_BENCH_LEVELS="native avx2": also our
#        AVX2 kernels (QP_FORCE_AVX2=1) against llama.cpp's AVX2 build (--cpu haswell), the SIMD
#        level of CPUs without AVX-512). Ends with one table row per run.
set -eu
B=${1:-build/bin}
shift || true
MODELS=${*:-F16 Q8_0 Q4_K_M I2_S TQ2_0}
THREADS=${QP_BENCH_THREADS:-1 2}
ARGS=${QP_BENCH_ARGS:---prompt 64 --gen 32}
LEVELS=${QP_BENCH_LEVELS:-native}
T=$(mktemp -d "${TMPDIR:-/tmp}/bench-tinyllama.XXXXXX")
trap 'rm -rf "$T"' EXIT
SHAPE="--dim 2048 --layers ${QP_BENCH_LAYERS:-22} --ffn 5632 --heads 32 --kv-heads 4 --vocab 32000"
# one table row from a qp-bench-decode report
summary() {
    awk -v m="$1" -v t="$2" '
        /load average/ { load = $NF }
        /quantpack runtime/ { for (i = 1; i <= NF; i++) { if ($i == "prompt") op = $(i + 1); if ($i == "decode") od = $(i + 1) }
                              ob = $(NF - 2); sub(/\(/, "", ob) }
        /^  llama.cpp \(/ { for (i = 1; i <= NF; i++) { if ($i == "prompt") lp = $(i + 1); if ($i == "decode") ld = $(i + 1) }
                             lb = $(NF - 2); sub(/\(/, "", lb) }
        /per CPU-second/ { rp = $(NF - 2); sub(/,/, "", rp); rd = $NF }
        END { printf "| %s | %s | %s | %s / %s | %s / %s | %s / %s | %s, %s |\n", m, t, load, op, lp, od, ld, ob, lb, rp, rd }' "$3"
}
need() { case " $MODELS " in *" $1 "*) return 0 ;; esac; return 1; }
convert() {
    "$B/quantpack" convert "$1" --to gguf --quant "$2" -o "$3" >/dev/null 2>"$T/convert.log" ||
        { cat "$T/convert.log" >&2; return 1; }
}
if need F16 || need Q8_0 || need Q4_K_M; then
    "$B/qp-bench-decode" $SHAPE --write "$T/llama-f16.gguf"
    need Q8_0 && convert "$T/llama-f16.gguf" Q8_0 "$T/llama-q8_0.gguf"
    need Q4_K_M && convert "$T/llama-f16.gguf" Q4_K_M "$T/llama-q4_k_m.gguf"
fi
if need I2_S || need TQ2_0; then
    "$B/qp-bench-decode" $SHAPE --arch bitnet --write "$T/bitnet-f16.gguf"
    convert "$T/bitnet-f16.gguf" TQ2_0 "$T/bitnet-tq2_0.gguf"
    rm -f "$T/bitnet-f16.gguf"
fi
if need I2_S; then
    "$B/qp-bench-decode" $SHAPE --arch bitnet-b1.58 --write "$T/bitnet158-f16.gguf"
    convert "$T/bitnet158-f16.gguf" I2_S "$T/bitnet158-i2_s.gguf"
    rm -f "$T/bitnet158-f16.gguf"
fi
need F16 || rm -f "$T/llama-f16.gguf"
for m in $MODELS; do
    case $m in
    F16) f="$T/llama-f16.gguf" peer= ;;
    Q8_0) f="$T/llama-q8_0.gguf" peer= ;;
    Q4_K_M) f="$T/llama-q4_k_m.gguf" peer= ;;
    TQ2_0) f="$T/bitnet-tq2_0.gguf" peer= ;;
    I2_S) f="$T/bitnet158-i2_s.gguf" peer="--peer-model $T/bitnet-tq2_0.gguf" ;;
    *) echo "bench: unknown model $m (F16 Q8_0 Q4_K_M I2_S TQ2_0)" >&2; exit 2 ;;
    esac
    for lv in $LEVELS; do
        case $lv in
        native) lvenv= lvcpu= name=$m ;;
        avx2) lvenv=QP_FORCE_AVX2=1 lvcpu="--cpu haswell" name="$m (AVX2)" ;;
        *) echo "bench: unknown level $lv (native avx2)" >&2; exit 2 ;;
        esac
        for t in $THREADS; do
            echo "== $name, $t thread(s)"
            env $lvenv "$B/qp-bench-decode" "$f" --threads "$t" $ARGS $peer $lvcpu | tee "$T/out"
            summary "$name" "$t" "$T/out" >>"$T/table"
        done
    done
done
echo
echo "| model | threads | load | prompt tok/s ours / llama.cpp | decode tok/s ours / llama.cpp | decode % of bandwidth ours / llama.cpp | per CPU-second ratio prompt, decode |"
echo "|---|---|---|---|---|---|---|"
cat "$T/table"
