-- Shared helpers: the start of the Functions library that every operation
-- of lua/ is a function of (see cmake/embed_lua.cmake).

-- The globals the scripts use, as upvalues of the library. A global read in a
-- function of a Redis library is a miss in the globals table followed by its
-- metatable's __index table (Redis protects the globals that way): two hash
-- lookups per use of `redis`, `string`, `tonumber`... An upvalue is an array
-- read. The library is loaded where these globals do not exist yet (Redis
-- offers only redis.register_function then), so every operation binds them
-- when it is called: llmq_bind_globals() is its first statement (the
-- wrapper in embed_lua.cmake writes it), once per call, and what the library
-- registers goes through llmq_load_api, the load-time `redis`. Code that runs
-- at load must not use these names.
local function llmq_runtime_globals()
    return redis, tonumber, tostring, type, pairs, ipairs, unpack, string, math, table, cjson,
        error, pcall, next
end
local llmq_load_api = redis
local redis, tonumber, tostring, type, pairs, ipairs, unpack, string, math, table, cjson, error,
    pcall, next
local function llmq_bind_globals()
    redis, tonumber, tostring, type, pairs, ipairs, unpack, string, math, table, cjson, error,
        pcall, next = llmq_runtime_globals()
end

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
