/* The worker's side of the stream relay (docs/DESIGN.md §3.8): the frames of
 * every stream this worker relays, gathered per gateway and sent as one
 * PUBLISH per gateway per tick of --stream-coalesce-ms, and the worker's own
 * channel, where gateways say that a client left.
 *
 * A relay is one (account, gateway) pair: its members are the streams whose
 * jobs that gateway holds the client of (job field lease), its buffer the
 * message being built (jobs/stream_relay.h: the sender line, then frames).
 * A tick flushes it: each member with events waiting (marked with
 * llmq_worker_relay_dirty) appends its frame through its flush callback,
 * then the buffer leaves as one PUBLISH P sse:<gateway>. Ticks fall on the
 * loop clock's grid shared by every relay, so the publishes due together
 * leave in one write. The PUBLISH's answer is checked: no subscriber means
 * the gateway is gone, and every member is told (its lost callback) and
 * aborts its call. A PUBLISH that did not arrive (Redis stalled or away)
 * is held and sent again, in order, once Redis answers: a stall costs the
 * client a pause, not its stream. Held frames are bounded (a stream's, the
 * worker's, and how long: LLMQ_RELAY_HOLD_*); past a bound the streams
 * concerned are lost as above.
 *
 * The worker's channel P ssw:<--consumer> is subscribed on one more
 * connection per account, opened with the account's first relayed stream
 * and kept for the process's life; a cancel there names a job whose client
 * left: its member is told (lost, "client_closed").
 *
 * Ownership: the relays belong to the worker (w->relays, freed by
 * llmq_worker_relays_free after the accounts' connections); a member is
 * borrowed from join to leave. Everything runs on the worker's loop. */
#ifndef LLMQ_WORKER_STREAM_RELAY_H
#define LLMQ_WORKER_STREAM_RELAY_H

#include <stddef.h>

struct llmq_worker;
struct worker_account;
struct worker_relay;

struct worker_relay_member {
    const char *job_id;  /* borrowed while a member */
    const char *attempt; /* its delivery's entry id (jobs/stream_relay.h); borrowed */
    /* appends the member's waiting events (llmq_worker_relay_frame) */
    void (*flush)(struct worker_relay_member *m);
    /* the gateway or the relay is gone, or the client left: why is
     * "client_closed" or "relay_lost" */
    void (*lost)(struct worker_relay_member *m, const char *why);
    /* the relay's own: */
    struct worker_relay *relay;
    struct worker_relay_member *prev, *next;
    int dirty;
    size_t held_bytes; /* its frames held while the relay has trouble */
};

/* Makes m (job_id, attempt, flush, lost set) a member of the relay to gateway of
 * account a. Returns 0, or -1 without memory or when gateway is no valid
 * name (m is no member then). */
int llmq_worker_relay_join(struct llmq_worker *w, struct worker_account *a, const char *gateway,
                           struct worker_relay_member *m);

/* Ends m's membership (its frames already appended still leave). NULL-safe
 * for a member that never joined (m->relay NULL). */
void llmq_worker_relay_leave(struct worker_relay_member *m);

/* Appends a frame of m's stream (payload[0..n) borrowed) to the message
 * being built. Returns 0, or -1 without memory or past a bound of what the
 * relay may hold while Redis is unreachable (the caller aborts the call). */
int llmq_worker_relay_frame(struct worker_relay_member *m, char kind, long long seq,
                            const char *payload, size_t n);

/* m has events waiting: its flush runs at the relay's next tick. */
void llmq_worker_relay_dirty(struct worker_relay_member *m);

/* Flushes m's relay now (every member's waiting events with it): for a
 * stream's first events (time to first token) and its last message. */
void llmq_worker_relay_flush_now(struct worker_relay_member *m);

/* Closes the worker's channels and frees every relay (members left by
 * then). After the accounts' connections are freed (their publish
 * callbacks point into the relays). */
void llmq_worker_relays_free(struct llmq_worker *w);

#endif
