#include <string.h>

#include "quantpack/core.h"

struct qp_arena_chunk {
    qp_arena_chunk *next;
    size_t cap, used;
    _Alignas(16) unsigned char data[];
};

#define QP_ARENA_CHUNK (64u * 1024u)

void *qp_arena_alloc(qp_arena *a, size_t n) {
    size_t need;
    if (!qp_size_align(n ? n : 1, 16, &need)) return NULL;
    qp_arena_chunk *c = a->head;
    if (!c || c->cap - c->used < need) {
        size_t cap = need > QP_ARENA_CHUNK ? need : QP_ARENA_CHUNK, total;
        if (!qp_size_add(cap, sizeof(qp_arena_chunk), &total)) return NULL;
        c = qp_malloc(total);
        if (!c) return NULL;
        c->cap = cap;
        c->used = 0;
        if (a->head && need > QP_ARENA_CHUNK) {
            /* a big one-off: keep the current chunk in front for small allocations */
            c->next = a->head->next;
            a->head->next = c;
        } else {
            c->next = a->head;
            a->head = c;
        }
    }
    void *p = c->data + c->used;
    c->used += need;
    memset(p, 0, n);
    return p;
}

char *qp_arena_strndup(qp_arena *a, const char *s, size_t n) {
    size_t total;
    if (!qp_size_add(n, 1, &total)) return NULL;
    char *d = qp_arena_alloc(a, total);
    if (!d) return NULL;
    if (n) memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *qp_arena_strdup(qp_arena *a, const char *s) { return qp_arena_strndup(a, s, strlen(s)); }

void qp_arena_free(qp_arena *a) {
    qp_arena_chunk *c = a->head;
    while (c) {
        qp_arena_chunk *n = c->next;
        qp_free(c);
        c = n;
    }
    a->head = NULL;
}
