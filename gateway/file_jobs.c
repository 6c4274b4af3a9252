/* Records of an uploaded file's requests (see file_jobs.h). */
#include "file_jobs.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse_int.h"
#include "llmq/priority.h"

#define MAGIC "J1 "
#define NUMS 15 /* the header's numbers: all but the priority */
#define HEAD_MAX (16 + NUMS * 22)

static size_t opt_len(const char *s)
{
    return s ? strlen(s) : 0;
}

int gw_file_job_encode(const struct llmq_job *j, long line, char **out, size_t *len)
{
    size_t id = strlen(j->id), model = strlen(j->model), url = strlen(j->url);
    size_t tenant = opt_len(j->tenant), user = opt_len(j->user);
    char head[HEAD_MAX];
    int hl = snprintf(head, sizeof(head),
                      MAGIC "%s %ld %lld %lld %d %lld %lld %lld %lld %lld %zu %zu %zu %lld %lld "
                            "%zu\n",
                      llmq_priority_name(j->priority), line, j->deadline_ms, j->ttl_ms,
                      j->max_attempts, j->cost.prompt_tokens, j->cost.completion_tokens,
                      j->cost.estimated_tokens, j->cost.margin_tokens, j->cost.total_tokens, id,
                      model, url, j->tenant ? (long long)tenant : -1LL,
                      j->user ? (long long)user : -1LL, j->body_len);
    if (hl < 0 || (size_t)hl >= sizeof(head))
        return -1;
    size_t n = (size_t)hl + id + model + url + tenant + user + j->body_len + 6;
    char *p = malloc(n);
    if (p == NULL)
        return -1;
    size_t k = 0;
    memcpy(p, head, (size_t)hl);
    k += (size_t)hl;
    const char *parts[] = {j->id, j->model, j->url, j->tenant, j->user, j->body};
    const size_t lens[] = {id, model, url, tenant, user, j->body_len};
    for (int i = 0; i < 6; i++) {
        if (lens[i] > 0)
            memcpy(p + k, parts[i], lens[i]);
        k += lens[i];
        p[k++] = '\0';
    }
    *out = p;
    *len = n;
    return 0;
}

/* Reads one integer of p[0..end) (an optional '-', then digits) into *v;
 * returns where it ends, or NULL. Never reads at or past end: a record from
 * Redis has no terminating NUL (strtoll would read on). */
static const char *read_num(const char *p, const char *end, long long *v)
{
    int neg = p < end && *p == '-';
    const char *q = p + neg;
    while (q < end && *q >= '0' && *q <= '9')
        q++;
    int64_t x;
    if (llmq_parse_digits(p + neg, (size_t)(q - p - neg), 0, INT64_MAX, &x) != 0)
        return NULL;
    *v = neg ? -x : x;
    return q;
}

/* Reads n space-separated integers of the header; returns where the header
 * ends (after its '\n') or NULL. */
static const char *read_nums(const char *p, const char *end, long long *v, int n)
{
    for (int i = 0; i < n; i++) {
        const char *next = read_num(p, end, &v[i]);
        if (next == NULL || next >= end || *next != (i + 1 < n ? ' ' : '\n'))
            return NULL;
        p = next + 1;
    }
    return p;
}

int gw_file_job_decode(const char *rec, size_t len, struct llmq_job *j, long *line)
{
    const char *end = rec + len;
    size_t ml = strlen(MAGIC);
    if (len < ml + 2 * NUMS || memcmp(rec, MAGIC, ml) != 0)
        return -1;
    /* the priority's name, then the numbers */
    const char *word = rec + ml;
    const char *sp = memchr(word, ' ', (size_t)(end - word) < 8 ? (size_t)(end - word) : 8);
    char name[8];
    enum llmq_priority prio;
    if (sp == NULL || (size_t)(sp - word) >= sizeof(name))
        return -1;
    memcpy(name, word, (size_t)(sp - word));
    name[sp - word] = '\0';
    if (llmq_priority_parse(name, &prio) != 0)
        return -1;
    long long v[NUMS];
    const char *p = read_nums(sp + 1, end, v, NUMS);
    if (p == NULL)
        return -1;
    /* v: line, deadline, ttl, attempts, 5 costs, then the six strings'
     * lengths; the strings, each with its NUL, fill the rest exactly */
    const long long *lens = v + 9;
    long long want = 0;
    for (int i = 0; i < 6; i++) {
        if (lens[i] < ((i == 3 || i == 4) ? -1 : 0) || lens[i] > (long long)len)
            return -1;
        want += (lens[i] < 0 ? 0 : lens[i]) + 1;
    }
    if (want != end - p)
        return -1;
    const char *s[6];
    for (int i = 0; i < 6; i++) {
        long long l = lens[i] < 0 ? 0 : lens[i];
        if (p[l] != '\0')
            return -1;
        s[i] = p;
        p += l + 1;
    }
    const char *url = llmq_job_url_known(s[2]);
    if (url == NULL || s[0][0] == '\0' || s[1][0] == '\0' || v[3] < 0 ||
        v[3] > LLMQ_JOB_MAX_ATTEMPTS_LIMIT)
        return -1;
    memset(j, 0, sizeof(*j));
    j->id = (char *)s[0];
    j->model = (char *)s[1];
    j->url = url;
    j->tenant = lens[3] < 0 ? NULL : (char *)s[3];
    j->user = lens[4] < 0 ? NULL : (char *)s[4];
    j->body = (char *)s[5];
    j->body_len = (size_t)lens[5];
    j->priority = prio;
    j->deadline_ms = v[1];
    j->ttl_ms = v[2];
    j->max_attempts = (int)v[3];
    j->cost.prompt_tokens = v[4];
    j->cost.completion_tokens = v[5];
    j->cost.estimated_tokens = v[6];
    j->cost.margin_tokens = v[7];
    j->cost.total_tokens = v[8];
    *line = (long)v[0];
    return 0;
}
