/* Cut-off answers (see cut_off.h): a choice that stopped at max_tokens, or
 * a Responses API response left incomplete. Every jansson value created
 * here is released before returning. */
#include "openai/cut_off.h"

#include <jansson.h>
#include <string.h>

static int is_text(const json_t *v, const char *want)
{
    return json_is_string(v) && strcmp(json_string_value(v), want) == 0;
}

int llmq_openai_cut_off(const char *body, size_t len)
{
    if (body == NULL || len == 0)
        return 0;
    /* most answers are whole: no parse unless one of the words is there */
    if (memmem(body, len, "\"length\"", 8) == NULL &&
        memmem(body, len, "\"incomplete\"", 12) == NULL)
        return 0;
    json_t *o = json_loadb(body, len, 0, NULL);
    if (!json_is_object(o)) {
        json_decref(o);
        return 0;
    }
    int cut = is_text(json_object_get(o, "status"), "incomplete");
    json_t *choices = json_object_get(o, "choices");
    size_t i;
    json_t *ch;
    json_array_foreach(choices, i, ch)
    {
        if (is_text(json_object_get(ch, "finish_reason"), "length"))
            cut = 1;
    }
    json_decref(o);
    return cut;
}
