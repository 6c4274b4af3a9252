-- pbatch_list: what `llmq offload list` and `llmq offload show` print.
-- KEYS[1]  P, the account prefix
-- ARGV[1]  a provider batch id, or '' for the list
-- ARGV[2]  the list's length at most (newest first)
-- Reply: with an id: {field, value, ...} of pb:<id> ({} when none). Without:
--        {{name, staged jobs}, ...} of the staging lists, then
--        {id, field, value, ...} per provider batch, newest first:
--        {staging, batch1, batch2, ...}.
-- uses keys: KEY
-- uses pbatch: pbatch_reply
local P = KEYS[1]
local id, n = ARGV[1], tonumber(ARGV[2]) or 100
if id ~= '' then
    return redis.call('HGETALL', KEY.pbatch(P, id))
end
local staging = {}
for _, name in ipairs(redis.call('SMEMBERS', KEY.pb_staged(P))) do
    staging[#staging + 1] = name
    staging[#staging + 1] = redis.call('LLEN', KEY.pb_stage(P, name))
end
local out = { staging }
for _, bid in ipairs(redis.call('ZREVRANGE', KEY.pbatches(P), 0, math.max(n, 1) - 1)) do
    out[#out + 1] = pbatch_reply(P, bid)
end
return out
