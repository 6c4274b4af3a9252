/* Records of an uploaded file's requests (see file_jobs.h). */
#include "file_jobs.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse_int.h"
#include "llmq/priority.h"

#define MAGIC "J1 "
#define MAGIC_FB "J2 "       /* J1 and the job's cost as its model's fallback */
#define MAGIC_CACHE "J3 "    /* J1 and the job's response cache terms */
#define MAGIC_FB_CACHE "J4 " /* J2 and the job's response cache terms */
#define NUMS 15              /* J1's header numbers: all but the priority */
#define NUMS_FB 3            /* J2's more: the fallback's total and prompt, its name's length */
#define NUMS_CACHE 3         /* J3's more: cache mode (enum llmq_job_cache), TTL, truncated */
#define HEAD_MAX (16 + (NUMS + NUMS_FB + NUMS_CACHE) * 22)

static size_t opt_len(const char *s)
{
    return s ? strlen(s) : 0;
}

int gw_file_job_encode(const struct llmq_job *j, long line, char **out, size_t *len)
{
    size_t id = strlen(j->id), model = strlen(j->model), url = strlen(j->url);
    size_t tenant = opt_len(j->tenant), user = opt_len(j->user);
    size_t fb = opt_len(j->fallback_model);
    int has_fb = j->fallback_model != NULL;
    int has_cache = j->cache != LLMQ_JOB_CACHE_OFF && j->cache_key[0] != '\0';
    size_t key = has_cache ? strlen(j->cache_key) : 0;
    const char *magic =
        has_fb ? (has_cache ? MAGIC_FB_CACHE : MAGIC_FB) : (has_cache ? MAGIC_CACHE : MAGIC);
    char head[HEAD_MAX];
    int hl = snprintf(head, sizeof(head),
                      "%s%s %ld %lld %lld %d %lld %lld %lld %lld %lld %zu %zu %zu %lld %lld %zu",
                      magic, llmq_priority_name(j->priority), line, j->deadline_ms, j->ttl_ms,
                      j->max_attempts, j->cost.prompt_tokens, j->cost.completion_tokens,
                      j->cost.estimated_tokens, j->cost.margin_tokens, j->cost.total_tokens, id,
                      model, url, j->tenant ? (long long)tenant : -1LL,
                      j->user ? (long long)user : -1LL, j->body_len);
    if (hl >= 0 && (size_t)hl < sizeof(head) && has_fb)
        hl += snprintf(head + hl, sizeof(head) - (size_t)hl, " %lld %lld %zu",
                       j->fallback_cost.total_tokens, j->fallback_cost.prompt_tokens, fb);
    if (hl >= 0 && (size_t)hl < sizeof(head) && has_cache)
        hl += snprintf(head + hl, sizeof(head) - (size_t)hl, " %d %lld %d", (int)j->cache,
                       j->cache_ttl_s, j->cache_store_truncated ? 1 : 0);
    if (hl >= 0 && (size_t)hl < sizeof(head))
        hl += snprintf(head + hl, sizeof(head) - (size_t)hl, "\n");
    if (hl < 0 || (size_t)hl >= sizeof(head))
        return -1;
    int n_parts = 6 + has_fb + has_cache;
    size_t n =
        (size_t)hl + id + model + url + tenant + user + j->body_len + fb + key + (size_t)n_parts;
    char *p = malloc(n);
    if (p == NULL)
        return -1;
    size_t k = 0;
    memcpy(p, head, (size_t)hl);
    k += (size_t)hl;
    const char *parts[] = {j->id,   j->model,          j->url,      j->tenant, j->user,
                           j->body, j->fallback_model, j->cache_key};
    const size_t lens[] = {id, model, url, tenant, user, j->body_len, fb, key};
    for (int i = 0; i < 8; i++) {
        if ((i == 6 && !has_fb) || (i == 7 && !has_cache))
            continue;
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
    if (len < ml + 2 * NUMS)
        return -1;
    int has_fb = memcmp(rec, MAGIC_FB, ml) == 0 || memcmp(rec, MAGIC_FB_CACHE, ml) == 0;
    int has_cache = memcmp(rec, MAGIC_CACHE, ml) == 0 || memcmp(rec, MAGIC_FB_CACHE, ml) == 0;
    if (!has_fb && !has_cache && memcmp(rec, MAGIC, ml) != 0)
        return -1;
    int nums = NUMS + (has_fb ? NUMS_FB : 0) + (has_cache ? NUMS_CACHE : 0);
    int n_parts = 6 + has_fb + has_cache;
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
    long long v[NUMS + NUMS_FB + NUMS_CACHE];
    const char *p = read_nums(sp + 1, end, v, nums);
    if (p == NULL)
        return -1;
    /* v: line, deadline, ttl, attempts, 5 costs, then the six strings'
     * lengths (J2: the fallback's total and prompt, then the seventh's);
     * the strings, each with its NUL, fill the rest exactly */
    long long lens[8];
    memcpy(lens, v + 9, 6 * sizeof(lens[0]));
    if (has_fb)
        lens[6] = v[17];
    const long long *cv = v + NUMS + (has_fb ? NUMS_FB : 0); /* mode, TTL, truncated */
    if (has_cache) {
        lens[n_parts - 1] = LLMQ_JOB_CACHE_KEY_HEX;
        if (cv[0] < LLMQ_JOB_CACHE_DEFAULT || cv[0] > LLMQ_JOB_CACHE_REFRESH ||
            cv[0] == LLMQ_JOB_CACHE_OFF || cv[1] < 0 || cv[1] > LLMQ_JOB_CACHE_TTL_S_MAX ||
            (cv[2] != 0 && cv[2] != 1))
            return -1;
    }
    long long want = 0;
    for (int i = 0; i < n_parts; i++) {
        if (lens[i] < ((i == 3 || i == 4) ? -1 : 0) || lens[i] > (long long)len)
            return -1;
        want += (lens[i] < 0 ? 0 : lens[i]) + 1;
    }
    if (want != end - p)
        return -1;
    const char *s[8];
    for (int i = 0; i < n_parts; i++) {
        long long l = lens[i] < 0 ? 0 : lens[i];
        if (p[l] != '\0')
            return -1;
        s[i] = p;
        p += l + 1;
    }
    const char *url = llmq_job_url_known(s[2]);
    if (url == NULL || s[0][0] == '\0' || s[1][0] == '\0' || v[3] < 0 ||
        v[3] > LLMQ_JOB_MAX_ATTEMPTS_LIMIT || (has_fb && s[6][0] == '\0'))
        return -1;
    for (int i = 0; has_cache && i < LLMQ_JOB_CACHE_KEY_HEX; i++) {
        char h = s[n_parts - 1][i]; /* the key: 64 lower-case hex digits */
        if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f')))
            return -1;
    }
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
    if (has_fb) {
        j->fallback_model = (char *)s[6];
        j->fallback_cost.total_tokens = v[15];
        j->fallback_cost.prompt_tokens = v[16];
    }
    j->cache = LLMQ_JOB_CACHE_OFF;
    if (has_cache) {
        memcpy(j->cache_key, s[n_parts - 1], LLMQ_JOB_CACHE_KEY_HEX + 1);
        j->cache = (enum llmq_job_cache)cv[0];
        j->cache_ttl_s = cv[1];
        j->cache_store_truncated = (int)cv[2];
    }
    *line = (long)v[0];
    return 0;
}
