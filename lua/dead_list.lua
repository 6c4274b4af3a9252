-- dead_list: the newest dead letters with what the dashboard filters them by
-- (gateway/dashboard/actions.c): the job's model and tenant come from the job
-- (the entry names only its id), so a tenant's viewer sees its own only.
-- Read-only.
-- KEYS[1]  P, the account prefix
-- ARGV[1]  at most this many entries, newest first
-- ARGV[2]  tenant ('' any): only jobs of this tenant
-- ARGV[3]  model ('' any)
-- ARGV[4]  reason ('' any): the entry's reason, exactly
-- Reply: JSON text [{entry, id, reason, error, ts, model, tenant}] (ts in
-- ms; id '' for an entry without a usable job id); an empty list may come
-- as {}.
-- uses job_record: llmq_job_read
-- uses keys: KEY
-- uses util: llmq_hash_table, llmq_int_arg
local P = KEYS[1]
local max = llmq_int_arg(ARGV[1], 'count')
local want_tenant, want_model, want_reason = ARGV[2] or '', ARGV[3] or '', ARGV[4] or ''
local out = {}
local SCAN_MAX = 10000 -- entries looked at: bounded work on a long list
for _, e in ipairs(redis.call('XREVRANGE', KEY.dead(P), '+', '-', 'COUNT', SCAN_MAX)) do
    if #out >= max then
        break
    end
    local f = llmq_hash_table(e[2])
    local id = f.id or ''
    local model, tenant = '', ''
    if id ~= '' then
        -- a job key of the wrong type (hostile data) names nothing
        local ok, v = pcall(llmq_job_read, P, id, { 'model', 'tenant' })
        if ok then
            model, tenant = v[1] or '', v[2] or ''
        end
    end
    if (want_tenant == '' or tenant == want_tenant) and (want_model == '' or model == want_model)
        and (want_reason == '' or f.reason == want_reason) then
        out[#out + 1] = { entry = e[1], id = id, reason = f.reason or '', error = f.error or '',
            ts = tonumber(f.ts) or 0, model = model, tenant = tenant }
    end
end
return cjson.encode(out)
