/* llmq_redis_async_new's contract (common/redis/redis_async.h): a missing
 * loop, url or config is an LLMQ_EINVAL error naming what is missing, never
 * a crash; with all three it starts (no server needed: it only connects when
 * the loop runs) and frees cleanly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>
#include <ev.h>

#include "redis/redis_async.h"

static void test_null_arguments(void **state)
{
    (void)state;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    assert_non_null(loop);
    struct llmq_redis_url url;
    assert_int_equal(llmq_redis_url_parse("redis://127.0.0.1:1/0", &url, NULL), LLMQ_OK);
    struct llmq_redis_async_config cfg = {.name = "test"};
    struct llmq_error err = {0};

    assert_null(llmq_redis_async_new(loop, &url, NULL, NULL, NULL, &err));
    assert_int_equal(err.rc, LLMQ_EINVAL);
    assert_non_null(strstr(err.msg, "no config"));

    assert_null(llmq_redis_async_new(loop, NULL, &cfg, NULL, NULL, &err));
    assert_int_equal(err.rc, LLMQ_EINVAL);
    assert_non_null(strstr(err.msg, "no url"));

    assert_null(llmq_redis_async_new(NULL, &url, &cfg, NULL, NULL, &err));
    assert_int_equal(err.rc, LLMQ_EINVAL);
    assert_non_null(strstr(err.msg, "no loop"));

    /* err may be NULL too */
    assert_null(llmq_redis_async_new(loop, &url, NULL, NULL, NULL, NULL));

    struct llmq_redis_async *ra = llmq_redis_async_new(loop, &url, &cfg, NULL, NULL, &err);
    assert_non_null(ra);
    assert_null(llmq_redis_async_context(ra)); /* not ready before the loop runs */
    llmq_redis_async_free(ra);
    ev_loop_destroy(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_null_arguments)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
