/* A Jinja subset for chat templates (runtime/jinja.h, runtime/jinja.md).
 *
 * Three steps over one render arena: preprocess + lex (tokens, as @huggingface/jinja's lexer
 * makes them), parse (recursive descent with the same precedence ladder), evaluate (tree walk
 * writing into an output buffer). Every allocation comes from the arena, whose total is capped;
 * a failure anywhere records a status and longjmps back to qp_jinja_render, which frees the
 * arena: no partial state survives a failed render. */
#include "runtime/jinja.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "quantpack/core.h"

/* ---- values --------------------------------------------------------------------------------- */

typedef enum jt { J_UNDEF, J_NONE, J_BOOL, J_INT, J_FLOAT, J_STR, J_LIST, J_DICT, J_NS, J_FUNC } jt;

typedef enum jfn {
    F_NAMESPACE, F_RAISE, F_RANGE, F_STRFTIME,
    M_UPPER, M_LOWER, M_STRIP, M_LSTRIP, M_RSTRIP, M_TITLE, M_CAPITALIZE, M_STARTSWITH, M_ENDSWITH,
    M_SPLIT, M_REPLACE, M_ITEMS, M_KEYS, M_VALUES, M_GET,
} jfn;

typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jv {
    jt t;
    union {
        bool b;
        int64_t i;
        double f;
        struct { const char *p; size_t n; } s;
        jlist *l;
        jdict *d;      /* J_DICT and J_NS */
        struct { jfn id; const struct jv *self; } fn;
    } u;
} jv;
struct jlist { size_t n, cap; jv *v; };
typedef struct jkey { const char *p; size_t n; } jkey;
struct jdict { size_t n, cap; jkey *k; jv *v; };

static const jv k_undef = {.t = J_UNDEF};

/* ---- render state ----------------------------------------------------------------------------- */

typedef struct jscope jscope;
struct jscope { jscope *parent; jdict vars; };

typedef struct jx {
    qp_jinja_limits lim;
    qp_arena arena;
    size_t used;          /* bytes taken from the arena */
    uint64_t steps;
    int depth;
    qp_err *e;
    qp_status st;
    jmp_buf fail;
    int loop_ctl;         /* 0, 1 = break, 2 = continue */
    qp_buf *tmp[128];     /* scratch buffers open now (freed by the render on failure) */
    int ntmp;
} jx;

__attribute__((noreturn, format(printf, 3, 4))) static void jfail(jx *x, qp_status s, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    x->st = qp_fail(x->e, s, "chat template: %s", msg);
    longjmp(x->fail, 1);
}

static void *jalloc(jx *x, size_t n) {
    if (n > x->lim.max_memory_bytes || x->used > x->lim.max_memory_bytes - n)
        jfail(x, QP_ERR_LIMIT, "the render needs more than %zu bytes of values", x->lim.max_memory_bytes);
    void *p = qp_arena_alloc(&x->arena, n);
    if (!p) jfail(x, QP_ERR_NOMEM, "out of memory");
    x->used += n;
    return p;
}

static void *jalloc_n(jx *x, size_t count, size_t size) {
    size_t n;
    if (!qp_size_mul(count, size, &n)) jfail(x, QP_ERR_LIMIT, "a list of %zu items is too long", count);
    return jalloc(x, n);
}

static jv v_str(const char *p, size_t n);

/* A scratch buffer for text built in pieces (tojson, captured blocks); closed by tbuf_close. */
static qp_buf *tbuf_open(jx *x) {
    if (x->ntmp == (int)(sizeof x->tmp / sizeof x->tmp[0])) jfail(x, QP_ERR_LIMIT, "too many nested captures");
    qp_buf *b = qp_calloc(1, sizeof *b);
    if (!b) jfail(x, QP_ERR_NOMEM, "out of memory");
    x->tmp[x->ntmp++] = b;
    return b;
}

/* Copies the buffer's text into the arena as a string value and frees the buffer. */
static jv tbuf_close(jx *x, qp_buf *b) {
    if (b->oom) jfail(x, QP_ERR_NOMEM, "out of memory");
    size_t n = b->len;
    char *d = jalloc(x, n + 1);
    if (n) memcpy(d, b->p, n);
    x->ntmp--; /* b is the innermost open buffer */
    qp_buf_free(b);
    qp_free(b);
    return v_str(d, n);
}

static void step(jx *x) {
    if (++x->steps > x->lim.max_steps)
        jfail(x, QP_ERR_LIMIT, "more than %llu evaluation steps", (unsigned long long)x->lim.max_steps);
}

static void enter(jx *x) {
    if (++x->depth > x->lim.max_depth) jfail(x, QP_ERR_LIMIT, "nesting deeper than %d", x->lim.max_depth);
}

static void leave(jx *x) { x->depth--; }

static jv v_bool(bool b) { jv v = {.t = J_BOOL}; v.u.b = b; return v; }
static jv v_int(int64_t i) { jv v = {.t = J_INT}; v.u.i = i; return v; }
static jv v_float(double f) { jv v = {.t = J_FLOAT}; v.u.f = f; return v; }
static jv v_str(const char *p, size_t n) { jv v = {.t = J_STR}; v.u.s.p = p; v.u.s.n = n; return v; }

static jv v_strcopy(jx *x, const char *p, size_t n) {
    char *d = jalloc(x, n + 1);
    if (n) memcpy(d, p, n);
    return v_str(d, n);
}

static jv v_cstr(const char *s) { return v_str(s, strlen(s)); }

static jlist *list_new(jx *x, size_t cap) {
    jlist *l = jalloc(x, sizeof *l);
    l->cap = cap ? cap : 4;
    l->v = jalloc_n(x, l->cap, sizeof(jv));
    return l;
}

static void list_push(jx *x, jlist *l, jv v) {
    if (l->n == l->cap) {
        jv *nv = jalloc_n(x, l->cap, 2 * sizeof(jv));
        memcpy(nv, l->v, l->n * sizeof(jv));
        l->v = nv;
        l->cap *= 2;
    }
    l->v[l->n++] = v;
}

static jv v_list(jlist *l) { jv v = {.t = J_LIST}; v.u.l = l; return v; }

static jdict *dict_new(jx *x) {
    jdict *d = jalloc(x, sizeof *d);
    return d;
}

static jv v_dict(jdict *d, jt t) { jv v = {.t = t}; v.u.d = d; return v; }

static jv *dict_find(const jdict *d, const char *k, size_t kn) {
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].n == kn && memcmp(d->k[i].p, k, kn) == 0) return &d->v[i];
    return NULL;
}

static void dict_set(jx *x, jdict *d, const char *k, size_t kn, jv v) {
    jv *old = dict_find(d, k, kn);
    if (old) {
        *old = v;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 8;
        jkey *nk = jalloc_n(x, cap, sizeof(jkey));
        jv *nv = jalloc_n(x, cap, sizeof(jv));
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof(jkey));
            memcpy(nv, d->v, d->n * sizeof(jv));
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = (jkey){k, kn};
    d->v[d->n++] = v;
}

static const char *type_name(jt t) {
    static const char *const names[] = {"undefined", "none", "boolean", "integer", "float",
                                        "string", "list", "object", "namespace", "function"};
    return names[t];
}

static bool truthy(jv v) {
    switch (v.t) {
    case J_UNDEF: case J_NONE: return false;
    case J_BOOL: return v.u.b;
    case J_INT: return v.u.i != 0;
    case J_FLOAT: return v.u.f != 0.0 && !isnan(v.u.f);
    case J_STR: return v.u.s.n > 0;
    case J_LIST: return v.u.l->n > 0;
    case J_DICT: return v.u.d->n > 0;
    default: return true;
    }
}

/* ---- text helpers (JavaScript's notion of white space, as String.prototype.trim) ----------- */

/* Length of the white-space character at s[0..n), or 0. */
static size_t ws_len(const unsigned char *s, size_t n) {
    if (n == 0) return 0;
    if (s[0] == ' ' || (s[0] >= '\t' && s[0] <= '\r')) return 1;
    if (n >= 2 && s[0] == 0xC2 && s[1] == 0xA0) return 2;
    if (n < 3) return 0;
    if (s[0] == 0xE1 && s[1] == 0x9A && s[2] == 0x80) return 3;
    if (s[0] == 0xE2 && s[1] == 0x80 && (s[2] <= 0x8A || s[2] == 0xA8 || s[2] == 0xA9 || s[2] == 0xAF))
        return 3;
    if (s[0] == 0xE2 && s[1] == 0x81 && s[2] == 0x9F) return 3;
    if (s[0] == 0xE3 && s[1] == 0x80 && s[2] == 0x80) return 3;
    if (s[0] == 0xEF && s[1] == 0xBB && s[2] == 0xBF) return 3;
    return 0;
}

static size_t skip_ws(const char *s, size_t n) {
    size_t i = 0, k;
    while (i < n && (k = ws_len((const unsigned char *)s + i, n - i)) > 0) i += k;
    return i;
}

/* Length of s[0..n) without its trailing white space. */
static size_t trim_end_len(const char *s, size_t n) {
    for (;;) {
        size_t cut = 0;
        for (size_t k = 1; k <= 3 && k <= n; k++)
            if (ws_len((const unsigned char *)s + n - k, k) == k) cut = k;
        if (!cut) return n;
        n -= cut;
    }
}

static jv str_trim(jv v, bool start, bool end) {
    const char *p = v.u.s.p;
    size_t n = v.u.s.n;
    if (start) {
        size_t k = skip_ws(p, n);
        p += k;
        n -= k;
    }
    if (end) n = trim_end_len(p, n);
    return v_str(p, n);
}

/* ---- tokens ------------------------------------------------------------------------------- */

typedef enum tk {
    T_TEXT, T_OPEN_STMT, T_CLOSE_STMT, T_OPEN_EXPR, T_CLOSE_EXPR, T_COMMENT, T_NUM, T_STR, T_IDENT,
    T_LPAREN, T_RPAREN, T_LBRACE, T_RBRACE, T_LBRACK, T_RBRACK, T_COMMA, T_DOT, T_COLON, T_PIPE,
    T_CMP, T_ADD, T_MUL, T_POW, T_UNARY, T_EQUALS, T_EOF
} tk;

typedef struct tok { tk t; const char *s; size_t n; } tok;

typedef struct lexer {
    jx *x;
    const char *src;
    size_t n, pos;
    tok *toks;
    size_t nt, cap;
    int curly;
} lexer;

static void push_tok(lexer *L, tk t, const char *s, size_t n) {
    if (L->nt == L->cap) {
        size_t cap = L->cap ? 2 * L->cap : 64;
        tok *nt = jalloc_n(L->x, cap, sizeof(tok));
        if (L->nt) memcpy(nt, L->toks, L->nt * sizeof(tok));
        L->toks = nt;
        L->cap = cap;
    }
    L->toks[L->nt++] = (tok){t, s, n};
}

static tk last_type(const lexer *L) { return L->nt ? L->toks[L->nt - 1].t : T_EOF; }

static bool at(const lexer *L, const char *s) {
    size_t k = strlen(s);
    return L->n - L->pos >= k && memcmp(L->src + L->pos, s, k) == 0;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_word(char c) {
    return is_digit(c) || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* @huggingface/jinja's preprocess with lstrip_blocks and trim_blocks: one trailing newline
 * dropped, spaces/tabs before a block at the start of a line dropped, the newline after a block
 * dropped, {% generation %} markers removed. */
static char *preprocess(jx *x, const char *s, size_t n, size_t *out_n) {
    if (n && s[n - 1] == '\n') n--;
    char *a = jalloc(x, n + 1);
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        bool line_start = i == 0 || s[i - 1] == '\n' || s[i - 1] == '\r';
        if (line_start) {
            size_t j = i;
            while (j < n && (s[j] == ' ' || s[j] == '\t')) j++;
            if (j > i && j + 1 < n && s[j] == '{' && (s[j + 1] == '#' || s[j + 1] == '%' || s[j + 1] == '-'))
                i = j;
        }
        a[m++] = s[i++];
    }
    char *b = jalloc(x, m + 1);
    size_t k = 0;
    for (size_t i = 0; i < m; i++) {
        b[k++] = a[i];
        if (a[i] == '}' && i > 0 && (a[i - 1] == '#' || a[i - 1] == '%' || a[i - 1] == '-') && i + 1 < m &&
            a[i + 1] == '\n')
            i++;
    }
    b[k] = '\0';
    *out_n = k;
    return b;
}

/* Removes {%-? (end)generation -?%} with the white space its dashes strip (the transformers tag). */
static size_t strip_generation_tags(char *s, size_t n) {
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        if (s[i] == '{' && i + 1 < n && s[i + 1] == '%') {
            size_t j = i + 2;
            bool lstrip = j < n && s[j] == '-';
            if (lstrip) j++;
            j += skip_ws(s + j, n - j);
            if (n - j >= 3 && memcmp(s + j, "end", 3) == 0) j += 3;
            if (n - j >= 10 && memcmp(s + j, "generation", 10) == 0) {
                j += 10;
                j += skip_ws(s + j, n - j);
                bool rstrip = j < n && s[j] == '-';
                if (rstrip) j++;
                if (n - j >= 2 && s[j] == '%' && s[j + 1] == '}') {
                    if (lstrip) w = trim_end_len(s, w);
                    i = j + 2;
                    if (rstrip) i += skip_ws(s + i, n - i);
                    continue;
                }
            }
        }
        s[w++] = s[i++];
    }
    s[w] = '\0';
    return w;
}

static void strip_last_text(lexer *L) {
    if (L->nt && L->toks[L->nt - 1].t == T_TEXT) {
        tok *t = &L->toks[L->nt - 1];
        t->n = trim_end_len(t->s, t->n);
        if (t->n == 0) L->nt--;
    }
}

static void lex_comment(lexer *L) {
    L->pos += 2;
    bool strip_before = L->pos < L->n && L->src[L->pos] == '-';
    if (strip_before) L->pos++;
    size_t start = L->pos;
    while (!(L->pos + 1 < L->n && L->src[L->pos] == '#' && L->src[L->pos + 1] == '}')) {
        if (L->pos + 2 >= L->n) jfail(L->x, QP_ERR_FORMAT, "missing end of comment tag");
        L->pos++;
    }
    bool strip_after = L->pos > start && L->src[L->pos - 1] == '-';
    if (strip_before) strip_last_text(L);
    push_tok(L, T_COMMENT, L->src + start, L->pos - start);
    L->pos += 2;
    if (strip_after) L->pos += skip_ws(L->src + L->pos, L->n - L->pos);
}

static void put_utf8(char *d, size_t *k, uint32_t cp) {
    if (cp < 0x80) {
        d[(*k)++] = (char)cp;
    } else if (cp < 0x800) {
        d[(*k)++] = (char)(0xC0 | (cp >> 6));
        d[(*k)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        d[(*k)++] = (char)(0xE0 | (cp >> 12));
        d[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        d[(*k)++] = (char)(0x80 | (cp & 0x3F));
    }
}

static void lex_string(lexer *L) {
    char q = L->src[L->pos++];
    char *d = jalloc(L->x, L->n - L->pos + 1);
    size_t k = 0;
    for (;;) {
        if (L->pos >= L->n) jfail(L->x, QP_ERR_FORMAT, "unterminated string literal");
        char c = L->src[L->pos];
        if (c == q) break;
        L->pos++;
        if (c != '\\') {
            d[k++] = c;
            continue;
        }
        if (L->pos >= L->n) jfail(L->x, QP_ERR_FORMAT, "unexpected end of input in a string literal");
        char esc = L->src[L->pos++];
        static const char from[] = "ntrbfv'\"\\", to[] = "\n\t\r\b\f\v'\"\\";
        const char *f = esc ? strchr(from, esc) : NULL;
        if (f) {
            d[k++] = to[f - from];
        } else if (esc == 'x' || esc == 'u') {
            size_t len = esc == 'x' ? 2 : 4;
            uint32_t cp = 0;
            for (size_t i = 0; i < len; i++, L->pos++) {
                char h = L->pos < L->n ? L->src[L->pos] : 0;
                int dv = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                                               : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
                if (dv < 0) jfail(L->x, QP_ERR_FORMAT, "invalid hexadecimal escape in a string literal");
                cp = cp * 16 + (uint32_t)dv;
            }
            put_utf8(d, &k, cp);
        } else {
            jfail(L->x, QP_ERR_FORMAT, "unexpected escaped character '%c'", esc);
        }
    }
    L->pos++;
    push_tok(L, T_STR, d, k);
}

static void lex_number(lexer *L, size_t start, bool allow_frac) {
    while (L->pos < L->n && is_digit(L->src[L->pos])) L->pos++;
    if (allow_frac && L->pos + 1 < L->n && L->src[L->pos] == '.' && is_digit(L->src[L->pos + 1])) {
        L->pos++;
        while (L->pos < L->n && is_digit(L->src[L->pos])) L->pos++;
    }
    push_tok(L, T_NUM, L->src + start, L->pos - start);
}

/* A '-' or '+' after an operator or an opening bracket is a sign (with digits: part of a number). */
static bool lex_sign(lexer *L) {
    tk lt = last_type(L);
    if (lt == T_TEXT || lt == T_EOF) jfail(L->x, QP_ERR_FORMAT, "unexpected character '%c'", L->src[L->pos]);
    if (lt == T_IDENT || lt == T_NUM || lt == T_STR || lt == T_RPAREN || lt == T_RBRACK) return false;
    size_t start = L->pos++;
    if (L->pos < L->n && is_digit(L->src[L->pos])) lex_number(L, start, true);
    else push_tok(L, T_UNARY, L->src + start, 1);
    return true;
}

static bool lex_operator(lexer *L) {
    static const struct { const char *s; tk t; } table[] = {
        {"{%", T_OPEN_STMT}, {"%}", T_CLOSE_STMT}, {"{{", T_OPEN_EXPR}, {"}}", T_CLOSE_EXPR},
        {"(", T_LPAREN}, {")", T_RPAREN}, {"{", T_LBRACE}, {"}", T_RBRACE}, {"[", T_LBRACK},
        {"]", T_RBRACK}, {",", T_COMMA}, {".", T_DOT}, {":", T_COLON}, {"|", T_PIPE},
        {"<=", T_CMP}, {">=", T_CMP}, {"==", T_CMP}, {"!=", T_CMP}, {"<", T_CMP}, {">", T_CMP},
        {"+", T_ADD}, {"-", T_ADD}, {"~", T_ADD}, {"**", T_POW}, {"*", T_MUL}, {"//", T_MUL},
        {"/", T_MUL}, {"%", T_MUL}, {"=", T_EQUALS},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (table[i].t == T_CLOSE_EXPR && L->curly > 0) continue;
        if (!at(L, table[i].s)) continue;
        size_t k = strlen(table[i].s);
        push_tok(L, table[i].t, L->src + L->pos, k);
        if (table[i].t == T_OPEN_EXPR) L->curly = 0;
        else if (table[i].t == T_LBRACE) L->curly++;
        else if (table[i].t == T_RBRACE) L->curly--;
        L->pos += k;
        return true;
    }
    return false;
}

/* One step inside a tag: white space, a dash-controlled close, or one token. */
static void lex_in_tag(lexer *L) {
    L->pos += skip_ws(L->src + L->pos, L->n - L->pos);
    if (L->pos >= L->n) return;
    if (at(L, "-%}") || at(L, "-}}")) {
        push_tok(L, L->src[L->pos + 1] == '%' ? T_CLOSE_STMT : T_CLOSE_EXPR, L->src + L->pos + 1, 2);
        L->pos += 3;
        L->pos += skip_ws(L->src + L->pos, L->n - L->pos);
        return;
    }
    char c = L->src[L->pos];
    if ((c == '-' || c == '+') && lex_sign(L)) return;
    if (lex_operator(L)) return;
    if (c == '\'' || c == '"') {
        lex_string(L);
    } else if (is_digit(c)) {
        lex_number(L, L->pos, last_type(L) != T_DOT);
    } else if (is_word(c)) {
        size_t start = L->pos;
        while (L->pos < L->n && is_word(L->src[L->pos])) L->pos++;
        push_tok(L, T_IDENT, L->src + start, L->pos - start);
    } else {
        jfail(L->x, QP_ERR_FORMAT, "unexpected character '%c' at byte %zu", c, L->pos);
    }
}

static void lex(lexer *L) {
    while (L->pos < L->n) {
        step(L->x);
        tk lt = last_type(L);
        if (lt == T_EOF || lt == T_CLOSE_STMT || lt == T_CLOSE_EXPR || lt == T_COMMENT) {
            size_t start = L->pos;
            while (L->pos < L->n && !(L->src[L->pos] == '{' && L->pos + 1 < L->n &&
                                      strchr("%{#", L->src[L->pos + 1])))
                L->pos++;
            if (L->pos > start) {
                push_tok(L, T_TEXT, L->src + start, L->pos - start);
                continue;
            }
        }
        if (at(L, "{#")) {
            lex_comment(L);
        } else if (at(L, "{%-") || at(L, "{{-")) {
            strip_last_text(L);
            bool stmt = L->src[L->pos + 1] == '%';
            push_tok(L, stmt ? T_OPEN_STMT : T_OPEN_EXPR, L->src + L->pos, 2);
            if (!stmt) L->curly = 0;
            L->pos += 3;
        } else {
            lex_in_tag(L);
        }
    }
    push_tok(L, T_EOF, "", 0);
}

/* ---- syntax tree ------------------------------------------------------------------------------ */

typedef enum nk {
    N_TEXT, N_OUT, N_IF, N_FOR, N_SET, N_BREAK, N_CONTINUE, N_NOP,
    N_LIT, N_NAME, N_MEMBER, N_SLICE, N_CALL, N_FILTER, N_TEST, N_UNARY, N_BIN, N_AND, N_OR,
    N_TERNARY, N_SELECT, N_LIST, N_TUPLE, N_DICT, N_KWARG
} nk;

typedef enum jop {
    OP_ADD, OP_SUB, OP_CAT, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW,
    OP_EQ, OP_NE, OP_LT, OP_GT, OP_LE, OP_GE, OP_IN, OP_NOTIN, OP_NOT, OP_NEG, OP_POS
} jop;

typedef struct jn jn;
typedef struct jnlist { jn **v; size_t n, cap; } jnlist;
struct jn {
    nk k;
    jop op;
    bool flag;      /* N_MEMBER: computed ([]); N_TEST: negated; N_FILTER: called with () */
    jn *a, *b, *c;
    jnlist l1, l2;  /* bodies, arguments, items; l2: else branch, dict values */
    const char *s;  /* text, names */
    size_t sn;
    jv lit;
};

typedef struct parser { jx *x; const tok *t; size_t i; } parser;

static jn *node(parser *P, nk k) {
    jn *n = jalloc(P->x, sizeof *n);
    n->k = k;
    return n;
}

static void nl_push(jx *x, jnlist *l, jn *n) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 4;
        jn **nv = jalloc_n(x, cap, sizeof(jn *));
        if (l->n) memcpy(nv, l->v, l->n * sizeof(jn *));
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = n;
}

static const tok *cur(const parser *P) { return &P->t[P->i]; }
static bool is(const parser *P, tk t) { return cur(P)->t == t; }
static bool tok_is(const tok *t, const char *s) { return t->n == strlen(s) && memcmp(t->s, s, t->n) == 0; }
static bool is_ident(const parser *P, const char *s) { return is(P, T_IDENT) && tok_is(cur(P), s); }

static void expect(parser *P, tk t, const char *what) {
    if (!is(P, t))
        jfail(P->x, QP_ERR_FORMAT, "expected %s, found '%.*s'", what, (int)(cur(P)->n > 40 ? 40 : cur(P)->n),
              cur(P)->s);
    P->i++;
}

static void expect_ident(parser *P, const char *s) {
    if (!is_ident(P, s)) jfail(P->x, QP_ERR_FORMAT, "expected '%s'", s);
    P->i++;
}

/* {% name: the statement opened here is `name` */
static bool is_stmt(const parser *P, const char *name) {
    return is(P, T_OPEN_STMT) && P->t[P->i + 1].t == T_IDENT && tok_is(&P->t[P->i + 1], name);
}

static jn *parse_expr(parser *P);
static jn *parse_any(parser *P);
static jn *parse_primary(parser *P);

static jn *bin(parser *P, nk k, jop op, jn *a, jn *b) {
    jn *n = node(P, k);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static jop op_of(const tok *t) {
    static const struct { const char *s; jop op; } ops[] = {
        {"+", OP_ADD}, {"-", OP_SUB}, {"~", OP_CAT}, {"*", OP_MUL}, {"/", OP_DIV}, {"//", OP_FLOORDIV},
        {"%", OP_MOD}, {"**", OP_POW}, {"==", OP_EQ}, {"!=", OP_NE}, {"<", OP_LT}, {">", OP_GT},
        {"<=", OP_LE}, {">=", OP_GE},
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (tok_is(t, ops[i].s)) return ops[i].op;
    return OP_ADD;
}

/* Call arguments after '(' up to ')': positional and name=value. */
static void parse_args(parser *P, jnlist *args) {
    expect(P, T_LPAREN, "'('");
    while (!is(P, T_RPAREN)) {
        jn *a;
        if (is(P, T_IDENT) && P->t[P->i + 1].t == T_EQUALS) {
            a = node(P, N_KWARG);
            a->s = cur(P)->s;
            a->sn = cur(P)->n;
            P->i += 2;
            a->a = parse_expr(P);
        } else {
            a = parse_expr(P);
        }
        nl_push(P->x, args, a);
        if (!is(P, T_COMMA)) break;
        P->i++;
    }
    expect(P, T_RPAREN, "')'");
}

/* Inside [ ]: an index, or a slice a:b:c with any part left out. */
static jn *parse_subscript(parser *P) {
    jn *parts[3] = {NULL, NULL, NULL};
    int n = 0;
    bool slice = false;
    while (!is(P, T_RBRACK)) {
        if (is(P, T_COLON)) {
            slice = true;
            if (++n > 2) jfail(P->x, QP_ERR_FORMAT, "a slice has at most 3 parts");
            P->i++;
        } else {
            if (parts[n]) jfail(P->x, QP_ERR_FORMAT, "expected ':' or ']' in a subscript");
            parts[n] = parse_expr(P);
        }
    }
    if (!slice) {
        if (!parts[0]) jfail(P->x, QP_ERR_FORMAT, "empty subscript");
        return parts[0];
    }
    jn *s = node(P, N_SLICE);
    s->a = parts[0];
    s->b = parts[1];
    s->c = parts[2];
    return s;
}

static jn *parse_member(parser *P, jn *obj) {
    while (is(P, T_DOT) || is(P, T_LBRACK)) {
        bool computed = is(P, T_LBRACK);
        P->i++;
        jn *m = node(P, N_MEMBER);
        m->a = obj;
        m->flag = computed;
        if (computed) {
            m->b = parse_subscript(P);
            expect(P, T_RBRACK, "']'");
        } else {
            if (!is(P, T_IDENT) && !is(P, T_NUM))
                jfail(P->x, QP_ERR_FORMAT, "expected a name or an integer after '.'");
            m->b = parse_primary(P);
        }
        obj = m;
    }
    return obj;
}

static jn *parse_call_member(parser *P) {
    jn *e = parse_member(P, parse_primary(P));
    while (is(P, T_LPAREN)) {
        jn *c = node(P, N_CALL);
        c->a = e;
        parse_args(P, &c->l1);
        e = parse_member(P, c);
    }
    return e;
}

static jn *parse_unary_sign(parser *P) {
    if ((is(P, T_UNARY) || is(P, T_ADD)) && (tok_is(cur(P), "-") || tok_is(cur(P), "+"))) {
        jn *n = node(P, N_UNARY);
        n->op = tok_is(cur(P), "-") ? OP_NEG : OP_POS;
        P->i++;
        enter(P->x);
        n->a = parse_unary_sign(P);
        leave(P->x);
        return n;
    }
    return parse_call_member(P);
}

static jn *parse_filter(parser *P) {
    jn *e = parse_unary_sign(P);
    while (is(P, T_PIPE)) {
        P->i++;
        if (!is(P, T_IDENT)) jfail(P->x, QP_ERR_FORMAT, "expected a filter name after '|'");
        jn *f = node(P, N_FILTER);
        f->a = e;
        f->s = cur(P)->s;
        f->sn = cur(P)->n;
        P->i++;
        if (is(P, T_LPAREN)) {
            f->flag = true;
            parse_args(P, &f->l1);
        }
        e = f;
    }
    return e;
}

static jn *parse_test(parser *P) {
    jn *e = parse_filter(P);
    while (is_ident(P, "is")) {
        P->i++;
        jn *t = node(P, N_TEST);
        t->a = e;
        if (is_ident(P, "not")) {
            t->flag = true;
            P->i++;
        }
        if (!is(P, T_IDENT)) jfail(P->x, QP_ERR_FORMAT, "expected a test name after 'is'");
        t->s = cur(P)->s;
        t->sn = cur(P)->n;
        P->i++;
        if (is(P, T_LPAREN)) parse_args(P, &t->l1);
        e = t;
    }
    return e;
}

static jn *parse_power(parser *P) {
    jn *e = parse_test(P);
    while (is(P, T_POW)) {
        P->i++;
        e = bin(P, N_BIN, OP_POW, e, parse_test(P));
    }
    return e;
}

static jn *parse_mul(parser *P) {
    jn *e = parse_power(P);
    while (is(P, T_MUL)) {
        jop op = op_of(cur(P));
        P->i++;
        e = bin(P, N_BIN, op, e, parse_power(P));
    }
    return e;
}

static jn *parse_add(parser *P) {
    jn *e = parse_mul(P);
    while (is(P, T_ADD)) {
        jop op = op_of(cur(P));
        P->i++;
        e = bin(P, N_BIN, op, e, parse_mul(P));
    }
    return e;
}

static jn *parse_compare(parser *P) {
    jn *e = parse_add(P);
    for (;;) {
        jop op;
        if (is_ident(P, "not") && P->t[P->i + 1].t == T_IDENT && tok_is(&P->t[P->i + 1], "in")) {
            op = OP_NOTIN;
            P->i += 2;
        } else if (is_ident(P, "in")) {
            op = OP_IN;
            P->i++;
        } else if (is(P, T_CMP)) {
            op = op_of(cur(P));
            P->i++;
        } else {
            return e;
        }
        e = bin(P, N_BIN, op, e, parse_add(P));
    }
}

static jn *parse_not(parser *P) {
    if (is_ident(P, "not")) {
        P->i++;
        jn *n = node(P, N_UNARY);
        n->op = OP_NOT;
        enter(P->x);
        n->a = parse_not(P);
        leave(P->x);
        return n;
    }
    return parse_compare(P);
}

static jn *parse_and(parser *P) {
    jn *e = parse_not(P);
    while (is_ident(P, "and")) {
        P->i++;
        e = bin(P, N_AND, OP_ADD, e, parse_not(P));
    }
    return e;
}

static jn *parse_or(parser *P) {
    jn *e = parse_and(P);
    while (is_ident(P, "or")) {
        P->i++;
        e = bin(P, N_OR, OP_ADD, e, parse_and(P));
    }
    return e;
}

static jn *parse_expr(parser *P) {
    enter(P->x);
    step(P->x);
    jn *e = parse_or(P);
    if (is_ident(P, "if")) {
        P->i++;
        jn *t = node(P, N_SELECT);
        t->b = e;
        t->a = parse_or(P);
        if (is_ident(P, "else")) {
            P->i++;
            t->k = N_TERNARY;
            t->c = parse_expr(P);
        }
        e = t;
    }
    leave(P->x);
    return e;
}

/* a, b, c (a tuple) or a single expression; primary_only for loop variables. */
static jn *parse_sequence(parser *P, bool primary_only) {
    jn *first = primary_only ? parse_primary(P) : parse_expr(P);
    if (!is(P, T_COMMA)) return first;
    jn *t = node(P, N_TUPLE);
    nl_push(P->x, &t->l1, first);
    while (is(P, T_COMMA)) {
        P->i++;
        nl_push(P->x, &t->l1, primary_only ? parse_primary(P) : parse_expr(P));
    }
    return t;
}

static jn *lit(parser *P, jv v) {
    jn *n = node(P, N_LIT);
    n->lit = v;
    return n;
}

static jn *parse_number(parser *P, const tok *t) {
    char buf[64];
    if (t->n >= sizeof buf) jfail(P->x, QP_ERR_LIMIT, "a number literal longer than 63 digits");
    memcpy(buf, t->s, t->n);
    buf[t->n] = '\0';
    if (memchr(buf, '.', t->n)) return lit(P, v_float(strtod(buf, NULL)));
    errno = 0;
    long long v = strtoll(buf, NULL, 10);
    if (errno == ERANGE) return lit(P, v_float(strtod(buf, NULL)));
    return lit(P, v_int(v));
}

static jn *parse_collection(parser *P, bool dict) {
    jn *n = node(P, dict ? N_DICT : N_LIST);
    tk close = dict ? T_RBRACE : T_RBRACK;
    while (!is(P, close)) {
        if (is(P, T_EOF)) jfail(P->x, QP_ERR_FORMAT, "unterminated %s literal", dict ? "object" : "list");
        nl_push(P->x, &n->l1, parse_expr(P));
        if (dict) {
            expect(P, T_COLON, "':' in an object literal");
            nl_push(P->x, &n->l2, parse_expr(P));
        }
        if (is(P, T_COMMA)) P->i++;
        else if (!is(P, close)) jfail(P->x, QP_ERR_FORMAT, "expected ',' in a %s literal", dict ? "object" : "list");
    }
    P->i++;
    return n;
}

static jn *parse_primary(parser *P) {
    const tok *t = cur(P);
    enter(P->x);
    P->i++;
    jn *n;
    switch (t->t) {
    case T_NUM: n = parse_number(P, t); break;
    case T_STR: {
        size_t total = t->n, j = P->i;
        while (P->t[j].t == T_STR) total += P->t[j++].n;
        char *d = jalloc(P->x, total + 1);
        memcpy(d, t->s, t->n);
        size_t k = t->n;
        for (; is(P, T_STR); P->i++) {
            memcpy(d + k, cur(P)->s, cur(P)->n);
            k += cur(P)->n;
        }
        n = lit(P, v_str(d, k));
        break;
    }
    case T_IDENT:
        n = node(P, N_NAME);
        n->s = t->s;
        n->sn = t->n;
        break;
    case T_LPAREN:
        n = parse_sequence(P, false);
        expect(P, T_RPAREN, "')'");
        break;
    case T_LBRACK: n = parse_collection(P, false); break;
    case T_LBRACE: n = parse_collection(P, true); break;
    default:
        jfail(P->x, QP_ERR_FORMAT, "unexpected '%.*s' in an expression", (int)(t->n > 40 ? 40 : t->n), t->s);
    }
    leave(P->x);
    return n;
}

/* Statements until one of the names (elif/else/endif...) opens a tag; fails at the end of input. */
static void parse_body(parser *P, jnlist *body, const char *const *names, const char *inside) {
    for (;;) {
        if (is(P, T_EOF)) jfail(P->x, QP_ERR_FORMAT, "unexpected end of template inside '%s'", inside);
        for (const char *const *nm = names; *nm; nm++)
            if (is_stmt(P, *nm)) return;
        nl_push(P->x, body, parse_any(P));
    }
}

static jn *parse_if(parser *P) {
    static const char *const stops[] = {"elif", "else", "endif", NULL};
    static const char *const end_only[] = {"endif", NULL};
    jn *n = node(P, N_IF);
    n->a = parse_expr(P);
    expect(P, T_CLOSE_STMT, "'%}'");
    parse_body(P, &n->l1, stops, "if");
    if (is_stmt(P, "elif")) {
        P->i += 2;
        enter(P->x);
        nl_push(P->x, &n->l2, parse_if(P));
        leave(P->x);
    } else if (is_stmt(P, "else")) {
        P->i += 2;
        expect(P, T_CLOSE_STMT, "'%}'");
        parse_body(P, &n->l2, end_only, "if");
    }
    return n;
}

static jn *parse_for(parser *P) {
    static const char *const stops[] = {"endfor", "else", NULL};
    static const char *const end_only[] = {"endfor", NULL};
    jn *n = node(P, N_FOR);
    n->a = parse_sequence(P, true);
    if (n->a->k != N_NAME && n->a->k != N_TUPLE) jfail(P->x, QP_ERR_FORMAT, "expected a loop variable");
    expect_ident(P, "in");
    jn *it = parse_expr(P);
    if (it->k == N_SELECT) {
        n->b = it->b;
        n->c = it->a;
    } else {
        n->b = it;
    }
    expect(P, T_CLOSE_STMT, "'%}'");
    parse_body(P, &n->l1, stops, "for");
    if (is_stmt(P, "else")) {
        P->i += 2;
        expect(P, T_CLOSE_STMT, "'%}'");
        parse_body(P, &n->l2, end_only, "for");
    }
    return n;
}

static jn *parse_set(parser *P) {
    static const char *const stops[] = {"endset", NULL};
    jn *n = node(P, N_SET);
    n->a = parse_sequence(P, false);
    if (is(P, T_EQUALS)) {
        P->i++;
        n->b = parse_sequence(P, false);
    } else {
        expect(P, T_CLOSE_STMT, "'%}'");
        parse_body(P, &n->l1, stops, "set");
        P->i++;
        expect_ident(P, "endset");
    }
    expect(P, T_CLOSE_STMT, "'%}'");
    return n;
}

static jn *parse_statement(parser *P) {
    expect(P, T_OPEN_STMT, "'{%'");
    if (!is(P, T_IDENT)) jfail(P->x, QP_ERR_FORMAT, "expected a statement name after '{%%'");
    const tok *name = cur(P);
    P->i++;
    jn *n;
    if (tok_is(name, "set")) return parse_set(P);
    if (tok_is(name, "if") || tok_is(name, "for")) {
        bool is_if = tok_is(name, "if");
        n = is_if ? parse_if(P) : parse_for(P);
        expect(P, T_OPEN_STMT, "'{%'");
        expect_ident(P, is_if ? "endif" : "endfor");
        expect(P, T_CLOSE_STMT, "'%}'");
        return n;
    }
    if (tok_is(name, "break") || tok_is(name, "continue")) {
        n = node(P, tok_is(name, "break") ? N_BREAK : N_CONTINUE);
        expect(P, T_CLOSE_STMT, "'%}'");
        return n;
    }
    if (tok_is(name, "macro") || tok_is(name, "call") || tok_is(name, "filter"))
        jfail(P->x, QP_ERR_UNSUPPORTED, "the '%.*s' statement is outside the supported subset", (int)name->n,
              name->s);
    jfail(P->x, QP_ERR_FORMAT, "unknown statement '%.*s'", (int)(name->n > 40 ? 40 : name->n), name->s);
}

static jn *parse_any(parser *P) {
    enter(P->x);
    step(P->x);
    jn *n;
    switch (cur(P)->t) {
    case T_TEXT:
        n = node(P, N_TEXT);
        n->s = cur(P)->s;
        n->sn = cur(P)->n;
        P->i++;
        break;
    case T_COMMENT:
        n = node(P, N_NOP);
        P->i++;
        break;
    case T_OPEN_STMT: n = parse_statement(P); break;
    case T_OPEN_EXPR:
        P->i++;
        n = node(P, N_OUT);
        n->a = parse_expr(P);
        expect(P, T_CLOSE_EXPR, "'}}'");
        break;
    default:
        jfail(P->x, QP_ERR_FORMAT, "unexpected '%.*s' outside a tag", (int)(cur(P)->n > 40 ? 40 : cur(P)->n),
              cur(P)->s);
    }
    leave(P->x);
    return n;
}

/* ---- evaluation ----------------------------------------------------------------------------- */

static jv eval(jx *x, jscope *sc, const jn *n);
static void exec_body(jx *x, jscope *sc, const jnlist *body, qp_buf *out);

static jv *scope_find(jscope *sc, const char *k, size_t kn) {
    for (; sc; sc = sc->parent) {
        jv *v = dict_find(&sc->vars, k, kn);
        if (v) return v;
    }
    return NULL;
}

static void emit(jx *x, qp_buf *out, const char *p, size_t n) {
    if (n > x->lim.max_output_bytes || out->len > x->lim.max_output_bytes - n)
        jfail(x, QP_ERR_LIMIT, "the output would exceed %zu bytes", x->lim.max_output_bytes);
    if (!qp_buf_put(out, p, n)) jfail(x, QP_ERR_NOMEM, "out of memory");
}

/* JavaScript's Number.prototype.toString for finite values: the shortest form that reads back. */
static void fmt_js_number(double d, char *buf, size_t cap) {
    if (isnan(d)) { snprintf(buf, cap, "NaN"); return; }
    if (isinf(d)) { snprintf(buf, cap, d < 0 ? "-Infinity" : "Infinity"); return; }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) break;
    }
    char *ep = strchr(buf, 'e');
    if (!ep) return;
    int ex = atoi(ep + 1);
    if (ex >= -7 && ex < 21) snprintf(buf, cap, "%.*f", ex < 0 ? 17 - ex : 0, d); /* rare: plain form */
    else snprintf(ep, cap - (size_t)(ep - buf), "e%s%d", ex < 0 ? "-" : "+", ex < 0 ? -ex : ex);
}

static void to_json(jx *x, qp_buf *b, jv v, int indent, int depth);
static jv json_value(jx *x, jv v, int indent);

/* The text a value prints as (@huggingface/jinja's toString). */
static jv to_str(jx *x, jv v) {
    char buf[64];
    switch (v.t) {
    case J_STR: return v;
    case J_INT: snprintf(buf, sizeof buf, "%lld", (long long)v.u.i); break;
    case J_FLOAT:
        if (v.u.f == 0.0 && signbit(v.u.f)) snprintf(buf, sizeof buf, "-0.0");
        else if (isfinite(v.u.f) && v.u.f == floor(v.u.f) && fabs(v.u.f) < 1e21) snprintf(buf, sizeof buf, "%.1f", v.u.f);
        else fmt_js_number(v.u.f, buf, sizeof buf);
        break;
    case J_BOOL: return v_cstr(v.u.b ? "true" : "false");
    case J_NONE: return v_cstr("null");
    case J_UNDEF: return v_cstr("");
    case J_LIST: case J_DICT: case J_NS: {
        return json_value(x, v, 0);
    }
    default: return v_cstr("[function]");
    }
    return v_strcopy(x, buf, strlen(buf));
}

static void json_pad(qp_buf *b, int indent, int depth) {
    qp_buf_put(b, "\n", 1);
    for (int i = 0; i < indent * depth; i++) qp_buf_put(b, " ", 1);
}

/* tojson: JSON.stringify's text with Python's separators (", " and ": "; "," when indenting). */
static void to_json(jx *x, qp_buf *b, jv v, int indent, int depth) {
    if (depth > x->lim.max_depth) jfail(x, QP_ERR_LIMIT, "tojson: value nested deeper than %d", x->lim.max_depth);
    step(x);
    char num[64];
    switch (v.t) {
    case J_NONE: case J_UNDEF: qp_buf_str(b, "null"); break;
    case J_BOOL: qp_buf_str(b, v.u.b ? "true" : "false"); break;
    case J_INT: qp_buf_printf(b, "%lld", (long long)v.u.i); break;
    case J_FLOAT:
        if (!isfinite(v.u.f)) qp_buf_str(b, "null");
        else { fmt_js_number(v.u.f, num, sizeof num); qp_buf_str(b, num); }
        break;
    case J_STR: qp_buf_json_str(b, v.u.s.p, v.u.s.n); break;
    case J_LIST: case J_DICT: case J_NS: {
        bool list = v.t == J_LIST;
        size_t n = list ? v.u.l->n : v.u.d->n;
        qp_buf_put(b, list ? "[" : "{", 1);
        for (size_t i = 0; i < n; i++) {
            if (i) qp_buf_str(b, indent ? "," : ", ");
            if (indent) json_pad(b, indent, depth + 1);
            if (!list) {
                qp_buf_json_str(b, v.u.d->k[i].p, v.u.d->k[i].n);
                qp_buf_str(b, ": ");
            }
            to_json(x, b, list ? v.u.l->v[i] : v.u.d->v[i], indent, depth + 1);
        }
        if (indent && n) json_pad(b, indent, depth);
        qp_buf_put(b, list ? "]" : "}", 1);
        break;
    }
    default: jfail(x, QP_ERR_ARG, "tojson: cannot convert a %s", type_name(v.t));
    }
    if (b->len > x->lim.max_output_bytes) jfail(x, QP_ERR_LIMIT, "tojson: text over %zu bytes", x->lim.max_output_bytes);
}

static jv json_value(jx *x, jv v, int indent) {
    qp_buf *b = tbuf_open(x);
    to_json(x, b, v, indent, 0);
    return tbuf_close(x, b);
}

static bool is_num(jv v) { return v.t == J_INT || v.t == J_FLOAT; }
static double num_of(jv v) { return v.t == J_INT ? (double)v.u.i : v.t == J_FLOAT ? v.u.f : v.u.b ? 1.0 : 0.0; }

/* JavaScript's loose == over the values' payloads, as @huggingface/jinja compares. */
static bool loose_eq(jv a, jv b) {
    bool an = a.t == J_NONE || a.t == J_UNDEF, bn = b.t == J_NONE || b.t == J_UNDEF;
    if (an || bn) return an && bn;
    if (a.t == J_STR && b.t == J_STR) return a.u.s.n == b.u.s.n && memcmp(a.u.s.p, b.u.s.p, a.u.s.n) == 0;
    bool anum = is_num(a) || a.t == J_BOOL, bnum = is_num(b) || b.t == J_BOOL;
    if (anum && bnum) return num_of(a) == num_of(b);
    if (a.t != b.t) return false;
    if (a.t == J_LIST) return a.u.l == b.u.l;
    if (a.t == J_DICT || a.t == J_NS) return a.u.d == b.u.d;
    return false;
}

/* JavaScript's === over payloads (list membership). */
static bool strict_eq(jv a, jv b) {
    if (is_num(a) && is_num(b)) return num_of(a) == num_of(b);
    if (a.t != b.t) return (a.t == J_NONE || a.t == J_UNDEF) && a.t == b.t;
    return loose_eq(a, b);
}

static jv concat(jx *x, jv a, jv b) {
    a = to_str(x, a);
    b = to_str(x, b);
    char *d = jalloc(x, a.u.s.n + b.u.s.n + 1);
    if (a.u.s.n) memcpy(d, a.u.s.p, a.u.s.n);
    if (b.u.s.n) memcpy(d + a.u.s.n, b.u.s.p, b.u.s.n);
    return v_str(d, a.u.s.n + b.u.s.n);
}

static bool str_contains(jv hay, jv needle) {
    if (needle.u.s.n == 0) return true;
    for (size_t i = 0; i + needle.u.s.n <= hay.u.s.n; i++)
        if (memcmp(hay.u.s.p + i, needle.u.s.p, needle.u.s.n) == 0) return true;
    return false;
}

static jv arith(jx *x, jop op, jv a, jv b) {
    bool fl = a.t == J_FLOAT || b.t == J_FLOAT;
    double da = num_of(a), db = num_of(b);
    switch (op) {
    case OP_ADD: case OP_SUB: case OP_MUL:
        if (!fl) {
            int64_t r;
            bool ok = op == OP_ADD ? !__builtin_add_overflow(a.u.i, b.u.i, &r)
                    : op == OP_SUB ? !__builtin_sub_overflow(a.u.i, b.u.i, &r)
                                   : !__builtin_mul_overflow(a.u.i, b.u.i, &r);
            if (ok) return v_int(r);
        }
        return fl ? v_float(op == OP_ADD ? da + db : op == OP_SUB ? da - db : da * db)
                  : v_float(op == OP_ADD ? da + db : op == OP_SUB ? da - db : da * db);
    case OP_DIV: return v_float(da / db);
    case OP_FLOORDIV:
        if (!fl && b.u.i != 0 && !(a.u.i == INT64_MIN && b.u.i == -1)) {
            int64_t q = a.u.i / b.u.i;
            if ((a.u.i % b.u.i != 0) && ((a.u.i < 0) != (b.u.i < 0))) q--;
            return v_int(q);
        }
        return v_float(floor(da / db));
    case OP_MOD:
        if (!fl && b.u.i != 0 && !(a.u.i == INT64_MIN && b.u.i == -1)) return v_int(a.u.i % b.u.i);
        if (!fl) jfail(x, QP_ERR_ARG, "integer modulo by zero");
        return v_float(fmod(da, db));
    case OP_POW: {
        if (da == 0 && db < 0) jfail(x, QP_ERR_ARG, "0.0 cannot be raised to a negative power");
        double r = pow(da, db);
        if (!isfinite(r)) jfail(x, QP_ERR_ARG, "exponentiation result is not a finite real number");
        if (fl || db < 0 || fabs(r) >= 9007199254740992.0) return v_float(r);
        return v_int((int64_t)r);
    }
    case OP_LT: return v_bool(da < db);
    case OP_GT: return v_bool(da > db);
    case OP_LE: return v_bool(da <= db);
    case OP_GE: return v_bool(da >= db);
    default: jfail(x, QP_ERR_INTERNAL, "bad arithmetic operator");
    }
}

static jv binary(jx *x, jop op, jv a, jv b) {
    if (op == OP_EQ) return v_bool(loose_eq(a, b));
    if (op == OP_NE) return v_bool(!loose_eq(a, b));
    if (a.t == J_UNDEF || b.t == J_UNDEF) {
        if (b.t == J_UNDEF && (op == OP_IN || op == OP_NOTIN)) return v_bool(op == OP_NOTIN);
        jfail(x, QP_ERR_ARG, "cannot apply an operator to an undefined value");
    }
    if (a.t == J_NONE || b.t == J_NONE) jfail(x, QP_ERR_ARG, "cannot apply an operator to none");
    if (op == OP_CAT) return concat(x, a, b);
    bool numlike_a = is_num(a) || a.t == J_BOOL, numlike_b = is_num(b) || b.t == J_BOOL;
    if (op == OP_POW && numlike_a && numlike_b) return arith(x, op, a, b);
    if (is_num(a) && is_num(b) && op != OP_IN && op != OP_NOTIN) return arith(x, op, a, b);
    if (a.t == J_LIST && b.t == J_LIST && op == OP_ADD) {
        jlist *l = list_new(x, a.u.l->n + b.u.l->n);
        for (size_t i = 0; i < a.u.l->n; i++) list_push(x, l, a.u.l->v[i]);
        for (size_t i = 0; i < b.u.l->n; i++) list_push(x, l, b.u.l->v[i]);
        return v_list(l);
    }
    if (b.t == J_LIST && (op == OP_IN || op == OP_NOTIN)) {
        bool found = false;
        for (size_t i = 0; i < b.u.l->n && !found; i++) found = strict_eq(a, b.u.l->v[i]);
        return v_bool(found == (op == OP_IN));
    }
    if ((a.t == J_STR || b.t == J_STR) && op == OP_ADD) return concat(x, a, b);
    if (a.t == J_STR && b.t == J_STR && (op == OP_IN || op == OP_NOTIN))
        return v_bool(str_contains(b, a) == (op == OP_IN));
    if (a.t == J_STR && b.t == J_DICT && (op == OP_IN || op == OP_NOTIN))
        return v_bool((dict_find(b.u.d, a.u.s.p, a.u.s.n) != NULL) == (op == OP_IN));
    jfail(x, QP_ERR_ARG, "unknown operator between %s and %s", type_name(a.t), type_name(b.t));
}

/* ---- calls: arguments, functions, methods, filters, tests ------------------------------------ */

typedef struct jargs { jv pos[8]; size_t npos; jkey kw[8]; jv kwv[8]; size_t nkw; } jargs;

static void eval_args(jx *x, jscope *sc, const jnlist *l, jargs *a) {
    memset(a, 0, sizeof *a);
    for (size_t i = 0; i < l->n; i++) {
        const jn *n = l->v[i];
        if (n->k == N_KWARG) {
            if (a->nkw == 8) jfail(x, QP_ERR_LIMIT, "more than 8 keyword arguments");
            a->kw[a->nkw] = (jkey){n->s, n->sn};
            a->kwv[a->nkw++] = eval(x, sc, n->a);
        } else {
            if (a->npos == 8) jfail(x, QP_ERR_LIMIT, "more than 8 arguments");
            a->pos[a->npos++] = eval(x, sc, n);
        }
    }
}

/* Positional argument i, else keyword `name`, else undefined. */
static jv arg(const jargs *a, size_t i, const char *name) {
    if (i < a->npos) return a->pos[i];
    for (size_t k = 0; name && k < a->nkw; k++)
        if (a->kw[k].n == strlen(name) && memcmp(a->kw[k].p, name, a->kw[k].n) == 0) return a->kwv[k];
    return k_undef;
}

static jv str_case(jx *x, jv s, int mode) { /* 0 upper, 1 lower, 2 title, 3 capitalize */
    char *d = jalloc(x, s.u.s.n + 1);
    bool word_start = true;
    for (size_t i = 0; i < s.u.s.n; i++) {
        char c = s.u.s.p[i];
        bool up = mode == 0 || (mode == 2 && word_start) || (mode == 3 && i == 0);
        bool low = mode == 1 || (mode == 2 && !word_start);
        if (up && c >= 'a' && c <= 'z') c = (char)(c - 32);
        else if (low && c >= 'A' && c <= 'Z') c = (char)(c + 32);
        d[i] = c;
        if (mode == 2) word_start = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '-' || c == '_';
    }
    return v_str(d, s.u.s.n);
}

static bool affix(jv s, jv p, bool end) {
    if (p.u.s.n > s.u.s.n) return false;
    return memcmp(s.u.s.p + (end ? s.u.s.n - p.u.s.n : 0), p.u.s.p, p.u.s.n) == 0;
}

static jv str_affix(jx *x, jv s, jv p, bool end) {
    if (p.t == J_STR) return v_bool(affix(s, p, end));
    if (p.t != J_LIST) jfail(x, QP_ERR_ARG, "%s: the argument must be a string or a tuple", end ? "endswith" : "startswith");
    for (size_t i = 0; i < p.u.l->n; i++) {
        if (p.u.l->v[i].t != J_STR) jfail(x, QP_ERR_ARG, "startswith/endswith: tuple items must be strings");
        if (affix(s, p.u.l->v[i], end)) return v_bool(true);
    }
    return v_bool(false);
}

static size_t find_sub(jv s, size_t from, jv sep) {
    for (size_t i = from; i + sep.u.s.n <= s.u.s.n; i++)
        if (memcmp(s.u.s.p + i, sep.u.s.p, sep.u.s.n) == 0) return i;
    return SIZE_MAX;
}

static jv str_split(jx *x, jv s, jv sep, jv maxsplit) {
    int64_t max = maxsplit.t == J_INT ? maxsplit.u.i : -1;
    if (maxsplit.t != J_INT && maxsplit.t != J_UNDEF) jfail(x, QP_ERR_ARG, "split: maxsplit must be an integer");
    jlist *l = list_new(x, 4);
    if (sep.t == J_UNDEF || sep.t == J_NONE) {
        size_t i = skip_ws(s.u.s.p, s.u.s.n);
        while (i < s.u.s.n) {
            step(x);
            if (max >= 0 && (int64_t)l->n >= max) {
                list_push(x, l, v_str(s.u.s.p + i, s.u.s.n - i));
                break;
            }
            size_t j = i;
            while (j < s.u.s.n && ws_len((const unsigned char *)s.u.s.p + j, s.u.s.n - j) == 0) j++;
            list_push(x, l, v_str(s.u.s.p + i, j - i));
            i = j + skip_ws(s.u.s.p + j, s.u.s.n - j);
        }
        return v_list(l);
    }
    if (sep.t != J_STR) jfail(x, QP_ERR_ARG, "split: the separator must be a string or none");
    if (sep.u.s.n == 0) jfail(x, QP_ERR_ARG, "split: empty separator");
    size_t i = 0;
    for (;;) {
        step(x);
        size_t k = (max >= 0 && (int64_t)l->n >= max) ? SIZE_MAX : find_sub(s, i, sep);
        if (k == SIZE_MAX) {
            list_push(x, l, v_str(s.u.s.p + i, s.u.s.n - i));
            return v_list(l);
        }
        list_push(x, l, v_str(s.u.s.p + i, k - i));
        i = k + sep.u.s.n;
    }
}

static jv str_replace(jx *x, jv s, jv from, jv to, jv count) {
    if (from.t != J_STR || to.t != J_STR) jfail(x, QP_ERR_ARG, "replace: arguments must be strings");
    int64_t max = count.t == J_INT ? count.u.i : -1;
    qp_buf *b = tbuf_open(x);
    size_t i = 0;
    int64_t done = 0;
    while (i <= s.u.s.n) {
        step(x);
        size_t k = (max >= 0 && done >= max) ? SIZE_MAX : from.u.s.n ? find_sub(s, i, from) : i;
        if (k == SIZE_MAX || k > s.u.s.n) break;
        qp_buf_put(b, s.u.s.p + i, k - i);
        qp_buf_put(b, to.u.s.p, to.u.s.n);
        done++;
        if (from.u.s.n) {
            i = k + from.u.s.n;
        } else {
            if (k < s.u.s.n) qp_buf_put(b, s.u.s.p + k, 1);
            i = k + 1;
        }
        if (b->len > x->lim.max_output_bytes) jfail(x, QP_ERR_LIMIT, "replace: result over %zu bytes", x->lim.max_output_bytes);
    }
    if (i < s.u.s.n) qp_buf_put(b, s.u.s.p + i, s.u.s.n - i);
    return tbuf_close(x, b);
}

static jv dict_list(jx *x, const jdict *d, int what) { /* 0 keys, 1 values, 2 items */
    jlist *l = list_new(x, d->n);
    for (size_t i = 0; i < d->n; i++) {
        jv key = v_str(d->k[i].p, d->k[i].n);
        if (what == 2) {
            jlist *pair = list_new(x, 2);
            list_push(x, pair, key);
            list_push(x, pair, d->v[i]);
            list_push(x, l, v_list(pair));
        } else {
            list_push(x, l, what == 0 ? key : d->v[i]);
        }
    }
    return v_list(l);
}

static jv fn_range(jx *x, const jargs *a) {
    int64_t p[3] = {0, 0, 1};
    if (a->npos < 1 || a->npos > 3) jfail(x, QP_ERR_ARG, "range: 1 to 3 arguments");
    for (size_t i = 0; i < a->npos; i++) {
        if (a->pos[i].t != J_INT) jfail(x, QP_ERR_ARG, "range: arguments must be integers");
        p[a->npos == 1 ? 1 : i] = a->pos[i].u.i;
    }
    if (p[2] == 0) jfail(x, QP_ERR_ARG, "range: step must not be zero");
    jlist *l = list_new(x, 4);
    for (int64_t v = p[0]; p[2] > 0 ? v < p[1] : v > p[1]; v += p[2]) {
        step(x);
        list_push(x, l, v_int(v));
        if ((p[2] > 0 && v > INT64_MAX - p[2]) || (p[2] < 0 && v < INT64_MIN - p[2])) break;
    }
    return v_list(l);
}

static jv fn_namespace(jx *x, const jargs *a) {
    jdict *d = dict_new(x);
    if (a->npos > 1) jfail(x, QP_ERR_ARG, "namespace: at most 1 positional argument");
    if (a->npos == 1) {
        if (a->pos[0].t != J_DICT) jfail(x, QP_ERR_UNSUPPORTED, "namespace: only an object as positional argument");
        for (size_t i = 0; i < a->pos[0].u.d->n; i++)
            dict_set(x, d, a->pos[0].u.d->k[i].p, a->pos[0].u.d->k[i].n, a->pos[0].u.d->v[i]);
    }
    for (size_t i = 0; i < a->nkw; i++) dict_set(x, d, a->kw[i].p, a->kw[i].n, a->kwv[i]);
    return v_dict(d, J_NS);
}

static jv fn_strftime(jx *x, const jargs *a) {
    jv f = arg(a, 0, NULL);
    if (f.t != J_STR) jfail(x, QP_ERR_ARG, "strftime_now: the format must be a string");
    char fmt[256], buf[512];
    if (f.u.s.n >= sizeof fmt) jfail(x, QP_ERR_LIMIT, "strftime_now: format longer than 255 bytes");
    memcpy(fmt, f.u.s.p, f.u.s.n);
    fmt[f.u.s.n] = '\0';
    time_t now = time(NULL);
    struct tm tmv;
    if (!localtime_r(&now, &tmv)) jfail(x, QP_ERR_ARG, "strftime_now: no local time");
    size_t n = strftime(buf, sizeof buf, fmt, &tmv);
    return v_strcopy(x, buf, n);
}

static jv call_fn(jx *x, jv f, const jargs *a) {
    const jv *self = f.u.fn.self;
    switch (f.u.fn.id) {
    case F_NAMESPACE: return fn_namespace(x, a);
    case F_RANGE: return fn_range(x, a);
    case F_STRFTIME: return fn_strftime(x, a);
    case F_RAISE: {
        jv m = to_str(x, arg(a, 0, NULL));
        jfail(x, QP_ERR_ARG, "raise_exception: %.*s", (int)(m.u.s.n > 300 ? 300 : m.u.s.n), m.u.s.p);
    }
    case M_UPPER: return str_case(x, *self, 0);
    case M_LOWER: return str_case(x, *self, 1);
    case M_TITLE: return str_case(x, *self, 2);
    case M_CAPITALIZE: return str_case(x, *self, 3);
    case M_STRIP: return str_trim(*self, true, true);
    case M_LSTRIP: return str_trim(*self, true, false);
    case M_RSTRIP: return str_trim(*self, false, true);
    case M_STARTSWITH: case M_ENDSWITH:
        if (a->npos < 1) jfail(x, QP_ERR_ARG, "startswith/endswith need an argument");
        return str_affix(x, *self, a->pos[0], f.u.fn.id == M_ENDSWITH);
    case M_SPLIT: return str_split(x, *self, arg(a, 0, "sep"), arg(a, 1, "maxsplit"));
    case M_REPLACE: return str_replace(x, *self, arg(a, 0, NULL), arg(a, 1, NULL), arg(a, 2, "count"));
    case M_KEYS: return dict_list(x, self->u.d, 0);
    case M_VALUES: return dict_list(x, self->u.d, 1);
    case M_ITEMS: return dict_list(x, self->u.d, 2);
    case M_GET: {
        jv k = arg(a, 0, NULL), dflt = arg(a, 1, NULL);
        if (k.t != J_STR) jfail(x, QP_ERR_ARG, "get: the key must be a string");
        const jv *v = dict_find(self->u.d, k.u.s.p, k.u.s.n);
        if (v) return *v;
        if (dflt.t != J_UNDEF) return dflt;
        return (jv){.t = J_NONE};
    }
    }
    jfail(x, QP_ERR_INTERNAL, "bad function id");
}

static jv bound(jx *x, jv self, jfn id) {
    jv *s = jalloc(x, sizeof *s);
    *s = self;
    jv f = {.t = J_FUNC};
    f.u.fn.id = id;
    f.u.fn.self = s;
    return f;
}

static bool name_is(const char *p, size_t n, const char *s) { return n == strlen(s) && memcmp(p, s, n) == 0; }

/* A builtin method or property of a string or an object, or undefined. */
static jv builtin_member(jx *x, jv obj, const char *p, size_t n) {
    static const struct { const char *name; jfn id; } str_methods[] = {
        {"upper", M_UPPER}, {"lower", M_LOWER}, {"strip", M_STRIP}, {"lstrip", M_LSTRIP},
        {"rstrip", M_RSTRIP}, {"title", M_TITLE}, {"capitalize", M_CAPITALIZE},
        {"startswith", M_STARTSWITH}, {"endswith", M_ENDSWITH}, {"split", M_SPLIT}, {"replace", M_REPLACE},
    };
    static const struct { const char *name; jfn id; } dict_methods[] = {
        {"items", M_ITEMS}, {"keys", M_KEYS}, {"values", M_VALUES}, {"get", M_GET},
    };
    if (obj.t == J_STR) {
        if (name_is(p, n, "length")) return v_int((int64_t)obj.u.s.n);
        for (size_t i = 0; i < sizeof str_methods / sizeof str_methods[0]; i++)
            if (name_is(p, n, str_methods[i].name)) return bound(x, obj, str_methods[i].id);
    } else if (obj.t == J_LIST) {
        if (name_is(p, n, "length")) return v_int((int64_t)obj.u.l->n);
    } else if (obj.t == J_DICT) {
        for (size_t i = 0; i < sizeof dict_methods / sizeof dict_methods[0]; i++)
            if (name_is(p, n, dict_methods[i].name)) return bound(x, obj, dict_methods[i].id);
    }
    return k_undef;
}

static jv index_value(jx *x, jv obj, jv key) {
    if (obj.t == J_DICT || obj.t == J_NS) {
        if (key.t != J_STR) jfail(x, QP_ERR_ARG, "an object key must be a string, not %s", type_name(key.t));
        const jv *v = dict_find(obj.u.d, key.u.s.p, key.u.s.n);
        if (v) return *v;
        return obj.t == J_DICT ? builtin_member(x, obj, key.u.s.p, key.u.s.n) : k_undef;
    }
    if (obj.t == J_LIST || obj.t == J_STR) {
        if (key.t == J_INT) {
            int64_t len = obj.t == J_LIST ? (int64_t)obj.u.l->n : (int64_t)obj.u.s.n;
            int64_t i = key.u.i < 0 ? key.u.i + len : key.u.i;
            if (i < 0 || i >= len) return k_undef;
            return obj.t == J_LIST ? obj.u.l->v[i] : v_str(obj.u.s.p + i, 1);
        }
        if (key.t == J_STR) return builtin_member(x, obj, key.u.s.p, key.u.s.n);
        jfail(x, QP_ERR_ARG, "cannot index a %s with a %s", type_name(obj.t), type_name(key.t));
    }
    if (key.t != J_STR) jfail(x, QP_ERR_ARG, "cannot index a %s with a %s", type_name(obj.t), type_name(key.t));
    return k_undef;
}

/* Python's slice of [0, len) with optional start, stop, step. */
static jv slice(jx *x, jv obj, jv a, jv b, jv c) {
    if (obj.t != J_LIST && obj.t != J_STR) jfail(x, QP_ERR_ARG, "only a list or a string can be sliced");
    for (int k = 0; k < 3; k++) {
        jv p = k == 0 ? a : k == 1 ? b : c;
        if (p.t != J_INT && p.t != J_UNDEF) jfail(x, QP_ERR_ARG, "slice bounds must be integers");
    }
    int64_t len = obj.t == J_LIST ? (int64_t)obj.u.l->n : (int64_t)obj.u.s.n;
    int64_t st = c.t == J_INT ? c.u.i : 1;
    if (st == 0) jfail(x, QP_ERR_ARG, "slice step cannot be zero");
    int64_t lo, hi;
    if (st > 0) {
        lo = a.t == J_INT ? (a.u.i < 0 ? (a.u.i + len < 0 ? 0 : a.u.i + len) : (a.u.i > len ? len : a.u.i)) : 0;
        hi = b.t == J_INT ? (b.u.i < 0 ? (b.u.i + len < 0 ? 0 : b.u.i + len) : (b.u.i > len ? len : b.u.i)) : len;
    } else {
        lo = a.t == J_INT ? (a.u.i < 0 ? (a.u.i + len < 0 ? -1 : a.u.i + len) : (a.u.i >= len ? len - 1 : a.u.i)) : len - 1;
        hi = b.t == J_INT ? (b.u.i < 0 ? (b.u.i + len < 0 ? -1 : b.u.i + len) : (b.u.i >= len ? len - 1 : b.u.i)) : -1;
    }
    jlist *l = obj.t == J_LIST ? list_new(x, 4) : NULL;
    char *d = obj.t == J_STR ? jalloc(x, (size_t)len + 1) : NULL;
    size_t k = 0;
    for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) {
        step(x);
        if (l) list_push(x, l, obj.u.l->v[i]);
        else d[k++] = obj.u.s.p[i];
    }
    return l ? v_list(l) : v_str(d, k);
}

static int64_t length_of(jx *x, jv v) {
    if (v.t == J_STR) return (int64_t)v.u.s.n;
    if (v.t == J_LIST) return (int64_t)v.u.l->n;
    if (v.t == J_DICT) return (int64_t)v.u.d->n;
    jfail(x, QP_ERR_ARG, "length: a %s has no length", type_name(v.t));
}

static jv filter_join(jx *x, jv v, jv sep) {
    if (v.t == J_STR) return v;
    if (v.t != J_LIST) jfail(x, QP_ERR_ARG, "join: cannot join a %s", type_name(v.t));
    jv out = v_str("", 0);
    for (size_t i = 0; i < v.u.l->n; i++) {
        step(x);
        if (i && sep.t == J_STR) out = concat(x, out, sep);
        out = concat(x, out, v.u.l->v[i]);
    }
    return out;
}

static jv filter_list(jx *x, jv v, int what) { /* 0 first, 1 last, 2 reverse, 3 unique */
    if (v.t != J_LIST) jfail(x, QP_ERR_ARG, "this filter needs a list, not a %s", type_name(v.t));
    size_t n = v.u.l->n;
    if (what == 0) return n ? v.u.l->v[0] : k_undef;
    if (what == 1) return n ? v.u.l->v[n - 1] : k_undef;
    jlist *l = list_new(x, n);
    for (size_t i = 0; i < n; i++) {
        jv item = v.u.l->v[what == 2 ? n - 1 - i : i];
        bool seen = false;
        for (size_t k = 0; what == 3 && k < l->n && !seen; k++) seen = strict_eq(l->v[k], item);
        if (!seen) list_push(x, l, item);
    }
    return v_list(l);
}

static jv filter_number(jx *x, jv v, bool to_int, jv dflt) {
    if (v.t == J_INT || v.t == J_FLOAT) return to_int && v.t == J_FLOAT ? v_int((int64_t)floor(v.u.f)) : v;
    if (v.t == J_BOOL) return to_int ? v_int(v.u.b) : v_float(v.u.b);
    if (v.t != J_STR) jfail(x, QP_ERR_ARG, "int/float: cannot convert a %s", type_name(v.t));
    char buf[64];
    size_t n = v.u.s.n < sizeof buf - 1 ? v.u.s.n : sizeof buf - 1;
    memcpy(buf, v.u.s.p, n);
    buf[n] = '\0';
    char *end;
    double d = to_int ? (double)strtoll(buf, &end, 10) : strtod(buf, &end);
    if (end == buf) return dflt.t != J_UNDEF ? dflt : to_int ? v_int(0) : v_float(0.0);
    return to_int ? v_int((int64_t)d) : v_float(d);
}

static jv apply_filter(jx *x, jscope *sc, const jn *f, jv v) {
    jargs a;
    eval_args(x, sc, &f->l1, &a);
    const char *p = f->s;
    size_t n = f->sn;
    if (name_is(p, n, "safe")) return v;
    if (name_is(p, n, "tojson")) {
        jv ind = arg(&a, 0, "indent");
        return json_value(x, v, ind.t == J_INT && ind.u.i > 0 && ind.u.i <= 16 ? (int)ind.u.i : 0);
    }
    if (name_is(p, n, "default") || name_is(p, n, "d")) {
        jv dflt = arg(&a, 0, "default_value"), b = arg(&a, 1, "boolean");
        if (v.t == J_UNDEF || (b.t == J_BOOL && b.u.b && !truthy(v))) return dflt.t == J_UNDEF ? v_str("", 0) : dflt;
        return v;
    }
    if (name_is(p, n, "length") || name_is(p, n, "count")) return v_int(length_of(x, v));
    if (name_is(p, n, "string")) return v.t == J_LIST || v.t == J_DICT ? json_value(x, v, 0) : to_str(x, v);
    if (name_is(p, n, "join")) return filter_join(x, v, arg(&a, 0, "d"));
    if (name_is(p, n, "first")) return filter_list(x, v, 0);
    if (name_is(p, n, "last")) return filter_list(x, v, 1);
    if (name_is(p, n, "reverse")) return filter_list(x, v, 2);
    if (name_is(p, n, "unique")) return filter_list(x, v, 3);
    if (name_is(p, n, "list") && v.t == J_LIST) return v;
    if (name_is(p, n, "int") || name_is(p, n, "float")) return filter_number(x, v, p[0] == 'i', arg(&a, 0, "default"));
    if (name_is(p, n, "abs") && is_num(v)) return v.t == J_INT ? v_int(v.u.i < 0 ? -v.u.i : v.u.i) : v_float(fabs(v.u.f));
    if (name_is(p, n, "items") && v.t == J_DICT) return dict_list(x, v.u.d, 2);
    if (v.t == J_STR) {
        static const struct { const char *name; jfn id; } str_filters[] = {
            {"trim", M_STRIP}, {"upper", M_UPPER}, {"lower", M_LOWER}, {"title", M_TITLE},
            {"capitalize", M_CAPITALIZE}, {"replace", M_REPLACE},
        };
        for (size_t i = 0; i < sizeof str_filters / sizeof str_filters[0]; i++)
            if (name_is(p, n, str_filters[i].name)) return call_fn(x, bound(x, v, str_filters[i].id), &a);
    }
    if (v.t == J_UNDEF || v.t == J_NONE)
        jfail(x, QP_ERR_ARG, "filter '%.*s' applied to %s", (int)n, p, type_name(v.t));
    jfail(x, QP_ERR_UNSUPPORTED, "filter '%.*s' on a %s is outside the supported subset", (int)n, p, type_name(v.t));
}

static bool apply_test(jx *x, jscope *sc, const jn *t, jv v) {
    jargs a;
    eval_args(x, sc, &t->l1, &a);
    const char *p = t->s;
    size_t n = t->sn;
    if (name_is(p, n, "defined")) return v.t != J_UNDEF;
    if (name_is(p, n, "undefined")) return v.t == J_UNDEF;
    if (name_is(p, n, "none")) return v.t == J_NONE;
    if (name_is(p, n, "string")) return v.t == J_STR;
    if (name_is(p, n, "number")) return is_num(v);
    if (name_is(p, n, "integer")) return v.t == J_INT;
    if (name_is(p, n, "float")) return v.t == J_FLOAT;
    if (name_is(p, n, "boolean")) return v.t == J_BOOL;
    if (name_is(p, n, "true")) return v.t == J_BOOL && v.u.b;
    if (name_is(p, n, "false")) return v.t == J_BOOL && !v.u.b;
    if (name_is(p, n, "iterable") || name_is(p, n, "sequence")) return v.t == J_LIST || v.t == J_STR;
    if (name_is(p, n, "mapping")) return v.t == J_DICT || v.t == J_NS;
    if (name_is(p, n, "callable")) return v.t == J_FUNC;
    if (name_is(p, n, "odd") || name_is(p, n, "even")) {
        if (v.t != J_INT) jfail(x, QP_ERR_ARG, "odd/even: not an integer");
        return (v.u.i % 2 != 0) == (p[0] == 'o');
    }
    if (name_is(p, n, "equalto") || name_is(p, n, "eq") || name_is(p, n, "sameas"))
        return strict_eq(v, arg(&a, 0, NULL));
    if (name_is(p, n, "lower") || name_is(p, n, "upper")) {
        if (v.t != J_STR) return false;
        jv c = str_case(x, v, p[0] == 'l' ? 1 : 0);
        return memcmp(c.u.s.p, v.u.s.p, v.u.s.n) == 0;
    }
    jfail(x, QP_ERR_UNSUPPORTED, "test '%.*s' is outside the supported subset", (int)n, p);
}

static jv eval_member(jx *x, jscope *sc, const jn *n) {
    jv obj = eval(x, sc, n->a);
    if (n->b->k == N_SLICE) {
        const jn *s = n->b;
        return slice(x, obj, s->a ? eval(x, sc, s->a) : k_undef, s->b ? eval(x, sc, s->b) : k_undef,
                     s->c ? eval(x, sc, s->c) : k_undef);
    }
    jv key;
    if (n->flag) key = eval(x, sc, n->b);
    else if (n->b->k == N_NAME) key = v_str(n->b->s, n->b->sn);
    else key = n->b->lit;
    return index_value(x, obj, key);
}

static jv eval_call(jx *x, jscope *sc, const jn *n) {
    jv f = eval(x, sc, n->a);
    if (f.t != J_FUNC) {
        if (n->a->k == N_MEMBER && !n->a->flag && n->a->b->k == N_NAME)
            jfail(x, QP_ERR_UNSUPPORTED, "method '%.*s' is outside the supported subset", (int)n->a->b->sn,
                  n->a->b->s);
        if (n->a->k == N_NAME)
            jfail(x, QP_ERR_UNSUPPORTED, "function '%.*s' is outside the supported subset", (int)n->a->sn, n->a->s);
        jfail(x, QP_ERR_ARG, "cannot call a %s", type_name(f.t));
    }
    jargs a;
    eval_args(x, sc, &n->l1, &a);
    return call_fn(x, f, &a);
}

static jv eval_collection(jx *x, jscope *sc, const jn *n) {
    if (n->k != N_DICT) {
        jlist *l = list_new(x, n->l1.n);
        for (size_t i = 0; i < n->l1.n; i++) list_push(x, l, eval(x, sc, n->l1.v[i]));
        return v_list(l);
    }
    jdict *d = dict_new(x);
    for (size_t i = 0; i < n->l1.n; i++) {
        jv k = eval(x, sc, n->l1.v[i]);
        if (k.t != J_STR) jfail(x, QP_ERR_UNSUPPORTED, "object literal keys other than strings");
        dict_set(x, d, k.u.s.p, k.u.s.n, eval(x, sc, n->l2.v[i]));
    }
    return v_dict(d, J_DICT);
}

static jv eval_unary(jx *x, jscope *sc, const jn *n) {
    jv v = eval(x, sc, n->a);
    if (n->op == OP_NOT) return v_bool(!truthy(v));
    if (v.t == J_FLOAT) return v_float(n->op == OP_NEG ? -v.u.f : v.u.f);
    if (v.t == J_INT || v.t == J_BOOL) {
        int64_t i = v.t == J_BOOL ? v.u.b : v.u.i;
        if (n->op == OP_NEG && i == INT64_MIN) return v_float(-(double)i);
        return v_int(n->op == OP_NEG ? -i : i);
    }
    jfail(x, QP_ERR_ARG, "unary %s on a %s", n->op == OP_NEG ? "-" : "+", type_name(v.t));
}

static jv eval(jx *x, jscope *sc, const jn *n) {
    step(x);
    switch (n->k) {
    case N_LIT: return n->lit;
    case N_NAME: {
        jv *v = scope_find(sc, n->s, n->sn);
        return v ? *v : k_undef;
    }
    case N_MEMBER: return eval_member(x, sc, n);
    case N_CALL: return eval_call(x, sc, n);
    case N_FILTER: return apply_filter(x, sc, n, eval(x, sc, n->a));
    case N_TEST: return v_bool(apply_test(x, sc, n, eval(x, sc, n->a)) != n->flag);
    case N_UNARY: return eval_unary(x, sc, n);
    case N_BIN: {
        jv a = eval(x, sc, n->a);
        return binary(x, n->op, a, eval(x, sc, n->b));
    }
    case N_AND: {
        jv a = eval(x, sc, n->a);
        return truthy(a) ? eval(x, sc, n->b) : a;
    }
    case N_OR: {
        jv a = eval(x, sc, n->a);
        return truthy(a) ? a : eval(x, sc, n->b);
    }
    case N_TERNARY: return truthy(eval(x, sc, n->a)) ? eval(x, sc, n->b) : eval(x, sc, n->c);
    case N_SELECT: return truthy(eval(x, sc, n->a)) ? eval(x, sc, n->b) : k_undef;
    case N_LIST: case N_TUPLE: case N_DICT: return eval_collection(x, sc, n);
    case N_SLICE: jfail(x, QP_ERR_FORMAT, "a slice outside [ ]");
    default: jfail(x, QP_ERR_FORMAT, "a statement where an expression belongs");
    }
}

static jscope *scope_new(jx *x, jscope *parent) {
    jscope *s = jalloc(x, sizeof *s);
    s->parent = parent;
    return s;
}

static void assign(jx *x, jscope *sc, const jn *target, jv v) {
    if (target->k == N_NAME) {
        dict_set(x, &sc->vars, target->s, target->sn, v);
    } else if (target->k == N_TUPLE) {
        if (v.t != J_LIST) jfail(x, QP_ERR_ARG, "cannot unpack a %s", type_name(v.t));
        if (v.u.l->n != target->l1.n) jfail(x, QP_ERR_ARG, "unpacking %zu values into %zu names", v.u.l->n, target->l1.n);
        for (size_t i = 0; i < target->l1.n; i++) {
            if (target->l1.v[i]->k != N_NAME) jfail(x, QP_ERR_FORMAT, "can only unpack into names");
            dict_set(x, &sc->vars, target->l1.v[i]->s, target->l1.v[i]->sn, v.u.l->v[i]);
        }
    } else if (target->k == N_MEMBER && !target->flag && target->b->k == N_NAME) {
        jv obj = eval(x, sc, target->a);
        if (obj.t != J_NS) jfail(x, QP_ERR_ARG, "cannot assign an attribute of a %s (only of a namespace)", type_name(obj.t));
        dict_set(x, obj.u.d, target->b->s, target->b->sn, v);
    } else {
        jfail(x, QP_ERR_FORMAT, "invalid assignment target");
    }
}

static void exec_set(jx *x, jscope *sc, const jn *n) {
    jv v;
    if (n->b) {
        v = eval(x, sc, n->b);
    } else {
        qp_buf *b = tbuf_open(x);
        exec_body(x, sc, &n->l1, b);
        v = tbuf_close(x, b);
    }
    assign(x, sc, n->a, v);
}

static jv loop_object(jx *x, const jlist *items, size_t i) {
    size_t n = items->n;
    jdict *d = dict_new(x);
    dict_set(x, d, "index", 5, v_int((int64_t)i + 1));
    dict_set(x, d, "index0", 6, v_int((int64_t)i));
    dict_set(x, d, "revindex", 8, v_int((int64_t)(n - i)));
    dict_set(x, d, "revindex0", 9, v_int((int64_t)(n - i - 1)));
    dict_set(x, d, "first", 5, v_bool(i == 0));
    dict_set(x, d, "last", 4, v_bool(i == n - 1));
    dict_set(x, d, "length", 6, v_int((int64_t)n));
    dict_set(x, d, "previtem", 8, i > 0 ? items->v[i - 1] : k_undef);
    dict_set(x, d, "nextitem", 8, i + 1 < n ? items->v[i + 1] : k_undef);
    return v_dict(d, J_DICT);
}

static void exec_for(jx *x, jscope *sc, const jn *n, qp_buf *out) {
    jscope *ls = scope_new(x, sc);
    jv it = eval(x, ls, n->b);
    if (it.t == J_DICT) it = dict_list(x, it.u.d, 0);
    if (it.t != J_LIST) jfail(x, QP_ERR_ARG, "for: cannot iterate over a %s", type_name(it.t));
    jlist *items = it.u.l;
    if (n->c) { /* for x in xs if cond: keep the items whose condition holds */
        jlist *kept = list_new(x, items->n);
        for (size_t i = 0; i < items->n; i++) {
            jscope *ts = scope_new(x, ls);
            assign(x, ts, n->a, items->v[i]);
            if (truthy(eval(x, ts, n->c))) list_push(x, kept, items->v[i]);
        }
        items = kept;
    }
    bool ran = false;
    for (size_t i = 0; i < items->n; i++) {
        step(x);
        dict_set(x, &ls->vars, "loop", 4, loop_object(x, items, i));
        assign(x, ls, n->a, items->v[i]);
        exec_body(x, ls, &n->l1, out);
        int ctl = x->loop_ctl;
        x->loop_ctl = 0;
        if (ctl == 1) break;
        if (ctl != 2) ran = true;
    }
    if (!ran && items->n == 0) exec_body(x, ls, &n->l2, out);
}

static void exec_one(jx *x, jscope *sc, const jn *n, qp_buf *out) {
    step(x);
    enter(x);
    switch (n->k) {
    case N_TEXT: emit(x, out, n->s, n->sn); break;
    case N_NOP: break;
    case N_OUT: {
        jv v = eval(x, sc, n->a);
        if (v.t != J_UNDEF && v.t != J_NONE) {
            v = to_str(x, v);
            emit(x, out, v.u.s.p, v.u.s.n);
        }
        break;
    }
    case N_IF: exec_body(x, sc, truthy(eval(x, sc, n->a)) ? &n->l1 : &n->l2, out); break;
    case N_FOR: exec_for(x, sc, n, out); break;
    case N_SET: exec_set(x, sc, n); break;
    case N_BREAK: x->loop_ctl = 1; break;
    case N_CONTINUE: x->loop_ctl = 2; break;
    default: jfail(x, QP_ERR_INTERNAL, "bad statement node");
    }
    leave(x);
}

static void exec_body(jx *x, jscope *sc, const jnlist *body, qp_buf *out) {
    for (size_t i = 0; i < body->n && x->loop_ctl == 0; i++) exec_one(x, sc, body->v[i], out);
}

/* ---- variables from JSON, and the entry point ------------------------------------------------- */

static jv from_json(jx *x, const cJSON *j, int depth) {
    if (depth > x->lim.max_depth) jfail(x, QP_ERR_LIMIT, "variables nested deeper than %d", x->lim.max_depth);
    step(x);
    if (cJSON_IsNull(j)) return (jv){.t = J_NONE};
    if (cJSON_IsBool(j)) return v_bool(cJSON_IsTrue(j));
    if (cJSON_IsString(j)) return v_cstr(j->valuestring);
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (d == floor(d) && fabs(d) < 9007199254740992.0) return v_int((int64_t)d);
        return v_float(d);
    }
    if (cJSON_IsArray(j)) {
        jlist *l = list_new(x, 4);
        for (const cJSON *c = j->child; c; c = c->next) list_push(x, l, from_json(x, c, depth + 1));
        return v_list(l);
    }
    if (cJSON_IsObject(j)) {
        jdict *d = dict_new(x);
        for (const cJSON *c = j->child; c; c = c->next)
            if (c->string) dict_set(x, d, c->string, strlen(c->string), from_json(x, c, depth + 1));
        return v_dict(d, J_DICT);
    }
    return k_undef;
}

static jv fn_value(jfn id) {
    jv f = {.t = J_FUNC};
    f.u.fn.id = id;
    return f;
}

static jscope *globals(jx *x, const cJSON *vars) {
    jscope *g = scope_new(x, NULL);
    static const struct { const char *name; jfn id; } fns[] = {
        {"namespace", F_NAMESPACE}, {"raise_exception", F_RAISE}, {"range", F_RANGE},
        {"strftime_now", F_STRFTIME},
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        dict_set(x, &g->vars, fns[i].name, strlen(fns[i].name), fn_value(fns[i].id));
    const char *consts[] = {"true", "false", "none", "True", "False", "None"};
    for (int i = 0; i < 6; i++)
        dict_set(x, &g->vars, consts[i], strlen(consts[i]),
                 i % 3 == 2 ? (jv){.t = J_NONE} : v_bool(i % 3 == 0));
    jscope *user = scope_new(x, g);
    for (const cJSON *c = vars ? vars->child : NULL; c; c = c->next)
        if (c->string) dict_set(x, &user->vars, c->string, strlen(c->string), from_json(x, c, 0));
    return user;
}

qp_jinja_limits qp_jinja_default_limits(void) {
    return (qp_jinja_limits){
        .max_template_bytes = (size_t)1 << 20,
        .max_depth = 64,
        .max_steps = 10u * 1000u * 1000u,
        .max_memory_bytes = (size_t)64 << 20,
        .max_output_bytes = (size_t)16 << 20,
    };
}

static void render(jx *x, const char *tmpl, size_t len, const cJSON *vars, qp_buf *out) {
    if (len > x->lim.max_template_bytes)
        jfail(x, QP_ERR_LIMIT, "template of %zu bytes (limit %zu)", len, x->lim.max_template_bytes);
    if (memchr(tmpl, '\0', len)) jfail(x, QP_ERR_FORMAT, "a NUL byte in the template");
    lexer L = {.x = x};
    L.src = preprocess(x, tmpl, len, &L.n);
    L.n = strip_generation_tags((char *)L.src, L.n);
    lex(&L);
    parser P = {.x = x, .t = L.toks};
    jnlist prog = {0};
    while (!is(&P, T_EOF)) nl_push(x, &prog, parse_any(&P));
    jscope *sc = globals(x, vars);
    exec_body(x, sc, &prog, out);
}

qp_status qp_jinja_render(const char *tmpl, size_t tmpl_len, const cJSON *vars, const qp_jinja_limits *lim,
                          char **out, size_t *out_len, qp_err *e) {
    if (!tmpl || !out) return qp_fail(e, QP_ERR_ARG, "qp_jinja_render: NULL argument");
    jx *x = qp_calloc(1, sizeof *x);
    if (!x) return qp_fail(e, QP_ERR_NOMEM, "chat template: out of memory");
    x->lim = lim ? *lim : qp_jinja_default_limits();
    x->e = e;
    qp_buf *buf = qp_calloc(1, sizeof *buf);
    qp_status s = buf ? QP_OK : qp_fail(e, QP_ERR_NOMEM, "chat template: out of memory");
    if (s == QP_OK && setjmp(x->fail) == 0) {
        render(x, tmpl, tmpl_len, vars, buf);
        if (buf->oom) jfail(x, QP_ERR_NOMEM, "out of memory");
        s = QP_OK;
    } else if (s == QP_OK) {
        s = x->st;
    }
    if (s == QP_OK) {
        size_t n = 0;
        uint8_t *p = buf->p ? qp_buf_take(buf, &n) : (uint8_t *)qp_strdup("");
        if (!p) s = qp_fail(e, QP_ERR_NOMEM, "chat template: out of memory");
        else {
            *out = (char *)p;
            if (out_len) *out_len = n;
        }
    }
    if (buf) qp_buf_free(buf);
    qp_free(buf);
    while (x->ntmp > 0) { /* scratch buffers a failure left open */
        qp_buf_free(x->tmp[--x->ntmp]);
        qp_free(x->tmp[x->ntmp]);
    }
    qp_arena_free(&x->arena);
    qp_free(x);
    return s;
}
