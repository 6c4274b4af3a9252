/* The spool: settles that outlive a Redis outage and the worker; see spool.h.
 *
 * Ownership: the jobs stay on their account's settle_retry list (settle.c
 * owns them); the spool owns only the names of the files it claimed at start
 * (struct worker_spool, one per account, freed by llmq_worker_spool_free). */
#include "spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "redis/redis.h"
#include "worker.h"

#define SPOOL_EXT ".jsonl"
#define SPOOL_REPLAY ".replay-"

struct worker_spool {
    char **claimed; /* files claimed at start (new strings) */
    int n_claimed;
    int pending; /* settles loaded from them not yet answered */
};

int llmq_worker_spool_pending(const struct worker_account *a)
{
    int n = 0;
    for (const struct worker_job *j = a->settle_retry; j != NULL; j = j->next)
        n++;
    return n;
}

static struct worker_spool *spool_of(struct worker_account *a)
{
    if (a->spool == NULL)
        a->spool = calloc(1, sizeof(*a->spool));
    return a->spool;
}

/* "spool-{<account>}-": names cannot hold '{' or '}', so one account's
 * files never match another's prefix. */
static void file_prefix(const struct worker_account *a, char *buf, size_t n)
{
    snprintf(buf, n, "spool-{%s}-", a->cfg->name);
}

static const char *mode_const(const char *m)
{
    static const char *const modes[] = {"done", "retry", "dead", "handback"};
    for (size_t i = 0; m != NULL && i < sizeof(modes) / sizeof(modes[0]); i++)
        if (strcmp(m, modes[i]) == 0)
            return modes[i];
    return NULL;
}

static char *dup_member(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return strdup(s != NULL ? s : "");
}

static int64_t int_member(const json_t *o, const char *k, int64_t dflt)
{
    const json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

/* A job to settle from one spooled line; NULL when the line is unusable. */
static struct worker_job *job_from_line(struct worker_account *a, const char *text)
{
    json_t *o = json_loads(text, 0, NULL);
    const char *mode = mode_const(json_string_value(json_object_get(o, "mode")));
    const char *prio = json_string_value(json_object_get(o, "prio"));
    const char *eid = json_string_value(json_object_get(o, "eid"));
    const char *id = json_string_value(json_object_get(o, "id"));
    struct worker_job *job = NULL;
    if (mode == NULL || prio == NULL || eid == NULL || id == NULL || strlen(prio) >= 8 ||
        strlen(eid) >= 64 || !llmq_name_valid(id) || (job = calloc(1, sizeof(*job))) == NULL) {
        json_decref(o);
        return NULL;
    }
    job->acct = a;
    job->mode = mode;
    snprintf(job->prio, sizeof(job->prio), "%s", prio);
    snprintf(job->eid, sizeof(job->eid), "%s", eid);
    snprintf(job->reason, sizeof(job->reason), "%s",
             json_string_value(json_object_get(o, "reason")) ?: "");
    job->id = strdup(id);
    job->handle = dup_member(o, "handle");
    job->model = dup_member(o, "model");
    job->url_path = strdup("");
    job->body = strdup("");
    if (json_is_string(json_object_get(o, "line")))
        job->line = dup_member(o, "line");
    job->cost = int_member(o, "cost", 0);
    job->attempts = (int)int_member(o, "attempts", 0);
    job->max_attempts = (int)int_member(o, "max_attempts", 0);
    job->est_prompt_tokens = -1;
    job->actual_tokens = int_member(o, "actual", -1);
    job->delay_ms = int_member(o, "delay_ms", 0);
    job->refund = (int)int_member(o, "refund", 0);
    job->pause_ms = int_member(o, "pause_ms", 0);
    job->rem_req = int_member(o, "rem_req", -1);
    job->rem_tok = int_member(o, "rem_tok", -1);
    job->reset_req_ms = int_member(o, "reset_req_ms", -1);
    job->reset_tok_ms = int_member(o, "reset_tok_ms", -1);
    job->lim_req = int_member(o, "lim_req", -1);
    job->lim_tok = int_member(o, "lim_tok", -1);
    job->from_spool = 1;
    json_decref(o);
    if (!job->id || !job->handle || !job->model || !job->url_path || !job->body) {
        llmq_worker_job_free(job);
        return NULL;
    }
    return job;
}

/* Claims file name (in dir) by renaming it to a name of our own; returns the
 * new path (new string) or NULL when another worker took it first. */
static char *claim(const char *dir, const char *name, const char *consumer)
{
    char from[2048], to[2048];
    size_t base = strstr(name, SPOOL_EXT) - name + strlen(SPOOL_EXT);
    snprintf(from, sizeof(from), "%s/%s", dir, name);
    int n = snprintf(to, sizeof(to), "%s/%.*s%s%s", dir, (int)base, name, SPOOL_REPLAY, consumer);
    if (n < 0 || (size_t)n >= sizeof(to) || rename(from, to) != 0)
        return NULL;
    return strdup(to);
}

static int load_file(struct worker_account *a, const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    char *text = NULL;
    size_t cap = 0;
    int loaded = 0, bad = 0;
    while (getline(&text, &cap, f) > 0) {
        struct worker_job *job = job_from_line(a, text);
        if (job == NULL) {
            bad++;
            continue;
        }
        job->next = a->settle_retry;
        a->settle_retry = job;
        a->w->inflight++;
        loaded++;
    }
    free(text);
    fclose(f);
    if (bad > 0)
        LLMQ_LOG_JOB(LLMQ_LOG_ERROR, a->cfg->name, NULL, "spool %s: %d unreadable lines skipped",
                     path, bad);
    return loaded;
}

int llmq_worker_spool_load(struct worker_account *a)
{
    const char *dir = a->w->cfg->spool_dir;
    char prefix[256];
    file_prefix(a, prefix, sizeof(prefix));
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0; /* no spool yet */
    struct worker_spool *sp = spool_of(a);
    int total = 0;
    struct dirent *e;
    while (sp != NULL && (e = readdir(d)) != NULL) {
        const char *ext = strstr(e->d_name, SPOOL_EXT);
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 || ext == NULL ||
            (ext[strlen(SPOOL_EXT)] != '\0' &&
             strncmp(ext + strlen(SPOOL_EXT), SPOOL_REPLAY, strlen(SPOOL_REPLAY)) != 0))
            continue; /* not ours, or a temporary file */
        char *path = claim(dir, e->d_name, a->w->cfg->consumer);
        char **grown = path ? realloc(sp->claimed, (sp->n_claimed + 1) * sizeof(char *)) : NULL;
        if (grown == NULL) {
            free(path);
            continue;
        }
        sp->claimed = grown;
        sp->claimed[sp->n_claimed++] = path;
        int n = load_file(a, path);
        sp->pending += n;
        total += n;
        LLMQ_LOG_JOB(LLMQ_LOG_WARN, a->cfg->name, NULL,
                     "spool: %d results of a previous run to write once redis answers (%s)", n,
                     path);
    }
    closedir(d);
    return total;
}

static void unlink_claimed(struct worker_spool *sp)
{
    for (int i = 0; sp != NULL && i < sp->n_claimed; i++) {
        unlink(sp->claimed[i]);
        free(sp->claimed[i]);
    }
    if (sp != NULL) {
        free(sp->claimed);
        sp->claimed = NULL;
        sp->n_claimed = 0;
        sp->pending = 0;
    }
}

void llmq_worker_spool_answered(struct worker_job *job)
{
    struct worker_spool *sp = job->acct->spool;
    if (!job->from_spool || sp == NULL)
        return;
    if (--sp->pending <= 0) {
        LLMQ_LOG_JOB(LLMQ_LOG_INFO, job->acct->cfg->name, NULL,
                     "spool: every result of the previous run is written");
        unlink_claimed(sp);
    }
}

/* One spooled line for job (new string), or NULL. */
static char *job_line(const struct worker_job *job)
{
    /* A pause belongs to the key of this run: the next run only hands the
     * job back (its own key may be right). */
    const char *mode = strcmp(job->mode, "authpause") == 0 ? "handback" : job->mode;
    json_t *o = json_pack(
        "{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:s, s:I, s:i, s:I, s:I, s:I, "
        "s:I, s:I, s:I, s:I, s:I, s:i, s:i}",
        "v", 1, "mode", mode, "prio", job->prio, "eid", job->eid, "id", job->id, "handle",
        job->handle, "model", job->model, "actual", (json_int_t)job->actual_tokens, "reason",
        job->reason, "delay_ms", (json_int_t)job->delay_ms, "refund", job->refund, "pause_ms",
        (json_int_t)job->pause_ms, "rem_req", (json_int_t)job->rem_req, "rem_tok",
        (json_int_t)job->rem_tok, "reset_req_ms", (json_int_t)job->reset_req_ms, "reset_tok_ms",
        (json_int_t)job->reset_tok_ms, "lim_req", (json_int_t)job->lim_req, "lim_tok",
        (json_int_t)job->lim_tok, "cost", (json_int_t)job->cost, "attempts", job->attempts,
        "max_attempts", job->max_attempts);
    if (o != NULL && job->line != NULL)
        json_object_set_new(o, "line", json_string(job->line));
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return text;
}

int llmq_worker_spool_write(struct worker_account *a)
{
    const struct llmq_worker_config *cfg = a->w->cfg;
    int n = 0;
    if (a->settle_retry == NULL) {
        unlink_claimed(a->spool);
        return 0;
    }
    char path[2048], tmp[2100];
    char prefix[256];
    file_prefix(a, prefix, sizeof(prefix));
    snprintf(path, sizeof(path), "%s/%s%s%s", cfg->spool_dir, prefix, cfg->consumer, SPOOL_EXT);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    if (mkdir(cfg->spool_dir, 0700) != 0 && errno != EEXIST) {
        LLMQ_LOG_JOB(LLMQ_LOG_ERROR, a->cfg->name, NULL, "spool: cannot create %s: %s",
                     cfg->spool_dir, strerror(errno));
        return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (f == NULL) {
        if (fd >= 0)
            close(fd);
        LLMQ_LOG_JOB(LLMQ_LOG_ERROR, a->cfg->name, NULL, "spool: cannot write %s: %s", tmp,
                     strerror(errno));
        return -1;
    }
    int failed = 0;
    for (const struct worker_job *j = a->settle_retry; j != NULL; j = j->next) {
        char *line = job_line(j);
        if (line == NULL || fputs(line, f) == EOF || fputc('\n', f) == EOF)
            failed = 1;
        free(line);
        n++;
    }
    failed |= fflush(f) != 0 || fsync(fileno(f)) != 0;
    failed |= fclose(f) != 0;
    if (failed || rename(tmp, path) != 0) {
        LLMQ_LOG_JOB(LLMQ_LOG_ERROR, a->cfg->name, NULL, "spool: writing %s failed: %s", path,
                     strerror(errno));
        unlink(tmp);
        return -1;
    }
    unlink_claimed(a->spool); /* what they held is in this file now, or settled */
    LLMQ_LOG_JOB(LLMQ_LOG_WARN, a->cfg->name, NULL,
                 "spool: %d results redis could not take are kept in %s for the next start", n,
                 path);
    return n;
}

void llmq_worker_spool_free(struct worker_account *a)
{
    if (a == NULL || a->spool == NULL)
        return;
    for (int i = 0; i < a->spool->n_claimed; i++)
        free(a->spool->claimed[i]);
    free(a->spool->claimed);
    free(a->spool);
    a->spool = NULL;
}
