-- The reservation handle: the text that carries what a grant reserved from
-- its admission (dispatch, acquire) to its settle or refund (job_settle,
-- limiter_settle, refund). Its format, the one place it is written down:
--
--   handle  = limiter part .. budget part
--   limiter part: "<resid>|<cost>|<admitted ms>" then "|<m><bucket>" for
--     each bucket that recorded the admission, in path order; m is 'w'
--     (window) or 'g' (gcra) under the admission ledger, 'W' or 'G' under
--     the usage ledger (lua/lib/limiter.lua). '' when no bucket recorded it.
--   budget part: '' when no spend budget applies, else
--     "{<tokens>|<nano-USD>|<tenant>|<user>" (what the job was charged, and
--     its names for the spend counters) then "{<period start ms>:<id>" for
--     each budget charged (lua/lib/budget.lua).
--
-- Names hold no '|', '{' or '}' (llmq_name_valid) and a limiter part holds
-- no '{', so the parts split without escapes. A reservation of the C
-- limiter API is "<account>|" .. limiter part (common/limiter/reservation.h:
-- the same format, built and split there); acquire returns the parts that
-- C puts together.
-- uses util: llmq_int_text

-- The tag of a bucket named name in mode ('window' or 'gcra') under the
-- usage ledger (usage true) or the admission one: "|<m><name>".
local function handle_bucket_tag(mode, usage, name)
    local m
    if mode == 'gcra' then
        m = usage and 'G' or 'g'
    else
        m = usage and 'W' or 'w'
    end
    return '|' .. m .. name
end

-- The limiter part of reservation id (a number) of cost (cost_str: its
-- decimal text) admitted at now_text (decimal ms) into the buckets of tags
-- (handle_bucket_tag's, concatenated).
local function handle_limiter(id, cost_str, now_text, tags)
    return llmq_int_text(id) .. '|' .. cost_str .. '|' .. now_text .. tags
end

-- A handle's limiter part and its budget part ('' when none).
local function handle_split(handle)
    local i = string.find(handle, '{', 1, true)
    if i == nil then
        return handle, ''
    end
    return string.sub(handle, 1, i - 1), string.sub(handle, i)
end

-- True when limiter part lim names a bucket under the usage ledger.
local function handle_has_usage(lim)
    return string.find(lim, '|[WG]') ~= nil
end

-- The cost of limiter part lim that names at least one bucket, or nil.
local function handle_cost(lim)
    return tonumber(string.match(lim, '^[^|]+|(%d+)|[^|]*|.'))
end

-- The admission time (ms) of a handle, or nil.
local function handle_admitted(handle)
    return tonumber(string.match(handle, '^%d+|%d+|(%d+)'))
end

-- Limiter part lim as its reservation id (text), its cost (a number) and
-- the text of its bucket tags (for handle_buckets); raises LLMQ_EINVAL when
-- it is malformed or names no bucket.
local function handle_limiter_decode(lim)
    local resid, cost_s, tail = string.match(lim, '^([^|]+)|([^|]+)|[^|]*(|.+)$')
    local cost = tonumber(cost_s)
    if resid == nil or cost == nil then
        error('LLMQ_EINVAL bad reservation handle')
    end
    return resid, cost, tail
end

-- The buckets of tags (handle_limiter_decode): a list of {m, name}, m the
-- mode letter of handle_bucket_tag.
local function handle_buckets(tags)
    local out = {}
    for tag in string.gmatch(tags, '|([^|]*)') do
        out[#out + 1] = { string.sub(tag, 1, 1), string.sub(tag, 2) }
    end
    return out
end

-- The head of a budget part: the charge of cost tokens and nusd nano-USD
-- of a job of tenant and user (nil or '' when none).
local function handle_budget_head(cost, nusd, tenant, user)
    return '{' .. llmq_int_text(cost) .. '|' .. llmq_int_text(nusd) .. '|' .. (tenant or '') ..
        '|' .. (user or '')
end

-- The entry of a budget part for budget id charged in the period that
-- starts at start (ms).
local function handle_budget_entry(start, id)
    return '{' .. llmq_int_text(start) .. ':' .. id
end

-- A budget part's charge: tokens and nano-USD (numbers), or nil when part
-- is none.
local function handle_budget_charge(part)
    local c_tok, c_nusd = string.match(part, '^{(%d+)|(%d+)|')
    return tonumber(c_tok), tonumber(c_nusd)
end

-- The tenant and user a budget part names ('' none), or nil when part is
-- none.
local function handle_budget_names(part)
    return string.match(part, '^{%d+|%d+|([^|{]*)|([^|{]*)')
end

-- The budgets of a budget part: a list of {period start (text), id}.
local function handle_budget_entries(part)
    local out = {}
    for start, id in string.gmatch(part, '{(%d+):([^{]+)') do
        out[#out + 1] = { start, id }
    end
    return out
end
