/* What llmq sends to and reads from the provider's Batch API, as pure
 * functions (no I/O; tests/unit/worker/pbatch/test_pbatch_file.c): an input file's
 * lines, the multipart body of its upload, a line of the output or error
 * file and what it means for its job, and the result line llmq stores.
 *
 * An input line's custom_id is the job id itself (job ids are names,
 * common/jobs/job_id.h), so a line that comes back names its job. */
#ifndef LLMQ_WORKER_PBATCH_FILE_H
#define LLMQ_WORKER_PBATCH_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "llmq/error.h"
#include "openai/usage.h"

/* A growable byte buffer (its bytes owned; free with llmq_pbatch_buf_free). */
struct llmq_pbatch_buf {
    char *data;
    size_t len, cap;
};

void llmq_pbatch_buf_free(struct llmq_pbatch_buf *b);

/* Appends one input line {"custom_id": job_id, "method": "POST", "url": url,
 * "body": body} and its newline to b; body[0..body_len) is the request's
 * JSON text (borrowed; not checked again: enqueue checked it). Returns
 * LLMQ_OK, LLMQ_EINVAL (a job id that JSON cannot hold as it is) or
 * LLMQ_ENOMEM (b unchanged). */
enum llmq_rc llmq_pbatch_input_line(struct llmq_pbatch_buf *b, const char *job_id, const char *url,
                                    const char *body, size_t body_len);

/* The multipart/form-data body of a Files API upload of data[0..len)
 * (borrowed) named filename with purpose "batch", into out (new; free with
 * llmq_pbatch_buf_free), and its Content-Type header value into ctype
 * (n bytes). The boundary is chosen so it is not in data. Returns LLMQ_OK
 * or LLMQ_ENOMEM. */
enum llmq_rc llmq_pbatch_multipart(const char *filename, const char *data, size_t len,
                                   struct llmq_pbatch_buf *out, char *ctype, size_t n);

/* What a line of an output or error file means for its job. */
enum llmq_pbatch_verdict {
    LLMQ_PBATCH_DONE = 0, /* a 2xx with a body: the job's result */
    LLMQ_PBATCH_RETRY,    /* 5xx, 429, a timeout, no response: try again later (an attempt) */
    LLMQ_PBATCH_DEAD,     /* the provider refused the request (4xx): dead-letter it */
    LLMQ_PBATCH_BACK,     /* never run: the batch expired or was cancelled first (error
                             code batch_expired or batch_cancelled): staged again, no attempt */
};

struct llmq_pbatch_line {
    char job_id[256];     /* the line's custom_id */
    int status;           /* response.status_code; 0 when the line has no response */
    char request_id[128]; /* response.request_id; "" */
    enum llmq_pbatch_verdict verdict;
    char reason[256];        /* why, for RETRY and DEAD ("" for DONE) */
    struct llmq_usage usage; /* of the body (present 0 when none) */
};

/* Parses one line line[0..len) (borrowed) of an output or error file into
 * *out. Returns LLMQ_OK, or LLMQ_EINVAL when it is no Batch output line (not
 * JSON, no custom_id): such a line names no job. */
enum llmq_rc llmq_pbatch_line_parse(const char *line, size_t len, struct llmq_pbatch_line *out);

/* The result line llmq stores for a parsed line pl of line[0..len): the
 * shape of a live result (worker/call.c: id, custom_id as the job's,
 * response {status_code, request_id, body}, error) plus "offloaded": true
 * and "provider_batch_id". Returns new text (free), or NULL when memory runs
 * out or the line is no JSON. */
char *llmq_pbatch_result_line(const struct llmq_pbatch_line *pl, const char *line, size_t len,
                              const char *provider_batch_id);

/* The seconds to wait before polling a batch again after polls polls, with
 * poll_ms the policy's interval: poll_ms for the first 10, then growing by
 * poll_ms every 10 more, at most 10 x poll_ms. */
int64_t llmq_pbatch_poll_delay_ms(int64_t poll_ms, int64_t polls);

#endif
