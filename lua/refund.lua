-- refund: give back a reservation entirely (its request and its tokens), as
-- when the request was never served (a 429). Call once per reservation.
-- KEYS[1]  P, the account prefix
-- ARGV[1]  reservation handle
-- Reply: number of buckets adjusted.
return limiter_adjust(KEYS[1], ARGV[1], nil)
