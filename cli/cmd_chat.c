/* quantpack chat MODEL [--system PROMPT | -f FILE] [generation options of cli/cli_gen.c]
 * [--chat-template NAME|FILE]: an interactive chat over the reference runtime.
 *
 * Each turn the whole conversation is rendered with the chat template (include/quantpack/chat.h)
 * and given to one generation session (include/quantpack/generate.h), which keeps what its KV
 * cache already holds and runs only the new turn's tokens. The reply streams to stdout as it
 * is made; tok/s and the stop reason go to stderr. On a terminal lines are read with libedit
 * (editing, history); otherwise lines come from stdin as they are, with no prompt or echo, so
 * stdout carries the replies only (one line each). /reset forgets the conversation (the system
 * prompt stays), /quit (or end of input) leaves. Ctrl-C stops a reply (kept as far as it got)
 * and, at the prompt, drops the line being typed. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <histedit.h>

#include "cli/cli.h"
#include "quantpack/chat.h"
#include "quantpack/generate.h"

static volatile sig_atomic_t g_interrupted; /* SIGINT: stop the reply / drop the line */

static void on_sigint(int sig) {
    (void)sig;
    g_interrupted = 1;
}

typedef struct conversation {
    qp_chat_message *msgs;
    size_t n, cap;
    size_t n_keep; /* the system prompt, kept by /reset */
} conversation;

typedef struct chat {
    const qp_cli_gen_args *g;
    const char *tmpl; /* --chat-template text or name, or NULL */
    qp_model *m;
    qp_gen_session *gs;
    conversation conv;
    bool tty;
    EditLine *el;
    History *hist;
    char *line; /* getline's buffer (not a terminal) */
    size_t line_cap;
    char *reply;
    size_t reply_len, reply_cap;
} chat;

/* ---- the conversation ------------------------------------------------------------------------ */

static bool conv_add(conversation *c, const char *role, const char *content, size_t len) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        qp_chat_message *m = qp_realloc(c->msgs, cap * sizeof *m);
        if (!m) return false;
        c->msgs = m;
        c->cap = cap;
    }
    char *text = qp_malloc(len + 1);
    if (!text) return false;
    memcpy(text, content, len);
    text[len] = '\0';
    c->msgs[c->n].role = role;
    c->msgs[c->n++].content = text;
    return true;
}

static void conv_truncate(conversation *c, size_t n) {
    while (c->n > n) qp_free((char *)c->msgs[--c->n].content);
}

/* ---- reading lines ------------------------------------------------------------------------------ */

static char *prompt_text(EditLine *el) {
    (void)el;
    return (char *)"> ";
}

static bool open_editor(chat *c) {
    c->el = el_init("quantpack", stdin, stdout, stderr);
    c->hist = history_init();
    if (!c->el || !c->hist) return false;
    HistEvent ev;
    history(c->hist, &ev, H_SETSIZE, 1000);
    history(c->hist, &ev, H_SETUNIQUE, 1);
    el_set(c->el, EL_EDITOR, "emacs");
    el_set(c->el, EL_PROMPT, prompt_text);
    el_set(c->el, EL_HIST, history, c->hist);
    return true;
}

/* The next line without its newline; NULL at the end of input. *dropped when Ctrl-C dropped it. */
static const char *read_line(chat *c, bool *dropped) {
    *dropped = false;
    g_interrupted = 0;
    const char *line;
    if (c->tty) {
        int count = 0;
        line = el_gets(c->el, &count);
        if (line && count > 0) {
            HistEvent ev;
            if (line[strspn(line, " \t\n")]) history(c->hist, &ev, H_ENTER, line);
        }
    } else {
        ssize_t n = getline(&c->line, &c->line_cap, stdin);
        line = n >= 0 ? c->line : NULL;
    }
    if (!line && g_interrupted) {
        *dropped = true;
        clearerr(stdin);
        return NULL;
    }
    return line;
}

/* ---- one turn ------------------------------------------------------------------------------------ */

static bool print_piece(void *arg, int32_t token, const char *text, size_t len) {
    (void)token;
    chat *c = arg;
    if (len && fwrite(text, 1, len, stdout) != len) return false;
    fflush(stdout);
    size_t need = c->reply_len + len + 1;
    if (need > c->reply_cap) {
        size_t cap = c->reply_cap ? c->reply_cap * 2 : 1024;
        while (cap < need) cap *= 2;
        char *r = qp_realloc(c->reply, cap);
        if (!r) return false;
        c->reply = r;
        c->reply_cap = cap;
    }
    memcpy(c->reply + c->reply_len, text, len);
    c->reply_len += len;
    return true;
}

/* The conversation rendered for the next reply, as token ids. */
static qp_status conversation_ids(chat *c, int32_t **ids, int64_t *n, qp_err *e) {
    char *text = NULL;
    qp_status s = qp_chat_render(c->m, c->tmpl, c->conv.msgs, c->conv.n, true, &text, e);
    if (s == QP_OK) s = qp_gen_tokenize(c->gs, text, strlen(text), true, true, ids, n, e);
    qp_free(text);
    return s;
}

/* Answers the last user message: the reply streams to stdout and joins the conversation.
 * A failure is reported and the user's message dropped; the chat goes on. */
static void reply(chat *c) {
    qp_err e = {0};
    int32_t *ids = NULL;
    int64_t n_ids = 0;
    qp_gen_params gp;
    qp_gen_params_default(&gp);
    gp.sampler = c->g->sampler;
    gp.max_tokens = c->g->n_predict;
    gp.cancel = &g_interrupted;
    gp.on_token = print_piece;
    gp.arg = c;
    c->reply_len = 0;
    g_interrupted = 0;
    qp_gen_result r;
    qp_status s = conversation_ids(c, &ids, &n_ids, &e);
    if (s == QP_OK) s = qp_gen_generate(c->gs, ids, n_ids, &gp, &r, &e);
    qp_free(ids);
    fputc('\n', stdout);
    fflush(stdout);
    if (s != QP_OK) {
        conv_truncate(&c->conv, c->conv.n - 1);
        fprintf(stderr, "quantpack chat: %s%s\n", e.msg,
                s == QP_ERR_LIMIT ? " (/reset starts over)" : "");
        return;
    }
    fprintf(stderr, "[%lld prompt tokens (%lld new) in %.2f s; %lld tokens in %.2f s, %.1f tok/s; %s]\n",
            (long long)r.n_prompt, (long long)(r.n_prompt - r.n_reused), r.prompt_s,
            (long long)r.n_generated, r.generate_s,
            r.generate_s > 0 ? (double)r.n_generated / r.generate_s : 0.0,
            r.stop == QP_GEN_STOP_CANCELLED ? "stopped by Ctrl-C" : qp_gen_stop_name(r.stop));
    if (!conv_add(&c->conv, "assistant", c->reply ? c->reply : "", c->reply_len)) {
        conv_truncate(&c->conv, c->conv.n - 1);
        fprintf(stderr, "quantpack chat: out of memory\n");
    }
}

/* Reads and answers lines until /quit or the end of input. */
static int chat_loop(chat *c) {
    for (;;) {
        bool dropped;
        const char *line = read_line(c, &dropped);
        if (dropped) {
            if (c->tty) fputc('\n', stdout);
            continue;
        }
        if (!line) break;
        size_t len = strlen(line);
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
        if (len == 0) continue;
        if ((len == 5 && memcmp(line, "/quit", 5) == 0) || (len == 5 && memcmp(line, "/exit", 5) == 0))
            break;
        if (len == 6 && memcmp(line, "/reset", 6) == 0) {
            conv_truncate(&c->conv, c->conv.n_keep);
            fprintf(stderr, "[conversation reset]\n");
            continue;
        }
        if (!conv_add(&c->conv, "user", line, len)) return qp_cli_error(QP_ERR_NOMEM, "chat: out of memory");
        reply(c);
        if (ferror(stdout)) return qp_cli_error(QP_ERR_IO, "cannot write standard output");
    }
    if (c->tty) fputc('\n', stdout);
    return qp_cli_flush_stdout();
}

/* ---- the command ---------------------------------------------------------------------------------- */

static const char k_chat_usage[] =
    "usage: quantpack chat MODEL [--system PROMPT | -f FILE] [options]\n\n"
    "Chats with the model through its chat template (or --chat-template NAME|FILE). Each\n"
    "turn runs only its new tokens: the KV cache keeps the conversation. Replies stream to\n"
    "stdout; tok/s goes to stderr. /reset forgets the conversation, /quit (or Ctrl-D) leaves;\n"
    "Ctrl-C stops a reply. On a terminal lines are edited with libedit (history with the\n"
    "arrow keys); from a pipe or file, one message a line and only the replies on stdout.\n";

/* The system prompt (--system or -f FILE) as the first message. 0 or an exit code. */
static int add_system(chat *c, const char *system) {
    char *text = NULL;
    size_t len = system ? strlen(system) : 0;
    qp_err e = {0};
    if (c->g->file && qp_file_read_all(c->g->file, (size_t)1 << 20, &text, &len, &e) != QP_OK)
        return qp_cli_fail(&e);
    const char *s = text ? text : system;
    int rc = 0;
    if (s && !conv_add(&c->conv, "system", s, len)) rc = qp_cli_error(QP_ERR_NOMEM, "chat: out of memory");
    c->conv.n_keep = c->conv.n;
    qp_free(text);
    return rc;
}

static int chat_run(chat *c, const char *system) {
    qp_err e = {0};
    int rc = add_system(c, system);
    if (rc) return rc;
    if (qp_model_open(c->g->model, &c->g->open, &c->m, &e) != QP_OK) return qp_cli_fail(&e);
    const qp_runtime_opts ro = qp_cli_gen_runtime_opts(c->g);
    if (qp_gen_session_new(c->m, &ro, &c->gs, &e) != QP_OK) return qp_cli_fail(&e);
    if (!qp_gen_session_tokenizer(c->gs))
        return qp_cli_error(QP_ERR_UNSUPPORTED, "chat: %s has no tokenizer (pass --tokenizer FILE)", c->g->model);
    c->tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
    if (c->tty && !open_editor(c)) return qp_cli_error(QP_ERR_NOMEM, "chat: cannot start line editing");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint; /* no SA_RESTART: a read at the prompt returns */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    if (c->tty)
        fprintf(stderr, "quantpack chat: %s, context %lld; /reset, /quit; Ctrl-C stops a reply\n",
                c->g->model, (long long)qp_gen_session_n_ctx(c->gs));
    return chat_loop(c);
}

int qp_cmd_chat(int argc, char **argv) {
    const char *model = NULL, *system = NULL;
    qp_cli_gen_args g;
    qp_cli_gen_defaults(&g, 0);
    qp_cli_opt opts[QP_CLI_GEN_MAX_ROWS + 1] = {
        {"--system", "-p", QP_CLI_STR, &system, .arg = "PROMPT", .help = "system prompt (llama.cpp's -p in a chat)"},
    };
    const int n_opts = 1 + qp_cli_gen_opts(&g, QP_GEN_OPT_FILE | QP_GEN_OPT_TEMPLATE, opts + 1);
    const qp_cli_cmd cmd = {"chat", k_chat_usage, NULL, opts, n_opts, 0, &model, 1, NULL, NULL};
    int rc = qp_cli_parse(&cmd, argc, argv, NULL);
    if (rc != QP_CLI_RUN) return rc;
    if ((rc = qp_cli_gen_finish("chat", &g, model)) != QP_CLI_RUN) return rc;
    if (system && g.file) return qp_cli_usage_error("chat: give --system PROMPT or -f FILE, not both");
    chat c;
    memset(&c, 0, sizeof c);
    c.g = &g;
    char *tmpl = NULL;
    if ((rc = qp_cli_gen_chat_template(&g, &tmpl)) != 0) return rc;
    c.tmpl = tmpl ? tmpl : g.chat_template;
    rc = chat_run(&c, system);
    if (c.el) el_end(c.el);
    if (c.hist) history_end(c.hist);
    conv_truncate(&c.conv, 0);
    qp_free(c.conv.msgs);
    free(c.line);
    qp_free(c.reply);
    qp_free(tmpl);
    qp_gen_session_free(c.gs);
    qp_model_close(c.m);
    return rc;
}
