-- The start of the Functions library that every operation of lua/ is a
-- function of (cmake/embed_lua.cmake puts it first, as it is: not a module,
-- its names are the scripts' globals and need no '-- uses:').
--
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
