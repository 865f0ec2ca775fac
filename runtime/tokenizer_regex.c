/* The pre-tokenizer regex engine (tokenizer_regex.h): a recursive-descent parser builds a small
 * syntax tree, which is emitted as a backtracking program (char / class / split / jump / assert /
 * lookahead / match); the matcher keeps its alternatives on an explicit stack, so the first match
 * found is the ECMAScript one (std::regex's, which llama.cpp runs). Supported syntax: literals
 * (UTF-8), escapes \r \n \t \f \v \\ and escaped punctuation, classes [...] / [^...] with ranges,
 * \s \S \d \D \w \W \p{L N P S M Lu Ll Lt Lm Lo} inside and outside classes, ., ^, $, \b, \B,
 * (...), (?:...), (?=...), (?!...), | and the greedy quantifiers ? * + {n} {n,} {n,m}. */
#include "runtime/tokenizer_regex.h"

#include <string.h>

#include "runtime/unicode.h"

enum { NODE_EMPTY, NODE_CHAR, NODE_CLASS, NODE_ANY, NODE_CAT, NODE_ALT, NODE_REP, NODE_LOOK, NODE_ASSERT };
enum { ASSERT_BOL, ASSERT_EOL, ASSERT_WORDB, ASSERT_NWORDB };
enum { OP_CHAR, OP_CLASS, OP_ANY, OP_SPLIT, OP_JMP, OP_MATCH, OP_ASSERT, OP_LOOK };
enum { ITEM_RANGE, ITEM_CAT, ITEM_SPACE, ITEM_NSPACE, ITEM_DIGIT, ITEM_NDIGIT, ITEM_WORD, ITEM_NWORD };

#define REGEX_MAX_INST 65536 /* far above the largest table pattern (jais-2: ~2,000) */
#define REGEX_MAX_DEPTH 32   /* parser nesting and lookahead recursion */

typedef struct re_node {
    int type, a, b; /* CHAR: a = code point; CLASS: a = class; REP: a = min, b = max (-1: none);
                       LOOK: a = negated; ASSERT: a = kind */
    int kid, next;  /* first child, next sibling (-1: none) */
} re_node;

typedef struct re_item {
    uint8_t kind;
    uint32_t lo, hi; /* RANGE: code points; CAT: lo = category mask */
} re_item;

typedef struct re_class {
    bool negated;
    int first, n; /* items[first .. first + n) */
} re_class;

typedef struct re_inst {
    uint8_t op;
    int32_t x, y; /* CHAR: x = code point; CLASS: x = class; SPLIT: x preferred, y other; JMP: x;
                     ASSERT: x = kind; LOOK: x = negated, y = pc after the sub-program */
} re_inst;

struct qp_tok_regex {
    re_inst *prog;
    int n_prog;
    re_class *classes;
    int n_classes;
    re_item *items;
    int n_items;
};

/* ---- growable arrays -------------------------------------------------------------------------- */

static bool grow(void **p, int *cap, int need, size_t elem) {
    if (need <= *cap) return true;
    int nc = *cap ? *cap * 2 : 32;
    while (nc < need) nc *= 2;
    void *q = qp_realloc(*p, (size_t)nc * elem);
    if (!q) return false;
    *p = q;
    *cap = nc;
    return true;
}

/* ---- parser --------------------------------------------------------------------------------- */

typedef struct re_parser {
    const char *s;
    size_t i, len;
    re_node *nodes;
    int n_nodes, cap_nodes, cap_classes, cap_items, depth;
    qp_tok_regex *re;
    const char *error; /* first error, static text */
} re_parser;

static int new_node(re_parser *p, int type, int a, int b) {
    if (!grow((void **)&p->nodes, &p->cap_nodes, p->n_nodes + 1, sizeof *p->nodes)) {
        p->error = "out of memory";
        return -1;
    }
    p->nodes[p->n_nodes] = (re_node){type, a, b, -1, -1};
    return p->n_nodes++;
}

static void append_kid(re_parser *p, int parent, int *last, int kid) {
    if (*last < 0) p->nodes[parent].kid = kid;
    else p->nodes[*last].next = kid;
    *last = kid;
}

static uint32_t next_cp(re_parser *p) {
    uint32_t c = (uint8_t)p->s[p->i];
    if (c < 0x80) {
        p->i++;
        return c;
    }
    size_t bad = 1, k = qp_utf8_decode((const uint8_t *)p->s + p->i, p->len - p->i, &c, &bad);
    if (!k) {
        p->error = "invalid UTF-8";
        p->i += bad;
        return 0;
    }
    p->i += k;
    return c;
}

static int add_item(re_parser *p, uint8_t kind, uint32_t lo, uint32_t hi) {
    qp_tok_regex *re = p->re;
    if (!grow((void **)&re->items, &p->cap_items, re->n_items + 1, sizeof *re->items)) {
        p->error = "out of memory";
        return -1;
    }
    re->items[re->n_items++] = (re_item){kind, lo, hi};
    return 0;
}

/* \p{...} after the "\p": the category mask, or 0 for a name it does not know. */
static unsigned parse_category(re_parser *p) {
    static const struct {
        const char *name;
        unsigned mask;
    } cats[] = {{"L", QP_UC_L}, {"N", QP_UC_N}, {"P", QP_UC_P}, {"S", QP_UC_S}, {"M", QP_UC_M},
                {"Lu", QP_UC_L}, {"Ll", QP_UC_L}, {"Lt", QP_UC_L}, {"Lm", QP_UC_L}, {"Lo", QP_UC_L}};
    if (p->i >= p->len || p->s[p->i] != '{') return 0;
    const char *close = memchr(p->s + p->i, '}', p->len - p->i);
    if (!close) return 0;
    size_t n = (size_t)(close - (p->s + p->i + 1));
    for (size_t k = 0; k < sizeof cats / sizeof cats[0]; k++) {
        if (strlen(cats[k].name) == n && memcmp(cats[k].name, p->s + p->i + 1, n) == 0) {
            p->i += n + 2;
            return cats[k].mask;
        }
    }
    return 0;
}

/* After a backslash: a set escape (\s \d \w \p{}) as an item kind (mask in *cat), or a literal
 * code point in *lit (returns -1 then). */
static int parse_escape(re_parser *p, unsigned *cat, uint32_t *lit) {
    if (p->i >= p->len) {
        p->error = "trailing backslash";
        return -1;
    }
    char c = p->s[p->i++];
    switch (c) {
    case 's': return ITEM_SPACE;
    case 'S': return ITEM_NSPACE;
    case 'd': return ITEM_DIGIT;
    case 'D': return ITEM_NDIGIT;
    case 'w': return ITEM_WORD;
    case 'W': return ITEM_NWORD;
    case 'p':
        *cat = parse_category(p);
        if (!*cat) p->error = "unknown \\p{...} category";
        return ITEM_CAT;
    case 'r': *lit = '\r'; return -1;
    case 'n': *lit = '\n'; return -1;
    case 't': *lit = '\t'; return -1;
    case 'f': *lit = '\f'; return -1;
    case 'v': *lit = '\v'; return -1;
    default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
            p->error = "unknown escape";
            return -1;
        }
        p->i--;
        *lit = next_cp(p);
        return -1;
    }
}

static int parse_class(re_parser *p) {
    qp_tok_regex *re = p->re;
    if (!grow((void **)&re->classes, &p->cap_classes, re->n_classes + 1, sizeof *re->classes)) {
        p->error = "out of memory";
        return -1;
    }
    re_class cl = {false, re->n_items, 0};
    if (p->i < p->len && p->s[p->i] == '^') {
        cl.negated = true;
        p->i++;
    }
    while (!p->error && p->i < p->len && p->s[p->i] != ']') {
        unsigned cat = 0;
        uint32_t lo = 0;
        int kind = -1;
        if (p->s[p->i] == '\\') {
            p->i++;
            kind = parse_escape(p, &cat, &lo);
        } else {
            lo = next_cp(p);
        }
        if (kind >= 0) {
            add_item(p, (uint8_t)kind, cat, 0);
            continue;
        }
        uint32_t hi = lo;
        if (p->i + 1 < p->len && p->s[p->i] == '-' && p->s[p->i + 1] != ']') {
            p->i++;
            if (p->s[p->i] == '\\') {
                p->i++;
                if (parse_escape(p, &cat, &hi) >= 0) p->error = "class range ends in a set";
            } else {
                hi = next_cp(p);
            }
        }
        if (hi < lo) p->error = "class range out of order";
        add_item(p, ITEM_RANGE, lo, hi);
    }
    if (p->i >= p->len) p->error = "unterminated class";
    p->i++;
    cl.n = re->n_items - cl.first;
    re->classes[re->n_classes] = cl;
    return new_node(p, NODE_CLASS, re->n_classes++, 0);
}

static int parse_alt(re_parser *p);

static int parse_group(re_parser *p) {
    int look = -1; /* -1: plain group, 0: (?=, 1: (?! */
    if (p->i + 1 < p->len && p->s[p->i] == '?') {
        char k = p->s[p->i + 1];
        if (k == '=' || k == '!') look = k == '!';
        else if (k != ':') p->error = "unsupported group";
        p->i += 2;
    }
    int inner = parse_alt(p);
    if (p->i >= p->len || p->s[p->i] != ')') p->error = "missing )";
    p->i++;
    if (look < 0 || inner < 0) return inner;
    int n = new_node(p, NODE_LOOK, look, 0);
    if (n >= 0) p->nodes[n].kid = inner;
    return n;
}

static int parse_atom(re_parser *p) {
    char c = p->s[p->i++];
    switch (c) {
    case '(': return parse_group(p);
    case '[': return parse_class(p);
    case '.': return new_node(p, NODE_ANY, 0, 0);
    case '^': return new_node(p, NODE_ASSERT, ASSERT_BOL, 0);
    case '$': return new_node(p, NODE_ASSERT, ASSERT_EOL, 0);
    case '*': case '+': case '?': case '{': case ')':
        p->error = "misplaced operator";
        return -1;
    case '\\': {
        if (p->i < p->len && (p->s[p->i] == 'b' || p->s[p->i] == 'B'))
            return new_node(p, NODE_ASSERT, p->s[p->i++] == 'b' ? ASSERT_WORDB : ASSERT_NWORDB, 0);
        unsigned cat = 0;
        uint32_t lit = 0;
        int kind = parse_escape(p, &cat, &lit);
        if (kind < 0) return new_node(p, NODE_CHAR, (int)lit, 0);
        /* a set escape outside brackets is a one-item class */
        qp_tok_regex *re = p->re;
        if (!grow((void **)&re->classes, &p->cap_classes, re->n_classes + 1, sizeof *re->classes)) {
            p->error = "out of memory";
            return -1;
        }
        re->classes[re->n_classes] = (re_class){false, re->n_items, 1};
        add_item(p, (uint8_t)kind, cat, 0);
        return new_node(p, NODE_CLASS, re->n_classes++, 0);
    }
    default:
        p->i--;
        return new_node(p, NODE_CHAR, (int)next_cp(p), 0);
    }
}

static int parse_number(re_parser *p) {
    int v = -1;
    while (p->i < p->len && p->s[p->i] >= '0' && p->s[p->i] <= '9' && v < 100000)
        v = (v < 0 ? 0 : v * 10) + (p->s[p->i++] - '0');
    return v;
}

/* An atom and its quantifiers. */
static int parse_repeat(re_parser *p) {
    int atom = parse_atom(p);
    while (atom >= 0 && !p->error && p->i < p->len) {
        char c = p->s[p->i];
        int lo, hi;
        if (c == '*') lo = 0, hi = -1;
        else if (c == '+') lo = 1, hi = -1;
        else if (c == '?') lo = 0, hi = 1;
        else if (c == '{') {
            p->i++;
            lo = parse_number(p);
            hi = lo;
            if (p->i < p->len && p->s[p->i] == ',') {
                p->i++;
                hi = parse_number(p);
            }
            if (lo < 0 || (hi >= 0 && hi < lo) || p->i >= p->len || p->s[p->i] != '}') {
                p->error = "bad {n,m}";
                return -1;
            }
        } else break;
        p->i++;
        if (p->i < p->len && (p->s[p->i] == '?' || p->s[p->i] == '+')) {
            p->error = "lazy and possessive quantifiers are not supported";
            return -1;
        }
        int rep = new_node(p, NODE_REP, lo, hi);
        if (rep >= 0) p->nodes[rep].kid = atom;
        atom = rep;
    }
    return atom;
}

static int parse_cat(re_parser *p) {
    int cat = new_node(p, NODE_CAT, 0, 0), last = -1;
    while (cat >= 0 && !p->error && p->i < p->len && p->s[p->i] != '|' && p->s[p->i] != ')') {
        int kid = parse_repeat(p);
        if (kid < 0) return -1;
        append_kid(p, cat, &last, kid);
    }
    return cat;
}

static int parse_alt(re_parser *p) {
    if (++p->depth > REGEX_MAX_DEPTH) {
        p->error = "nested too deeply";
        return -1;
    }
    int alt = new_node(p, NODE_ALT, 0, 0), last = -1;
    for (;;) {
        int kid = parse_cat(p);
        if (kid < 0 || alt < 0) return -1;
        append_kid(p, alt, &last, kid);
        if (p->i >= p->len || p->s[p->i] != '|') break;
        p->i++;
    }
    p->depth--;
    return alt;
}

/* ---- code generation -------------------------------------------------------------------------- */

typedef struct re_emitter {
    const re_node *nodes;
    qp_tok_regex *re;
    int cap;
    bool failed;
} re_emitter;

static int emit(re_emitter *m, uint8_t op, int32_t x, int32_t y) {
    qp_tok_regex *re = m->re;
    if (m->failed || re->n_prog >= REGEX_MAX_INST ||
        !grow((void **)&re->prog, &m->cap, re->n_prog + 1, sizeof *re->prog)) {
        m->failed = true;
        return 0;
    }
    re->prog[re->n_prog] = (re_inst){op, x, y};
    return re->n_prog++;
}

static void emit_node(re_emitter *m, int n);

/* x{min,max}: min copies, then either a loop (no max) or max-min optional copies. */
static void emit_repeat(re_emitter *m, const re_node *nd) {
    for (int k = 0; k < nd->a; k++) emit_node(m, nd->kid);
    if (nd->b < 0) {
        int split = emit(m, OP_SPLIT, 0, 0);
        emit_node(m, nd->kid);
        emit(m, OP_JMP, split, 0);
        if (!m->failed) m->re->prog[split] = (re_inst){OP_SPLIT, split + 1, m->re->n_prog};
        return;
    }
    int n_opt = nd->b - nd->a, splits[64], k;
    if (n_opt > 64) {
        m->failed = true;
        return;
    }
    for (k = 0; k < n_opt; k++) {
        splits[k] = emit(m, OP_SPLIT, 0, 0);
        emit_node(m, nd->kid);
    }
    for (k = 0; k < n_opt && !m->failed; k++)
        m->re->prog[splits[k]] = (re_inst){OP_SPLIT, splits[k] + 1, m->re->n_prog};
}

static void emit_alt(re_emitter *m, const re_node *nd) {
    int jumps[64], n_jumps = 0;
    for (int kid = nd->kid; kid >= 0 && !m->failed; kid = m->nodes[kid].next) {
        if (m->nodes[kid].next < 0) {
            emit_node(m, kid);
            break;
        }
        int split = emit(m, OP_SPLIT, 0, 0);
        emit_node(m, kid);
        if (n_jumps == 64) {
            m->failed = true;
            return;
        }
        jumps[n_jumps++] = emit(m, OP_JMP, 0, 0);
        if (!m->failed) m->re->prog[split] = (re_inst){OP_SPLIT, split + 1, m->re->n_prog};
    }
    for (int k = 0; k < n_jumps && !m->failed; k++) m->re->prog[jumps[k]].x = m->re->n_prog;
}

static void emit_node(re_emitter *m, int n) {
    const re_node *nd = &m->nodes[n];
    switch (nd->type) {
    case NODE_CHAR: emit(m, OP_CHAR, nd->a, 0); break;
    case NODE_CLASS: emit(m, OP_CLASS, nd->a, 0); break;
    case NODE_ANY: emit(m, OP_ANY, 0, 0); break;
    case NODE_ASSERT: emit(m, OP_ASSERT, nd->a, 0); break;
    case NODE_CAT:
        for (int kid = nd->kid; kid >= 0; kid = m->nodes[kid].next) emit_node(m, kid);
        break;
    case NODE_ALT: emit_alt(m, nd); break;
    case NODE_REP: emit_repeat(m, nd); break;
    case NODE_LOOK: {
        int look = emit(m, OP_LOOK, nd->a, 0);
        emit_node(m, nd->kid);
        emit(m, OP_MATCH, 0, 0);
        if (!m->failed) m->re->prog[look].y = m->re->n_prog;
        break;
    }
    default: break;
    }
}

void qp_tok_regex_free(qp_tok_regex *re) {
    if (!re) return;
    qp_free(re->prog);
    qp_free(re->classes);
    qp_free(re->items);
    qp_free(re);
}

qp_status qp_tok_regex_compile(const char *pattern, qp_tok_regex **out, qp_err *e) {
    qp_tok_regex *re = qp_calloc(1, sizeof *re);
    if (!re) return qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory (regex)");
    re_parser p = {.s = pattern, .len = strlen(pattern), .re = re};
    int root = parse_alt(&p);
    if (!p.error && p.i < p.len) p.error = "unbalanced )";
    re_emitter m = {.nodes = p.nodes, .re = re};
    if (!p.error && root >= 0) {
        emit_node(&m, root);
        emit(&m, OP_MATCH, 0, 0);
    }
    qp_free(p.nodes);
    if (p.error || root < 0 || m.failed) {
        qp_tok_regex_free(re);
        if (m.failed) return qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory (regex program)");
        return qp_fail(e, QP_ERR_CORRUPT, "tokenizer: pre-tokenizer regex '%.60s': %s at offset %zu",
                       pattern, p.error ? p.error : "syntax error", p.i);
    }
    *out = re;
    return QP_OK;
}

/* ---- matching --------------------------------------------------------------------------------- */

/* llama.cpp's collapsed categories: ASCII by its explicit lists (Unicode's, except that '~' is in
 * no category), other code points by their category unless they are whitespace. */
static bool in_category(uint32_t c, unsigned fl, unsigned mask) {
    if (c < 0x80) return c != '~' && (fl & mask);
    return !(fl & QP_UC_WS) && (fl & mask);
}

static bool is_word(uint32_t c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

/* Literal comparisons see non-ASCII whitespace as U+000B, as llama.cpp's matcher text does. */
static uint32_t literal_cp(const qp_tok_regex_text *t, size_t i) {
    uint32_t c = t->cp[i];
    return c >= 0x80 && (t->fl[i] & QP_UC_WS) ? 0x0B : c;
}

static bool item_matches(const re_item *it, uint32_t lit, uint32_t c, unsigned fl) {
    switch (it->kind) {
    case ITEM_RANGE: return lit >= it->lo && lit <= it->hi;
    case ITEM_CAT: return in_category(c, fl, it->lo);
    case ITEM_SPACE: return fl & QP_UC_WS;
    case ITEM_NSPACE: return !(fl & QP_UC_WS);
    case ITEM_DIGIT: return c >= '0' && c <= '9';
    case ITEM_NDIGIT: return !(c >= '0' && c <= '9');
    case ITEM_WORD: return is_word(c);
    default: return !is_word(c);
    }
}

static bool class_matches(const qp_tok_regex *re, int cls, const qp_tok_regex_text *t, size_t i) {
    const re_class *cl = &re->classes[cls];
    uint32_t lit = literal_cp(t, i);
    bool in = false;
    for (int k = 0; k < cl->n && !in; k++) in = item_matches(&re->items[cl->first + k], lit, t->cp[i], t->fl[i]);
    return in != cl->negated;
}

static bool assert_holds(int kind, const qp_tok_regex_text *t, size_t sp) {
    switch (kind) {
    case ASSERT_BOL: return sp == 0;
    case ASSERT_EOL: return sp == t->n;
    default: {
        bool before = sp > 0 && is_word(t->cp[sp - 1]), after = sp < t->n && is_word(t->cp[sp]);
        return (before != after) == (kind == ASSERT_WORDB);
    }
    }
}

typedef struct re_thread {
    int32_t pc;
    size_t sp;
} re_thread;

typedef struct re_stack {
    re_thread *a;
    int n, cap;
} re_stack;

static bool step_one(const qp_tok_regex *re, qp_tok_regex_text *t, const re_inst *in, size_t *sp) {
    switch (in->op) {
    case OP_CHAR:
        if (*sp >= t->n || literal_cp(t, *sp) != (uint32_t)in->x) return false;
        (*sp)++;
        return true;
    case OP_CLASS:
        if (*sp >= t->n || !class_matches(re, in->x, t, *sp)) return false;
        (*sp)++;
        return true;
    case OP_ANY:
        if (*sp >= t->n || t->cp[*sp] == '\n' || t->cp[*sp] == '\r' || t->cp[*sp] == 0x2028 ||
            t->cp[*sp] == 0x2029)
            return false;
        (*sp)++;
        return true;
    default: return assert_holds(in->x, t, *sp);
    }
}

/* Runs the program from pc at sp; *end = match end or -1. Threads above `base` are this run's. */
static qp_status run(const qp_tok_regex *re, qp_tok_regex_text *t, re_stack *st, int32_t pc, size_t sp,
                     size_t start, bool not_null, int depth, int64_t *end, qp_err *e) {
    int base = st->n;
    for (;;) {
        if (t->steps_left == 0) {
            st->n = base;
            return qp_fail(e, QP_ERR_LIMIT, "tokenizer: pre-tokenizer regex over its backtracking "
                                             "budget on a %zu-character piece", t->n);
        }
        t->steps_left--;
        const re_inst *in = &re->prog[pc];
        bool ok = true;
        switch (in->op) {
        case OP_SPLIT:
            if (!grow((void **)&st->a, &st->cap, st->n + 1, sizeof *st->a)) {
                st->n = base;
                return qp_fail(e, QP_ERR_NOMEM, "tokenizer: out of memory (regex stack)");
            }
            st->a[st->n++] = (re_thread){in->y, sp};
            pc = in->x;
            continue;
        case OP_JMP: pc = in->x; continue;
        case OP_MATCH:
            if (!(not_null && sp == start)) {
                st->n = base;
                *end = (int64_t)sp;
                return QP_OK;
            }
            ok = false;
            break;
        case OP_LOOK: {
            if (depth >= REGEX_MAX_DEPTH) return qp_fail(e, QP_ERR_LIMIT, "tokenizer: regex lookahead too deep");
            int64_t sub;
            qp_status s = run(re, t, st, pc + 1, sp, sp, false, depth + 1, &sub, e);
            if (s != QP_OK) {
                st->n = base;
                return s;
            }
            ok = (sub >= 0) != (in->x != 0);
            if (ok) {
                pc = in->y;
                continue;
            }
            break;
        }
        default: ok = step_one(re, t, in, &sp); break;
        }
        if (ok) {
            pc++;
            continue;
        }
        if (st->n == base) {
            *end = -1;
            return QP_OK;
        }
        re_thread th = st->a[--st->n];
        pc = th.pc;
        sp = th.sp;
    }
}

qp_status qp_tok_regex_match_at(const qp_tok_regex *re, qp_tok_regex_text *t, size_t at, bool not_null,
                                int64_t *len, qp_err *e) {
    re_stack st = {t->scratch->stack, 0, t->scratch->cap};
    int64_t end = -1;
    qp_status s = run(re, t, &st, 0, at, at, not_null, 0, &end, e);
    t->scratch->stack = st.a;
    t->scratch->cap = st.cap;
    if (s == QP_OK) *len = end < 0 ? -1 : end - (int64_t)at;
    return s;
}
