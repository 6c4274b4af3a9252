-- The dead-letter list P dead, as `llmq dead retry` and `llmq dead purge`
-- (dead_retry.lua, dead_purge.lua) walk it.
-- uses keys: KEY
-- uses util: llmq_hash_table, llmq_int_arg

-- Calls act(id, entry_id) for each job named in argv[2..], or, when none is
-- named, for the oldest argv[1] entries of P dead (entry_id nil for a named
-- job: act reads it from the job's hash). act returns the outcome; an entry
-- whose job is not dead ('not_dead': it lives again) is dropped from the
-- list. Returns one {id, outcome} per job looked at.
local function dead_each(P, argv, act)
    local out = {}
    if #argv > 1 then
        for i = 2, #argv do
            out[#out + 1] = { argv[i], act(argv[i], nil) }
        end
        return out
    end
    local limit = llmq_int_arg(argv[1], 'limit')
    for _, e in ipairs(redis.call('XRANGE', KEY.dead(P), '-', '+', 'COUNT', limit)) do
        local id = llmq_hash_table(e[2])['id'] or ''
        local r = act(id, e[1])
        if r == 'not_dead' then
            redis.call('XDEL', KEY.dead(P), e[1])
        end
        out[#out + 1] = { id, r }
    end
    return out
end
