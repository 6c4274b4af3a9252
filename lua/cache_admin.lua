-- cache_admin: `llmq cache stats|purge` (lua/lib/cache.lua): one step over
-- the entries' index P cachei (a bounded number of members a call, so no
-- call is slow; the CLI calls again from the rank it returns).
-- KEYS[1]  P, the account prefix
-- ARGV[1]  op: stats | purge
-- ARGV[2]  tenant the entries must be of ('*' any; '' the jobs without one;
--          "/<name>" namespace name's, lua/lib/cache.lua cache_scope)
-- ARGV[3]  model the entries must be of ('*' any)
-- ARGV[4]  rank of the index to start at (0 first)
-- Reply: {entries, bytes, next rank (-1: done), hits, misses, coalesced,
-- stored, stored_bytes, saved_tokens, saved_nusd}: the entries of this step that match
-- (stats: those live; purge: those deleted) and the bytes of their stored
-- lines; then the account's counters (P caches). Entries past their TTL
-- leave the index first.
-- uses keys: KEY
-- uses util: llmq_now_ms
local P = KEYS[1]
local STEP = 1000
local op, tenant, model = ARGV[1], ARGV[2], ARGV[3]
local start = tonumber(ARGV[4])
if (op ~= 'stats' and op ~= 'purge') or start == nil or start < 0 then
    return redis.error_reply('LLMQ_EINVAL cache_admin: op stats|purge and a rank')
end
local idx = KEY.cache_index(P)
if start == 0 then
    redis.call('ZREMRANGEBYSCORE', idx, '-inf', llmq_now_ms())
end
local names = redis.call('ZRANGE', idx, start, start + STEP - 1)
local entries, bytes, gone = 0, 0, 0
for _, name in ipairs(names) do
    local t, m = string.match(name, '^([^|]*)|([^|]*)|')
    if (tenant == '*' or t == tenant) and (model == '*' or m == model) then
        local k = KEY.cache(P, name)
        local len = redis.call('STRLEN', k)
        if len > 0 then
            entries = entries + 1
            bytes = bytes + len
        end
        if op == 'purge' then
            redis.call('DEL', k)
            redis.call('ZREM', idx, name)
            gone = gone + 1
        end
    end
end
local next = #names < STEP and -1 or start + STEP - gone
local c = redis.call('HMGET', KEY.cache_stats(P), 'hits', 'misses', 'coalesced', 'stored',
    'stored_bytes', 'saved_tokens', 'saved_nusd')
local out = { entries, bytes, next }
for i = 1, 7 do
    out[#out + 1] = tonumber(c[i]) or 0
end
return out
