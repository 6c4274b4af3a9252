/* llmq top: a live view of an account, like top(1): per model and per tenant
 * the requests and tokens per minute (the jobs done in the last minute, as
 * Redis counts them per second: P done_sec:<s>, so the first frame has them
 * too), bucket use, jobs queued, the backlog's ETA at that pace, spend today
 * against budgets, and errors. One read script per refresh
 * (lua/top_snapshot.lua) plus the day's counters and the budgets.
 *
 * The terminal: plain ANSI (clear, home, bold) and termios (no echo, no line
 * buffering) on standard input, so it works over SSH with no library; `q`
 * (or Ctrl-C) quits and restores the terminal. Without a terminal on
 * standard input it refreshes until killed; --once prints one frame. ANSI
 * codes only go to a terminal: to a file or a pipe, frames are plain text. */
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
#include "cli_opts.h"
#include "offload_table.h"
#include "cost/money.h"
#include "jobs/offload_stats.h"
#include "redis/redis.h"
#include "redis/script.h"

#define GROUPS_MAX 512

/* A model ("gpt-4o") or a model's tenant ("gpt-4o|acme") and what is known
 * of it this frame. */
struct group {
    char name[256];
    int is_tenant;
    long long n, tok, nusd;                /* today's counters */
    long long queued;                      /* jobs waiting */
    int blocked;                           /* a node waits (limit or budget) */
    long long req, tokb, req_lim, tok_lim; /* its bucket: used, limits (-1 none) */
    int has_bucket;
    long long rpm, tpm; /* jobs done and their tokens in the last minute */
    int seen;           /* in this frame */
};

struct top {
    struct group *g;
    size_t n;
    /* lua/top_snapshot.lua's [2]: done, dead, cancelled, http_429,
     * insufficient_quota, http_429_spurious, own_429_wait, own_429_budget */
    long long stats[8], inflight, now_ms;
    long long base_dead, base_429; /* at start, for "since top started" */
    int first;
    json_t *budgets;
    json_t *offload; /* jobs/offload_stats.h: offload per model */
    /* ANSI codes on a terminal, nothing elsewhere; the line end ("\r\n" on a
     * terminal, whose input top makes raw) */
    const char *bold, *plain, *nl;
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
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 6) {
        if (r != NULL)
            freeReplyObject(r);
        return -1;
    }
    t->now_ms = elem_ll(r->element[0]);
    for (size_t i = 0; i < 8 && i < r->element[1]->elements; i++)
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
    for (size_t i = 0; i < t->n; i++)
        t->g[i].rpm = t->g[i].tpm = 0;
    const redisReply *m = r->element[5];
    for (size_t i = 0; i + 1 < m->elements; i += 2) {
        /* "<model>|<tenant>|<n|tok>" */
        char f[512];
        snprintf(f, sizeof(f), "%s", m->element[i]->str ? m->element[i]->str : "");
        char *b1 = strchr(f, '|'), *b2 = b1 ? strrchr(b1 + 1, '|') : NULL;
        if (b2 == NULL)
            continue;
        *b1 = *b2 = '\0';
        long long v = elem_ll(m->element[i + 1]);
        char tname[520];
        snprintf(tname, sizeof(tname), "%s|%s", f, b1[1] ? b1 + 1 : "(none)");
        struct group *gs[2] = {group_get(t, f, 0), group_get(t, tname, 1)};
        for (int k = 0; k < 2; k++) {
            if (gs[k] == NULL)
                continue;
            if (strcmp(b2 + 1, "n") == 0)
                gs[k]->rpm += v;
            else if (strcmp(b2 + 1, "tok") == 0)
                gs[k]->tpm += v;
        }
    }
    freeReplyObject(r);
    return 0;
}

static void use_text(long long used, long long lim, char *buf, size_t n)
{
    if (lim <= 0)
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, "%lld%%", used * 100 / lim);
}

/* The backlog's ETA at the pace of the last minute (rpm jobs): "waiting"
 * when nothing was done in it while a node waits (a limit or a budget), "?"
 * when nothing was done and nothing waits. */
static void eta_text(long long queued, long long rpm, int blocked, char *buf, size_t n)
{
    if (queued == 0)
        snprintf(buf, n, "-");
    else if (rpm <= 0)
        snprintf(buf, n, blocked ? "waiting" : "?");
    else {
        long long s = (long long)((double)queued / (double)rpm * 60.0 + 0.5);
        if (s < 60)
            snprintf(buf, n, "%llds", s);
        else if (s < 3600)
            snprintf(buf, n, "%lldm%02llds", s / 60, s % 60);
        else
            snprintf(buf, n, "%lldh%02lldm", s / 3600, (s % 3600) / 60);
    }
}

static void print_group(const struct top *t, const struct group *g)
{
    char ru[16], tu[16], eta[24], usd[40];
    use_text(g->req, g->req_lim, ru, sizeof(ru));
    use_text(g->tokb, g->tok_lim, tu, sizeof(tu));
    eta_text(g->queued, g->rpm, g->blocked, eta, sizeof(eta));
    usd[0] = '$';
    llmq_usd_format(g->nusd, usd + 1, sizeof(usd) - 1);
    const char *name = g->name;
    char shown[300];
    if (g->is_tenant) {
        const char *bar = strchr(g->name, '|');
        snprintf(shown, sizeof(shown), "  %s", bar ? bar + 1 : g->name);
        name = shown;
    }
    printf("%-28s %8lld %10lld %6s %6s %8lld%s %9s %8lld %14s%s", name, g->rpm, g->tpm, ru, tu,
           g->queued, g->blocked ? "*" : " ", eta, g->n, usd, t->nl);
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
    printf("%sllmq top%s  account %s  %s UTC%s%s", t->bold, t->plain, cli->account, when,
           clear ? "  (q quits)" : "", t->nl);
    printf("in flight %lld   done %lld   dead %lld (+%lld)   429s %lld (+%lld)   "
           "insufficient_quota %lld   spurious %lld%s",
           t->inflight, t->stats[0], t->stats[1], t->stats[1] - t->base_dead, t->stats[3],
           t->stats[3] - t->base_429, t->stats[4], t->stats[5], t->nl);
    /* the gateway's own 429s are not the API's: not in "429s" above */
    printf("llmq's own 429s: %lld waited too long, %lld over a budget%s%s", t->stats[6],
           t->stats[7], t->nl, t->nl);
    printf("%s%-28s %8s %10s %6s %6s %9s %9s %8s %14s%s%s", t->bold, "MODEL / TENANT", "RPM", "TPM",
           "REQ%", "TOK%", "QUEUED", "ETA", "DONE", "SPENT TODAY", t->plain, t->nl);
    qsort(t->g, t->n, sizeof(*t->g), group_cmp); /* a model, then its tenants */
    for (size_t i = 0; i < t->n; i++)
        if (t->g[i].seen)
            print_group(t, &t->g[i]);
    printf("(* waits for a limit or a budget)%s", t->nl);
    size_t i;
    json_t *b;
    if (json_array_size(t->budgets) > 0)
        printf("%s%s%-34s %16s %16s %6s %s%s%s", t->nl, t->bold, "BUDGET", "SPENT", "LIMIT", "USED",
               "WAITING", t->plain, t->nl);
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
        printf("%-34s %16s %16s %5.1f%% %lld jobs%s", json_string_value(json_object_get(b, "id")),
               ss, ls, lim > 0 ? 100.0 * (double)sp / (double)lim : 0.0,
               (long long)json_integer_value(json_object_get(b, "waiting_jobs")), t->nl);
    }
    if (json_array_size(t->offload) > 0) { /* docs/DESIGN.md §3.10 */
        printf("%s", t->nl);
        llmq_cli_offload_table(stdout, t->offload, "", t->bold, t->plain, t->nl);
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

static const struct llmq_cli_opt options[] = {
    LLMQ_CLI_OPT_INT("interval-ms", "MS", struct top_opts, interval_ms, 100, 3600000,
                     "refresh every MS (default 1000)"),
    LLMQ_CLI_OPT_FLAG("once", struct top_opts, once, "print one frame and exit"),
    LLMQ_CLI_OPT_END,
};

static const struct llmq_cli_spec spec = {
    .usage = "usage: llmq top [--interval-ms MS] [--once]\n",
    .about = "A live view of the account: per model and tenant the requests and tokens per\n"
             "minute done (over the last minute), bucket use (requests and tokens of the\n"
             "window against the limit), jobs queued and, at the current pace, when the\n"
             "backlog is done; spend today and every budget's use; jobs in flight, dead\n"
             "letters and 429s; per model with offload (llmq offload) its jobs staged and\n"
             "offloaded, open provider batches by state, enqueued tokens against the queue\n"
             "limit, jobs done and failed and the money saved. Refreshes every MS (default\n"
             "1000); q quits. --once prints one frame. Colour and screen control only on a\n"
             "terminal.\n",
    .opts = options,
    .exit = "Exit: 0 ok; 1 Redis failure; 2 usage error.\n",
};

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
    json_decref(t->offload);
    t->offload = llmq_offload_stats_read(c, prefix, &err);
    if (t->offload == NULL) {
        llmq_cli_error(cli, "offload: %s", err.msg[0] ? err.msg : llmq_redis_context_error(c));
        return -1;
    }
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
    int out_tty = isatty(STDOUT_FILENO);
    t.bold = out_tty ? "\033[1m" : "";
    t.plain = out_tty ? "\033[0m" : "";
    struct termios saved;
    if (!o->once && tty && tcgetattr(STDIN_FILENO, &saved) == 0) {
        struct termios raw = saved;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        tcsetattr(STDIN_FILENO, TCSANOW, &raw);
        if (out_tty)
            fputs("\033[?25l", stdout); /* hide the cursor */
    } else {
        tty = 0;
    }
    t.nl = out_tty ? "\r\n" : "\n";
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    while (!stop) {
        if (refresh(cli, c, prefix, &t) != 0) {
            code = LLMQ_EXIT_FAIL;
            break;
        }
        frame(cli, &t, !o->once && out_tty);
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
        fputs(out_tty ? "\033[?25h\r\n" : "\n", stdout);
        fflush(stdout);
    }
    json_decref(t.budgets);
    json_decref(t.offload);
    free(t.g);
    return code;
}

int llmq_cmd_top(struct llmq_cli *cli, int argc, char **argv)
{
    struct top_opts o = {.interval_ms = 1000};
    char *pos[1];
    int n = 0;
    int rc = llmq_cli_parse(cli, &spec, argc, argv, &o, pos, 0, &n);
    if (rc >= 0)
        return rc;
    return llmq_cli_on_account(cli, act, &o);
}
