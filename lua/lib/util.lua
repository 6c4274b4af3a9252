-- Shared helpers: Redis time, integer text, splitting, argument checks.

-- Milliseconds from the Redis server's clock: the only clock llmq's shared
-- decisions use, so workers' clocks never matter.
local function llmq_now_ms()
    local t = redis.call('TIME')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The decimal text of integer n. Pass this, not the number, to redis.call
-- and to `..` in hot paths: Redis formats a Lua number argument with
-- "%.17g" and Lua's `..` with "%.14g", both through the C library's float
-- formatting, which profiles of the scripts showed as a large share of
-- their CPU; an integer "%d" costs a fraction of that.
local function llmq_int_text(n)
    return string.format('%d', n)
end

-- Splits s on the single plain character sep; keeps empty fields.
local function llmq_split(s, sep)
    local out = {}
    local start = 1
    while true do
        local i = string.find(s, sep, start, true)
        if not i then
            out[#out + 1] = string.sub(s, start)
            return out
        end
        out[#out + 1] = string.sub(s, start, i - 1)
        start = i + 1
    end
end

-- HGETALL's flat reply as a table.
local function llmq_hash_table(flat)
    local t = {}
    for i = 1, #flat, 2 do
        t[flat[i]] = flat[i + 1]
    end
    return t
end

-- An integer argument, or an error reply naming it.
local function llmq_int_arg(v, name)
    local n = tonumber(v)
    if n == nil or n ~= math.floor(n) then
        error('LLMQ_EINVAL ' .. name .. ' must be an integer, got ' .. tostring(v))
    end
    return n
end
