/* Allocation failures inside jansson, for the tests that check a parser
 * fails cleanly (an error, no crash, no leak: ASan checks) at every
 * allocation it makes. Process-wide state: one test thread at a time. */
#ifndef LLMQ_TEST_JSON_ALLOC_H
#define LLMQ_TEST_JSON_ALLOC_H

/* From now on jansson's first n allocations succeed and every later one
 * fails (returns NULL), until the next call or llmq_test_json_alloc_reset. */
void llmq_test_json_alloc_fail_after(long n);

/* jansson allocates with malloc again, never failing on purpose. */
void llmq_test_json_alloc_reset(void);

#endif
