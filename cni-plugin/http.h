/* One HTTP/1.1 request over a Unix socket, read back to its end, with the Python plugin's timeouts and
 * its reading of the answer (services/cni_plugin/main.py: post()). */
#ifndef PYNGRESS_CNI_HTTP_H
#define PYNGRESS_CNI_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

typedef enum {
    POST_ANSWERED, /* an HTTP response: status and payload are set */
    POST_OS_ERROR, /* a system call failed: errno_value */
    POST_FAILED,   /* anything else (timeout, not HTTP, ...): message, worded as Python words it */
} post_outcome;

typedef struct {
    post_outcome outcome;
    int errno_value;
    buf message;
    buf response;
    buf status; /* the status code in decimal, without leading zeros */
    const unsigned char *payload;
    size_t payload_len;
} post_result;

/* POSTs body to / at the socket whose path is the text socket_path (see text.h). content_length is
 * what the request announces: when it is more than body->len (a body too large to hold), only what there
 * is gets sent: the server refuses a body over its limit from the request's head alone. */
void http_post(const buf *socket_path, const buf *body, size_t content_length, int timeout_seconds,
               size_t response_max, post_result *result);
void post_result_free(post_result *result);

/* The text of an errno value as glibc words it (the Python plugin's messages come from glibc). */
const char *os_error_text(int errno_value);

#endif
