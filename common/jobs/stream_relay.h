/* The messages of the stream relay (docs/DESIGN.md §3.8): how a worker
 * sends a streamed answer's events to the gateway holding the client, and
 * how the gateway tells the worker that a client left. Pure: bytes in and
 * out, no I/O; a message comes from Redis pub/sub, so the decoders check
 * everything (fuzzed by tests/fuzz/fuzz_stream_relay.c).
 *
 * A worker -> gateway message (PUBLISH P sse:<gateway id>) carries the
 * frames of every stream that worker relays to that gateway, in order:
 *   <sender>\n                       the worker's name: its own channel is
 *                                    P ssw:<sender> (where cancels go)
 *   then frames, each
 *   <kind><seq> <job id> <attempt> <len>\n<len bytes of payload>
 * kind one of LLMQ_RELAY_KINDS (worker/stream_call.h says what each means),
 * seq the stream's message number (decimal, from 0 per attempt), attempt
 * the attempt's number: the entry id of its delivery (<ms>-<n>, decimal;
 * a job's later delivery has a greater one, so frames of a superseded
 * attempt are told apart from the current one's), len the payload's bytes
 * (decimal). A head without the attempt (<kind><seq> <job id> <len>, a
 * worker of an earlier release) reads as attempt 0-0. Names and ids are
 * llmq names (redis/redis.h: llmq_name_valid: no space, newline or NUL).
 *
 * A gateway -> worker message (PUBLISH P ssw:<worker>) is one cancel:
 *   c <job id>                       the job's client is gone: abort it */
#ifndef LLMQ_JOBS_STREAM_RELAY_H
#define LLMQ_JOBS_STREAM_RELAY_H

#include <stddef.h>

#define LLMQ_RELAY_KINDS "shdexr"
#define LLMQ_RELAY_NAME_MAX 200
/* An attempt at most: two decimal numbers and the dash. */
#define LLMQ_RELAY_ATTEMPT_MAX (20 + 1 + 20)
/* A frame's head at most: kind, seq, job id, attempt, len, separators. */
#define LLMQ_RELAY_HEAD_MAX                                                                        \
    (1 + 20 + 1 + LLMQ_RELAY_NAME_MAX + 1 + LLMQ_RELAY_ATTEMPT_MAX + 1 + 20 + 2)
#define LLMQ_RELAY_PAYLOAD_MAX (64 * 1024 * 1024)

/* While Redis is unreachable a worker holds the frames it cannot publish
 * (worker/stream_relay.h) this long at most, at most this many bytes of
 * one stream and of the whole worker; the gateway waits for a stream's
 * frames this long (plus its watchdog) while Redis looks stalled from
 * where it runs too (gateway/stream.h). */
#define LLMQ_RELAY_HOLD_MS 30000
#define LLMQ_RELAY_HOLD_STREAM_BYTES (8 * 1024 * 1024)
#define LLMQ_RELAY_HOLD_WORKER_BYTES (256 * 1024 * 1024)

/* An attempt's number: a delivery's entry id; {0, 0} none. */
struct llmq_relay_attempt {
    long long ms, n;
};

struct llmq_relay_frame {
    char kind;
    long long seq;
    struct llmq_relay_attempt attempt;
    const char *job_id; /* into the message; not NUL-terminated */
    size_t job_id_len;
    const char *payload; /* into the message */
    size_t payload_len;
};

/* Reads attempt s[0..n) (<ms>-<n>, not NUL-terminated) into *a. Returns
 * 0, or -1 when it is none. */
int llmq_relay_attempt_parse(const char *s, size_t n, struct llmq_relay_attempt *a);

/* Orders attempts: < 0 when a is older than b, 0 the same, > 0 newer. */
int llmq_relay_attempt_cmp(const struct llmq_relay_attempt *a, const struct llmq_relay_attempt *b);

/* Writes the head of a frame (kind, seq, job_id and attempt borrowed: the
 * delivery's entry id, <ms>-<n>; payload_len) into out[0..n). Returns its
 * length, or -1 when it does not fit, job_id is no valid name or attempt no
 * attempt. */
int llmq_relay_frame_head(char *out, size_t n, char kind, long long seq, const char *job_id,
                          const char *attempt, size_t payload_len);

/* Reads the sender line of message m[0..n): *name (into m) and its length.
 * Returns the offset of the first frame, or -1 when it is malformed. */
long llmq_relay_sender(const char *m, size_t n, const char **name, size_t *name_len);

/* Reads the frame of m[0..n) at *off into *f (pointers into m) and moves
 * *off past it. Returns 1, 0 at the end of m, or -1 when the frame is
 * malformed (the rest of the message cannot be read either). */
int llmq_relay_frame_next(const char *m, size_t n, size_t *off, struct llmq_relay_frame *f);

/* Writes the cancel of job_id into out[0..n). Returns its length, or -1. */
int llmq_relay_cancel_encode(char *out, size_t n, const char *job_id);

/* Reads cancel message m[0..n): the job id (into m) and its length.
 * Returns 0, or -1 when it is no cancel. */
int llmq_relay_cancel_decode(const char *m, size_t n, const char **job_id, size_t *job_id_len);

#endif
