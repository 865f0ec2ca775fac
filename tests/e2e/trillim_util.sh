# Shared by the Trillim protocol tests (sourced): pass/fail counting, and a PEFT LoRA adapter
# written with node for the bitnet-float fixture (hidden 128, 4 heads x 32, 2 kv heads, ffn 256).

fail=0; pass=0
# trillim_workdir NAME FIXTURE: BIN, FIX, TMP as absolute paths, W = $TMP/NAME emptied; exit 77
# (skip) when the generated fixture FIXTURE is missing
trillim_workdir() {
  BIN=$(cd "${QP_BIN_DIR:-bin}" && pwd); FIX=${QP_FIXTURES_DIR:-fixtures}; TMP=${QP_TMP_DIR:-test-tmp}
  [ -f "$FIX/$2/config.json" ] || { echo "skipped: no fixtures"; exit 77; }
  mkdir -p "$TMP"; TMP=$(cd "$TMP" && pwd); FIX=$(cd "$FIX" && pwd)
  W="$TMP/$1"; rm -rf "$W"; mkdir -p "$W"
}
check() { if eval "$2"; then pass=$((pass+1)); else echo "FAIL: $1"; fail=$((fail+1)); fi; }
finish() { echo "$pass passed, $fail failed"; [ $fail -eq 0 ]; }
# req KV TOKENS(comma list) MAX_TOKENS: a greedy request block of the current SDK's protocol
req() { printf '8\nkv_position=%s\ntokens=%s\ntemperature=0\ntop_k=50\ntop_p=0.9\nrepetition_penalty=1.0\nrep_penalty_lookback=64\nmax_tokens=%s\n' "$1" "$2" "$3"; }

# peft_adapter DIR [SHAPES_JSON]: adapter_model.safetensors (q_proj, v_proj, down_proj of both
# layers, rank 4, deterministic values in +-0.5) and adapter_config.json (alpha 8). SHAPES_JSON:
# the {target: [out, in]} of another model (default bitnet-float's).
peft_adapter() {
  mkdir -p "$1"
  node - "$1" "${2:-}" <<'EOF' || return 1
const fs = require('fs'), dir = process.argv[2];
const shapes = process.argv[3] ? JSON.parse(process.argv[3]) :
  {'self_attn.q_proj': [128, 128], 'self_attn.v_proj': [64, 128], 'mlp.down_proj': [128, 256]};
const r = 4; let seed = 12345, header = {}, chunks = [], off = 0;
const rnd = () => { seed = (seed * 1103515245 + 12345) >>> 0; return (seed / 4294967296 - 0.5); };
for (let l = 0; l < 2; l++)
  for (const [t, [out, inp]] of Object.entries(shapes))
    for (const [ab, shape] of [['A', [r, inp]], ['B', [out, r]]]) {
      const a = new Float32Array(shape[0] * shape[1]).map(rnd);
      header[`base_model.model.model.layers.${l}.${t}.lora_${ab}.weight`] =
        {dtype: 'F32', shape, data_offsets: [off, off + a.byteLength]};
      chunks.push(Buffer.from(a.buffer)); off += a.byteLength;
    }
let h = JSON.stringify(header); h += ' '.repeat((8 - h.length % 8) % 8);
const len = Buffer.alloc(8); len.writeBigUInt64LE(BigInt(h.length));
fs.writeFileSync(dir + '/adapter_model.safetensors', Buffer.concat([len, Buffer.from(h), ...chunks]));
fs.writeFileSync(dir + '/adapter_config.json', JSON.stringify({r, lora_alpha: 8, peft_type: 'LORA',
  target_modules: ['q_proj', 'v_proj', 'down_proj']}));
EOF
}
