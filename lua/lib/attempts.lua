-- Attempts: each call a job made, one by one (the dashboard's job view,
-- issue 38), written by the settle that ends the call (job_settle.lua, no
-- extra round trip) and kept bounded: the last ATTEMPTS_KEPT of a job.
--
-- While the job lives they are fields of its hash: 'an' the number of calls
-- recorded ever, and 'a<k>' (k = 1..ATTEMPTS_KEPT) a ring, the n-th call at
-- k = (n - 1) % ATTEMPTS_KEPT + 1: one short value a field, so the hash
-- stays a compact listpack (docs/operations.md "Sizing Redis"). When the
-- job ends they go into its ended record as one field
-- (lua/lib/job_ended.lua, 'att'), since a done job's hash is deleted.
--
-- One call, as text (fields separated by ' '; names hold no whitespace,
-- lua/lib/worker.lua worker_name_ok):
--   <mode> <status> <start_ms> <took_ms> <in_tokens> <out_tokens> <endpoint> <model>
-- mode: what the settle did (done, retry, dead, authpause, moved: requeued
-- at once for another endpoint); status: the HTTP status or the transport's
-- outcome ("timeout", "not_sent"; '-' unknown); start_ms: unix ms (Redis
-- clock) the call began, now less its duration; took_ms, in/out tokens: -1
-- when not known; endpoint: '-' the implicit one.
-- The log of a job (job_fields.lua 'att', the ended record's field):
--   "<n>" then "|" .. call for each call kept, oldest first ('' none).
-- uses util: llmq_int_text

local ATTEMPTS_KEPT = 8
local ATTEMPTS_HASH_FIELDS = { 'an' }
for i = 1, ATTEMPTS_KEPT do
    ATTEMPTS_HASH_FIELDS[#ATTEMPTS_HASH_FIELDS + 1] = 'a' .. i
end

-- A word of a call's text: s, or '-' when it is empty or not a string.
local function attempts_word(s)
    if type(s) ~= 'string' or s == '' or string.find(s, '[%s|]') then
        return '-'
    end
    return s
end

-- The text of one call (see above). took_ms, in_tok, out_tok: numbers or
-- nil; now_ms: Redis TIME in ms.
local function attempts_text(mode, status, now_ms, took_ms, in_tok, out_tok, endpoint, model)
    took_ms = (took_ms ~= nil and took_ms >= 0) and math.floor(took_ms) or -1
    local start = now_ms - math.max(took_ms, 0)
    return table.concat({ attempts_word(mode), attempts_word(status), llmq_int_text(start),
        llmq_int_text(took_ms), llmq_int_text(math.floor(in_tok or -1)),
        llmq_int_text(math.floor(out_tok or -1)), attempts_word(endpoint), attempts_word(model) },
        ' ')
end

-- Where call text goes in a hash whose ATTEMPTS_HASH_FIELDS are h[first..]
-- (as HMGET gives them): returns the new count and the field name; h is
-- updated the same way, so attempts_log(h, first) includes it.
local function attempts_push(h, first, text)
    local n = (tonumber(h[first]) or 0) + 1
    local k = (n - 1) % ATTEMPTS_KEPT + 1
    h[first] = tostring(n)
    h[first + k] = text
    return n, 'a' .. k
end

-- The log (see above) of the calls in h[first..] (ATTEMPTS_HASH_FIELDS),
-- '' when none was recorded.
local function attempts_log(h, first)
    local n = tonumber(h[first]) or 0
    if n <= 0 then
        return ''
    end
    local parts = { tostring(n) }
    for i = math.max(1, n - ATTEMPTS_KEPT + 1), n do
        local v = h[first + (i - 1) % ATTEMPTS_KEPT + 1]
        if type(v) == 'string' and v ~= '' then
            parts[#parts + 1] = v
        end
    end
    return table.concat(parts, '|')
end
