/* A job's fields as a test reads them from outside, whatever its layout: a
 * record (a job no worker took yet, P jr:<id>), a hash (P job:<id>) or,
 * once it ended done or cancelled, its ended record (P res:<id>), through
 * lua/job_fields.lua, so no test knows the records' formats; and its result
 * line as text (jobs/job_result.h). */
#ifndef LLMQ_TEST_JOB_FIELDS_H
#define LLMQ_TEST_JOB_FIELDS_H

#include <hiredis/hiredis.h>
#include <stddef.h>

/* Field field of job id of account prefix prefix: returns new (free), or
 * NULL when the job has no such field (or no job). Fails the test on an
 * error reply. */
char *llmq_test_job_field(redisContext *c, const char *prefix, const char *id, const char *field);

/* The same with its length in *len (a stored body is bytes: it may hold NUL). */
char *llmq_test_job_bytes(redisContext *c, const char *prefix, const char *id, const char *field,
                          size_t *len);

/* The same as a number (a missing field: def). */
long long llmq_test_job_int(redisContext *c, const char *prefix, const char *id, const char *field,
                            long long def);

/* 1 when job id exists: a record, a hash or an ended record. */
int llmq_test_job_exists(redisContext *c, const char *prefix, const char *id);

/* Job id's result line as text (returns new, free; NULL when it has none),
 * through llmq_job_result_read. Fails the test when that fails. */
char *llmq_test_job_result(redisContext *c, const char *prefix, const char *id);

#endif
