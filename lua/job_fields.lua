-- job_fields: fields of one job, whether it is still a record (a job no
-- worker took yet, P jr:<id>: lua/lib/job_record.lua) or a hash
-- (P job:<id>), for readers outside the scripts that must not know the
-- record's format (`llmq results` naming a job's state, tests). Read-only.
-- KEYS[1]  P, the account prefix
-- ARGV[1]  the job id
-- ARGV[2..] field names (state, prio, model, attempts, cost, ...; body: the
--          body as stored, common/jobs/job_pack.h)
-- Reply: one value per field name, nil for a field the job has not (every
-- field nil: no such job); a job key of the wrong type, or a damaged record,
-- is an error.
-- uses: llmq_job_read
-- uses: KEY
local names = {}
for i = 2, #ARGV do
    names[#names + 1] = ARGV[i]
end
if #names == 0 then
    return redis.error_reply('LLMQ_EINVAL job_fields takes a job id and field names')
end
local v, rec = llmq_job_read(KEYS[1], ARGV[1], names)
for i, name in ipairs(names) do
    if name == 'body' and not rec and not v[i] then
        -- a hash's body is its own key (an older layout's, the field)
        v[i] = redis.call('GET', KEY.job_body(KEYS[1], ARGV[1]))
    end
end
return v
