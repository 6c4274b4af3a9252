/* jansson's allocator swapped for one that fails after a budget. */
#include "json_alloc.h"

#include <jansson.h>
#include <stdlib.h>

static long alloc_budget;

static void *failing_malloc(size_t n)
{
    if (alloc_budget <= 0)
        return NULL;
    alloc_budget--;
    return malloc(n);
}

void llmq_test_json_alloc_fail_after(long n)
{
    alloc_budget = n;
    json_set_alloc_funcs(failing_malloc, free);
}

void llmq_test_json_alloc_reset(void)
{
    json_set_alloc_funcs(malloc, free);
}
