# stories260K (llama2.c + tok512.bin) -> .bullet -> run / verify / task heads, through the CLI.
#  - bullet-pack and `convert --to bullet` write the same bytes; the GGUF twin of the model
#    (stories260K.gguf, written by llama.cpp's converter) packs to the same weights;
#  - `run` produces text; `run --task gen` is plain generation;
#  - `verify` against the F32 source: receipt numbers printed; BQ4 thresholds (readers/bullet.md):
#    mean cosine >= 0.95, mean KL <= 0.1, top-1 >= 0.85;
#  - task heads from a safetensors file: class scores sum to 1, per-token labels come from the
#    header's label list; misuse exits 2, corrupt input 3.
set -u
BIN=${QP_BIN_DIR:?}
REAL=${QP_REAL_FIXTURES:?}
TMP=${QP_TMP_DIR:-/tmp}/bullet_e2e_$$
[ -f "$REAL/stories260K.bin" ] && [ -f "$REAL/tok512.bin" ] || { echo "skipped: stories260K missing"; exit 77; }
mkdir -p "$TMP"
trap 'rm -rf "$TMP"' EXIT
fail=0
check() { if eval "$1"; then echo "ok: $2"; else echo "FAIL: $2"; fail=1; fi; }

"$BIN/bullet-pack" "$REAL/stories260K.bin" --tokenizer "$REAL/tok512.bin" -o "$TMP/a.bullet" 2> "$TMP/pack.err"
check '[ $? -eq 0 ] && [ -s "$TMP/a.bullet" ]' "bullet-pack writes the file ($(cat "$TMP/pack.err"))"
"$BIN/quantpack" convert "$REAL/stories260K.bin" --tokenizer "$REAL/tok512.bin" --to bullet -o "$TMP/b.bullet" 2>/dev/null
check 'cmp -s "$TMP/a.bullet" "$TMP/b.bullet"' "convert --to bullet == bullet-pack, byte for byte"
if [ -f "$REAL/stories260K.gguf" ]; then
  "$BIN/bullet-pack" "$REAL/stories260K.gguf" -o "$TMP/g.bullet" 2>/dev/null
  # the header JSON differs (the GGUF says context 2048 and no add_bos key); everything from the
  # tokenizer section on (tokens, scores, BQ4 weights) is the same bytes
  check 'cmp -s <(tail -c +4097 "$TMP/a.bullet") <(tail -c +4097 "$TMP/g.bullet")' \
        "the GGUF twin packs to the same tokenizer and BQ4 weights"
fi
"$BIN/quantpack" inspect "$TMP/a.bullet" > "$TMP/inspect.txt"
check 'grep -q "bullet v1" "$TMP/inspect.txt" && grep -q "total: 48 tensors" "$TMP/inspect.txt"' "inspect: 48 tensors"

"$BIN/quantpack" run "$TMP/a.bullet" -p "Once upon a time" -n 40 > "$TMP/run.txt" 2>/dev/null
check '[ $? -eq 0 ] && grep -q "^Once upon a time" "$TMP/run.txt" && [ $(wc -c < "$TMP/run.txt") -gt 60 ]' "run produces text"
echo "  text: $(cat "$TMP/run.txt")"
"$BIN/quantpack" run "$TMP/a.bullet" --task gen -p "Once upon a time" -n 40 > "$TMP/run2.txt" 2>/dev/null
check 'cmp -s "$TMP/run.txt" "$TMP/run2.txt"' "run --task gen == run"

"$BIN/quantpack" verify "$TMP/a.bullet" --against "$REAL/stories260K.bin" --tokenizer "$REAL/tok512.bin" \
  --min-cosine 0.95 --max-kl 0.1 --min-top1 0.85 --receipt "$TMP/receipt.json" > "$TMP/verify.txt" 2>&1
rc=$?
cat "$TMP/verify.txt" | sed 's/^/  /'
check '[ $rc -eq 0 ]' "verify against the F32 source passes the BQ4 thresholds"
check 'grep -q "\"top1_agreement\"" "$TMP/receipt.json" && grep -q "\"mean_kl\"" "$TMP/receipt.json"' "receipt has top-1 and KL"

# task heads: sentiment [2, 64] and ner [3, 64] with labels in __metadata__
python3 - "$TMP/heads.safetensors" <<'EOF'
import json, struct, sys
hidden = 64
def rows(n, seed):
    out = []
    for r in range(n):
        for c in range(hidden):
            out.append(((r * 31 + c * 17 + seed) % 23 - 11) / 40.0)
    return out
s, n = rows(2, 1), rows(3, 5)
data = struct.pack('<%df' % len(s), *s) + struct.pack('<%df' % len(n), *n)
hdr = {"__metadata__": {"sentiment_labels": json.dumps(["negative", "positive"]), "ner_labels": "O,PER,LOC"},
       "sentiment_head.weight": {"dtype": "F32", "shape": [2, hidden], "data_offsets": [0, 4 * len(s)]},
       "ner_head.weight": {"dtype": "F32", "shape": [3, hidden], "data_offsets": [4 * len(s), len(data)]}}
h = json.dumps(hdr).encode()
h += b' ' * ((8 - len(h) % 8) % 8)
open(sys.argv[1], 'wb').write(struct.pack('<Q', len(h)) + h + data)
EOF
"$BIN/bullet-pack" "$REAL/stories260K.bin" --tokenizer "$REAL/tok512.bin" -o "$TMP/h.bullet" \
  --heads gen,sentiment,ner --head-weights "$TMP/heads.safetensors" --checksum 2>/dev/null
check '[ $? -eq 0 ] && grep -aq "\"tasks\":\[\"gen\",\"sentiment\",\"ner\"\]" "$TMP/h.bullet"' "heads packed, tasks in the header"
"$BIN/quantpack" run "$TMP/h.bullet" --task sentiment -p "Once upon a time" > "$TMP/sent.txt"
cat "$TMP/sent.txt" | sed 's/^/  sentiment: /'
check '[ $(grep -c "^negative: \|^positive: " "$TMP/sent.txt") -eq 2 ] && awk -F": " "{s+=\$2} END {exit !(s > 0.999 && s < 1.001)}" "$TMP/sent.txt"' \
      "sentiment prints label: score lines summing to 1"
"$BIN/quantpack" run "$TMP/h.bullet" --task ner -p "Once upon a time" > "$TMP/ner.txt"
cat "$TMP/ner.txt" | sed 's/^/  ner: /'
check '[ $(wc -l < "$TMP/ner.txt") -eq 5 ] && [ $(cut -f2 "$TMP/ner.txt" | grep -vc "^O$\|^PER$\|^LOC$") -eq 0 ]' \
      "ner labels every token (BOS + 4) from the header's labels"
"$BIN/quantpack" run "$TMP/h.bullet" --task pos -p "x" > /dev/null 2>&1
check '[ $? -eq 3 ]' "a head the file lacks: exit 3"
"$BIN/bullet-pack" "$REAL/stories260K.bin" --tokenizer "$REAL/tok512.bin" -o "$TMP/x.bullet" --heads sentiment > /dev/null 2>&1
check '[ $? -eq 2 ] && [ ! -e "$TMP/x.bullet" ]' "--heads without --head-weights: exit 2, nothing written"
"$BIN/bullet-pack" "$REAL/stories260K.bin" -o "$TMP/x.bullet" > /dev/null 2>&1
check '[ $? -eq 3 ] && [ ! -e "$TMP/x.bullet" ]' "no tokenizer: exit 3, nothing written"
head -c 5000 "$TMP/a.bullet" > "$TMP/t.bullet"
"$BIN/quantpack" inspect "$TMP/t.bullet" > /dev/null 2>&1
check '[ $? -eq 3 ]' "truncated .bullet: exit 3"
ls "$TMP" | grep -q '\.tmp\.' && { echo "FAIL: temporary files left"; fail=1; }
exit $fail
