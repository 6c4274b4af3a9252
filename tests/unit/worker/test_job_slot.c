/* worker/job_slot.c: the job's phases and the slots.
 *   - the transition table: each step of a job's life is allowed, every
 *     other pair is not (a skipped step, a step back, leaving RELEASED);
 *   - the slots: hold and release count a job in hand, the held list keeps
 *     it until it is freed, and a freed slot runs every slot_freed
 *     subscriber once, in subscription order, with the job still readable
 *     and already out of the count. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "job_slot.h"

static void test_transitions(void **state)
{
    (void)state;
    static const struct {
        enum worker_job_phase from, to;
    } steps[] = {
        {WORKER_JOB_NEW, WORKER_JOB_HELD},         {WORKER_JOB_NEW, WORKER_JOB_WAITING},
        {WORKER_JOB_HELD, WORKER_JOB_CALLING},     {WORKER_JOB_HELD, WORKER_JOB_DECIDED},
        {WORKER_JOB_CALLING, WORKER_JOB_DECIDED},  {WORKER_JOB_DECIDED, WORKER_JOB_SETTLING},
        {WORKER_JOB_DECIDED, WORKER_JOB_RELEASED}, {WORKER_JOB_SETTLING, WORKER_JOB_RELEASED},
        {WORKER_JOB_SETTLING, WORKER_JOB_WAITING}, {WORKER_JOB_WAITING, WORKER_JOB_SETTLING},
    };
    int allowed = 0;
    for (int from = 0; from < WORKER_JOB_PHASE_COUNT; from++) {
        for (int to = 0; to < WORKER_JOB_PHASE_COUNT; to++) {
            int expected = 0;
            for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
                expected |= (int)steps[i].from == from && (int)steps[i].to == to;
            assert_int_equal(llmq_worker_job_phase_allowed(from, to), expected);
            allowed += expected;
        }
    }
    assert_int_equal(allowed, 10);
    /* Out of range on either side: never. */
    assert_false(llmq_worker_job_phase_allowed(WORKER_JOB_PHASE_COUNT, WORKER_JOB_HELD));
    assert_false(llmq_worker_job_phase_allowed(WORKER_JOB_NEW, WORKER_JOB_PHASE_COUNT));
    assert_string_equal(llmq_worker_job_phase_name(WORKER_JOB_SETTLING), "settling");
    assert_string_equal(llmq_worker_job_phase_name(WORKER_JOB_PHASE_COUNT), "?");
}

struct seen {
    int calls[2];
    int order[6], n; /* three releases, two hooks each */
    int in_hand_then;
    char id_then[16];
};

static struct worker_slots slots;
static struct seen seen;

static void first(void *ctx, const struct worker_job *job)
{
    (void)ctx;
    seen.calls[0]++;
    seen.order[seen.n++] = 0;
    seen.in_hand_then = slots.in_hand;
    snprintf(seen.id_then, sizeof(seen.id_then), "%s", job->id);
    assert_int_equal(job->phase, WORKER_JOB_RELEASED);
}

static void second(void *ctx, const struct worker_job *job)
{
    (void)job;
    assert_ptr_equal(ctx, &seen);
    seen.calls[1]++;
    seen.order[seen.n++] = 1;
}

/* A job that went the whole way to its settle's answer. */
static struct worker_job *settled_job(const char *id)
{
    struct worker_job *job = llmq_worker_job_new(&slots, NULL);
    assert_non_null(job);
    job->id = strdup(id);
    llmq_worker_job_hold(job);
    llmq_worker_job_set_phase(job, WORKER_JOB_CALLING);
    llmq_worker_job_set_phase(job, WORKER_JOB_DECIDED);
    llmq_worker_job_set_phase(job, WORKER_JOB_SETTLING);
    return job;
}

static void test_slots_and_the_freed_hook(void **state)
{
    (void)state;
    memset(&seen, 0, sizeof(seen));
    llmq_worker_slots_init(&slots);
    assert_int_equal(llmq_worker_slot_freed_subscribe(&slots, first, NULL), 0);
    assert_int_equal(llmq_worker_slot_freed_subscribe(&slots, second, &seen), 0);

    struct worker_job *a = settled_job("job-a");
    struct worker_job *b = settled_job("job-b");
    assert_int_equal(slots.in_hand, 2);
    assert_ptr_equal(slots.held, b);
    assert_ptr_equal(b->held_next, a);

    llmq_worker_job_release(a);
    assert_int_equal(slots.in_hand, 1);
    assert_int_equal(seen.calls[0], 1);
    assert_int_equal(seen.calls[1], 1);
    assert_int_equal(seen.order[0], 0);
    assert_int_equal(seen.order[1], 1);
    assert_int_equal(seen.in_hand_then, 1); /* the slot was back before the hook ran */
    assert_string_equal(seen.id_then, "job-a");
    assert_ptr_equal(slots.held, b); /* a left the held list */
    assert_null(b->held_next);

    /* A spooled job takes a slot but is not held. */
    struct worker_job *s = llmq_worker_job_new(&slots, NULL);
    s->id = strdup("job-s");
    llmq_worker_job_take_spooled(s);
    assert_int_equal(s->phase, WORKER_JOB_WAITING);
    assert_int_equal(slots.in_hand, 2);
    assert_ptr_equal(slots.held, b);
    llmq_worker_job_set_phase(s, WORKER_JOB_SETTLING);
    llmq_worker_job_release(s);
    llmq_worker_job_release(b);
    assert_int_equal(slots.in_hand, 0);
    assert_null(slots.held);
    assert_int_equal(seen.calls[0], 3);
    assert_int_equal(seen.calls[1], 3);
}

static void test_subscribers_are_bounded(void **state)
{
    (void)state;
    llmq_worker_slots_init(&slots);
    for (int i = 0; i < WORKER_SLOT_SUBSCRIBERS_MAX; i++)
        assert_int_equal(llmq_worker_slot_freed_subscribe(&slots, first, NULL), 0);
    assert_int_equal(llmq_worker_slot_freed_subscribe(&slots, first, NULL), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transitions),
        cmocka_unit_test(test_slots_and_the_freed_hook),
        cmocka_unit_test(test_subscribers_are_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
