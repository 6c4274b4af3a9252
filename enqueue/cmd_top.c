/* llmq top: a live view of an account, like top(1): per model and per tenant
 * the requests and tokens per minute (from the spend counters' growth,
 * P spend:<day>), bucket use, jobs queued, the backlog's ETA at that pace,
 * spend today against budgets, and errors. One read script per refresh
 * (lua/top_snapshot.lua) plus the day's counters and the budgets.
 *
 * The terminal: plain ANSI (clear, home, bold) and termios (no echo, no line
 * buffering) on standard input, so it works over SSH with no library; `q`
 * (or Ctrl-C) quits and restores the terminal. Without a terminal on
 * standard input it refreshes until killed; --once prints one frame. */
#include <getopt.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "cli.h"
#include "cost/money.h"
#include "redis/redis.h"
#include "redis/script.h"

static void usage(FILE *out)
{
    fputs("usage: llmq top [--interval-ms MS] [--once]\n\n"
          "A live view of the account: per model and tenant the requests and tokens per\n"
          "minute done (over the last minute), bucket use (requests and tokens of the\n"
          "window against the limit), jobs queued and, at the current pace, when the\n"
          "backlog is done; spend today and every budget's use; jobs in flight, dead\n"
          "letters and 429s. Refreshes every MS (default 1000); q quits. --once prints\n"
          "one frame (the rates need two: they show '-').\n\n"
          "Options: --redis URL, --account NAME, --help\n"
          "Exit: 0 ok; 1 Redis failure; 2 usage error.\n",
          out);
}

#define RATE_SAMPLES 64 /* refreshes remembered for the per-minute rates */
#define GROUPS_MAX 512

/* A model ("gpt-4o") or a model's tenant ("gpt-4o|acme") and what is known
 * of it this frame; samples of its counters for the rates. */
struct group {
    char name[256];
    int is_tenant;
    long long n, tok, nusd;                /* today's counters */
    long long queued;                      /* jobs waiting */
    int blocked;                           /* a node waits (limit or budget) */
    long long req, tokb, req_lim, tok_lim; /* its bucket: used, limits (-1 none) */
    int has_bucket;
    long long s_ms[RATE_SAMPLES], s_n[RATE_SAMPLES], s_tok[RATE_SAMPLES];
    int s_len;
    int seen; /* in this frame */
};

struct top {
    struct group *g;
    size_t n;
    long long stats[5], inflight, now_ms;
    long long base_dead, base_429; /* at start, for "since top started" */
    int first;
    json_t *budgets;
};

static struct group *group_get(struct top *t, const char *name, int is_tenant)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->g[i].name, name) == 0)
            return &t->g[i];
    /* a name too long for a row is not shown rather than cut to one that
       may be another group's */
    size_t len = strlen(name);
    if (t->n == GROUPS_MAX || len >= sizeof(t->g[0].name))
        return NULL;
    struct group *g = &t->g[t->n++];
    memset(g, 0, sizeof(*g));
    memcpy(g->name, name, len + 1);
    g->is_tenant = is_tenant;
    g->req_lim = g->tok_lim = -1;
    return g;
}

static long long elem_ll(const redisReply *e)
{
    if (e == NULL)
        return 0;
    if (e->type == REDIS_REPLY_INTEGER)
        return e->integer;
    return e->type == REDIS_REPLY_STRING ? strtoll(e->str, NULL, 10) : 0;
}

/* Adds today's counters (P spend:<day>) to the groups. Returns 0 or -1. */
static int read_spend(redisContext *c, const char *prefix, struct top *t)
{
    char day[16], key[LLMQ_KEY_FIXED_MAX + 16];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(day, sizeof(day), "%Y-%m-%d", &tm);
    struct llmq_error err = {0};
    if (llmq_key(key, sizeof(key), prefix, LLMQ_KEY_SPEND, day, &err) != LLMQ_OK)
        return -1;
    redisReply *r = redisCommand(c, "HGETALL %s", key);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
        if (r != NULL)
            freeReplyObject(r);
        return -1;
    }
    for (size_t i = 0; i < t->n; i++)
        t->g[i].n = t->g[i].tok = t->g[i].nusd = 0;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        /* "<model>|<tenant>|<user>|<kind>" */
        char f[512];
        snprintf(f, sizeof(f), "%s", r->element[i]->str);
        char *b1 = strchr(f, '|'), *b2 = b1 ? strchr(b1 + 1, '|') : NULL;
        char *b3 = b2 ? strchr(b2 + 1, '|') : NULL;
        if (b3 == NULL)
            continue;
        *b1 = *b2 = *b3 = '\0';
        const char *kind = b3 + 1;
        long long v = elem_ll(r->element[i + 1]);
        char tname[520];
        snprintf(tname, sizeof(tname), "%s|%s", f, b1[1] ? b1 + 1 : "(none)");
        struct group *gs[2] = {group_get(t, f, 0), group_get(t, tname, 1)};
        for (int k = 0; k < 2; k++) {
            struct group *g = gs[k];
            if (g == NULL)
                continue;
            g->seen = 1;
            if (strcmp(kind, "n") == 0)
                g->n += v;
            else if (strcmp(kind, "tok") == 0)
                g->tok += v;
            else if (strcmp(kind, "nusd") == 0)
                g->nusd += v;
        }
    }
    freeReplyObject(r);
    return 0;
}

/* Reads the snapshot script's reply into t. Returns 0 or -1. */
static int read_snapshot(redisContext *c, const char *prefix, struct top *t)
{
    const char *argv[1 + GROUPS_MAX];
    int argc = 0;
    argv[argc++] = prefix;
    for (size_t i = 0; i < t->n && argc < 1 + GROUPS_MAX; i++)
        if (!t->g[i].is_tenant)
            argv[argc++] = t->g[i].name;
    struct llmq_error err = {0};
    redisReply *r = llmq_script_run(c, LLMQ_SCRIPT_TOP_SNAPSHOT, 1, argc, argv, NULL, &err);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 5) {
        if (r != NULL)
            freeReplyObject(r);
        return -1;
    }
    t->now_ms = elem_ll(r->element[0]);
    for (size_t i = 0; i < 5 && i < r->element[1]->elements; i++)
        t->stats[i] = elem_ll(r->element[1]->element[i]);
    t->inflight = elem_ll(r->element[2]);
    for (size_t i = 0; i < t->n; i++)
        t->g[i].queued = t->g[i].blocked = 0;
    const redisReply *q = r->element[3];
    for (size_t i = 0; i + 3 < q->elements; i += 4) {
        char tname[520];
        snprintf(tname, sizeof(tname), "%s|%s", q->element[0 + i]->str,
                 q->element[1 + i]->str[0] ? q->element[1 + i]->str : "(none)");
        struct group *gs[2] = {group_get(t, q->element[i]->str, 0), group_get(t, tname, 1)};
        for (int k = 0; k < 2; k++) {
            if (gs[k] == NULL)
                continue;
            gs[k]->seen = 1;
            gs[k]->queued += elem_ll(q->element[i + 2]);
            gs[k]->blocked |= elem_ll(q->element[i + 3]) != 0;
        }
    }
    const redisReply *b = r->element[4];
    for (size_t i = 0; i + 5 < b->elements; i += 6) {
        const char *name = b->element[i]->str;
        char tname[520];
        const char *slash = strstr(name, "/t/");
        if (slash != NULL)
            snprintf(tname, sizeof(tname), "%.*s|%s", (int)(slash - name), name, slash + 3);
        struct group *g = group_get(t, slash ? tname : name, slash != NULL);
        if (g == NULL)
            continue;
        g->seen = 1;
        g->has_bucket = 1;
        g->req = elem_ll(b->element[i + 1]);
        g->tokb = elem_ll(b->element[i + 2]);
        g->req_lim = elem_ll(b->element[i + 3]);
        g->tok_lim = elem_ll(b->element[i + 4]);
    }
    freeReplyObject(r);
    return 0;
}

/* Remembers this frame's counters of g at now_ms, keeping about a minute
 * (samples oldest first). */
static void sample(struct group *g, long long now_ms)
{
    int drop = 0;
    while (drop < g->s_len - 1 && now_ms - g->s_ms[drop] > 60000)
        drop++;
    if (g->s_len - drop == RATE_SAMPLES)
        drop++;
    if (drop > 0) {
        g->s_len -= drop;
        memmove(g->s_ms, g->s_ms + drop, (size_t)g->s_len * sizeof(g->s_ms[0]));
        memmove(g->s_n, g->s_n + drop, (size_t)g->s_len * sizeof(g->s_n[0]));
        memmove(g->s_tok, g->s_tok + drop, (size_t)g->s_len * sizeof(g->s_tok[0]));
    }
    g->s_ms[g->s_len] = now_ms;
    g->s_n[g->s_len] = g->n;
    g->s_tok[g->s_len] = g->tok;
    g->s_len++;
}

/* Per-minute rates of g over its samples; 0 when fewer than two. */
static int rates(const struct group *g, double *rpm, double *tpm)
{
    *rpm = *tpm = 0;
    if (g->s_len < 2)
        return 0;
    int last = g->s_len - 1;
    double ms = (double)(g->s_ms[last] - g->s_ms[0]);
    if (ms <= 0)
        return 0;
    long long dn = g->s_n[last] - g->s_n[0];
    long long dt = g->s_tok[last] - g->s_tok[0];
    *rpm = dn > 0 ? (double)dn * 60000.0 / ms : 0;
    *tpm = dt > 0 ? (double)dt * 60000.0 / ms : 0;
    return 1;
}

/* Whether g's done count grew over the last 5 s of samples. */
static int progressed(const struct group *g)
{
    if (g->s_len < 2)
        return 1;
    int last = g->s_len - 1, from = last;
    while (from > 0 && g->s_ms[last] - g->s_ms[from - 1] <= 5000)
        from--;
    return from == last || g->s_n[last] > g->s_n[from];
}

static void use_text(long long used, long long lim, char *buf, size_t n)
{
    if (lim <= 0)
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, "%lld%%", used * 100 / lim);
}

static void eta_text(long long queued, double rpm, int blocked, char *buf, size_t n)
{
    if (queued == 0)
        snprintf(buf, n, "-");
    else if (rpm <= 0)
        snprintf(buf, n, blocked ? "waiting" : "?");
    else {
        long long s = (long long)((double)queued / rpm * 60.0 + 0.5);
        if (s < 60)
            snprintf(buf, n, "%llds", s);
        else if (s < 3600)
            snprintf(buf, n, "%lldm%02llds", s / 60, s % 60);
        else
            snprintf(buf, n, "%lldh%02lldm", s / 3600, (s % 3600) / 60);
    }
}

static void print_group(const struct group *g, int have_rates)
{
    double rpm, tpm;
    int ok = rates(g, &rpm, &tpm) && have_rates;
    char r[24], k[24], ru[16], tu[16], eta[24], usd[40];
    if (ok) {
        snprintf(r, sizeof(r), "%.0f", rpm);
        snprintf(k, sizeof(k), "%.0f", tpm);
    } else {
        snprintf(r, sizeof(r), "-");
        snprintf(k, sizeof(k), "-");
    }
    use_text(g->req, g->req_lim, ru, sizeof(ru));
    use_text(g->tokb, g->tok_lim, tu, sizeof(tu));
    /* a blocked group that made no progress of late waits (a budget, a pause) */
    eta_text(g->queued, ok && (progressed(g) || !g->blocked) ? rpm : 0, g->blocked, eta,
             sizeof(eta));
    usd[0] = '$';
    llmq_usd_format(g->nusd, usd + 1, sizeof(usd) - 1);
    const char *name = g->name;
    char shown[300];
    if (g->is_tenant) {
        const char *bar = strchr(g->name, '|');
        snprintf(shown, sizeof(shown), "  %s", bar ? bar + 1 : g->name);
        name = shown;
    }
    printf("%-28s %8s %10s %6s %6s %8lld%s %9s %8lld %14s\r\n", name, r, k, ru, tu, g->queued,
           g->blocked ? "*" : " ", eta, g->n, usd);
}

static int group_cmp(const void *a, const void *b)
{
    const struct group *x = a, *y = b;
    return strcmp(x->name, y->name);
}

static void frame(const struct llmq_cli *cli, struct top *t, int clear)
{
    char when[32];
    time_t now = (time_t)(t->now_ms / 1000);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
    if (clear)
        fputs("\033[H\033[2J", stdout);
    printf("\033[1mllmq top\033[0m  account %s  %s UTC  (q quits)\r\n", cli->account, when);
    printf("in flight %lld   done %lld   dead %lld (+%lld)   429s %lld (+%lld)   "
           "insufficient_quota %lld\r\n\r\n",
           t->inflight, t->stats[0], t->stats[1], t->stats[1] - t->base_dead, t->stats[3],
           t->stats[3] - t->base_429, t->stats[4]);
    printf("\033[1m%-28s %8s %10s %6s %6s %9s %9s %8s %14s\033[0m\r\n", "MODEL / TENANT", "RPM",
           "TPM", "REQ%", "TOK%", "QUEUED", "ETA", "DONE", "SPENT TODAY");
    qsort(t->g, t->n, sizeof(*t->g), group_cmp); /* a model, then its tenants */
    for (size_t i = 0; i < t->n; i++)
        if (t->g[i].seen)
            print_group(&t->g[i], !t->first);
    printf("(* waits for a limit or a budget)\r\n");
    size_t i;
    json_t *b;
    if (json_array_size(t->budgets) > 0)
        printf("\r\n\033[1m%-34s %16s %16s %6s %s\033[0m\r\n", "BUDGET", "SPENT", "LIMIT", "USED",
               "WAITING");
    json_array_foreach(t->budgets, i, b)
    {
        int usd = strcmp(json_string_value(json_object_get(b, "unit")), "usd") == 0;
        long long lim = json_integer_value(json_object_get(b, "limit"));
        long long sp = json_integer_value(json_object_get(b, "spent"));
        char ls[40], ss[40];
        if (usd) {
            ls[0] = ss[0] = '$';
            llmq_usd_format(lim, ls + 1, sizeof(ls) - 1);
            llmq_usd_format(sp, ss + 1, sizeof(ss) - 1);
        } else {
            snprintf(ls, sizeof(ls), "%lld", lim);
            snprintf(ss, sizeof(ss), "%lld", sp);
        }
        printf("%-34s %16s %16s %5.1f%% %lld jobs\r\n", json_string_value(json_object_get(b, "id")),
               ss, ls, lim > 0 ? 100.0 * (double)sp / (double)lim : 0.0,
               (long long)json_integer_value(json_object_get(b, "waiting_jobs")));
    }
    fflush(stdout);
}

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

struct top_opts {
    long long interval_ms;
    int once;
};

static int take_option(int opt, const char *arg, void *ud)
{
    struct top_opts *o = ud;
    (void)arg;
    if (opt == 'o') {
        o->once = 1;
        return 0;
    }
    if (opt == 'i') {
        char *end = NULL;
        o->interval_ms = strtoll(arg, &end, 10);
        return end != arg && *end == '\0' && o->interval_ms >= 100 && o->interval_ms <= 3600000
                   ? 0
                   : LLMQ_EXIT_USAGE;
    }
    return LLMQ_EXIT_USAGE;
}

/* One refresh: returns 0, or -1 when Redis failed (printed). */
static int refresh(const struct llmq_cli *cli, redisContext *c, const char *prefix, struct top *t)
{
    for (size_t i = 0; i < t->n; i++)
        t->g[i].seen = 0;
    struct llmq_error err = {0};
    if (read_spend(c, prefix, t) != 0 || read_snapshot(c, prefix, t) != 0) {
        llmq_cli_error(cli, "reading the account: %s", llmq_redis_context_error(c));
        return -1;
    }
    json_decref(t->budgets);
    t->budgets = llmq_cli_budgets_json(c, prefix, &err);
    if (t->budgets == NULL) {
        llmq_cli_error(cli, "budgets: %s", err.msg[0] ? err.msg : llmq_redis_context_error(c));
        return -1;
    }
    for (size_t i = 0; i < t->n; i++)
        sample(&t->g[i], t->now_ms);
    if (t->first) {
        t->base_dead = t->stats[1];
        t->base_429 = t->stats[3];
    }
    return 0;
}

static int act(const struct llmq_cli *cli, redisContext *c, const char *prefix, void *ud)
{
    const struct top_opts *o = ud;
    struct top t = {.first = 1};
    t.g = calloc(GROUPS_MAX, sizeof(*t.g));
    if (t.g == NULL)
        return LLMQ_EXIT_FAIL;
    int tty = isatty(STDIN_FILENO), code = LLMQ_EXIT_OK, stdin_done = 0;
    struct termios saved;
    if (!o->once && tty && tcgetattr(STDIN_FILENO, &saved) == 0) {
        struct termios raw = saved;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        tcsetattr(STDIN_FILENO, TCSANOW, &raw);
        fputs("\033[?25l", stdout); /* hide the cursor */
    } else {
        tty = 0;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    while (!stop) {
        if (refresh(cli, c, prefix, &t) != 0) {
            code = LLMQ_EXIT_FAIL;
            break;
        }
        frame(cli, &t, !o->once);
        t.first = 0;
        if (o->once)
            break;
        long long until = llmq_monotonic_ms() + o->interval_ms;
        while (!stop && llmq_monotonic_ms() < until) {
            struct pollfd p = {.fd = stdin_done ? -1 : STDIN_FILENO, .events = POLLIN};
            int left = (int)(until - llmq_monotonic_ms());
            if (poll(&p, 1, left > 0 ? left : 0) > 0 && (p.revents & (POLLIN | POLLHUP))) {
                char ch = 0;
                ssize_t n = read(STDIN_FILENO, &ch, 1);
                if (n <= 0) /* standard input ended: refresh until a signal */
                    stdin_done = 1;
                else if (ch == 'q' || ch == 'Q')
                    stop = 1;
            } else if (p.revents & POLLNVAL) {
                stdin_done = 1;
            }
        }
    }
    if (tty) {
        tcsetattr(STDIN_FILENO, TCSANOW, &saved);
        fputs("\033[?25h\r\n", stdout);
        fflush(stdout);
    }
    json_decref(t.budgets);
    free(t.g);
    return code;
}

int llmq_cmd_top(struct llmq_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {{"interval-ms", required_argument, NULL, 'i'},
                                         {"once", no_argument, NULL, 'o'},
                                         LLMQ_CLI_COMMON_OPTIONS,
                                         {NULL, 0, NULL, 0}};
    struct top_opts o = {.interval_ms = 1000};
    char *pos[1];
    int n = 0;
    int rc = llmq_cli_getopt(cli, argc, argv, opts, take_option, &o, usage, pos, 0, &n);
    if (rc >= 0) {
        if (rc == LLMQ_EXIT_USAGE && o.interval_ms != 1000)
            llmq_cli_error(cli, "--interval-ms: expected an integer in 100..3600000");
        return rc;
    }
    return llmq_cli_on_account(cli, act, &o);
}
