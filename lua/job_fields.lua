-- job_fields: fields of one job, whether it is still a record (a job no
-- worker took yet, P jr:<id>: lua/lib/job_record.lua), a hash
-- (P job:<id>) or, ended done or cancelled, its ended record alone
-- (P res:<id>: lua/lib/job_ended.lua, which keeps state, fin_ms, attempts,
-- enq_ms, run_ms, prio, model, tenant, user and last_error), for readers outside the scripts that must
-- not know the records' formats (`llmq results` naming a job's state,
-- tests). Read-only.
-- KEYS[1]  P, the account prefix
-- ARGV[1]  the job id
-- ARGV[2..] field names (state, prio, model, attempts, cost, ...; body: the
--          body as stored, common/jobs/job_pack.h; att: its calls one by
--          one, lua/lib/attempts.lua attempts_log, nil when none)
-- Reply: one value per field name, nil for a field the job has not (every
-- field nil: no such job); a job key of the wrong type, or a damaged record,
-- is an error.
-- uses attempts: ATTEMPTS_HASH_FIELDS, attempts_log
-- uses job_ended: llmq_job_ended_get
-- uses job_record: llmq_job_read
-- uses keys: KEY
local names = {}
for i = 2, #ARGV do
    names[#names + 1] = ARGV[i]
end
if #names == 0 then
    return redis.error_reply('LLMQ_EINVAL job_fields takes a job id and field names')
end
local v, rec = llmq_job_read(KEYS[1], ARGV[1], names)
local any = rec ~= nil
for i = 1, #names do
    any = any or v[i] ~= false
end
if not any and redis.call('EXISTS', KEY.job(KEYS[1], ARGV[1])) == 0 then
    -- no hash: ended (its record keeps what is left of it), or no job
    local e = llmq_job_ended_get(KEYS[1], ARGV[1])
    for i, name in ipairs(names) do
        v[i] = e and e[name] or false
    end
    return v
end
for i, name in ipairs(names) do
    if name == 'body' and not rec and not v[i] then
        -- a hash's body is its own key (an older layout's, the field)
        v[i] = redis.call('GET', KEY.job_body(KEYS[1], ARGV[1]))
    end
    if name == 'att' and not rec then
        -- a hash keeps its calls in a ring of fields
        local log = attempts_log(redis.call('HMGET', KEY.job(KEYS[1], ARGV[1]),
            unpack(ATTEMPTS_HASH_FIELDS)), 1)
        v[i] = log ~= '' and log or false
    end
end
return v
