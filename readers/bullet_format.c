/* .bullet format helpers shared by the reader and the writer: task names, FNV-1a 64, the
 * bullet-core <-> canonical name map (readers/bullet.md). */
#include <stdio.h>
#include <string.h>

#include "readers/bullet_format.h"

const char *const qp_bullet_tasks[QP_BULLET_N_TASKS] = {"gen", "ner", "pos", "sentiment",
                                                        "classifier"};

int qp_bullet_task_index(const char *name) {
    if (!name) return -1;
    if (strcmp(name, "cls") == 0) return 4;
    for (int i = 0; i < QP_BULLET_N_TASKS; i++)
        if (strcmp(name, qp_bullet_tasks[i]) == 0) return i;
    return -1;
}

const char *qp_bullet_skip_rule(const char *name) {
    size_t n = strlen(name);
    if (n > 5 && strcmp(name + n - 5, ".bias") == 0)
        return "a .bullet bias: bullet-core's runtime never reads it";
    if (strcmp(name, "output_head.weight") == 0)
        return "a .bullet output_head beside gen_head: bullet-core's runtime reads gen_head";
    for (int i = 1; i < QP_BULLET_N_TASKS; i++) { /* 0 is gen, the output */
        size_t k = strlen(qp_bullet_tasks[i]);
        if (strncmp(name, qp_bullet_tasks[i], k) == 0 && strcmp(name + k, "_head.weight") == 0)
            return "a .bullet task head: only the generative model is converted (bullet-pack "
                   "--heads TASK --head-weights FILE puts it back)";
    }
    return NULL;
}

uint64_t qp_bullet_fnv1a64_update(uint64_t h, const void *data, size_t n) {
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

uint64_t qp_bullet_fnv1a64(const void *data, size_t n) {
    return qp_bullet_fnv1a64_update(0xcbf29ce484222325ULL, data, n);
}

/* ---- names ------------------------------------------------------------------------------- */

static const struct {
    const char *bullet, *canon;
} k_layer_names[] = {
    {"norm.attn.weight", "attn_norm.weight"},      {"attention.query.weight", "attn_q.weight"},
    {"attention.key.weight", "attn_k.weight"},     {"attention.value.weight", "attn_v.weight"},
    {"attention.output.weight", "attn_output.weight"}, {"norm.ffn.weight", "ffn_norm.weight"},
    {"ffn.w1.weight", "ffn_gate.weight"},          {"ffn.w3.weight", "ffn_up.weight"},
    {"ffn.w2.weight", "ffn_down.weight"},
};

static const struct {
    const char *bullet, *canon;
} k_global_names[] = {
    {"tok_embeddings.weight", "token_embd.weight"},
    {"final_layernorm.weight", "output_norm.weight"},
    {"gen_head.weight", "output.weight"},
};

/* "PREFIX<digits>.REST" -> layer and rest; false otherwise. */
static bool split_layer(const char *s, const char *prefix, long *layer, const char **rest) {
    size_t pl = strlen(prefix);
    if (strncmp(s, prefix, pl) != 0) return false;
    const char *p = s + pl;
    if (*p < '0' || *p > '9') return false;
    long l = 0;
    while (*p >= '0' && *p <= '9') {
        l = l * 10 + (*p - '0');
        if (l > 1000000) return false;
        p++;
    }
    if (*p != '.') return false;
    *layer = l;
    *rest = p + 1;
    return true;
}

bool qp_bullet_canon_name(const char *b, char *out, size_t cap) {
    for (size_t i = 0; i < sizeof k_global_names / sizeof k_global_names[0]; i++)
        if (strcmp(b, k_global_names[i].bullet) == 0)
            return (size_t)snprintf(out, cap, "%s", k_global_names[i].canon) < cap;
    long l;
    const char *rest;
    if (!split_layer(b, "layers.", &l, &rest)) return false;
    for (size_t i = 0; i < sizeof k_layer_names / sizeof k_layer_names[0]; i++)
        if (strcmp(rest, k_layer_names[i].bullet) == 0)
            return (size_t)snprintf(out, cap, "blk.%ld.%s", l, k_layer_names[i].canon) < cap;
    return false;
}

bool qp_bullet_name_from_canon(const char *c, char *out, size_t cap) {
    for (size_t i = 0; i < sizeof k_global_names / sizeof k_global_names[0]; i++)
        if (strcmp(c, k_global_names[i].canon) == 0)
            return (size_t)snprintf(out, cap, "%s", k_global_names[i].bullet) < cap;
    long l;
    const char *rest;
    if (!split_layer(c, "blk.", &l, &rest)) return false;
    for (size_t i = 0; i < sizeof k_layer_names / sizeof k_layer_names[0]; i++)
        if (strcmp(rest, k_layer_names[i].canon) == 0)
            return (size_t)snprintf(out, cap, "layers.%ld.%s", l, k_layer_names[i].bullet) < cap;
    return false;
}
