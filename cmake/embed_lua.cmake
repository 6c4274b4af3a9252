# Turns the Lua scripts into one Redis 7 Functions library, as C: the library
# text, a table naming each operation's function, and an enum of operations.
#
# The library, in order:
#   1. lua/lib/prelude.lua as it is: the Lua globals the scripts use, as
#      upvalues every function shares (its header says why), and the
#      load-time `redis`. Its names need no declaration.
#   2. LLMQ_LIB, the registry: a table of every name a module defines.
#   3. Each module lua/lib/<name>.lua in its own `do ... end` block: the
#      names it declares (`-- uses <module>: a, b, ...` lines, one group per
#      module the names come from) bound as locals from
#      LLMQ_LIB, its text, then each name it defines at its top level
#      (`local function f`, `local X =`, at column 0) stored into LLMQ_LIB.
#      Modules are ordered by what they use (a module comes after every
#      module it uses; ties by file name), never by their names: a cycle is
#      a build error.
#   4. Each operation's file lua/<op>.lua the same way, its text wrapped as a
#      local function of (KEYS, ARGV) that first binds the globals
#      (llmq_bind_globals, prelude.lua) and registered under
#      "llmq_<op>_<tag>".
# A block's locals end with the block, so the library's top level holds the
# prelude and the registry only, however many modules and operations there
# are: Lua's limit of 200 local variables per function (and 60 upvalues)
# applies to each block and each function on its own. The ctest
# lua_library_headroom loads OUT_HEADROOM, the same library with
# LLMQ_LUA_HEADROOM unused locals more in every block and operation (and as
# many more upvalues in every operation), into a real Redis: it fails while
# there is still that much room.
# The bindings are made once, when the library loads; a module changes only
# its own locals (a value another module bound does not follow it).
#
# The declarations are checked here, and the build fails naming the file and
# the name when a file uses a name another module defines without declaring
# it, declares a name no module defines, declares one it does not use,
# declares one under a module that does not define it (or under none), or
# when two modules define one name. A declaration's <module> is the file name
# of lua/lib/<module>.lua; `keys` for KEY (common/redis/keys.c) and `prices`
# for LLMQ_PRICE_TABLE_JSON (data/prices.json).
#
# <tag> is the first 12 hex digits of the SHA-1 of all the Lua text, so the
# library of each build has its own name ("llmq_<tag>") and workers of two
# versions run their own code side by side during an upgrade.
# Why Functions and not EVALSHA of per-operation scripts: an EVALSHA runs the
# script's whole chunk on every call, creating a closure per local function
# of the library it carries; a loaded library did that once (docs/operations.md,
# "Script loading").
# Inputs: LUA_DIR, OUT_C, OUT_H, OUT_HEADROOM (optional).
cmake_policy(SET CMP0007 NEW) # lists keep empty elements (a key without a tail)
set(LLMQ_LUA_HEADROOM 20)
get_filename_component(LUA_DIR "${LUA_DIR}" ABSOLUTE)
set(prelude_file "${LUA_DIR}/lib/prelude.lua")
file(GLOB lib_files "${LUA_DIR}/lib/*.lua")
list(REMOVE_ITEM lib_files "${prelude_file}")
list(SORT lib_files)
file(GLOB op_files "${LUA_DIR}/*.lua")
list(SORT op_files)

function(lua_fail file msg)
    file(RELATIVE_PATH rel "${LUA_DIR}/.." "${file}")
    message(FATAL_ERROR "${rel}: ${msg}")
endfunction()

# The names file declares (its `-- uses <module>: a, b` lines) into out_var,
# and the module each line names, per name, into out_var_groups ("-" for a
# line that names none: `-- uses: a, b`, an error lua_check_uses reports).
function(lua_uses file text out_var)
    string(REGEX MATCHALL "(^|\n)-- uses( [A-Za-z_][A-Za-z0-9_]*)?:[^\n]*" lines "${text}")
    set(uses "")
    set(groups "")
    foreach(l ${lines})
        set(group "-")
        if(l MATCHES "^\n?-- uses ([A-Za-z_][A-Za-z0-9_]*):")
            set(group "${CMAKE_MATCH_1}")
        endif()
        string(REGEX REPLACE "^\n?-- uses( [A-Za-z_][A-Za-z0-9_]*)?:" "" l "${l}")
        string(REGEX MATCHALL "[^ ,\t]+" names "${l}")
        foreach(n ${names})
            if(NOT n MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
                lua_fail("${file}" "'-- uses:' names '${n}', which is not a Lua name")
            endif()
            list(FIND uses "${n}" at)
            if(NOT at EQUAL -1)
                lua_fail("${file}" "declares ${n} twice")
            endif()
            list(APPEND uses "${n}")
            list(APPEND groups "${group}")
        endforeach()
    endforeach()
    set(${out_var} "${uses}" PARENT_SCOPE)
    set(${out_var}_groups "${groups}" PARENT_SCOPE)
endfunction()

# The names text defines at its top level (column 0) into out_var.
function(lua_defines text out_var)
    string(REGEX MATCHALL "(^|\n)local [A-Za-z_][A-Za-z0-9_, ]*" heads "${text}")
    set(defs "")
    foreach(h ${heads})
        string(REGEX REPLACE "^\n?local (function )?" "" h "${h}")
        string(REGEX MATCHALL "[A-Za-z_][A-Za-z0-9_]*" names "${h}")
        list(APPEND defs ${names})
    endforeach()
    set(${out_var} "${defs}" PARENT_SCOPE)
endfunction()

# The identifiers text's code refers to (comments and one-line strings
# left out; a name after '.' or ':' is a field, not a variable).
function(lua_identifiers text out_var)
    string(REGEX REPLACE "--[^\n]*" "" code "${text}")
    string(REGEX REPLACE "'[^'\n]*'" "''" code "${code}")
    string(REGEX REPLACE "\"[^\"\n]*\"" "''" code "${code}")
    string(REGEX MATCHALL "[.:]?[A-Za-z_][A-Za-z0-9_]*" toks "${code}")
    list(REMOVE_DUPLICATES toks)
    list(FILTER toks EXCLUDE REGEX "^[.:]")
    set(${out_var} "${toks}" PARENT_SCOPE)
endfunction()

# Reads every module: what it uses and defines; each name's module.
set(lib_names "")
foreach(f ${lib_files})
    get_filename_component(mod "${f}" NAME_WE)
    file(READ "${f}" t)
    set(text_${mod} "${t}")
    lua_uses("${f}" "${t}" u)
    lua_defines("${t}" d)
    set(uses_${mod} "${u}")
    set(groups_${mod} "${u_groups}")
    set(defs_${mod} "${d}")
    foreach(n ${d})
        if(DEFINED owner_${n})
            lua_fail("${f}" "defines ${n}, which lua/lib/${owner_${n}}.lua defines too")
        endif()
        set(owner_${n} "${mod}")
        list(APPEND lib_names "${n}")
    endforeach()
endforeach()
# The price table (data/prices.json) is a name of the registry too, as a Lua
# string: lua/lib/budget.lua decodes it at its first use.
set(owner_LLMQ_PRICE_TABLE_JSON "(data/prices.json)")
set(group_LLMQ_PRICE_TABLE_JSON prices)

# KEY, the scripts' key helpers, made from the one key table of C
# (common/redis/keys.c, its rows `[LLMQ_KEY_JOB] = {"job:", "", 1},`): per
# kind a function of the account prefix P (and the name, for a kind that
# takes one) that returns the key, named after the kind in lower case
# without LLMQ_KEY_: KEY.job(P, id) is P .. 'job:' .. id. Lua code spells
# keys only through these (scripts/check-source checks it).
set(owner_KEY "(common/redis/keys.c)")
set(group_KEY keys)
file(READ "${LUA_DIR}/../common/redis/keys.c" key_table)
string(REGEX MATCHALL "\\[LLMQ_KEY_[A-Z0-9_]+\\] = {\"[^\"]*\", \"[^\"]*\", [01]}" key_rows "${key_table}")
list(LENGTH key_rows key_count)
if(key_count LESS 10)
    message(FATAL_ERROR "common/redis/keys.c: cannot read its key table (${key_count} rows) for the Lua key helpers")
endif()
set(key_text "do -- KEY: the key table of common/redis/keys.c\nlocal KEY = {}\n")
foreach(row ${key_rows})
    string(REGEX REPLACE "^\\[LLMQ_KEY_([A-Z0-9_]+)\\] = {\"([^\"]*)\", \"([^\"]*)\", ([01])}$" "\\1;\\2;\\3;\\4" parts "${row}")
    list(GET parts 0 kind)
    list(GET parts 1 khead)
    list(GET parts 2 ktail)
    list(GET parts 3 knamed)
    string(TOLOWER "${kind}" kind)
    if(knamed)
        set(expr "P .. '${khead}' .. name")
        if(NOT ktail STREQUAL "")
            string(APPEND expr " .. '${ktail}'")
        endif()
        string(APPEND key_text "function KEY.${kind}(P, name)\n    return ${expr}\nend\n")
    else()
        string(APPEND key_text "function KEY.${kind}(P)\n    return P .. '${khead}${ktail}'\nend\n")
    endif()
endforeach()
string(APPEND key_text "LLMQ_LIB.KEY = KEY\nend\n")

# Checks file's declarations (uses, each under the module groups names)
# against what its code refers to; defs: its own top-level names, which it
# refers to without declaring.
function(lua_check_uses file text uses groups defs)
    lua_identifiers("${text}" ids)
    set(i 0)
    foreach(n ${uses})
        list(GET groups ${i} group)
        math(EXPR i "${i} + 1")
        if(NOT DEFINED owner_${n})
            lua_fail("${file}" "declares ${n} (-- uses:), which no module of lua/lib defines")
        endif()
        list(FIND defs "${n}" own)
        if(NOT own EQUAL -1)
            lua_fail("${file}" "declares ${n} (-- uses:), which it defines itself")
        endif()
        list(FIND ids "${n}" at)
        if(at EQUAL -1)
            lua_fail("${file}" "declares ${n} (-- uses:) but does not use it")
        endif()
        set(want "${owner_${n}}")
        if(DEFINED group_${n})
            set(want "${group_${n}}")
        endif()
        if(group STREQUAL "-")
            lua_fail("${file}" "declares ${n} on a '-- uses:' line without its module: write it as '-- uses ${want}: ${n}'")
        elseif(NOT group STREQUAL want)
            lua_fail("${file}" "declares ${n} under '-- uses ${group}:', but it comes from '${want}': move it to a '-- uses ${want}:' line")
        endif()
    endforeach()
    foreach(n ${ids})
        if(DEFINED owner_${n})
            list(FIND uses "${n}" at)
            list(FIND defs "${n}" own)
            if(at EQUAL -1 AND own EQUAL -1)
                lua_fail("${file}" "uses ${n} (lua/lib/${owner_${n}}.lua) without declaring it: add it to a '-- uses ${owner_${n}}:' line")
            endif()
        endif()
    endforeach()
endfunction()

foreach(f ${lib_files})
    get_filename_component(mod "${f}" NAME_WE)
    lua_check_uses("${f}" "${text_${mod}}" "${uses_${mod}}" "${groups_${mod}}" "${defs_${mod}}")
endforeach()

# Modules in dependency order: repeatedly the first (by name) whose every
# use is defined by a module already placed.
set(ordered "")
set(left "")
foreach(f ${lib_files})
    get_filename_component(mod "${f}" NAME_WE)
    list(APPEND left "${mod}")
endforeach()
while(left)
    set(picked "")
    foreach(mod ${left})
        set(ready TRUE)
        foreach(n ${uses_${mod}})
            set(o "${owner_${n}}")
            if(NOT o MATCHES "^\\(")
                list(FIND ordered "${o}" at)
                if(at EQUAL -1)
                    set(ready FALSE)
                endif()
            endif()
        endforeach()
        if(ready)
            set(picked "${mod}")
            break()
        endif()
    endforeach()
    if(picked STREQUAL "")
        string(REPLACE ";" ", " names "${left}")
        message(FATAL_ERROR "lua/lib: the modules ${names} use each other in a circle")
    endif()
    list(APPEND ordered "${picked}")
    list(REMOVE_ITEM left "${picked}")
endwhile()

# The `local a, b = LLMQ_LIB.a, LLMQ_LIB.b` that binds names (nothing for none).
function(lua_bind names out_var)
    set(s "")
    if(names)
        string(REPLACE ";" ", " lhs "${names}")
        set(rhs "")
        foreach(n ${names})
            list(APPEND rhs "LLMQ_LIB.${n}")
        endforeach()
        string(REPLACE ";" ", " rhs "${rhs}")
        set(s "local ${lhs} = ${rhs}\n")
    endif()
    set(${out_var} "${s}" PARENT_SCOPE)
endfunction()

# `local _llmq_headroom_1, ... _n`: n unused locals (the headroom check).
function(lua_pad prefix n out_var)
    set(names "")
    foreach(i RANGE 1 ${n})
        list(APPEND names "${prefix}${i}")
    endforeach()
    string(REPLACE ";" ", " names "${names}")
    set(${out_var} "${names}" PARENT_SCOPE)
endfunction()
lua_pad(_llmq_headroom_ ${LLMQ_LUA_HEADROOM} pad_names)
lua_pad(_llmq_upvalue_ ${LLMQ_LUA_HEADROOM} up_names)
set(pad "local ${pad_names}\n")

file(READ "${prelude_file}" prelude)
file(READ "${LUA_DIR}/../data/prices.json" price_table)
set(head "${prelude}\nlocal LLMQ_LIB = {}\nLLMQ_LIB.LLMQ_PRICE_TABLE_JSON = [==[${price_table}]==]\n${key_text}")
set(lib_text "${head}")
set(pad_text "${head}")
foreach(mod ${ordered})
    lua_bind("${uses_${mod}}" bind)
    set(export "")
    foreach(n ${defs_${mod}})
        string(APPEND export "LLMQ_LIB.${n} = ${n}\n")
    endforeach()
    set(open "do -- lua/lib/${mod}.lua\n${bind}")
    set(close "${export}end\n")
    string(APPEND lib_text "${open}${text_${mod}}\n${close}")
    string(APPEND pad_text "${open}${pad}${text_${mod}}\n${close}")
endforeach()

set(all_text "${lib_text}")
foreach(f ${op_files})
    file(READ "${f}" t)
    string(APPEND all_text "${t}\n")
endforeach()
string(SHA1 digest "${all_text}")
string(SUBSTRING "${digest}" 0 12 tag)

function(c_string_literal text out_var)
    string(REPLACE "\\" "\\\\" text "${text}")
    string(REPLACE "\"" "\\\"" text "${text}")
    string(REPLACE "\n" "\\n\"\n    \"" text "${text}")
    set(${out_var} "\"${text}\"" PARENT_SCOPE)
endfunction()

set(library "#!lua name=llmq_${tag}\n${lib_text}")
set(padded "#!lua name=llmq_headroom_${tag}\n${pad_text}")
set(table "const struct llmq_script llmq_scripts[LLMQ_SCRIPT_COUNT] = {\n")
set(enum "/* Generated by cmake/embed_lua.cmake from lua/: do not edit. */\n#ifndef LLMQ_SCRIPTS_GEN_H\n#define LLMQ_SCRIPTS_GEN_H\nenum llmq_script_id {\n")
foreach(f ${op_files})
    get_filename_component(op "${f}" NAME_WE)
    file(READ "${f}" op_text)
    lua_uses("${f}" "${op_text}" uses)
    lua_check_uses("${f}" "${op_text}" "${uses}" "${uses_groups}" "")
    lua_bind("${uses}" bind)
    string(APPEND library "\ndo -- lua/${op}.lua\n${bind}local function op_${op}(KEYS, ARGV)\nllmq_bind_globals()\n${op_text}\nend\nllmq_load_api.register_function('llmq_${op}_${tag}', op_${op})\nend\n")
    # The headroom copy: unused locals in the block and the function, and
    # upvalues the function refers to (registered under other names: a
    # function name is one namespace for every library of a server).
    string(APPEND padded "\ndo -- lua/${op}.lua\n${bind}local ${up_names}\nlocal function op_${op}(KEYS, ARGV)\nllmq_bind_globals()\nlocal _llmq_upvalues = { ${up_names} }\n${pad}${op_text}\nend\nllmq_load_api.register_function('llmq_headroom_${op}_${tag}', op_${op})\nend\n")
    string(TOUPPER "${op}" up)
    string(APPEND table "    [LLMQ_SCRIPT_${up}] = {\"${op}\", \"llmq_${op}_${tag}\"},\n")
    string(APPEND enum "    LLMQ_SCRIPT_${up},\n")
endforeach()
string(APPEND table "};\n")
string(APPEND enum "    LLMQ_SCRIPT_COUNT\n};\n#endif\n")
c_string_literal("${library}" lit)
set(body "/* Generated by cmake/embed_lua.cmake from lua/: do not edit. */\n#include \"redis/script.h\"\n\nconst char llmq_script_library[] =\n    ${lit};\n\nconst char llmq_script_library_name[] = \"llmq_${tag}\";\n\n")
set(outputs "OUT_C;OUT_H")
set(text_OUT_C "${body}${table}")
set(text_OUT_H "${enum}")
if(OUT_HEADROOM)
    list(APPEND outputs OUT_HEADROOM)
    set(text_OUT_HEADROOM "${padded}")
endif()
foreach(var ${outputs})
    file(WRITE "${${var}}.tmp" "${text_${var}}")
    execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${${var}}.tmp" "${${var}}")
    file(REMOVE "${${var}}.tmp")
endforeach()
