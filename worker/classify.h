/* What one API call's outcome means for its job (DESIGN.md flows 4-5): a
 * pure function of the response — transport outcome, HTTP status, headers,
 * body — and the endpoint called. No logging, counting, clock or Redis here:
 * call.c acts on the verdict. Tested case by case in
 * tests/unit/worker/test_classify.c.
 *
 *   2xx whose body is what the endpoint     DONE (usage parsed when present)
 *     returns (see below)
 *   2xx any other body                      RETRY, reason invalid_response
 *   401, 403                                AUTH: the key is wrong, not the
 *                                           job: pause the account, hand the
 *                                           job back untried
 *   429 insufficient_quota / billing        DEAD (retrying cannot help)
 *   429 rate limit                          RETRY with refund and the
 *                                           server's hint (pause the bucket)
 *   5xx, 408, 409                           RETRY, no refund (may have cost)
 *   other 4xx (400, 404, 413, ...)          DEAD at once, refunded
 *   x-should-retry: true / false            overrides for the retry/dead
 *                                           statuses above (never for 2xx,
 *                                           401/403 or insufficient_quota
 *                                           without an explicit true)
 *   timeout, reset, connect, TLS, protocol  RETRY; refunded when the request
 *                                           surely never left
 *   body over the size limit                DEAD response_too_big
 *   cancelled at shutdown                   HANDBACK
 *   not sent: its grant went stale          HANDBACK
 *
 * The body of a 2xx must be, by endpoint (the url path's tail):
 *   /chat/completions, /completions   a JSON object with a "choices" array
 *   /embeddings                       a JSON object with a "data" array
 *   /responses                        a JSON object with an "output" array
 *   anything else                     a JSON object
 * or, for a streamed request, a server-sent-event stream that ended: its
 * last event is "data: [DONE]" (chat, completions) or a "response.completed"
 * event (Responses API). */
#ifndef LLMQ_WORKER_CLASSIFY_H
#define LLMQ_WORKER_CLASSIFY_H

#include <stddef.h>
#include <stdint.h>

#include "openai/errorbody.h"
#include "http/http.h"
#include "openai/ratelimit_headers.h"
#include "openai/usage.h"

enum llmq_call_verdict {
    LLMQ_CALL_DONE = 0, /* a result: settle to usage, store the response */
    LLMQ_CALL_RETRY,    /* requeue with backoff (dead once attempts are used up) */
    LLMQ_CALL_DEAD,     /* dead-letter now */
    LLMQ_CALL_AUTH,     /* the key was refused: pause the account, hand the job back */
    LLMQ_CALL_HANDBACK, /* cancelled, or its grant stale, before an answer: give it back
                           untried */
};

/* Why, for counters and logs. */
enum llmq_call_cause {
    LLMQ_CALL_CAUSE_OK = 0,
    LLMQ_CALL_CAUSE_INVALID_RESPONSE, /* a 2xx the endpoint does not send */
    LLMQ_CALL_CAUSE_RATE_LIMIT,       /* 429 rate limit */
    LLMQ_CALL_CAUSE_QUOTA,            /* 429 insufficient_quota */
    LLMQ_CALL_CAUSE_SERVER,           /* 5xx, 408, 409 */
    LLMQ_CALL_CAUSE_CLIENT,           /* other 4xx */
    LLMQ_CALL_CAUSE_AUTH,             /* 401, 403 */
    LLMQ_CALL_CAUSE_TRANSPORT,        /* no complete response */
    LLMQ_CALL_CAUSE_TOO_BIG,          /* response over the size limit */
    LLMQ_CALL_CAUSE_CANCELLED,
    LLMQ_CALL_CAUSE_STALE, /* the grant's lifetime passed before the request could go out */
};

/* What the classifier looks at. Everything borrowed. */
struct llmq_call_response {
    enum llmq_http_outcome outcome;
    int request_sent;  /* transport failures: 0 when the request surely never left */
    const char *error; /* transport failures: curl's message (may be NULL) */
    long status;
    const struct llmq_ratelimit_headers *headers; /* may be NULL: none */
    const char *body;                             /* may be NULL when body_len is 0 */
    size_t body_len;
    const char *url_path; /* the job's endpoint path, "/v1/chat/completions"; may be NULL */
};

struct llmq_call_class {
    enum llmq_call_verdict verdict;
    enum llmq_call_cause cause;
    char reason[192]; /* "http 500", "http 404 model_not_found", "insufficient_quota",
                         "invalid_response: body is not JSON", "timeout: ..." */
    int refund;       /* RETRY/DEAD: give the reservation back (not served) */
    int64_t hint_ms;  /* RETRY after a 429: the server's retry hint; -1 none */
    int has_usage;    /* DONE: usage was reported (usage valid) */
    struct llmq_usage usage;
    struct llmq_errorbody eb; /* the error body's fields (kind OK for a 2xx) */
};

/* Classifies resp into *out (always fully written). */
void llmq_call_classify(const struct llmq_call_response *resp, struct llmq_call_class *out);

/* Static name of a cause ("invalid_response", "rate_limit", ...). */
const char *llmq_call_cause_name(enum llmq_call_cause cause);

#endif
