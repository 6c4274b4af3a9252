-- job_find: the jobs of the gateway's Batches whose custom_id is the one a
-- person typed (the dashboard's job view, gateway/dashboard/actions.c). A
-- Batch's job is "<batch id>.<id of its custom_id>" (gateway/batches.c), so
-- a custom_id alone names no key: the newest batches are looked at, those
-- of the viewer's tenant only, and each asked whether it has that job
-- (waiting, running or ended: P jr, job or res). Read-only.
-- KEYS[1]  P, the account prefix
-- ARGV[1]  the job id of the custom_id (common/jobs/job_id.h)
-- ARGV[2]  tenant ('' any): only batches of this tenant
-- ARGV[3]  at most this many batches looked at, newest first
-- ARGV[4]  at most this many jobs replied
-- Reply: {batches looked at, job id, job id, ...} (newest batch first)
-- uses keys: KEY
-- uses util: llmq_int_arg
local P = KEYS[1]
local id = ARGV[1] or ''
local want_tenant = ARGV[2] or ''
local scan = llmq_int_arg(ARGV[3], 'batches')
local max = llmq_int_arg(ARGV[4], 'count')
if id == '' then
    return redis.error_reply('LLMQ_EINVAL job_find takes a job id')
end
local ids = redis.call('ZREVRANGE', KEY.gw_batches(P), 0, scan - 1)
local out = { #ids }
for _, bid in ipairs(ids) do
    if #out > max then
        break
    end
    local tenant = redis.call('HGET', KEY.gw_batch(P, bid), 'tenant') or ''
    if want_tenant == '' or tenant == want_tenant then
        local jid = bid .. '.' .. id
        if redis.call('EXISTS', KEY.job_record(P, jid), KEY.job(P, jid), KEY.result(P, jid)) > 0 then
            out[#out + 1] = jid
        end
    end
end
return out
