-- pbatch_bodies: a slice of a provider batch's jobs with their bodies, for
-- the worker that builds its input file (worker/pbatch/).
-- KEYS[1]  P, the account prefix
-- ARGV[1]  provider batch id   ARGV[2] first index (0-based)   ARGV[3] count
-- Reply: {id1, body1, id2, body2, ...} in the batch's job order; a body as
--        stored (common/jobs/job_pack.h: packed or JSON text), false when
--        the job's body is gone (it ended meanwhile: cancelled).
-- uses keys: KEY
local P = KEYS[1]
local id, first, count = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if not first or not count or first < 0 or count < 1 then
    return redis.error_reply('LLMQ_EINVAL pbatch_bodies: first and count')
end
local ids = redis.call('LRANGE', KEY.pbatch_jobs(P, id), first, first + count - 1)
local out = {}
for _, jid in ipairs(ids) do
    out[#out + 1] = jid
    out[#out + 1] = redis.call('GET', KEY.job_body(P, jid))
end
return out
