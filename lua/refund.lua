-- refund: give back a reservation entirely (its request and its tokens), as
-- when the request was never served (a 429). Call once per reservation.
-- KEYS[1]  P, the account prefix
-- ARGV[1]  reservation handle
-- The room given back unblocks the scheduler's nodes waiting on those buckets
-- and wakes idle workers (sched_wake_buckets).
-- Reply: number of buckets adjusted.
-- uses limiter: limiter_adjust
-- uses sched: sched_wake_buckets
local adjusted, freed = limiter_adjust(KEYS[1], ARGV[1], nil)
sched_wake_buckets(KEYS[1], freed)
return adjusted
