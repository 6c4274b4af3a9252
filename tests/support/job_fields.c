/* See job_fields.h. */
#include "job_fields.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/job_result.h"
#include "redis/script.h"

char *llmq_test_job_bytes(redisContext *c, const char *prefix, const char *id, const char *field,
                          size_t *len)
{
    *len = 0;
    const char *argv[] = {prefix, id, field};
    redisReply *r = llmq_script_run(c, LLMQ_SCRIPT_JOB_FIELDS, 1, 3, argv, NULL, NULL);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 1) {
        fprintf(stderr, "job_fields %s %s: %s\n", id, field,
                r && r->type == REDIS_REPLY_ERROR ? r->str : "no reply");
        abort();
    }
    char *v = NULL;
    if (r->element[0]->type == REDIS_REPLY_STRING) {
        v = malloc(r->element[0]->len + 1);
        if (v != NULL) {
            memcpy(v, r->element[0]->str, r->element[0]->len);
            v[r->element[0]->len] = '\0';
            *len = r->element[0]->len;
        }
    }
    freeReplyObject(r);
    return v;
}

char *llmq_test_job_field(redisContext *c, const char *prefix, const char *id, const char *field)
{
    size_t len = 0;
    return llmq_test_job_bytes(c, prefix, id, field, &len);
}

long long llmq_test_job_int(redisContext *c, const char *prefix, const char *id, const char *field,
                            long long def)
{
    char *v = llmq_test_job_field(c, prefix, id, field);
    long long n = v != NULL ? strtoll(v, NULL, 10) : def;
    free(v);
    return n;
}

int llmq_test_job_exists(redisContext *c, const char *prefix, const char *id)
{
    char *v = llmq_test_job_field(c, prefix, id, "state");
    int yes = v != NULL;
    free(v);
    return yes;
}

char *llmq_test_job_result(redisContext *c, const char *prefix, const char *id)
{
    struct llmq_job_result r;
    struct llmq_error err = {0};
    if (llmq_job_result_read(c, prefix, &id, 1, &r, &err) != LLMQ_OK) {
        fprintf(stderr, "reading the result of %s: %s\n", id, err.msg);
        abort();
    }
    return r.line; /* taken: new */
}
