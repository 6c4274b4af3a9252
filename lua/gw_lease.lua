-- gw_lease: renews an llmq-gateway's lease and hands it the batches that
-- gateways without a lease left half-created (gateway/lease.c runs it every
-- third of the lease: one command per period for everything the gateway
-- holds).
--   P gw:lease:<id> is set for ARGV[2] ms. While it lives, the sync calls the
--   gateway enqueued (job field lease: dispatch cancels them once it is gone)
--   and the batches it is creating (P gw:staging, hash field lease) are its.
--   Every batch of P gw:staging whose lease is '' or gone becomes the
--   caller's (at most 16 a call); one without a hash leaves the set.
-- KEYS[1]  P, the account prefix
-- ARGV[1]  the gateway's id (a name)   ARGV[2] lease ms (> 0)
-- Reply: {batch id, status, ...} for every staged batch the caller holds
-- now, those it is creating itself included (it skips them).
-- uses keys: KEY
-- uses util: llmq_int_arg, llmq_int_text, llmq_now_ms
-- uses worker: worker_name_ok
local P = KEYS[1]
local gw = ARGV[1]
local ms = llmq_int_arg(ARGV[2], 'lease ms')
if not worker_name_ok(gw) or ms <= 0 then
    return redis.error_reply('LLMQ_EINVAL gw_lease takes a gateway id and a lease ms > 0')
end
redis.call('SET', KEY.gw_lease(P, gw), llmq_int_text(llmq_now_ms()), 'PX', ms)
local out, claimed = {}, 0
for _, bid in ipairs(redis.call('SMEMBERS', KEY.gw_staging(P))) do
    local bk = KEY.gw_batch(P, bid)
    local v = redis.call('HMGET', bk, 'status', 'lease')
    if not v[1] then
        redis.call('SREM', KEY.gw_staging(P), bid)
    else
        local holder = v[2] or ''
        if holder ~= gw and claimed < 16 and
            (holder == '' or redis.call('EXISTS', KEY.gw_lease(P, holder)) == 0) then
            redis.call('HSET', bk, 'lease', gw)
            holder = gw
            claimed = claimed + 1
        end
        if holder == gw then
            out[#out + 1] = bid
            out[#out + 1] = v[1]
        end
    end
end
return out
