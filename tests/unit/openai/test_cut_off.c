/* Unit tests for common/openai/cut_off.c: which response bodies are answers
 * the model cut off at its token limit (never stored by the cache). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "openai/cut_off.h"

static int cut(const char *body)
{
    return llmq_openai_cut_off(body, body ? strlen(body) : 0);
}

static void test_bodies(void **state)
{
    (void)state;
    static const struct {
        const char *body;
        int cut;
    } cases[] = {
        {"{\"object\":\"chat.completion\",\"choices\":[{\"index\":0,\"finish_reason\":\"stop\"}]}",
         0},
        {"{\"object\":\"chat.completion\",\"choices\":[{\"index\":0,\"finish_reason\":\"length\"}]"
         "}",
         1},
        /* any choice of several */
        {"{\"choices\":[{\"finish_reason\":\"stop\"},{\"finish_reason\":\"length\"}]}", 1},
        {"{\"choices\":[{\"finish_reason\":\"tool_calls\"}]}", 0},
        {"{\"object\":\"text_completion\",\"choices\":[{\"text\":\"x\",\"finish_reason\":"
         "\"length\"}]}",
         1},
        {"{\"object\":\"response\",\"status\":\"incomplete\",\"incomplete_details\":"
         "{\"reason\":\"max_output_tokens\"}}",
         1},
        {"{\"object\":\"response\",\"status\":\"completed\"}", 0},
        {"{\"object\":\"list\",\"data\":[{\"embedding\":[0.1]}]}", 0},
        /* not an answer at all: not cut off */
        {"", 0},
        {"not json", 0},
        {"[1,2]", 0},
        {"{\"choices\":{\"finish_reason\":\"length\"}}", 0},
        {"{\"choices\":[{\"finish_reason\":7}]}", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (cut(cases[i].body) != cases[i].cut)
            fail_msg("case %zu (%s): expected %d", i, cases[i].body, cases[i].cut);
    assert_int_equal(llmq_openai_cut_off(NULL, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bodies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
