/* The Files API (files.c): POST /v1/files, GET /v1/files, GET and DELETE
 * /v1/files/{id}, GET /v1/files/{id}/content, and a batch's output and error
 * files (ids.h GW_FILE_OUT_PREFIX, GW_FILE_ERR_PREFIX). Runs on the
 * gateway's loop; an upload is checked on the offload thread (offload.h). */
#ifndef LLMQ_GW_FILES_H
#define LLMQ_GW_FILES_H

struct gw_request;

/* The route handlers (router.h): r's key is checked and its body whole;
 * r->m.id is the {id} of the path where the route has one. */
void gw_files_create(struct gw_request *r);  /* POST /v1/files (the upload in r->upload) */
void gw_files_list(struct gw_request *r);    /* GET /v1/files */
void gw_files_get(struct gw_request *r);     /* GET /v1/files/{id} */
void gw_files_content(struct gw_request *r); /* GET /v1/files/{id}/content */
void gw_files_delete(struct gw_request *r);  /* DELETE /v1/files/{id} */

#endif
