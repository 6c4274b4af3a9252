# The mutation check (tests/mutation/): run.sh plants each bug of specs/*.mut
# in a scratch copy and runs the tests that must catch it. It takes tens of
# minutes, so it is not part of ctest; this cheap test only checks that every
# spec still applies to the tree, so that code moving under a spec fails CI
# (a stale spec would silently stop guarding its invariant) and the spec is
# refreshed by whoever moved the code.
file(GLOB LLMQ_MUTATION_SPECS CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/mutation/specs/*.mut")
add_test(NAME mutation_specs_apply
    COMMAND perl ${CMAKE_CURRENT_SOURCE_DIR}/mutation/apply.pl --check ${PROJECT_SOURCE_DIR}
        ${LLMQ_MUTATION_SPECS})
set_tests_properties(mutation_specs_apply PROPERTIES LABELS unit TIMEOUT 60)
