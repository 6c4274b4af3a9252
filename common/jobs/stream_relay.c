/* The stream relay's messages; see stream_relay.h. */
#include "jobs/stream_relay.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/parse_int.h"
#include "redis/redis.h"

/* 1 when s[0..n) (not NUL-terminated) is a name (llmq_name_valid). */
static int name_ok(const char *s, size_t n)
{
    char b[LLMQ_RELAY_NAME_MAX + 1];
    if (n == 0 || n > LLMQ_RELAY_NAME_MAX || memchr(s, '\0', n) != NULL)
        return 0;
    memcpy(b, s, n);
    b[n] = '\0';
    return llmq_name_valid(b);
}

int llmq_relay_attempt_parse(const char *s, size_t n, struct llmq_relay_attempt *a)
{
    const char *dash = s != NULL ? memchr(s, '-', n) : NULL;
    int64_t ms, k;
    if (dash == NULL || n > LLMQ_RELAY_ATTEMPT_MAX ||
        llmq_parse_digits(s, (size_t)(dash - s), 0, INT64_MAX, &ms) != 0 ||
        llmq_parse_digits(dash + 1, n - (size_t)(dash - s) - 1, 0, INT64_MAX, &k) != 0)
        return -1;
    a->ms = (long long)ms;
    a->n = (long long)k;
    return 0;
}

int llmq_relay_attempt_cmp(const struct llmq_relay_attempt *a, const struct llmq_relay_attempt *b)
{
    if (a->ms != b->ms)
        return a->ms < b->ms ? -1 : 1;
    return a->n < b->n ? -1 : a->n > b->n;
}

int llmq_relay_frame_head(char *out, size_t n, char kind, long long seq, const char *job_id,
                          const char *attempt, size_t payload_len)
{
    struct llmq_relay_attempt a;
    if (job_id == NULL || !name_ok(job_id, strlen(job_id)) || seq < 0 ||
        strchr(LLMQ_RELAY_KINDS, kind) == NULL || kind == '\0' ||
        payload_len > LLMQ_RELAY_PAYLOAD_MAX || attempt == NULL ||
        llmq_relay_attempt_parse(attempt, strlen(attempt), &a) != 0)
        return -1;
    int k =
        snprintf(out, n, "%c%lld %s %lld-%lld %zu\n", kind, seq, job_id, a.ms, a.n, payload_len);
    return k > 0 && (size_t)k < n ? k : -1;
}

long llmq_relay_sender(const char *m, size_t n, const char **name, size_t *name_len)
{
    const char *nl = m != NULL ? memchr(m, '\n', n) : NULL;
    if (nl == NULL || !name_ok(m, (size_t)(nl - m)))
        return -1;
    *name = m;
    *name_len = (size_t)(nl - m);
    return (long)(nl - m) + 1;
}

/* The field of s[0..n) up to the byte stop: its length, or -1 without stop. */
static long field(const char *s, size_t n, char stop)
{
    const char *at = memchr(s, stop, n);
    return at != NULL ? (long)(at - s) : -1;
}

int llmq_relay_frame_next(const char *m, size_t n, size_t *off, struct llmq_relay_frame *f)
{
    if (*off >= n)
        return 0;
    const char *p = m + *off;
    size_t left = n - *off;
    long seq_len = field(p + 1, left - 1, ' ');
    if (strchr(LLMQ_RELAY_KINDS, p[0]) == NULL || p[0] == '\0' || seq_len <= 0)
        return -1;
    int64_t seq, len;
    if (llmq_parse_digits(p + 1, (size_t)seq_len, 0, INT64_MAX / 2, &seq) != 0)
        return -1;
    const char *id = p + 1 + seq_len + 1;
    size_t rest = left - 1 - (size_t)seq_len - 1;
    long id_len = field(id, rest, ' ');
    if (id_len <= 0 || !name_ok(id, (size_t)id_len))
        return -1;
    const char *num = id + id_len + 1;
    rest -= (size_t)id_len + 1;
    long len_len = field(num, rest, '\n');
    f->attempt = (struct llmq_relay_attempt){0, 0};
    const char *sp = len_len > 0 ? memchr(num, ' ', (size_t)len_len) : NULL;
    if (sp != NULL) { /* <attempt> <len> */
        if (llmq_relay_attempt_parse(num, (size_t)(sp - num), &f->attempt) != 0)
            return -1;
        size_t skip = (size_t)(sp - num) + 1;
        num += skip;
        rest -= skip;
        len_len -= (long)skip;
    }
    if (len_len <= 0 ||
        llmq_parse_digits(num, (size_t)len_len, 0, LLMQ_RELAY_PAYLOAD_MAX, &len) != 0 ||
        (size_t)len > rest - (size_t)len_len - 1)
        return -1;
    f->kind = p[0];
    f->seq = (long long)seq;
    f->job_id = id;
    f->job_id_len = (size_t)id_len;
    f->payload = num + len_len + 1;
    f->payload_len = (size_t)len;
    *off = (size_t)(f->payload + f->payload_len - m);
    return 1;
}

int llmq_relay_cancel_encode(char *out, size_t n, const char *job_id)
{
    if (job_id == NULL || !name_ok(job_id, strlen(job_id)))
        return -1;
    int k = snprintf(out, n, "c %s", job_id);
    return k > 0 && (size_t)k < n ? k : -1;
}

int llmq_relay_cancel_decode(const char *m, size_t n, const char **job_id, size_t *job_id_len)
{
    if (m == NULL || n < 3 || m[0] != 'c' || m[1] != ' ' || !name_ok(m + 2, n - 2))
        return -1;
    *job_id = m + 2;
    *job_id_len = n - 2;
    return 0;
}
