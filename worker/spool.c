/* The spool: settles that outlive a Redis outage and the worker; see spool.h.
 *
 * Ownership: the jobs stay on their account's waiting settles (job_settle.c
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
#include "job_settle.h"
#include "redis/redis.h"
#include "settle_request.h"
#include "worker.h"

#define SPOOL_EXT ".jsonl"
#define SPOOL_REPLAY ".replay-"

struct worker_spool {
    char **claimed; /* files claimed at start (new strings) */
    int n_claimed;
    int pending;    /* settles loaded from them not yet answered */
    int subscribed; /* on_slot_freed is subscribed to the slots */
};

static void on_slot_freed(void *ctx, const struct worker_job *job);

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

/* A job to settle from one spooled line; NULL when the line is unusable.
 * The spool never holds an authpause (llmq_worker_spool_write writes it as
 * a handback): one in a file is not ours. */
static struct worker_job *job_from_line(struct worker_account *a, const char *text)
{
    json_t *o = json_loads(text, 0, NULL);
    struct worker_job *job = o != NULL ? llmq_worker_job_new(&a->w->slots, a) : NULL;
    if (job == NULL) {
        json_decref(o);
        return NULL;
    }
    job->from_spool = 1;
    int ok = llmq_worker_settle_from_json(job, o) == 0 && llmq_name_valid(job->id) &&
             job->settle.mode != WORKER_SETTLE_AUTHPAUSE && (job->url_path = strdup("")) != NULL &&
             (job->body = strdup("")) != NULL;
    json_decref(o);
    if (!ok) {
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
        llmq_worker_job_take_spooled(job);
        llmq_worker_settle_keep(job);
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
    if (sp != NULL && !sp->subscribed &&
        llmq_worker_slot_freed_subscribe(&a->w->slots, on_slot_freed, a) == 0)
        sp->subscribed = 1;
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

/* A slot was given back (job_slot.h): when it was a replayed result of a's
 * (its settle answered), the last one deletes the claimed files. */
static void on_slot_freed(void *ctx, const struct worker_job *job)
{
    struct worker_account *a = ctx;
    struct worker_spool *sp = a->spool;
    if (job->acct != a || !job->from_spool || sp == NULL)
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
    enum worker_settle_mode mode =
        job->settle.mode == WORKER_SETTLE_AUTHPAUSE ? WORKER_SETTLE_HANDBACK : job->settle.mode;
    json_t *o = llmq_worker_settle_to_json(job, mode);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return text;
}

int llmq_worker_spool_write(struct worker_account *a)
{
    const struct llmq_worker_config *cfg = a->w->cfg;
    int n = 0;
    if (llmq_worker_settle_waiting_first(a) == NULL) {
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
    for (const struct worker_job *j = llmq_worker_settle_waiting_first(a); j != NULL; j = j->next) {
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
