#!/usr/bin/env bash
# quantpack convert on the BitNet fixtures (qp-gen-fixtures bitnet-float: projections exactly
# ternary q * alpha in BF16; bitnet-packed: the same weights packed U8 + weight_scale):
# - I2_S, TQ2_0, TQ1_0 outputs run (quantpack run) and verify against the float source with the
#   runtime's ternary thresholds (the runtime quantizes BitNet activations to int8 whatever the
#   weight encoding, so the float source and its exactly ternary outputs give the same logits);
# - the packed checkpoint gives byte-identical GGUFs to the float one (unpacking is exact);
# - I2_S tensors are GGUF type 36 with general.file_type 40, arch bitnet-b1.58 (bitnet.cpp's
#   name for this relu2 kind); the 1bitLLM kind (bitnet-silu) is llama.cpp's "bitnet": its
#   TQ2_0 says silu and float activations, its I2_S is bitnet.cpp's (silu, int8 activations), QK256
#   or I2_S mixed with TQ2_0 is refused, and a file whose
#   quantpack.ffn_activation contradicts its architecture is refused (issue 20);
# - --dry-run shows the seven projections ternary and the rest float;
# - QK256: type 36 with 64-byte rows per 256, F32 "<base>.scale", quantpack.i2s.flavour; the
#   runtime applies that sibling scale, so the file runs exactly as its F32 decoding (below);
# - the ternary weights are exact: each output converted back to F32 (--allow-requantize decodes
#   I2_S with its per-tensor scale, TQ with its block scales) is byte-identical to the HF source
#   converted straight to F32 (alpha is a power of two, so even the f16 block scales are exact);
# - --to safetensors unpacks the packed checkpoint: --quant BF16 is the float checkpoint's bytes.
set -u
BIN="${QP_BIN_DIR:?}"; FX="${QP_FIXTURES_DIR:?}"; TMP="${QP_TMP_DIR:-/tmp}/convert-bitnet.$$"
QP="$BIN/quantpack"
[ -d "$FX/bitnet-float" ] && [ -d "$FX/bitnet-packed" ] || { echo "skipped: BitNet fixtures missing in $FX"; exit 77; }
mkdir -p "$TMP/f" "$TMP/p"; trap 'rm -rf "$TMP"' EXIT
# same folder name for both, so general.name matches
ln -s "$FX/bitnet-float" "$TMP/f/model"; ln -s "$FX/bitnet-packed" "$TMP/p/model"
fail=0; pass=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

for q in I2_S TQ2_0 TQ1_0; do
  "$QP" convert "$TMP/f/model" --quant $q -o "$TMP/float-$q.gguf" 2>"$TMP/err" || { bad "float $q: $(cat "$TMP/err")"; continue; }
  "$QP" convert "$TMP/p/model" --quant $q -o "$TMP/packed-$q.gguf" 2>"$TMP/err" || { bad "packed $q: $(cat "$TMP/err")"; continue; }
  cmp -s "$TMP/float-$q.gguf" "$TMP/packed-$q.gguf" && ok || bad "$q: packed and float checkpoints give different files"
  "$QP" run "$TMP/float-$q.gguf" -p "Once upon a time" -n 8 >/dev/null 2>"$TMP/err" && ok || bad "run $q: $(cat "$TMP/err")"
  "$QP" verify "$TMP/float-$q.gguf" --against "$FX/bitnet-float" -n 8 >"$TMP/v" 2>&1 && ok || bad "verify $q: $(tail -4 "$TMP/v")"
  echo "$q: $(grep prompt "$TMP/v")"
done

"$QP" convert "$TMP/f/model" --quant F32 -o "$TMP/float-F32.gguf" 2>/dev/null || bad "float F32"
for q in I2_S TQ2_0 TQ1_0; do
  "$QP" convert "$TMP/float-$q.gguf" --quant F32 --allow-requantize -o "$TMP/back-$q.gguf" 2>"$TMP/err" || bad "decode $q: $(cat "$TMP/err")"
  cmp -s "$TMP/back-$q.gguf" "$TMP/float-F32.gguf" && ok || bad "$q decoded to F32 differs from the source's F32"
done

"$QP" inspect "$TMP/float-I2_S.gguf" >"$TMP/inspect" 2>&1
cp "$TMP/inspect" "$TMP/inspect-i2s"
grep -Eq "general.architecture +string +\"bitnet-b1.58\"" "$TMP/inspect" && ok || bad "arch is not bitnet-b1.58"
grep -Eq "general.file_type +u32 +40" "$TMP/inspect" && ok || bad "file type is not 40"
grep -Eq "^blk.0.attn_q.weight +I2_S" "$TMP/inspect" && ok || bad "attn_q is not I2_S: $(grep attn_q "$TMP/inspect")"
grep -Eq "^blk.1.ffn_down.weight +I2_S" "$TMP/inspect" && ok || bad "ffn_down is not I2_S"
grep -Eq "^token_embd.weight +F32" "$TMP/inspect" && ok || bad "token_embd is not F32 (BF16 widened)"
grep -Eq "^blk.0.attn_sub_norm.weight +F32" "$TMP/inspect" && ok || bad "attn_sub_norm missing or not F32"

"$QP" convert "$TMP/p/model" --quant TQ2_0 --dry-run >"$TMP/plan" 2>&1 && ok || bad "dry run"
[ "$(grep -c 'unpack+encode' "$TMP/plan")" -eq 14 ] && ok || bad "14 packed projections expected: $(grep -c unpack "$TMP/plan")"
# QK256 (BitNet-rs GgmlQk256NoScale): GGUF type 36, 64 bytes per 256 elements per row, the per-tensor
# scale in an F32 [1] "<base>.scale", the flavour named by quantpack.i2s.flavour. The fixture's only
# 256-wide projections are ffn_down ([256 -> 128]); the rest fall back to F32. QK256 has no level 0,
# so ternary zeros become +scale (encodings/enc_ternary.md): verify is expected to FAIL, and the
# numbers it reports are printed. The runtime applies the sibling scale (runtime/weights.c via
# qp_gguf_sibling_scale), so the same file decoded to F32 (scale folded in) reports the same
# numbers against the source, and the QK256 file verified against its F32 decoding passes with
# exact thresholds (at unit scale, as before the runtime read the scale, both would fail).
"$QP" convert "$TMP/f/model" --quant QK256 -o "$TMP/float-QK256.gguf" >/dev/null 2>"$TMP/err" && ok || bad "float QK256: $(cat "$TMP/err")"
"$QP" convert "$TMP/p/model" --quant QK256 -o "$TMP/packed-QK256.gguf" >/dev/null 2>"$TMP/err" && ok || bad "packed QK256: $(cat "$TMP/err")"
cmp -s "$TMP/float-QK256.gguf" "$TMP/packed-QK256.gguf" && ok || bad "QK256: packed and float checkpoints give different files"
"$QP" inspect "$TMP/float-QK256.gguf" >"$TMP/inspect" 2>&1
grep -Eq "^blk.0.ffn_down.weight +QK256 +\[128, 256\] +8192 " "$TMP/inspect" && ok || bad "ffn_down is not QK256 of 128 x 64 bytes: $(grep ffn_down "$TMP/inspect")"
grep -Eq "^blk.1.ffn_down.scale +F32 +\[1\] +4 " "$TMP/inspect" && ok || bad "no F32 [1] blk.1.ffn_down.scale"
grep -Eq "quantpack.i2s.flavour +string +\"qk256\"" "$TMP/inspect" && ok || bad "no quantpack.i2s.flavour qk256 key"
grep -Eq "general.file_type +u32 +40" "$TMP/inspect" && ok || bad "QK256 file type is not 40"
grep -q "inferred" "$TMP/inspect" && bad "QK256 flavour inferred although the key is there" || ok
"$QP" inspect "$TMP/float-QK256.gguf" --json >"$TMP/inspect.json" 2>&1
grep -q '"blk.0.ffn_down.weight"' "$TMP/inspect.json" && ok || bad "inspect --json"
"$QP" run "$TMP/float-QK256.gguf" -p "Once upon a time" -n 8 >/dev/null 2>"$TMP/err" && ok || bad "run QK256: $(cat "$TMP/err")"
"$QP" verify "$TMP/float-QK256.gguf" --against "$FX/bitnet-float" -n 8 >"$TMP/v" 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q "verdict: FAIL" "$TMP/v" && ok || bad "verify QK256: exit $rc (1 expected: ternary zeros are lost) $(tail -3 "$TMP/v")"
grep prompt "$TMP/v" >"$TMP/v-qk256"
echo "QK256 (sibling scale applied): $(cat "$TMP/v-qk256")"
"$QP" convert "$TMP/float-QK256.gguf" --quant F32 --allow-requantize -o "$TMP/back-QK256.gguf" >/dev/null 2>"$TMP/err" && ok || bad "decode QK256: $(cat "$TMP/err")"
"$QP" inspect "$TMP/back-QK256.gguf" >"$TMP/inspect" 2>&1
grep -Eq "\.scale|quantpack.i2s.flavour" "$TMP/inspect" && bad "decoded QK256 keeps its scales or key" || ok
grep -Eq "^blk.0.ffn_down.weight +F32 +\[128, 256\]" "$TMP/inspect" && ok || bad "decoded ffn_down is not F32"
"$QP" verify "$TMP/back-QK256.gguf" --against "$FX/bitnet-float" -n 8 >"$TMP/v" 2>&1; rc=$?
[ $rc -eq 1 ] && ok || bad "verify decoded QK256: exit $rc"
echo "QK256 decoded to F32 (scale applied): $(grep prompt "$TMP/v")"
grep prompt "$TMP/v" | cmp -s - "$TMP/v-qk256" && ok || bad "QK256 and its F32 decoding verify differently against the source (sibling scale not applied?)"
"$QP" verify "$TMP/float-QK256.gguf" --against "$TMP/back-QK256.gguf" -n 8 --min-cosine 0.99999 --max-kl 1e-5 \
  --min-top1 1 --min-greedy 1 >"$TMP/v" 2>&1 && ok || bad "QK256 vs its F32 decoding: $(tail -3 "$TMP/v")"
echo "QK256 vs its F32 decoding: $(grep prompt "$TMP/v")"
# a QK256 file turned into I2_S again: its levels are +-scale, so I2_S holds them exactly
"$QP" convert "$TMP/float-QK256.gguf" --quant I2_S --allow-requantize -o "$TMP/qk-i2s.gguf" >/dev/null 2>"$TMP/err" && ok || bad "QK256 -> I2_S: $(cat "$TMP/err")"
"$QP" convert "$TMP/qk-i2s.gguf" --quant F32 --allow-requantize -o "$TMP/qk-i2s-back.gguf" >/dev/null 2>"$TMP/err" && ok || bad "decode QK256 -> I2_S: $(cat "$TMP/err")"
cmp -s "$TMP/qk-i2s-back.gguf" "$TMP/back-QK256.gguf" && ok || bad "QK256 -> I2_S -> F32 differs from QK256 -> F32"

# issue 20: each kind's architecture and the keys that say what it computes, read back exactly
grep -Eq "quantpack.ffn_activation +string +\"relu2\"" "$TMP/inspect-i2s" && ok || bad "I2_S: no ffn_activation relu2"
grep -Eq "quantpack.activation_quant +string +\"int8_per_token\"" "$TMP/inspect-i2s" && ok || bad "I2_S: no int8 activation key"
"$QP" convert "$FX/bitnet-silu" --quant TQ2_0 -o "$TMP/silu-TQ2_0.gguf" >/dev/null 2>"$TMP/err" && ok || bad "silu TQ2_0: $(cat "$TMP/err")"
"$QP" inspect "$TMP/silu-TQ2_0.gguf" >"$TMP/inspect" 2>&1
grep -Eq "general.architecture +string +\"bitnet\"" "$TMP/inspect" && ok || bad "silu: arch is not bitnet"
grep -Eq "activation silu \(float activations\)" "$TMP/inspect" && ok || bad "silu: inspect does not read silu / float back"
grep -Eq "quantpack.activation_quant +string +\"none\"" "$TMP/inspect" && ok || bad "silu: no activation_quant none"
# I2_S under "bitnet" is bitnet.cpp's file of this kind (its build_bitnet: SiLU; its I2_S kernels
# quantize activation rows to int8): written, read back as SiLU + int8, runs as the HF source does
"$QP" convert "$FX/bitnet-silu" --quant I2_S -o "$TMP/silu-I2_S.gguf" >/dev/null 2>"$TMP/err" && ok || bad "silu I2_S: $(cat "$TMP/err")"
"$QP" inspect "$TMP/silu-I2_S.gguf" >"$TMP/inspect" 2>&1
grep -Eq "general.architecture +string +\"bitnet\"" "$TMP/inspect" && ok || bad "silu I2_S: arch is not bitnet"
grep -Eq "activation silu \(int8 per-token activations\)" "$TMP/inspect" && ok || bad "silu I2_S: not read back as silu + int8"
grep -Eq "quantpack.activation_quant +string +\"int8_per_token\"" "$TMP/inspect" && ok || bad "silu I2_S: no int8 activation key"
"$QP" verify "$TMP/silu-I2_S.gguf" --against "$FX/bitnet-silu" -n 8 >"$TMP/v" 2>&1 && ok || bad "verify silu I2_S: $(tail -4 "$TMP/v")"
# back to llama.cpp's kind: the key is rewritten for the output's weights, not copied
"$QP" convert "$TMP/silu-I2_S.gguf" --quant TQ2_0 --allow-requantize -o "$TMP/silu-back.gguf" >/dev/null 2>"$TMP/err" && ok || bad "I2_S -> TQ2_0: $(cat "$TMP/err")"
"$QP" inspect "$TMP/silu-back.gguf" 2>&1 | grep -Eq "activation silu \(float activations\)" && ok || bad "I2_S -> TQ2_0: not float activations"
# a type no consumer runs under "bitnet", and both kinds of ternary type in one file
"$QP" convert "$FX/bitnet-silu" --quant QK256 -o "$TMP/silu-QK256.gguf" >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 3 ] && grep -q "neither llama.cpp nor bitnet.cpp" "$TMP/err" && [ ! -e "$TMP/silu-QK256.gguf" ] && ok || bad "silu QK256: exit $rc: $(cat "$TMP/err")"
"$QP" convert "$FX/bitnet-silu" --quant I2_S --tensor-type attn_q=TQ2_0 -o "$TMP/silu-mix.gguf" >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 3 ] && grep -q "both kinds of ternary type" "$TMP/err" && [ ! -e "$TMP/silu-mix.gguf" ] && ok || bad "silu I2_S + TQ2_0: exit $rc: $(cat "$TMP/err")"
# the same file saying gelu (4 bytes, patched in place) contradicts llama.cpp's "bitnet"
LC_ALL=C sed 's/silu/gelu/g' "$TMP/silu-TQ2_0.gguf" >"$TMP/silu-gelu.gguf"
cmp -s "$TMP/silu-TQ2_0.gguf" "$TMP/silu-gelu.gguf" && bad "patch did not change the file" || ok
"$QP" inspect "$TMP/silu-gelu.gguf" >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 3 ] && grep -q "contradicts general.architecture 'bitnet'" "$TMP/err" && ok || bad "contradicting key: exit $rc: $(cat "$TMP/err")"

# --to safetensors from the packed checkpoint: each U8 projection unpacked to (code - 1) * scale, its
# weight_scale folded (named in the left-out note); with --quant BF16 every tensor is the float
# checkpoint's, byte for byte (the float checkpoint is what was packed); the F32 folder verifies
# against the packed source (it was written as the U8 codes, [out/4, in], which no runtime reads)
"$QP" convert "$FX/bitnet-packed" --to safetensors --quant BF16 -o "$TMP/pst16" >/dev/null 2>"$TMP/err"; rc=$?
[ $rc -eq 0 ] && grep -q "left out: .*weight_scale (packed BitNet weight_scale: folded" "$TMP/err" && ok \
  || bad "packed -> safetensors BF16: exit $rc: $(cat "$TMP/err")"
node -e 'const fs = require("fs");
const rd = (f) => { const b = fs.readFileSync(f), n = Number(b.readBigUInt64LE(0)), h = JSON.parse(b.subarray(8, 8 + n)), m = new Map();
  for (const [k, v] of Object.entries(h)) if (k !== "__metadata__") m.set(k, {dtype: v.dtype, shape: v.shape.join(), b: b.subarray(8 + n + v.data_offsets[0], 8 + n + v.data_offsets[1])});
  return m; };
const a = rd(process.argv[1]), b = rd(process.argv[2]);
const same = [...a].filter(([k, v]) => { const w = b.get(k); return w && w.dtype === v.dtype && w.shape === v.shape && Buffer.compare(w.b, v.b) === 0; });
console.log(`packed -> safetensors BF16: ${same.length}/${a.size} tensors = the float checkpoint, ${b.size} written`);
process.exit(same.length === a.size && b.size === a.size ? 0 : 1);' "$FX/bitnet-float/model.safetensors" "$TMP/pst16/model.safetensors" \
  && ok || bad "packed -> safetensors BF16 is not the float checkpoint"
"$QP" convert "$FX/bitnet-packed" --to safetensors -o "$TMP/pst" >/dev/null 2>&1 \
  && "$QP" verify "$TMP/pst" --against "$FX/bitnet-packed" -n 8 >"$TMP/out" 2>&1 && ok \
  || bad "packed -> safetensors F32 does not verify against the packed source: $(tail -3 "$TMP/out")"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
