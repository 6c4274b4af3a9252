# public_headers: every header of common/include/llmq/ compiles alone and
# together with all the others, as C11 and as C++ (a program may use the
# producer API and the limiter API at once; tests/support/compile-public-headers).
find_program(LLMQ_CXX_COMPILER NAMES g++ c++ clang++ REQUIRED)
set(LLMQ_HEADER_FLAGS)
foreach(dir ${JANSSON_INCLUDE_DIRS})
    list(APPEND LLMQ_HEADER_FLAGS -I${dir})
endforeach()
add_test(NAME public_headers
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/support/compile-public-headers
        ${PROJECT_SOURCE_DIR}/common/include ${CMAKE_C_COMPILER} ${LLMQ_CXX_COMPILER}
        ${LLMQ_HEADER_FLAGS})
set_tests_properties(public_headers PROPERTIES LABELS unit TIMEOUT 120)
