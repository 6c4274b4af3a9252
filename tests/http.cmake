# The worker's HTTP client (worker/http/) is tested by http_client and
# measured by bench_http, which link it from llmq_worker_core like every test;
# the small HTTP/1.1 server they talk to (tests/http_testserver/) is a helper
# program in the tests' binary directory (found via LLMQ_TEST_BIN_DIR).
add_executable(http_testserver ${CMAKE_CURRENT_SOURCE_DIR}/http_testserver/http_testserver.c)
target_link_libraries(http_testserver PRIVATE llmq_libev)
set_target_properties(http_testserver PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})

function(llmq_http_attach target)
    if(TARGET ${target})
        target_compile_definitions(${target} PRIVATE LLMQ_HTTP_TEST_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
        add_dependencies(${target} http_testserver)
    endif()
endfunction()

# http_client is registered by the integration glob before this file is read;
# bench_http after it, hence the deferred call.
llmq_http_attach(http_client)
if(TARGET http_client)
    # Talks to its own HTTP server only: no redis fixture needed.
    set_tests_properties(http_client PROPERTIES TIMEOUT 60 FIXTURES_REQUIRED "")
endif()
cmake_language(DEFER CALL llmq_http_attach bench_http)

# http_client also runs one scenario against openai-sim when it is built.
function(llmq_http_sim_dep)
    if(TARGET http_client AND TARGET openai-sim)
        add_dependencies(http_client openai-sim)
    endif()
endfunction()
cmake_language(DEFER CALL llmq_http_sim_dep)
