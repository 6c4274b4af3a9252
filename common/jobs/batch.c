/* Batch files: read whole, split into lines, each line through the job codec,
 * custom_ids checked for repeats across the file.
 *
 * Decoding, validation and cost estimation dominate enqueue's client time, and
 * lines are independent: a large file is cut at line ends into one part per
 * CPU, each checked on its own thread; the parts are then merged in file order
 * on the calling thread, which alone checks ids for repeats (so "first on
 * line N" is always the earlier line). The batch owns its jobs and errors; the
 * duplicate set borrows job ids and lives only inside the merge. */
#include "jobs/batch.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jobs/job_idset.h"

/* Below this size a file is checked on one thread: threads would cost more. */
#define PARALLEL_MIN_BYTES (256 * 1024)

/* Threads for checking one file: one per online CPU, at most the maximum. */
static int batch_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > LLMQ_BATCH_THREADS_MAX ? LLMQ_BATCH_THREADS_MAX : (int)n;
}

void llmq_batch_clear(struct llmq_batch *b)
{
    if (b == NULL)
        return;
    for (size_t i = 0; i < b->n_jobs; i++)
        llmq_job_clear(&b->jobs[i]);
    free(b->jobs);
    free(b->job_lines);
    free(b->errors);
    memset(b, 0, sizeof(*b));
}

static int is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            return 0;
    return 1;
}

/* Appends an error for line. Returns 0, or -1 when out of memory. */
static int add_error(struct llmq_batch_error **errors, size_t *n, size_t *cap, long line,
                     const struct llmq_error *e)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        struct llmq_batch_error *ne = realloc(*errors, nc * sizeof(*ne));
        if (ne == NULL)
            return -1;
        *errors = ne;
        *cap = nc;
    }
    struct llmq_batch_error *be = &(*errors)[(*n)++];
    be->line = line;
    be->rc = e->rc;
    snprintf(be->msg, sizeof(be->msg), "%s", e->msg);
    return 0;
}

/* Counts lines, an upper bound on the number of jobs. */
static size_t count_lines(const char *buf, size_t len)
{
    size_t n = 1;
    for (const char *p = buf; (p = memchr(p, '\n', (size_t)(buf + len - p))) != NULL; p++)
        n++;
    return n;
}

/* A part of the file parsed by one thread: whole lines, numbered from
 * first_line. Results stay in the segment until the merge. */
struct segment {
    const char *buf;
    size_t len;
    long first_line;
    const struct llmq_job_defaults *d;
    struct llmq_batch b; /* jobs, job_lines, errors of this part only */
    size_t err_cap;
    int failed; /* out of memory */
};

static void *parse_segment(void *arg)
{
    struct segment *g = arg;
    size_t max_jobs = count_lines(g->buf, g->len);
    g->b.jobs = calloc(max_jobs, sizeof(*g->b.jobs));
    g->b.job_lines = calloc(max_jobs, sizeof(*g->b.job_lines));
    g->failed = g->b.jobs == NULL || g->b.job_lines == NULL;
    long line = g->first_line - 1;
    for (size_t pos = 0; !g->failed && pos < g->len;) {
        const char *s = g->buf + pos;
        const char *nl = memchr(s, '\n', g->len - pos);
        size_t n = nl ? (size_t)(nl - s) : g->len - pos;
        pos += n + 1;
        line++;
        if (n > 0 && s[n - 1] == '\r')
            n--;
        if (is_blank(s, n))
            continue;
        struct llmq_error e = {0};
        struct llmq_job *j = &g->b.jobs[g->b.n_jobs];
        if (llmq_job_from_line(s, n, g->d, j, &e) == LLMQ_OK)
            g->b.job_lines[g->b.n_jobs++] = line;
        else if (e.rc == LLMQ_ENOMEM ||
                 add_error(&g->b.errors, &g->b.n_errors, &g->err_cap, line, &e) != 0)
            g->failed = 1;
    }
    return NULL;
}

/* Splits buf into n segments at line ends (fewer when lines are few). */
static int split(const char *buf, size_t len, const struct llmq_job_defaults *d,
                 struct segment *segs, int n)
{
    size_t pos = 0;
    long line = 1;
    int k = 0;
    for (; k < n && pos < len; k++) {
        size_t end = k == n - 1 ? len : pos + (len - pos) / (size_t)(n - k);
        const char *nl = end < len ? memchr(buf + end, '\n', len - end) : NULL;
        end = nl ? (size_t)(nl - buf) + 1 : len;
        segs[k] = (struct segment){.buf = buf + pos, .len = end - pos, .first_line = line, .d = d};
        for (const char *p = buf + pos; (p = memchr(p, '\n', (size_t)(buf + end - p))) != NULL; p++)
            line++;
        pos = end;
    }
    return k;
}

static int error_line_cmp(const void *a, const void *b)
{
    long x = ((const struct llmq_batch_error *)a)->line;
    long y = ((const struct llmq_batch_error *)b)->line;
    return (x > y) - (x < y);
}

/* Moves the segments' jobs into out in file order, turning repeated ids into
 * errors, and gathers every error in line order. */
static int merge(struct segment *segs, int n, size_t total_jobs, struct llmq_batch *out)
{
    size_t err_cap = 0;
    struct llmq_job_idset *ids = llmq_job_idset_new(total_jobs);
    out->jobs = calloc(total_jobs + 1, sizeof(*out->jobs));
    out->job_lines = calloc(total_jobs + 1, sizeof(*out->job_lines));
    int failed = ids == NULL || out->jobs == NULL || out->job_lines == NULL;
    for (int k = 0; k < n; k++) {
        struct llmq_batch *b = &segs[k].b;
        for (size_t i = 0; i < b->n_errors && !failed; i++) {
            struct llmq_error e = {.rc = b->errors[i].rc};
            snprintf(e.msg, sizeof(e.msg), "%s", b->errors[i].msg);
            failed = add_error(&out->errors, &out->n_errors, &err_cap, b->errors[i].line, &e) != 0;
        }
        for (size_t i = 0; i < b->n_jobs && !failed; i++) {
            long first = 0;
            int added = llmq_job_idset_add(ids, b->jobs[i].id, b->job_lines[i], &first);
            if (added == 1) {
                out->jobs[out->n_jobs] = b->jobs[i];
                out->job_lines[out->n_jobs++] = b->job_lines[i];
                memset(&b->jobs[i], 0, sizeof(b->jobs[i])); /* moved */
                continue;
            }
            struct llmq_error e = {0};
            llmq_error_set(&e, LLMQ_EDUPLICATE, "duplicate custom_id \"%.60s\" (first on line %ld)",
                           b->jobs[i].id, first);
            failed = added < 0 ||
                     add_error(&out->errors, &out->n_errors, &err_cap, b->job_lines[i], &e) != 0;
        }
    }
    llmq_job_idset_free(ids);
    if (!failed && out->n_errors > 1)
        qsort(out->errors, out->n_errors, sizeof(*out->errors), error_line_cmp);
    return failed ? -1 : 0;
}

enum llmq_rc llmq_batch_parse(const char *buf, size_t len, const struct llmq_job_defaults *d,
                              struct llmq_batch *out, struct llmq_error *err)
{
    struct segment segs[LLMQ_BATCH_THREADS_MAX];
    pthread_t threads[LLMQ_BATCH_THREADS_MAX];
    int started[LLMQ_BATCH_THREADS_MAX] = {0};
    int want = len >= PARALLEL_MIN_BYTES ? batch_threads() : 1;
    int n = split(buf, len, d, segs, want), failed = 0;
    size_t total = 0;
    /* jansson seeds its hash function on first use; do that before threads */
    json_object_seed(0);
    /* segment 0 runs on this thread, the others on their own (or here too,
     * when a thread cannot be had) */
    for (int k = 1; k < n; k++) {
        started[k] = pthread_create(&threads[k], NULL, parse_segment, &segs[k]) == 0;
        if (!started[k])
            parse_segment(&segs[k]);
    }
    if (n > 0)
        parse_segment(&segs[0]);
    for (int k = 1; k < n; k++)
        if (started[k])
            pthread_join(threads[k], NULL);
    for (int k = 0; k < n; k++) {
        failed |= segs[k].failed;
        total += segs[k].b.n_jobs;
    }
    if (!failed)
        failed = merge(segs, n, total, out) != 0;
    for (int k = 0; k < n; k++)
        llmq_batch_clear(&segs[k].b);
    if (failed) {
        llmq_batch_clear(out);
        return llmq_error_set(err, LLMQ_ENOMEM, "batch: out of memory");
    }
    return LLMQ_OK;
}

enum llmq_rc llmq_batch_read_file(const char *path, char **buf, size_t *len, struct llmq_error *err)
{
    int is_stdin = strcmp(path, "-") == 0;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (f == NULL)
        return llmq_error_set(err, LLMQ_EIO, "%s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    enum llmq_rc rc = b ? LLMQ_OK : llmq_error_set(err, LLMQ_ENOMEM, "out of memory");
    while (rc == LLMQ_OK) {
        if (cap - n < 2) {
            char *nb = realloc(b, cap * 2);
            if (nb == NULL) {
                rc = llmq_error_set(err, LLMQ_ENOMEM, "%s: out of memory", path);
                break;
            }
            b = nb;
            cap *= 2;
        }
        size_t got = fread(b + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) {
            if (ferror(f))
                rc = llmq_error_set(err, LLMQ_EIO, "%s: read error", path);
            break;
        }
    }
    if (!is_stdin)
        fclose(f);
    if (rc != LLMQ_OK) {
        free(b);
        return rc;
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return LLMQ_OK;
}
