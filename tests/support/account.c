/* A fresh test account (see account.h). */
#include "account.h"

#include <stdio.h>
#include <stdlib.h>

#include "redis/redis.h"
#include "testsupport.h"

void llmq_test_account_open(struct llmq_test_account *a, const char *tag)
{
    llmq_test_unique_name(a->name, sizeof(a->name), tag);
    llmq_account_prefix(a->name, a->prefix, sizeof(a->prefix), NULL);
    struct llmq_producer_options o = {.redis_url = llmq_test_redis_url(), .account = a->name};
    struct llmq_error err = {0};
    a->producer = NULL;
    if (llmq_producer_open(&o, &a->producer, &err) != LLMQ_OK) {
        fprintf(stderr, "test: cannot open a producer for %s: %s\n", a->name, err.msg);
        exit(1);
    }
    a->c = llmq_test_redis_connect();
}

void llmq_test_account_close(struct llmq_test_account *a)
{
    llmq_producer_close(a->producer);
    a->producer = NULL;
    redisFree(a->c);
    a->c = NULL;
}
