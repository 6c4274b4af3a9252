/* The Files API (files.c): POST /v1/files, GET /v1/files, GET and DELETE
 * /v1/files/{id}, GET /v1/files/{id}/content, and a batch's output and error
 * files (ids.h GW_FILE_OUT_PREFIX, GW_FILE_ERR_PREFIX). Runs on the
 * gateway's loop; an upload is checked on the offload thread (offload.h). */
#ifndef LLMQ_GW_FILES_H
#define LLMQ_GW_FILES_H

struct gw_request;

/* The route handler (router.h): r's key is checked and its body whole. */
void gw_files_handle(struct gw_request *r);

#endif
