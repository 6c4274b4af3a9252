# The docs cannot drift (tests/docs/check_docs.sh): every option a binary's
# --help prints is on its reference page docs/man/<page>.md and the other way
# round (docs_options: llmq and each of its commands, llmq-worker,
# llmq-gateway), and every relative link of README.md, CONTRIBUTING.md and
# docs/ names a file and heading that exist (docs_links).
add_test(NAME docs_options
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/docs/check_docs.sh options ${PROJECT_BINARY_DIR}/bin ${PROJECT_SOURCE_DIR})
set_tests_properties(docs_options PROPERTIES LABELS unit TIMEOUT 300)
add_test(NAME docs_links
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/docs/check_docs.sh links ${PROJECT_SOURCE_DIR})
set_tests_properties(docs_links PROPERTIES LABELS unit TIMEOUT 300)
