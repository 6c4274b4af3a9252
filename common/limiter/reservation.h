/* The reservation of the limiter API (llmq_grant.reservation): the text a
 * grant is settled or refunded by. It is the account, '|', then the limiter
 * part of a reservation handle, whose format is written down once, in
 * lua/lib/handle.lua:
 *     "<account>|<resid>|<cost>|<admitted ms>" then "|<m><bucket>" per bucket
 * (m: 'w'/'g' window/GCRA under the admission ledger, 'W'/'G' under the
 * usage ledger). The Redis scripts build and read the handle; C puts the
 * reservation together from the parts acquire returns and takes the account
 * off again for settle and refund. A grant of the local fail-open limiter
 * (limiter_local.h) has resid "L<id>" and window buckets ('w') only. Names
 * hold no '|' (llmq_name_valid), so no part needs escaping. Pure functions
 * on caller-owned buffers. */
#ifndef LLMQ_LIMITER_RESERVATION_H
#define LLMQ_LIMITER_RESERVATION_H

#include <stddef.h>
#include <stdint.h>

/* Writes "<account>|<id_prefix><id>|<cost>|<at_ms><tags>" into buf (len
 * bytes); tags: the bucket tags acquire returned ("" for none). Returns 0,
 * or -1 when it does not fit (buf then holds a cut copy). */
int llmq_reservation_format(char *buf, size_t len, const char *account, const char *id_prefix,
                            int64_t id, int64_t cost, int64_t at_ms, const char *tags);

/* Appends the tag of bucket in mode ('w', 'g', 'W', 'G') to the reservation
 * in buf (len bytes). Returns 0, or -1 when it does not fit (buf then holds
 * a cut copy). */
int llmq_reservation_add_bucket(char *buf, size_t len, char mode, const char *bucket);

/* True when reservation is one of the local fail-open limiter's. */
int llmq_reservation_is_local(const char *reservation);

/* Copies the account of reservation into account (len bytes, at least
 * LLMQ_NAME_MAX + 1) and returns the handle after it (borrowed from
 * reservation), or NULL when it has no '|' or an account longer than
 * LLMQ_NAME_MAX (or than len - 1). */
const char *llmq_reservation_split(const char *reservation, char *account, size_t len);

/* The cost of handle (llmq_reservation_split's), or -1 when it has none. */
int64_t llmq_reservation_cost(const char *handle);

/* The first bucket tag of handle (its mode letter), or NULL when it names
 * no bucket. */
const char *llmq_reservation_buckets(const char *handle);

/* Reads the bucket tag at tag (llmq_reservation_buckets, or this function's
 * result): its mode into *mode and its name into name (len bytes; "" when
 * it does not fit). Returns the next tag, or NULL after the last. */
const char *llmq_reservation_bucket(const char *tag, char *mode, char *name, size_t len);

#endif
