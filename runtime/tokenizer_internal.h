/* Private to runtime/tokenizer*.c: the tokenizer object, the token-text index, the merge heap
 * and the growable id buffer shared by the SentencePiece, byte-level BPE and WordPiece code. */
#ifndef QP_TOKENIZER_INTERNAL_H
#define QP_TOKENIZER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quantpack/core.h"
#include "quantpack/tokenizer.h"

/* Token text -> id (open addressing over ids; the texts stay in the vocab). */
typedef struct qp_tok_index {
    int32_t *slots; /* id + 1; 0 = empty */
    size_t mask;
} qp_tok_index;

/* (left id, right id) -> merge rank, for byte-level BPE. */
typedef struct qp_pair_index {
    uint64_t *keys; /* (left << 32 | right) + 1; 0 = empty */
    int32_t *ranks;
    int32_t *merged; /* id of left+right, -1 when that text is not a token */
    size_t mask;
} qp_pair_index;

/* A byte-level BPE pre-tokenizer (tokenizer_pre.c): a llama.cpp family's regex list. */
typedef struct qp_tok_pre qp_tok_pre;
typedef struct qp_tok_piece {
    uint32_t start, end; /* code point indices */
} qp_tok_piece;

/* The pre-tokenizer of the GGUF tokenizer.ggml.pre name (at most name_cap bytes);
 * UNSUPPORTED naming it when llama.cpp's list has no such name. */
QP_NODISCARD qp_status qp_tok_pre_new(const char *name, size_t name_cap, qp_tok_pre **out, qp_err *e);
void qp_tok_pre_free(qp_tok_pre *p);
enum {
    QP_PRE_IGNORE_MERGES = 1,  /* a word that is a token is taken whole */
    QP_PRE_RAW_UTF8 = 2,       /* words merge as UTF-8 characters, not GPT-2 byte characters
                                  (llama.cpp byte_encode = false); "<0xNN>" byte fallback */
    QP_PRE_ESCAPE_SPACES = 4,  /* ' ' becomes U+2581 before splitting (escape_whitespaces) */
    QP_PRE_NEWLINES_WHOLE = 8, /* a word of only '\n' that is a token is taken whole (gemma4) */
};
unsigned qp_tok_pre_flags(const qp_tok_pre *p); /* QP_PRE_* */
/* Splits n code points (flags fl) into words; *pieces is allocated with qp_malloc. */
QP_NODISCARD qp_status qp_tok_pre_split(const qp_tok_pre *p, const uint32_t *cp, const uint8_t *fl, size_t n,
                                        qp_tok_piece **pieces, size_t *n_pieces, qp_err *e);

/* A SentencePiece unigram model's tables (tokenizer_ugm.c). */
typedef struct qp_tok_ugm qp_tok_ugm;

struct qp_tokenizer {
    const qp_vocab *v;
    qp_tok_model model;
    int32_t n_tokens;
    int32_t *types;      /* effective QP_TOKTYPE_* (the vocab's, or inferred) */
    qp_tok_index index;
    /* Tokens recognised in raw text before the model runs (CONTROL, USER_DEFINED, UNKNOWN),
     * bucketed by first byte and sorted longest first inside a bucket. */
    int32_t *special;
    uint32_t special_start[257];
    uint32_t *special_lens; /* distinct special-token lengths, longest first */
    uint32_t n_special_lens;
    /* Added tokens matched in the normalised text (normalized: true with a Unicode normalizer),
     * longest normalised text first */
    int32_t *norm_special;
    char **norm_text;
    size_t *norm_len;
    uint32_t n_norm_special;
    /* SentencePiece */
    bool add_space_prefix;
    int32_t byte_ids[256]; /* id of "<0xNN>" or -1 (SPM: else the byte as a piece) */
    /* byte-level BPE */
    qp_tok_pre *pre;
    qp_pair_index pairs;
    uint32_t byte_cp[256];  /* GPT-2 bytes_to_unicode */
    int16_t cp_byte[324];   /* inverse of byte_cp (-1 where none) */
    int32_t byte_char_id[256]; /* id of the one-character token byte_cp[b], or -1 */
    /* WordPiece */
    uint32_t max_token_len;
    /* unigram */
    qp_tok_ugm *ugm;
};

/* Growable id output. */
typedef struct qp_ids {
    int32_t *p;
    size_t n, cap;
} qp_ids;

bool qp_ids_push(qp_ids *o, int32_t id);

/* Token id's text and length (never NULL: "" for a missing text). */
const char *qp_tok_text(const qp_vocab *v, int32_t id, size_t *len);

/* Sorts ids stably by cmp (negative: x before y); false when out of memory. */
typedef int (*qp_tok_id_cmp)(const qp_vocab *v, int32_t x, int32_t y);
bool qp_tok_sort_ids(const qp_vocab *v, int32_t *a, size_t n, qp_tok_id_cmp cmp);

/* Looks a token text up; -1 when absent. */
int32_t qp_tok_lookup(const qp_tokenizer *t, const char *s, size_t len);

/* Min-heap of merge candidates ordered by prio, then by left position. */
typedef struct qp_merge_cand {
    double prio;
    int32_t left, right;
    uint32_t size; /* bytes of left+right when queued; stale entries no longer match */
} qp_merge_cand;

typedef struct qp_merge_heap {
    qp_merge_cand *a;
    size_t n, cap;
} qp_merge_heap;

bool qp_heap_push(qp_merge_heap *h, qp_merge_cand c);
bool qp_heap_pop(qp_merge_heap *h, qp_merge_cand *out);
void qp_heap_free(qp_merge_heap *h);

/* Model-specific setup and encoders over one raw-text fragment (well-formed UTF-8). */
QP_NODISCARD qp_status qp_tok_spm_init(qp_tokenizer *t, qp_err *e);
QP_NODISCARD qp_status qp_tok_spm_encode(const qp_tokenizer *t, const char *text, size_t len,
                                         bool prefix_space, qp_ids *out, qp_err *e);
QP_NODISCARD qp_status qp_tok_bpe_init(qp_tokenizer *t, qp_err *e);
void qp_tok_bpe_free(qp_tokenizer *t);
QP_NODISCARD qp_status qp_tok_bpe_encode(const qp_tokenizer *t, const char *text, size_t len, qp_ids *out,
                                         qp_err *e);
QP_NODISCARD qp_status qp_tok_ugm_init(qp_tokenizer *t, qp_err *e);
void qp_tok_ugm_free(qp_tokenizer *t);
QP_NODISCARD qp_status qp_tok_ugm_encode(const qp_tokenizer *t, const char *text, size_t len, qp_ids *out,
                                         qp_err *e);
QP_NODISCARD qp_status qp_tok_wpm_init(qp_tokenizer *t, qp_err *e);
QP_NODISCARD qp_status qp_tok_wpm_encode(const qp_tokenizer *t, const char *text, size_t len, qp_ids *out,
                                         qp_err *e);

#endif
