# Tokenizer tests that need more than the default registration.
#
# unit_test_tokenizer_alloc fails the Nth allocation: wrap the allocator at link
# time so that every call from libllmq's objects goes through the test's hooks.
if(TARGET unit_test_tokenizer_alloc)
    target_link_options(unit_test_tokenizer_alloc PRIVATE
        -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc)
endif()
