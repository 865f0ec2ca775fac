/* The OpenAI-compatible API of quantpack serve (cli/serve_api.h, cli/serve_api.md). */
#define _DEFAULT_SOURCE 1
#include "cli/serve_api.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "quantpack/chat.h"

enum { MAX_STOPS = 16, MAX_MESSAGES = 4096 };


typedef struct api_job api_job;

struct qp_api {
    const qp_model *m;
    qp_gen_session *gs;
    qp_api_opts o;
    pthread_t worker;
    bool worker_started;
    pthread_mutex_t mu;     /* the queue, the live list, every job's output and flags */
    pthread_cond_t cv;      /* a job was queued, or stopping */
    pthread_mutex_t tok_mu; /* tokenizing and rendering on the daemon's threads */
    api_job *head, *tail;   /* queued jobs, oldest first */
    api_job *live;          /* jobs whose response exists */
    bool stopping;
    uint64_t n_requests, rng;
    int64_t created;
};

/* One generation request: queued, run by the worker, read out by the response. */
struct api_job {
    qp_api *api;
    api_job *next, *live_prev, *live_next;
    int refs; /* the response's and the worker's */
    struct MHD_Connection *conn;
    bool chat, stream, include_usage;
    int32_t *ids;
    int64_t n_ids;
    qp_gen_params gp;
    char *stops[MAX_STOPS];
    char id[48];
    int64_t created; /* seconds since the epoch, when the request came */
    char *out; /* bytes for the client: out[out_pos..out_len) not sent yet */
    size_t out_len, out_cap, out_pos;
    char *text; /* the reply (non-stream), worker only */
    size_t text_len, text_cap;
    bool done, failed, suspended, response_alive;
    volatile sig_atomic_t cancel;
};

/* ---- small helpers --------------------------------------------------------------------------- */

static bool grow(char **buf, size_t *cap, size_t need) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 1024;
    while (c < need) c *= 2;
    char *b = qp_realloc(*buf, c);
    if (!b) return false;
    *buf = b;
    *cap = c;
    return true;
}

static bool append(char **buf, size_t *len, size_t *cap, const char *s, size_t n) {
    if (!grow(buf, cap, *len + n + 1)) return false;
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = '\0';
    return true;
}

static bool path_is(const qp_http_request *req, const char *path) {
    return req->path_len == strlen(path) && memcmp(req->target, path, req->path_len) == 0;
}

static bool same_secret(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    unsigned char d = la != lb;
    for (size_t i = 0; i < la && i < lb; i++) d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

static const char *const k_api_cors[] = {
    "Access-Control-Allow-Origin", "*",
    "Access-Control-Allow-Methods", "GET, POST, OPTIONS",
    "Access-Control-Allow-Headers", "Authorization, Content-Type",
    NULL,
};

static void add_headers(struct MHD_Response *r, const char *type) {
    for (size_t i = 0; k_api_cors[i]; i += 2) MHD_add_response_header(r, k_api_cors[i], k_api_cors[i + 1]);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
}

/* Sends j (deleted here) with status. */
static enum MHD_Result respond_json(const qp_http_request *req, unsigned status, cJSON *j) {
    char *text = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    if (!text) return MHD_NO;
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_COPY);
    cJSON_free(text);
    if (!r) return MHD_NO;
    add_headers(r, "application/json");
    return qp_http_respond(req, status, r);
}

/* {"error": {"message", "type", "param": null, "code": null}} as OpenAI answers. */
static cJSON *error_json(const char *type, const char *msg) {
    cJSON *j = cJSON_CreateObject(), *err = cJSON_AddObjectToObject(j, "error");
    cJSON_AddStringToObject(err, "message", msg);
    cJSON_AddStringToObject(err, "type", type);
    cJSON_AddNullToObject(err, "param");
    cJSON_AddNullToObject(err, "code");
    return j;
}

static enum MHD_Result respond_error(const qp_http_request *req, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum MHD_Result respond_error(const qp_http_request *req, unsigned status, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *type = status == MHD_HTTP_UNAUTHORIZED ? "authentication_error"
                       : status >= 500               ? "server_error"
                       : status == MHD_HTTP_NOT_FOUND ? "not_found_error"
                                                      : "invalid_request_error";
    return respond_json(req, status, error_json(type, msg));
}

/* ---- request fields ---------------------------------------------------------------------------- */

/* A number field: absent or null keeps *out; else it must be a number in [lo, hi] (integral
 * when integer). false with a message in why. */
static bool get_number(const cJSON *body, const char *name, double lo, double hi, bool integer,
                       double *out, char *why, size_t cap) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, name);
    if (!v || cJSON_IsNull(v)) return true;
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!isfinite(d) || d < lo || d > hi || (integer && d != floor(d))) {
        snprintf(why, cap, "'%s' must be %s in [%g, %g]", name, integer ? "an integer" : "a number", lo, hi);
        return false;
    }
    *out = d;
    return true;
}

/* stop: a string or an array of up to MAX_STOPS strings; copies kept in the job. */
static bool get_stops(const cJSON *body, api_job *j, char *why, size_t cap) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, "stop");
    if (!v || cJSON_IsNull(v)) return true;
    int n = cJSON_IsString(v) ? 1 : cJSON_IsArray(v) ? cJSON_GetArraySize(v) : -1;
    if (n < 0 || n > MAX_STOPS) {
        snprintf(why, cap, "'stop' must be a string or an array of at most %d strings", MAX_STOPS);
        return false;
    }
    for (int i = 0; i < n; i++) {
        const cJSON *s = cJSON_IsString(v) ? v : cJSON_GetArrayItem(v, i);
        if (!cJSON_IsString(s)) {
            snprintf(why, cap, "'stop' item %d is not a string", i);
            return false;
        }
        if (!(j->stops[j->gp.n_stop] = qp_strdup(s->valuestring))) {
            snprintf(why, cap, "out of memory");
            return false;
        }
        j->gp.n_stop++;
    }
    j->gp.stop = (const char *const *)j->stops;
    return true;
}

/* The sampling fields of a request over the server's defaults. */
static bool get_sampling(qp_api *a, const cJSON *body, api_job *j, char *why, size_t cap) {
    qp_sampler_params *sp = &j->gp.sampler;
    *sp = a->o.sampler;
    double temp = sp->temperature, top_p = sp->top_p, top_k = sp->top_k, rp = sp->repeat_penalty;
    double max = (double)a->o.n_predict, seed = -1, n = 1;
    if (!get_number(body, "temperature", 0, 1e6, false, &temp, why, cap) ||
        !get_number(body, "top_p", 0, 1, false, &top_p, why, cap) ||
        !get_number(body, "top_k", 0, INT32_MAX, true, &top_k, why, cap) ||
        !get_number(body, "repeat_penalty", 1e-6, 1e6, false, &rp, why, cap) ||
        !get_number(body, "max_tokens", -1, 1 << 24, true, &max, why, cap) ||
        !get_number(body, "max_completion_tokens", -1, 1 << 24, true, &max, why, cap) ||
        !get_number(body, "seed", -9007199254740991.0, 9007199254740991.0, true, &seed, why, cap) ||
        !get_number(body, "n", 1, 1, true, &n, why, cap) || !get_stops(body, j, why, cap))
        return false;
    if (top_p <= 0) {
        snprintf(why, cap, "'top_p' must be in (0, 1]");
        return false;
    }
    sp->temperature = (float)temp;
    sp->top_p = (float)top_p;
    sp->top_k = (int32_t)top_k;
    sp->repeat_penalty = (float)rp;
    j->gp.max_tokens = (int64_t)max;
    if (seed != -1) /* given; -1 (or absent, or null) asks for a random one, as llama.cpp */
        sp->seed = (uint64_t)(int64_t)seed;
    else if (!a->o.fixed_seed) {
        pthread_mutex_lock(&a->mu);
        sp->seed = qp_rng_u32(&a->rng) | (uint64_t)qp_rng_u32(&a->rng) << 32;
        pthread_mutex_unlock(&a->mu);
    }
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(body, "stream");
    if (st && !cJSON_IsNull(st) && !cJSON_IsBool(st)) {
        snprintf(why, cap, "'stream' must be true or false");
        return false;
    }
    j->stream = cJSON_IsTrue(st);
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(body, "stream_options");
    j->include_usage = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(so, "include_usage"));
    return true;
}

/* Tokenizes text under tok_mu: BOS as the vocabulary wants it, special token texts recognised
 * (as llama.cpp's server does). */
static bool tokenize(qp_api *a, const char *text, api_job *j, char *why, size_t cap) {
    qp_err e = {0};
    pthread_mutex_lock(&a->tok_mu);
    qp_status s = qp_gen_tokenize(a->gs, text, strlen(text), true, true, &j->ids, &j->n_ids, &e);
    pthread_mutex_unlock(&a->tok_mu);
    if (s != QP_OK) snprintf(why, cap, "%.400s", e.msg);
    return s == QP_OK;
}

/* prompt: a string, an array of one string, or an array of token ids. */
static bool get_prompt(qp_api *a, const cJSON *body, api_job *j, char *why, size_t cap) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(body, "prompt");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(cJSON_GetArrayItem(p, 0)))
        p = cJSON_GetArrayItem(p, 0);
    if (cJSON_IsString(p)) return tokenize(a, p->valuestring, j, why, cap);
    int n = cJSON_IsArray(p) ? cJSON_GetArraySize(p) : 0;
    if (n < 1) {
        snprintf(why, cap, "'prompt' must be a string, an array of one string or an array of token ids");
        return false;
    }
    if (!(j->ids = qp_malloc((size_t)n * sizeof *j->ids))) {
        snprintf(why, cap, "out of memory");
        return false;
    }
    for (int i = 0; i < n; i++) {
        const cJSON *t = cJSON_GetArrayItem(p, i);
        double d = cJSON_IsNumber(t) ? t->valuedouble : -1;
        if (d < 0 || d >= (double)qp_runtime_get_config(qp_gen_session_runtime(a->gs))->vocab || d != floor(d)) {
            snprintf(why, cap, "'prompt' item %d is not a token id of this model", i);
            return false;
        }
        j->ids[i] = (int32_t)d;
    }
    j->n_ids = n;
    return true;
}

/* ---- chat messages ----------------------------------------------------------------------------- */

/* A message's content: a string, null, or an array of {"type": "text", "text": ...} parts
 * (joined). *owned is set when a joined copy was made. */
static const char *message_text(const cJSON *c, char **owned) {
    *owned = NULL;
    if (cJSON_IsString(c)) return c->valuestring;
    if (!c || cJSON_IsNull(c)) return "";
    if (!cJSON_IsArray(c)) return NULL;
    size_t len = 0, cap = 0;
    char *buf = NULL;
    const cJSON *part;
    cJSON_ArrayForEach(part, c) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") != 0 || !cJSON_IsString(t) ||
            !append(&buf, &len, &cap, t->valuestring, strlen(t->valuestring))) {
            qp_free(buf);
            return NULL;
        }
    }
    *owned = buf;
    return buf ? buf : "";
}

/* messages -> the rendered conversation with the generation prompt -> ids. */
static bool get_messages(qp_api *a, const cJSON *body, api_job *j, char *why, size_t cap) {
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(body, "messages");
    int n = cJSON_IsArray(msgs) ? cJSON_GetArraySize(msgs) : 0;
    if (n < 1 || n > MAX_MESSAGES) {
        snprintf(why, cap, "'messages' must be an array of 1 to %d messages", MAX_MESSAGES);
        return false;
    }
    qp_chat_message *cm = qp_calloc((size_t)n, sizeof *cm);
    char **owned = qp_calloc((size_t)n, sizeof *owned);
    bool ok = cm && owned;
    if (!ok) snprintf(why, cap, "out of memory");
    for (int i = 0; ok && i < n; i++) {
        const cJSON *m = cJSON_GetArrayItem(msgs, i);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        cm[i].role = cJSON_IsString(role) ? role->valuestring : NULL;
        cm[i].content = message_text(cJSON_GetObjectItemCaseSensitive(m, "content"), &owned[i]);
        if (!cm[i].role || !cm[i].content) {
            snprintf(why, cap, "message %d needs a string 'role' and a string (or text parts) 'content'", i);
            ok = false;
        }
    }
    char *text = NULL;
    if (ok) {
        qp_err e = {0};
        pthread_mutex_lock(&a->tok_mu);
        qp_status s = qp_chat_render(a->m, a->o.chat_template, cm, (size_t)n, true, &text, &e);
        pthread_mutex_unlock(&a->tok_mu);
        if (s != QP_OK) snprintf(why, cap, "chat template: %.400s", e.msg);
        ok = s == QP_OK && tokenize(a, text, j, why, cap);
    }
    for (int i = 0; owned && i < n; i++) qp_free(owned[i]);
    qp_free(owned);
    qp_free(cm);
    qp_free(text);
    return ok;
}

/* ---- jobs ---------------------------------------------------------------------------------------- */

static void job_free(api_job *j) {
    for (size_t i = 0; i < j->gp.n_stop; i++) qp_free(j->stops[i]);
    qp_free(j->ids);
    qp_free(j->out);
    qp_free(j->text);
    qp_free(j);
}

/* Drops one reference (under mu). */
static void job_release(api_job *j) {
    if (--j->refs == 0) job_free(j);
}

/* New output for the client (under mu): wakes its suspended connection. */
static void job_wake(api_job *j) {
    if (j->suspended && j->response_alive) {
        j->suspended = false;
        MHD_resume_connection(j->conn);
    }
}

static void job_send(api_job *j, const char *s, size_t n) {
    qp_api *a = j->api;
    pthread_mutex_lock(&a->mu);
    if (!append(&j->out, &j->out_len, &j->out_cap, s, n)) j->failed = true;
    job_wake(j);
    pthread_mutex_unlock(&a->mu);
}

/* One server-sent event "data: JSON\n\n" (j deleted). */
static void send_event(api_job *job, cJSON *j) {
    char *text = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    if (!text) {
        job->failed = true;
        return;
    }
    job_send(job, "data: ", 6);
    job_send(job, text, strlen(text));
    job_send(job, "\n\n", 2);
    cJSON_free(text);
}

/* The fields every response object starts with. */
static cJSON *response_head(const api_job *j, const char *object) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", j->id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)j->created);
    cJSON_AddStringToObject(o, "model", j->api->o.model_id);
    return o;
}

/* A response (or chunk) with one choice; text NULL: an empty delta. finish NULL: null. */
static cJSON *choice_json(const api_job *j, const char *text, const char *finish, bool first) {
    const char *object = j->chat ? (j->stream ? "chat.completion.chunk" : "chat.completion")
                                 : "text_completion";
    cJSON *o = response_head(j, object), *choices = cJSON_AddArrayToObject(o, "choices");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddItemToArray(choices, c);
    cJSON_AddNumberToObject(c, "index", 0);
    if (j->chat) {
        cJSON *msg = cJSON_AddObjectToObject(c, j->stream ? "delta" : "message");
        if (first || !j->stream) cJSON_AddStringToObject(msg, "role", "assistant");
        if (text) cJSON_AddStringToObject(msg, "content", text);
    } else {
        cJSON_AddStringToObject(c, "text", text ? text : "");
    }
    cJSON_AddNullToObject(c, "logprobs");
    if (finish) cJSON_AddStringToObject(c, "finish_reason", finish);
    else cJSON_AddNullToObject(c, "finish_reason");
    return o;
}

static void add_usage(cJSON *o, const qp_gen_result *r) {
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)r->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)r->n_generated);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(r->n_prompt + r->n_generated));
}

/* Each generated piece: an event (stream) or onto the reply. */
static bool on_piece(void *arg, int32_t token, const char *text, size_t len) {
    (void)token;
    api_job *j = arg;
    if (len == 0) return !j->cancel;
    if (!j->stream) {
        if (!append(&j->text, &j->text_len, &j->text_cap, text, len)) return false;
        return true;
    }
    char *piece = qp_malloc(len + 1);
    if (!piece) return false;
    memcpy(piece, text, len);
    piece[len] = '\0';
    send_event(j, choice_json(j, piece, NULL, false));
    qp_free(piece);
    return !j->failed;
}

static const char *finish_reason(qp_gen_stop s) {
    return s == QP_GEN_STOP_MAX_TOKENS || s == QP_GEN_STOP_CONTEXT ? "length" : "stop";
}

/* Generates one job's answer (worker thread). */
static void run_job(qp_api *a, api_job *j) {
    qp_err e = {0};
    qp_gen_result r;
    memset(&r, 0, sizeof r);
    j->gp.on_token = on_piece;
    j->gp.arg = j;
    j->gp.cancel = &j->cancel;
    if (j->stream && j->chat) send_event(j, choice_json(j, "", NULL, true));
    qp_status s = qp_gen_generate(a->gs, j->ids, j->n_ids, &j->gp, &r, &e);
    if (a->o.verbose)
        fprintf(stderr, "quantpack serve: %s: %lld prompt tokens (%lld reused), %lld new in %.3f s, %s%s%s\n",
                j->id, (long long)r.n_prompt, (long long)r.n_reused, (long long)r.n_generated,
                r.prompt_s + r.generate_s, qp_gen_stop_name(r.stop), s != QP_OK ? ": " : "",
                s != QP_OK ? e.msg : "");
    if (s != QP_OK) {
        if (j->stream) send_event(j, error_json("server_error", e.msg));
        else j->failed = true;
    } else if (j->stream) {
        send_event(j, choice_json(j, NULL, finish_reason(r.stop), false));
        if (j->include_usage) {
            cJSON *u = response_head(j, j->chat ? "chat.completion.chunk" : "text_completion");
            cJSON_AddArrayToObject(u, "choices");
            add_usage(u, &r);
            send_event(j, u);
        }
    } else {
        cJSON *o = choice_json(j, j->text ? j->text : "", finish_reason(r.stop), false);
        add_usage(o, &r);
        char *text = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (text) job_send(j, text, strlen(text));
        else j->failed = true;
        cJSON_free(text);
    }
    if (j->stream) job_send(j, "data: [DONE]\n\n", 14);
}

static void *worker_main(void *arg) {
    qp_api *a = arg;
    for (;;) {
        pthread_mutex_lock(&a->mu);
        while (!a->head && !a->stopping) pthread_cond_wait(&a->cv, &a->mu);
        api_job *j = a->head;
        if (j) {
            a->head = j->next;
            if (!a->head) a->tail = NULL;
        }
        bool skip = a->stopping || (j && j->cancel);
        pthread_mutex_unlock(&a->mu);
        if (!j) return NULL;
        if (!skip) run_job(a, j);
        pthread_mutex_lock(&a->mu);
        j->done = true;
        job_wake(j);
        job_release(j);
        pthread_mutex_unlock(&a->mu);
    }
}

/* MHD's content reader: the bytes ready, else suspend until the worker has more. */
static ssize_t read_job(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    api_job *j = cls;
    qp_api *a = j->api;
    ssize_t n;
    pthread_mutex_lock(&a->mu);
    if (j->out_pos < j->out_len) {
        size_t k = j->out_len - j->out_pos < max ? j->out_len - j->out_pos : max;
        memcpy(buf, j->out + j->out_pos, k);
        j->out_pos += k;
        if (j->out_pos == j->out_len) j->out_pos = j->out_len = 0;
        n = (ssize_t)k;
    } else if (j->done || a->stopping) {
        n = j->failed || !j->done ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
    } else {
        j->suspended = true;
        MHD_suspend_connection(j->conn);
        n = 0;
    }
    pthread_mutex_unlock(&a->mu);
    return n;
}

/* The response is gone (sent, or the client left): cancel the generation. */
static void free_job_response(void *cls) {
    api_job *j = cls;
    qp_api *a = j->api;
    pthread_mutex_lock(&a->mu);
    j->response_alive = false;
    j->cancel = 1;
    if (j->live_prev) j->live_prev->live_next = j->live_next;
    else a->live = j->live_next;
    if (j->live_next) j->live_next->live_prev = j->live_prev;
    job_release(j);
    pthread_mutex_unlock(&a->mu);
}

/* Parses a completion (chat or not) request, queues it and answers with its stream. */
static enum MHD_Result start_job(qp_api *a, const qp_http_request *req, bool chat) {
    if (strcmp(req->method, "POST") != 0)
        return respond_error(req, MHD_HTTP_METHOD_NOT_ALLOWED, "%s wants POST", chat ? "/v1/chat/completions" : "/v1/completions");
    cJSON *body = req->body ? cJSON_ParseWithLength(req->body, req->body_len) : NULL;
    if (!cJSON_IsObject(body)) {
        cJSON_Delete(body);
        return respond_error(req, MHD_HTTP_BAD_REQUEST, "the request body must be a JSON object");
    }
    api_job *j = qp_calloc(1, sizeof *j);
    char why[512] = "out of memory";
    bool ok = j != NULL;
    if (ok) {
        j->api = a;
        j->chat = chat;
        j->conn = req->conn;
        j->created = (int64_t)time(NULL);
        qp_gen_params_default(&j->gp);
        ok = get_sampling(a, body, j, why, sizeof why) &&
             (chat ? get_messages(a, body, j, why, sizeof why) : get_prompt(a, body, j, why, sizeof why));
    }
    cJSON_Delete(body);
    if (ok && j->n_ids > qp_gen_session_n_ctx(a->gs)) {
        snprintf(why, sizeof why, "the prompt has %lld tokens, more than the context of %lld",
                 (long long)j->n_ids, (long long)qp_gen_session_n_ctx(a->gs));
        ok = false;
    }
    if (!ok) {
        if (j) job_free(j);
        return respond_error(req, MHD_HTTP_BAD_REQUEST, "%s", why);
    }
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, read_job, j,
                                                               free_job_response);
    if (!r) {
        job_free(j);
        return MHD_NO;
    }
    add_headers(r, j->stream ? "text/event-stream" : "application/json");
    pthread_mutex_lock(&a->mu);
    snprintf(j->id, sizeof j->id, "%s-%" PRIu64, chat ? "chatcmpl" : "cmpl", ++a->n_requests);
    j->refs = 2;
    j->response_alive = true;
    j->live_next = a->live;
    if (a->live) a->live->live_prev = j;
    a->live = j;
    if (a->tail) a->tail->next = j;
    else a->head = j;
    a->tail = j;
    if (a->stopping) j->cancel = 1;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
    return qp_http_respond(req, MHD_HTTP_OK, r);
}

static enum MHD_Result list_models(qp_api *a, const qp_http_request *req) {
    cJSON *o = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(o, "data"), *m = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON_AddItemToArray(data, m);
    cJSON_AddStringToObject(m, "id", a->o.model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)a->created);
    cJSON_AddStringToObject(m, "owned_by", "quantpack");
    return respond_json(req, MHD_HTTP_OK, o);
}

enum MHD_Result qp_api_handle(void *ctx, const qp_http_request *req) {
    qp_api *a = ctx;
    if (strcmp(req->method, "OPTIONS") == 0) return qp_http_respond_status(req, MHD_HTTP_NO_CONTENT, k_api_cors);
    if (path_is(req, "/health")) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", "ok");
        return respond_json(req, MHD_HTTP_OK, o);
    }
    if (req->path_len < 4 || memcmp(req->target, "/v1/", 4) != 0)
        return respond_error(req, MHD_HTTP_NOT_FOUND, "no such path");
    if (a->o.api_key) {
        const char *auth = qp_http_header(req, MHD_HTTP_HEADER_AUTHORIZATION);
        if (!auth || strncmp(auth, "Bearer ", 7) != 0 || !same_secret(auth + 7, a->o.api_key))
            return respond_error(req, MHD_HTTP_UNAUTHORIZED, "a valid API key is needed (Authorization: Bearer KEY)");
    }
    if (path_is(req, "/v1/models")) {
        if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0)
            return respond_error(req, MHD_HTTP_METHOD_NOT_ALLOWED, "/v1/models wants GET");
        return list_models(a, req);
    }
    if (path_is(req, "/v1/completions")) return start_job(a, req, false);
    if (path_is(req, "/v1/chat/completions")) return start_job(a, req, true);
    return respond_error(req, MHD_HTTP_NOT_FOUND, "no such endpoint: %.*s", (int)(req->path_len > 200 ? 200 : req->path_len), req->target);
}

/* ---- lifetime ------------------------------------------------------------------------------------ */

qp_status qp_api_new(const qp_model *m, const qp_runtime_opts *ro, const qp_api_opts *o, qp_api **out,
                     qp_err *e) {
    qp_api *a = qp_calloc(1, sizeof *a);
    if (!a) return qp_fail(e, QP_ERR_NOMEM, "serve: out of memory");
    a->m = m;
    a->o = *o;
    a->created = (int64_t)time(NULL);
    a->rng = qp_rng_seed(o->sampler.seed ^ (uint64_t)a->created);
    pthread_mutex_init(&a->mu, NULL);
    pthread_mutex_init(&a->tok_mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    qp_status s = qp_gen_session_new(m, ro, &a->gs, e);
    if (s == QP_OK && !qp_gen_session_tokenizer(a->gs))
        s = qp_fail(e, QP_ERR_UNSUPPORTED, "serve: %s has no tokenizer (pass --tokenizer FILE)", m->path);
    if (s == QP_OK && pthread_create(&a->worker, NULL, worker_main, a) != 0)
        s = qp_fail(e, QP_ERR_NOMEM, "serve: cannot start the generation thread");
    a->worker_started = s == QP_OK;
    if (s != QP_OK) {
        qp_api_free(a);
        return s;
    }
    *out = a;
    return QP_OK;
}

void qp_api_shutdown(qp_api *a) {
    if (!a) return;
    pthread_mutex_lock(&a->mu);
    a->stopping = true;
    for (api_job *j = a->live; j; j = j->live_next) {
        j->cancel = 1;
        job_wake(j);
    }
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

void qp_api_free(qp_api *a) {
    if (!a) return;
    if (a->worker_started) {
        qp_api_shutdown(a);
        pthread_join(a->worker, NULL);
    }
    qp_gen_session_free(a->gs);
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->tok_mu);
    pthread_mutex_destroy(&a->mu);
    qp_free(a);
}
