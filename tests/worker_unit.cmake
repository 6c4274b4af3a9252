# Unit tests of the worker's pure parts (tests/unit/worker/test_<module>.c),
# compiled with the worker sources they test: llmq-worker is an executable,
# not a library. (When the worker becomes a core library, link that instead.)
set(LLMQ_WORKER_SRC ${PROJECT_SOURCE_DIR}/worker)
add_executable(unit_test_worker_classify ${CMAKE_CURRENT_SOURCE_DIR}/unit/worker/test_classify.c
    ${LLMQ_WORKER_SRC}/classify.c ${LLMQ_WORKER_SRC}/http.c ${LLMQ_WORKER_SRC}/http_xfer.c)
target_include_directories(unit_test_worker_classify PRIVATE ${LLMQ_WORKER_SRC})
target_link_libraries(unit_test_worker_classify PRIVATE llmq_internal PkgConfig::CMOCKA)
add_test(NAME unit_test_worker_classify COMMAND unit_test_worker_classify)
set_tests_properties(unit_test_worker_classify PROPERTIES LABELS unit TIMEOUT 60)
