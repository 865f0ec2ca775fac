/* Corrupt GGUF files built from an enum (as llama.cpp's test-gguf does), each with the exact status
 * the reader must return; truncation of a small valid file at every byte; `quantpack inspect`
 * exits 3 on several of them. When llama.cpp's libggml-base.so is installed (QP_PEER_DIR), its
 * gguf_init_from_file must agree on which files are bad (documented deviations excepted). */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qp_test.h"
#include "qp_test_util.h"
#include "quantpack/quantpack.h"
#include "readers/gguf_meta.h"

typedef enum bad_kind {
    GOOD_BASE,
    GOOD_V2,
    GOOD_ALIGN_64,
    GOOD_NO_TENSORS,
    GOOD_NAME_63,
    GOOD_I2_S,
    PROB_UNORDERED,   /* offsets not llama.cpp's running sum: accepted with a problem */
    PROB_CTX_U64,     /* llama.context_length as u64: accepted with a problem */
    PROB_PAD_TRUNCATED, /* file ends inside the last tensor's padding: accepted with a problem */
    PROB_SPECIAL_IDS,   /* BOS/EOS/UNK/PAD ids past the 4-token vocabulary: each a problem, id -1 */
    BAD_MAGIC,
    BAD_VERSION_0,
    BAD_VERSION_1,
    BAD_VERSION_4,
    BAD_BYTESWAPPED,
    BAD_N_TENSORS_HUGE,
    BAD_N_TENSORS_NEG,
    BAD_N_KV_HUGE,
    BAD_N_KV_2_40,
    BAD_KEY_LEN_HUGE,
    BAD_STR_LEN_HUGE,
    BAD_ARRAY_COUNT_HUGE,
    BAD_STR_ARRAY_COUNT_HUGE,
    BAD_STR_ELEM_LEN_HUGE,
    BAD_DUP_KEY,
    BAD_EMPTY_KEY,
    BAD_NESTED_ARRAY,
    BAD_VALUE_TYPE,
    BAD_ARRAY_ELEM_TYPE,
    BAD_ALIGN_TYPE,
    BAD_ALIGN_ZERO,
    BAD_ALIGN_NPOT,
    BAD_DUP_TENSOR,
    BAD_NAME_64,
    BAD_NAME_LEN_HUGE,
    BAD_N_DIMS_5,
    BAD_NE_NEG,
    BAD_NE_OVERFLOW,
    BAD_BYTES_OVERFLOW,
    BAD_TYPE_31,
    BAD_TYPE_NEG,
    BAD_TYPE_1000,
    BAD_NE0_BLOCK,
    BAD_OFFSET_PAST_END,
    BAD_OFFSET_HUGE,
    BAD_OFFSET_MISALIGNED,
    BAD_OVERLAP,
    BAD_DATA_TRUNCATED,
    BAD_SCORES_COUNT,
    BAD_TOKENS_NOT_STRINGS,
    /* GGUF type 36 flavours (readers/gguf.md): a [256, 2] tensor at data offset 128 */
    GOOD_QK256,          /* quantpack.i2s.flavour "qk256", 128 bytes, F32 [1] .scale at 256 */
    PROB_QK256_SLACK,    /* the same, 96 bytes of slack before the scale (within 128) */
    BAD_QK256_SLACK,     /* 160 bytes of slack: more than the tolerance */
    BAD_QK256_MS_SIZED,  /* says qk256, but 160 bytes = n/4 + 32, microsoft/BitNet's I2_S size */
    BAD_QK256_NO_SCALE,  /* says qk256, no blk.0.ffn_up.scale */
    BAD_MS_QK256_SIZED,  /* general.file_type 40 (MS I2_S, n/4 + 32) on a 128-byte tensor */
    BAD_FLAVOUR_VALUE,   /* quantpack.i2s.flavour "qk512" */
    BAD_KIND_COUNT
} bad_kind;

/* expected status; llama.cpp's verdict (1 rejects, 0 accepts, -1 not asked: it would try a
 * huge allocation, or it does not check this tokenizer-level rule in gguf_init) */
static const struct {
    const char *name;
    qp_status want;
    int llama_rejects;
} k_cases[BAD_KIND_COUNT] = {
    [GOOD_BASE] = {"good", QP_OK, 0},
    [GOOD_V2] = {"version 2", QP_OK, 0},
    [GOOD_ALIGN_64] = {"alignment 64", QP_OK, 0},
    [GOOD_NO_TENSORS] = {"no tensors", QP_OK, 0},
    [GOOD_NAME_63] = {"63-byte tensor name", QP_OK, 0},
    [GOOD_I2_S] = {"I2_S tensor (id 36)", QP_OK, -1}, /* upstream has no type 36 */
    [PROB_UNORDERED] = {"offsets out of order", QP_OK, 1},  /* deviation: a problem, not an error */
    [PROB_CTX_U64] = {"u64 context_length", QP_OK, 0},     /* gguf accepts; llama_model refuses */
    [PROB_PAD_TRUNCATED] = {"last padding cut off", QP_OK, 1}, /* deviation: a problem */
    [PROB_SPECIAL_IDS] = {"special ids past the vocabulary", QP_OK, 0}, /* gguf_init does not look */
    [BAD_MAGIC] = {"wrong magic", QP_ERR_FORMAT, 1},
    [BAD_VERSION_0] = {"version 0", QP_ERR_FORMAT, 1},
    [BAD_VERSION_1] = {"version 1", QP_ERR_FORMAT, 1},
    [BAD_VERSION_4] = {"version 4", QP_ERR_FORMAT, 1},
    [BAD_BYTESWAPPED] = {"byte-swapped (big-endian)", QP_ERR_UNSUPPORTED, 1},
    [BAD_N_TENSORS_HUGE] = {"n_tensors 2^62", QP_ERR_CORRUPT, -1},
    [BAD_N_TENSORS_NEG] = {"n_tensors 2^64-2", QP_ERR_CORRUPT, -1},
    [BAD_N_KV_HUGE] = {"n_kv 2^64-16", QP_ERR_CORRUPT, -1},
    [BAD_N_KV_2_40] = {"n_kv 2^40", QP_ERR_CORRUPT, -1},
    [BAD_KEY_LEN_HUGE] = {"key length 2^64-1", QP_ERR_CORRUPT, -1},
    [BAD_STR_LEN_HUGE] = {"string length 2^64-16", QP_ERR_CORRUPT, -1},
    [BAD_ARRAY_COUNT_HUGE] = {"f32 array count 2^62", QP_ERR_CORRUPT, -1},
    [BAD_STR_ARRAY_COUNT_HUGE] = {"string array count 2^61", QP_ERR_CORRUPT, -1},
    [BAD_STR_ELEM_LEN_HUGE] = {"string element length 2^63", QP_ERR_CORRUPT, -1},
    [BAD_DUP_KEY] = {"duplicate key", QP_ERR_CORRUPT, 1},
    [BAD_EMPTY_KEY] = {"empty key", QP_ERR_CORRUPT, -1},
    [BAD_NESTED_ARRAY] = {"nested array", QP_ERR_UNSUPPORTED, 1},
    [BAD_VALUE_TYPE] = {"value type 13", QP_ERR_CORRUPT, 1},
    [BAD_ARRAY_ELEM_TYPE] = {"array element type 13", QP_ERR_CORRUPT, 1},
    [BAD_ALIGN_TYPE] = {"general.alignment as u64", QP_ERR_CORRUPT, 1},
    [BAD_ALIGN_ZERO] = {"general.alignment 0", QP_ERR_CORRUPT, 1},
    [BAD_ALIGN_NPOT] = {"general.alignment 48", QP_ERR_CORRUPT, 1},
    [BAD_DUP_TENSOR] = {"duplicate tensor name", QP_ERR_CORRUPT, 1},
    [BAD_NAME_64] = {"64-byte tensor name", QP_ERR_LIMIT, 1},
    [BAD_NAME_LEN_HUGE] = {"tensor name length 2^64-1", QP_ERR_CORRUPT, -1},
    [BAD_N_DIMS_5] = {"n_dims 5", QP_ERR_LIMIT, 1},
    [BAD_NE_NEG] = {"negative ne", QP_ERR_CORRUPT, 1},
    /* llama.cpp 0.5.0 (npm) accepts ne = [2^62, 4]: its INT64_MAX/ne[1] check does not fire */
    [BAD_NE_OVERFLOW] = {"ne product overflows", QP_ERR_CORRUPT, -1},
    [BAD_BYTES_OVERFLOW] = {"byte size overflows", QP_ERR_CORRUPT, 1},
    [BAD_TYPE_31] = {"tensor type 31", QP_ERR_UNSUPPORTED, 1},
    [BAD_TYPE_NEG] = {"tensor type -1", QP_ERR_UNSUPPORTED, 1},
    [BAD_TYPE_1000] = {"tensor type 1000", QP_ERR_UNSUPPORTED, 1},
    [BAD_NE0_BLOCK] = {"ne[0] not a multiple of the block", QP_ERR_CORRUPT, 1},
    [BAD_OFFSET_PAST_END] = {"offset past the end", QP_ERR_CORRUPT, 1},
    [BAD_OFFSET_HUGE] = {"offset 2^63", QP_ERR_CORRUPT, 1},
    [BAD_OFFSET_MISALIGNED] = {"misaligned offset", QP_ERR_CORRUPT, 1},
    [BAD_OVERLAP] = {"overlapping tensors", QP_ERR_CORRUPT, 1},
    [BAD_DATA_TRUNCATED] = {"data one byte short", QP_ERR_CORRUPT, 1},
    [BAD_SCORES_COUNT] = {"3 scores for 4 tokens", QP_ERR_CORRUPT, 0},
    [BAD_TOKENS_NOT_STRINGS] = {"tokens as i32 array", QP_ERR_CORRUPT, 0},
    [GOOD_QK256] = {"QK256 (type 36) + .scale", QP_OK, -1},
    [PROB_QK256_SLACK] = {"QK256 with 96 bytes of slack", QP_OK, -1},
    [BAD_QK256_SLACK] = {"QK256 with 160 bytes of slack", QP_ERR_CORRUPT, -1},
    [BAD_QK256_MS_SIZED] = {"qk256 key on an MS I2_S-sized tensor", QP_ERR_CORRUPT, -1},
    [BAD_QK256_NO_SCALE] = {"qk256 key without the .scale", QP_ERR_CORRUPT, -1},
    [BAD_MS_QK256_SIZED] = {"file_type 40 on a QK256-sized tensor", QP_ERR_CORRUPT, -1},
    [BAD_FLAVOUR_VALUE] = {"quantpack.i2s.flavour qk512", QP_ERR_UNSUPPORTED, -1},
};

static bool is_flavour_case(bad_kind k) { return k >= GOOD_QK256 && k <= BAD_FLAVOUR_VALUE; }
/* data offset of the .scale after the 128-byte QK256 tensor at 128; 0: none */
static uint64_t scale_offset(bad_kind k) {
    switch (k) {
    case GOOD_QK256: case BAD_MS_QK256_SIZED: case BAD_FLAVOUR_VALUE: return 256;
    case PROB_QK256_SLACK: return 256 + 96;
    case BAD_QK256_SLACK: return 256 + 160;
    case BAD_QK256_MS_SIZED: return 128 + 160;
    default: return 0;
    }
}

/* ---- a tiny GGUF writer that can be told to lie ------------------------------------------ */
static void key(qp_test_buf *b, const char *k, uint32_t type) { qp_test_put_gguf_str(b, k); qp_test_put_u32(b, type); }

enum { T_U8 = 0, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 };

static const char *const k_tokens[4] = {"<unk>", "<s>", "</s>", "a\xc3\xa9"};

static int build(bad_kind k, qp_test_buf *b) {
    b->n = 0;
    int n_kv = 0;
    qp_test_put(b, k == BAD_MAGIC ? "GGUX" : "GGUF", 4);
    uint32_t version = 3;
    if (k == GOOD_V2) version = 2;
    if (k == BAD_VERSION_0) version = 0;
    if (k == BAD_VERSION_1) version = 1;
    if (k == BAD_VERSION_4) version = 4;
    if (k == BAD_BYTESWAPPED) version = 0x03000000u;
    qp_test_put_u32(b, version);
    uint64_t n_tensors = k == GOOD_NO_TENSORS ? 0 : k == GOOD_I2_S ? 3 : 2;
    if (is_flavour_case(k)) n_tensors = scale_offset(k) ? 4 : 3;
    if (k == BAD_N_TENSORS_HUGE) n_tensors = 1ull << 62;
    if (k == BAD_N_TENSORS_NEG) n_tensors = UINT64_MAX - 1;
    qp_test_put_u64(b, n_tensors);
    size_t n_kv_at = b->n;
    qp_test_put_u64(b, 0); /* patched below */

    /* metadata */
    if (k == BAD_KEY_LEN_HUGE) { qp_test_put_u64(b, UINT64_MAX); qp_test_put(b, "x", 1); n_kv++; }
    key(b, "general.architecture", T_STR), n_kv++;
    if (k == BAD_STR_LEN_HUGE) { qp_test_put_u64(b, UINT64_MAX - 15); qp_test_put(b, "llama", 5); }
    else qp_test_put_gguf_str(b, "llama");
    if (k == BAD_ALIGN_TYPE) { key(b, "general.alignment", T_U64); qp_test_put_u64(b, 32); }
    else {
        key(b, "general.alignment", T_U32);
        qp_test_put_u32(b, k == BAD_ALIGN_ZERO ? 0 : k == BAD_ALIGN_NPOT ? 48 : k == GOOD_ALIGN_64 ? 64 : 32);
    }
    n_kv++;
    key(b, "llama.block_count", T_U32), qp_test_put_u32(b, 1), n_kv++;
    if (k == PROB_CTX_U64) key(b, "llama.context_length", T_U64), qp_test_put_u64(b, 128);
    else key(b, "llama.context_length", T_U32), qp_test_put_u32(b, 128);
    n_kv++;
    key(b, "llama.embedding_length", T_U32), qp_test_put_u32(b, 8), n_kv++;
    key(b, "llama.attention.head_count", T_U32), qp_test_put_u32(b, 2), n_kv++;
    key(b, "llama.attention.layer_norm_rms_epsilon", T_F32), qp_test_put_f32(b, 1e-5f), n_kv++;
    key(b, "tokenizer.ggml.model", T_STR), qp_test_put_gguf_str(b, "llama"), n_kv++;
    key(b, "tokenizer.ggml.tokens", T_ARR), n_kv++;
    if (k == BAD_TOKENS_NOT_STRINGS) {
        qp_test_put_u32(b, T_I32), qp_test_put_u64(b, 4);
        for (int i = 0; i < 4; i++) qp_test_put_u32(b, (uint32_t)i);
    } else {
        qp_test_put_u32(b, T_STR);
        qp_test_put_u64(b, k == BAD_STR_ARRAY_COUNT_HUGE ? 1ull << 61 : 4);
        for (int i = 0; i < 4; i++) {
            if (k == BAD_STR_ELEM_LEN_HUGE && i == 2) { qp_test_put_u64(b, 1ull << 63); qp_test_put(b, "x", 1); }
            else qp_test_put_gguf_str(b, k_tokens[i]);
        }
    }
    key(b, "tokenizer.ggml.scores", T_ARR), n_kv++;
    qp_test_put_u32(b, T_F32);
    int n_scores = k == BAD_SCORES_COUNT ? 3 : 4;
    qp_test_put_u64(b, k == BAD_ARRAY_COUNT_HUGE ? 1ull << 62 : (uint64_t)n_scores);
    for (int i = 0; i < n_scores; i++) qp_test_put_f32(b, -(float)i);
    key(b, "tokenizer.ggml.token_type", T_ARR), qp_test_put_u32(b, T_I32), qp_test_put_u64(b, 4), n_kv++;
    qp_test_put_u32(b, 2), qp_test_put_u32(b, 3), qp_test_put_u32(b, 3), qp_test_put_u32(b, 1);
    key(b, "tokenizer.ggml.bos_token_id", T_U32), qp_test_put_u32(b, k == PROB_SPECIAL_IDS ? 4 : 1), n_kv++;
    if (k == PROB_SPECIAL_IDS) {
        key(b, "tokenizer.ggml.eos_token_id", T_U32), qp_test_put_u32(b, 99), n_kv++;
        key(b, "tokenizer.ggml.unknown_token_id", T_U32), qp_test_put_u32(b, 1000), n_kv++;
        key(b, "tokenizer.ggml.padding_token_id", T_U32), qp_test_put_u32(b, 7), n_kv++;
    }
    key(b, "tokenizer.ggml.add_bos_token", T_BOOL), qp_test_put_u8(b, 1), n_kv++;
    key(b, "test.u8", T_U8), qp_test_put_u8(b, 200), n_kv++;
    key(b, "test.i8", T_I8), qp_test_put_u8(b, (uint8_t)-5), n_kv++;
    key(b, "test.u16", T_U16), qp_test_put_u8(b, 0x34), qp_test_put_u8(b, 0x12), n_kv++;
    key(b, "test.i16", T_I16), qp_test_put_u8(b, 0xfe), qp_test_put_u8(b, 0xff), n_kv++;
    key(b, "test.i32", T_I32), qp_test_put_u32(b, (uint32_t)-7), n_kv++;
    key(b, "test.u64", T_U64), qp_test_put_u64(b, 0x123456789abcdefull), n_kv++;
    key(b, "test.i64", T_I64), qp_test_put_u64(b, (uint64_t)-9), n_kv++;
    key(b, "test.f64", T_F64), qp_test_put_u64(b, 0x3fd0000000000000ull), n_kv++; /* 0.25 */
    key(b, "test.u8arr", T_ARR), qp_test_put_u32(b, T_U8), qp_test_put_u64(b, 3), qp_test_put(b, "\x01\x02\x03", 3), n_kv++;
    key(b, "test.empty", T_ARR), qp_test_put_u32(b, T_I64), qp_test_put_u64(b, 0), n_kv++;
    if (k == BAD_DUP_KEY) key(b, "test.u8", T_U8), qp_test_put_u8(b, 1), n_kv++;
    if (k == BAD_EMPTY_KEY) key(b, "", T_U8), qp_test_put_u8(b, 1), n_kv++;
    if (k == BAD_NESTED_ARRAY) {
        key(b, "test.nested", T_ARR), qp_test_put_u32(b, T_ARR), qp_test_put_u64(b, 1);
        qp_test_put_u32(b, T_U8), qp_test_put_u64(b, 1), qp_test_put_u8(b, 7), n_kv++;
    }
    if (k == BAD_VALUE_TYPE) key(b, "test.badtype", 13), qp_test_put_u32(b, 0), n_kv++;
    if (k == BAD_ARRAY_ELEM_TYPE) key(b, "test.badarr", T_ARR), qp_test_put_u32(b, 13), qp_test_put_u64(b, 0), n_kv++;
    if (is_flavour_case(k) && k != BAD_MS_QK256_SIZED)
        key(b, "quantpack.i2s.flavour", T_STR), qp_test_put_gguf_str(b, k == BAD_FLAVOUR_VALUE ? "qk512" : "qk256"), n_kv++;
    if (k == BAD_MS_QK256_SIZED) key(b, "general.file_type", T_U32), qp_test_put_u32(b, 40), n_kv++;
    uint64_t n_kv_field = (uint64_t)n_kv;
    if (k == BAD_N_KV_HUGE) n_kv_field = UINT64_MAX - 15;
    if (k == BAD_N_KV_2_40) n_kv_field = 1ull << 40;
    qp_store_u64le(b->p + n_kv_at, n_kv_field);

    /* tensor infos: "blk.0.attn_q.weight" Q8_0 [32] (34 bytes) at 0, "token_embd.weight" F32 [8, 2]
     * (64 bytes) at 64 */
    if (k == GOOD_NO_TENSORS) return 0;
    size_t align = k == GOOD_ALIGN_64 ? 64 : 32;
    const char *name0 = "blk.0.attn_q.weight";
    char longname[80];
    if (k == GOOD_NAME_63 || k == BAD_NAME_64) {
        memset(longname, 'n', sizeof longname);
        longname[k == GOOD_NAME_63 ? 63 : 64] = '\0';
        name0 = longname;
    }
    if (k == BAD_NAME_LEN_HUGE) { qp_test_put_u64(b, UINT64_MAX); qp_test_put(b, "x", 1); }
    else qp_test_put_gguf_str(b, name0);
    qp_test_put_u32(b, k == BAD_N_DIMS_5 ? 5 : 1);
    qp_test_put_u64(b, k == BAD_NE0_BLOCK ? 16 : 32);
    if (k == BAD_N_DIMS_5) for (int i = 0; i < 4; i++) qp_test_put_u64(b, 1);
    qp_test_put_u32(b, k == BAD_TYPE_31 ? 31 : k == BAD_TYPE_NEG ? UINT32_MAX : k == BAD_TYPE_1000 ? 1000 : 8);
    qp_test_put_u64(b, k == PROB_UNORDERED ? 128 : 0);

    qp_test_put_gguf_str(b, k == BAD_DUP_TENSOR ? name0 : "token_embd.weight");
    qp_test_put_u32(b, 2);
    qp_test_put_u64(b, k == BAD_NE_OVERFLOW ? 1ull << 62 : k == BAD_BYTES_OVERFLOW ? 1ull << 61 : k == PROB_PAD_TRUNCATED ? 3 : 8);
    qp_test_put_u64(b, k == BAD_NE_NEG ? (uint64_t)-2 : k == BAD_NE_OVERFLOW ? 4 : k == BAD_BYTES_OVERFLOW ? 2 : 2);
    qp_test_put_u32(b, 0);
    uint64_t off1 = 64;
    if (align == 64) off1 = 64;
    if (k == PROB_UNORDERED) off1 = 0;
    if (k == BAD_OFFSET_PAST_END) off1 = 4096;
    if (k == BAD_OFFSET_HUGE) off1 = 1ull << 63;
    if (k == BAD_OFFSET_MISALIGNED) off1 = 48;
    if (k == BAD_OVERLAP) off1 = 32;
    qp_test_put_u64(b, off1);
    if (k == GOOD_I2_S) { /* BitNet I2_S [128, 2]: 256/4 + 32 = 96 bytes at 128 */
        qp_test_put_gguf_str(b, "blk.0.ffn_up.weight"), qp_test_put_u32(b, 2), qp_test_put_u64(b, 128), qp_test_put_u64(b, 2);
        qp_test_put_u32(b, 36), qp_test_put_u64(b, 128);
    }
    if (is_flavour_case(k)) { /* [256, 2] type 36 at 128; its F32 [1] scale after it */
        qp_test_put_gguf_str(b, "blk.0.ffn_up.weight"), qp_test_put_u32(b, 2), qp_test_put_u64(b, 256), qp_test_put_u64(b, 2);
        qp_test_put_u32(b, 36), qp_test_put_u64(b, 128);
        if (scale_offset(k))
            qp_test_put_gguf_str(b, "blk.0.ffn_up.scale"), qp_test_put_u32(b, 1), qp_test_put_u64(b, 1), qp_test_put_u32(b, 0),
                qp_test_put_u64(b, scale_offset(k));
    }
    while (b->n % align) qp_test_put_u8(b, 0);
    size_t data_bytes = k == GOOD_I2_S ? 224 : k == PROB_UNORDERED ? 192 : k == PROB_PAD_TRUNCATED ? 88 : 128;
    if (is_flavour_case(k)) data_bytes = scale_offset(k) ? (size_t)scale_offset(k) + 32 : 256;
    for (size_t i = 0; i < data_bytes; i++) qp_test_put_u8(b, (uint8_t)(i * 7 + 1));
    if (k == BAD_DATA_TRUNCATED) b->n--;
    return 0;
}

/* ---- running --------------------------------------------------------------------------- */
static char g_tmp[4096];

static const char *write_file(const char *name, const uint8_t *p, size_t n) {
    static char path[4096 + 64];
    snprintf(path, sizeof path, "%s/%s", g_tmp, name);
    qp_test_must_write_file(path, p, n);
    return path;
}

static qp_status open_status(const char *path, qp_model **keep, qp_err *e) {
    qp_model *m = NULL;
    qp_err_clear(e);
    qp_status s = qp_model_open(path, NULL, &m, e);
    if (s == QP_OK) {
        /* every tensor lies inside the file */
        for (int64_t i = 0; i < m->n_tensors; i++)
            if (m->tensors[i].nbytes) (void)*(volatile const uint8_t *)(m->tensors[i].data + m->tensors[i].nbytes - 1);
        if (keep) *keep = m;
        else qp_model_close(m);
    }
    return s;
}

typedef struct gguf_init_params_peer { bool no_alloc; void **ctx; } gguf_init_params_peer;
static void *(*g_peer_init)(const char *, gguf_init_params_peer);
static void (*g_peer_free)(void *);
static void (*g_peer_ggml_free)(void *);

static void load_peer(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so",
             qp_test_env("QP_PEER_DIR", "tests/peer/node_modules"));
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    *(void **)&g_peer_init = dlsym(h, "gguf_init_from_file");
    *(void **)&g_peer_free = dlsym(h, "gguf_free");
    *(void **)&g_peer_ggml_free = dlsym(h, "ggml_free");
    if (!g_peer_init || !g_peer_free || !g_peer_ggml_free) g_peer_init = NULL;
}

static void check_base_values(const qp_model *m) {
    /* scalars and arrays as the builder wrote them */
    const qp_meta *md;
    int64_t iv;
    double dv;
    QP_CHECK(qp_gguf_meta_int(m, "test.u8", &iv) && iv == 200);
    QP_CHECK(qp_gguf_meta_int(m, "test.i8", &iv) && iv == -5);
    QP_CHECK(qp_gguf_meta_int(m, "test.u16", &iv) && iv == 0x1234);
    QP_CHECK(qp_gguf_meta_int(m, "test.i16", &iv) && iv == -2);
    QP_CHECK(qp_gguf_meta_int(m, "test.i32", &iv) && iv == -7);
    QP_CHECK(qp_gguf_meta_int(m, "test.u64", &iv) && iv == 0x123456789abcdefll);
    QP_CHECK(qp_gguf_meta_int(m, "test.i64", &iv) && iv == -9);
    QP_CHECK(qp_gguf_meta_float(m, "test.f64", &dv) && dv == 0.25);
    QP_CHECK(qp_gguf_meta_float(m, "llama.attention.layer_norm_rms_epsilon", &dv) && (float)dv == 1e-5f);
    QP_CHECK((md = qp_gguf_meta_array(m, "test.u8arr", QP_META_U8)) && md->n == 3 && md->raw_size == 3 &&
             memcmp(md->raw, "\x01\x02\x03", 3) == 0);
    QP_CHECK((md = qp_gguf_meta_array(m, "test.empty", QP_META_I64)) && md->n == 0 && md->raw_size == 0);
    QP_CHECK((md = qp_gguf_meta_array(m, "tokenizer.ggml.tokens", QP_META_STRING)) && md->n == 4 &&
             md->raw_size == 4 * 8 + 5 + 3 + 4 + 3);
    QP_CHECK_EQ_INT(m->vocab.n_tokens, 4);
    for (int i = 0; i < 4 && i < m->vocab.n_tokens; i++)
        QP_CHECK(strcmp(m->vocab.tokens[i], k_tokens[i]) == 0 && m->vocab.token_lens[i] == strlen(k_tokens[i]));
    QP_CHECK(m->vocab.scores && m->vocab.scores[3] == -3.0f);
    QP_CHECK(m->vocab.types && m->vocab.types[0] == 2 && m->vocab.types[3] == 1);
    QP_CHECK_EQ_INT(m->vocab.model, QP_TOK_SPM);
    QP_CHECK_EQ_INT(m->vocab.bos_id, 1);
    QP_CHECK(m->vocab.add_bos);
    QP_CHECK_EQ_INT(m->arch.family, QP_FAMILY_LLAMA);
    QP_CHECK_EQ_INT(m->arch.hidden, 8);
    QP_CHECK_EQ_INT(m->arch.n_heads, 2);
    QP_CHECK_EQ_INT(m->arch.n_kv_heads, 2); /* default = heads */
    QP_CHECK_EQ_INT(m->arch.head_dim, 4);   /* default = hidden / heads */
    QP_CHECK_EQ_INT(m->arch.max_pos, 128);
    QP_CHECK(m->arch.rope_theta == 10000.0f);
    QP_CHECK(m->arch.tie_embeddings); /* no output.weight */
    const qp_tensor *t = qp_model_find(m, "token_embd.weight");
    QP_CHECK(t && t->enc == QP_ENC_F32 && t->n_dims == 2 && t->ne[0] == 8 && t->ne[1] == 2 && t->nbytes == 64);
    const qp_tensor *q = qp_model_find(m, "blk.0.attn_q.weight");
    QP_CHECK(q && q->enc == QP_ENC_Q8_0 && q->nbytes == 34 && t && t->offset == q->offset + 64);
    QP_CHECK(q && q->data[0] == 1 && t && t->data[0] == (uint8_t)(64 * 7 + 1));
    QP_CHECK_EQ_INT(m->n_problems, 0);
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "%s/gguf_bad.%ld", qp_test_env("QP_TMP_DIR", "/tmp"), (long)getpid());
    if (!qp_test_mkdir_p(g_tmp)) { fprintf(stderr, "cannot create %s\n", g_tmp); return 2; }
    load_peer();
    if (!g_peer_init) fprintf(stderr, "note: llama.cpp peer not found; its verdicts are not compared\n");
    const char *bin = qp_test_env("QP_BIN_DIR", "bin");
    static qp_test_buf b;
    int inspect_checked = 0;

    for (int k = 0; k < BAD_KIND_COUNT; k++) {
        build((bad_kind)k, &b);
        char name[64];
        snprintf(name, sizeof name, "case%02d.gguf", k);
        const char *path = write_file(name, b.p, b.n);
        qp_err e;
        qp_model *m = NULL;
        qp_status s = open_status(path, &m, &e);
        QP_CHECK_MSG(s == k_cases[k].want, "case '%s': got %s (%s), want %s", k_cases[k].name,
                     qp_status_name(s), e.msg, qp_status_name(k_cases[k].want));
        if (s != QP_OK) {
            /* the message names the file */
            QP_CHECK_MSG(strstr(e.msg, name) != NULL, "case '%s': message lacks the file: %s", k_cases[k].name, e.msg);
            const char *at = strstr(e.msg, name);
            printf("%-36s %-11s %s\n", k_cases[k].name, qp_status_name(s), at ? at + strlen(name) : e.msg);
        }
        if (m) {
            if (k == GOOD_BASE || k == GOOD_V2 || k == GOOD_ALIGN_64) check_base_values(m);
            if (k == GOOD_V2) QP_CHECK_EQ_INT(m->format_version, 2);
            if (k == PROB_UNORDERED)
                QP_CHECK(m->n_problems >= 1 && strstr(m->problems[0], "running sum"));
            if (k == PROB_PAD_TRUNCATED)
                QP_CHECK(m->n_problems == 1 && strstr(m->problems[0], "ends 8 bytes before"));
            if (k == PROB_CTX_U64)
                QP_CHECK(m->n_problems == 1 && strstr(m->problems[0], "llama.context_length"));
            if (k == PROB_SPECIAL_IDS) { /* issue 11: never dropped without a word */
                static const char *const keys[] = {"bos_token_id' = 4", "eos_token_id' = 99",
                                                   "unknown_token_id' = 1000", "padding_token_id' = 7"};
                for (size_t i = 0; i < 4; i++) {
                    bool said = false;
                    for (int64_t j = 0; j < m->n_problems; j++)
                        said |= strstr(m->problems[j], keys[i]) && strstr(m->problems[j], "4-token vocabulary");
                    QP_CHECK_MSG(said, "no problem names %s", keys[i]);
                }
                QP_CHECK(m->vocab.bos_id == -1 && m->vocab.eos_id == -1 && m->vocab.unk_id == -1 &&
                         m->vocab.pad_id == -1);
            }
            if (k == GOOD_I2_S) {
                const qp_tensor *t = qp_model_find(m, "blk.0.ffn_up.weight");
                QP_CHECK(t && t->enc == QP_ENC_I2_S && t->nbytes == 96);
                /* no flavour key, no file_type 40: inferred from n/4 + 32 bytes, and said so */
                QP_CHECK(m->n_problems >= 1 && strstr(m->problems[0], "flavour MS I2_S inferred"));
            }
            if (k == GOOD_QK256 || k == PROB_QK256_SLACK) {
                const qp_tensor *t = qp_model_find(m, "blk.0.ffn_up.weight");
                QP_CHECK(t && t->enc == QP_ENC_QK256 && t->nbytes == 128);
                float sc = 0.0f;
                /* the builder's data bytes are i * 7 + 1: the scale is whatever f32 they make */
                uint8_t want[4];
                for (int i = 0; i < 4; i++) want[i] = (uint8_t)((scale_offset((bad_kind)k) + (uint64_t)i) * 7 + 1);
                QP_CHECK(t && qp_gguf_sibling_scale(m, t, &sc) && memcmp(&sc, want, 4) == 0);
                bool inferred = false, slack = false;
                for (int64_t i = 0; i < m->n_problems; i++) {
                    inferred |= strstr(m->problems[i], "inferred") != NULL;
                    slack |= strstr(m->problems[i], "224 bytes before the next tensor") != NULL;
                }
                QP_CHECK(!inferred);
                QP_CHECK(slack == (k == PROB_QK256_SLACK));
            }
            if (k == GOOD_NO_TENSORS) QP_CHECK(m->n_tensors == 0 && m->vocab.n_tokens == 4);
            qp_model_close(m);
        }
        if (g_peer_init && k_cases[k].llama_rejects >= 0) {
            /* no_alloc = false with a context: llama.cpp also reads (and so bounds-checks) the data */
            void *ctx = NULL;
            gguf_init_params_peer ip = {false, &ctx};
            void *g = g_peer_init(path, ip);
            if (ctx) g_peer_ggml_free(ctx);
            QP_CHECK_MSG((g == NULL) == (k_cases[k].llama_rejects == 1), "case '%s': llama.cpp %s it",
                         k_cases[k].name, g ? "accepts" : "rejects");
            if (g) g_peer_free(g);
        }
        /* the CLI maps bad input to exit 3 */
        if (s != QP_OK && k % 3 == 0) {
            int rc = qp_test_system("'%s/quantpack' inspect '%s' >/dev/null 2>&1", bin, path);
            QP_CHECK_MSG(rc == 3, "inspect on '%s' exited %d", k_cases[k].name, rc);
            inspect_checked++;
        }
        unlink(path);
    }
    QP_CHECK(inspect_checked >= 5);

    /* truncation of the valid file at every byte: FORMAT before the magic is complete (not
     * recognised as GGUF), CORRUPT everywhere after (header, keys, tensor infos, padding, data) */
    build(GOOD_BASE, &b);
    int trunc_bad = 0;
    for (size_t cut = 0; cut < b.n; cut++) {
        const char *path = write_file("trunc.gguf", b.p, cut);
        qp_err e;
        qp_status s = open_status(path, NULL, &e);
        qp_status want = cut < 4 ? QP_ERR_FORMAT : QP_ERR_CORRUPT;
        if (s != want && trunc_bad++ < 5)
            fprintf(stderr, "truncated at %zu: got %s (%s)\n", cut, qp_status_name(s), e.msg);
    }
    QP_CHECK_MSG(trunc_bad == 0, "%d truncation points gave the wrong status", trunc_bad);
    printf("truncated a %zu-byte file at every byte: %s\n", b.n, trunc_bad ? "FAILED" : "all rejected");
    const char *path = write_file("trunc.gguf", b.p, b.n - 1);
    QP_CHECK(qp_test_system("'%s/quantpack' inspect '%s' >/dev/null 2>&1", bin, path) == 3);
    unlink(path);
    /* issue 11: convert says what the source's ids were before it writes (or refuses) anything */
    build(PROB_SPECIAL_IDS, &b);
    path = write_file("special.gguf", b.p, b.n);
    QP_CHECK(qp_test_system("'%s/quantpack' convert '%s' --to gguf --quant F32 -o '%s.out' 2>&1 "
                            "| grep -q \"warning: .*bos_token_id' = 4 is outside\"", bin, path, path) == 0);
    unlink(path);
    rmdir(g_tmp);
    return qp_test_finish();
}
