/* See hdoor.h. */
#include "hdoor.h"

#include <stdio.h>
#include <string.h>

int hdoor_respond(proto_out_t *out, int status, const char *reason, const char *type,
                  const char *extra, const void *body, size_t len, hdoor_frame_t f)
{
    char head[256];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s", status,
                     reason, type, len, f.keep_alive ? "" : "Connection: close\r\n");
    if (n < 0 || (size_t)n >= sizeof(head))
        return -1;
    proto_out_append(out, head, (size_t)n);
    if (extra)
        proto_out_append(out, extra, strlen(extra));
    proto_out_append(out, "\r\n", 2);
    if (!f.head_only && len)
        proto_out_append(out, body, len);
    return out->failed ? -1 : 0;
}

int hdoor_respond_text(proto_out_t *out, int status, const char *reason, const char *text,
                       hdoor_frame_t f)
{
    return hdoor_respond(out, status, reason, "text/plain; charset=utf-8", NULL, text, strlen(text),
                         f);
}
