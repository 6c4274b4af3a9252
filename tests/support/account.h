/* A fresh account for a test: a name no other test or run uses, its key
 * prefix, a producer and a synchronous connection, all on the fixture
 * redis-server (testsupport.h). One thread; a failure to open ends the test
 * process with a message (the fixture is broken, nothing to assert). */
#ifndef LLMQ_TEST_ACCOUNT_H
#define LLMQ_TEST_ACCOUNT_H

#include <hiredis/hiredis.h>

#include "llmq/llmq.h"

struct llmq_test_account {
    char name[96];
    char prefix[128]; /* "llmq:{name}:" */
    struct llmq_producer *producer;
    redisContext *c;
};

/* Opens a new account named "<tag>-<unique>" into a. */
void llmq_test_account_open(struct llmq_test_account *a, const char *tag);

/* Closes the producer and the connection. */
void llmq_test_account_close(struct llmq_test_account *a);

#endif
