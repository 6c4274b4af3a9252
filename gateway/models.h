/* The Models API, as far as a client's discovery needs it: GET /v1/models
 * and GET /v1/models/{id}, in OpenAI's shapes ({"object": "list", "data":
 * [model...]}; a model {"id", "object": "model", "created", "owned_by"}).
 *
 * What a key may use: a key with a model list (`llmq keys create --models`)
 * lists exactly those. A key without one may call any model the API serves,
 * which llmq cannot know; it lists the models llmq knows for the account:
 * those with a price (data/prices.json and `llmq prices set`, the
 * price_list script) and those named by a model fallback (fallbacks.h).
 * GET /v1/models/{id} answers a model of that list, else 404
 * model_not_found. created is 0 (llmq does not know when a model was made);
 * owned_by is "llmq". Runs on the gateway's loop. */
#ifndef LLMQ_GW_MODELS_H
#define LLMQ_GW_MODELS_H

struct gw_request;

/* The route handlers (router.h): r's key is checked. */
void gw_models_list(struct gw_request *r); /* GET /v1/models */
void gw_models_get(struct gw_request *r);  /* GET /v1/models/{id} (r->m.id: the id) */

#endif
