# The Functions library's room under Lua's limits (cmake/embed_lua.cmake):
# lua/CMakeLists.txt builds a copy of the library with 20 unused locals more
# in every module block and operation and 20 upvalues more in every
# operation; this loads it into the test redis-server, so it fails while
# the library is still 20 short of a limit, before a helper more breaks
# FUNCTION LOAD of the real one.
add_test(NAME lua_library_headroom
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/support/lua-headroom ${LLMQ_LUA_HEADROOM})
set_tests_properties(lua_library_headroom PROPERTIES ENVIRONMENT "${LLMQ_TEST_ENV}"
    FIXTURES_REQUIRED redis LABELS integration TIMEOUT 60)

# The build's check of what each Lua file declares it uses (-- uses:): the
# faults it must catch, planted in a scratch copy of lua/.
add_test(NAME lua_uses_checked
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/support/lua-uses-check ${PROJECT_SOURCE_DIR})
set_tests_properties(lua_uses_checked PROPERTIES ENVIRONMENT "CMAKE_COMMAND=${CMAKE_COMMAND}"
    LABELS unit TIMEOUT 60)

# The key rule in Lua (scripts/check-lua-keys, run by scripts/check-source):
# keys spelled outside KEY.<kind>, planted in a copy of a script.
add_test(NAME lua_key_rule_checked
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/support/lua-key-rule-check ${PROJECT_SOURCE_DIR})
set_tests_properties(lua_key_rule_checked PROPERTIES LABELS unit TIMEOUT 60)
