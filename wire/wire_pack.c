/* The bounded msgpack-c writer. See wire_pack.h. */
#include "wire_pack.h"

#include <string.h>

int wire_pack_write(void *data, const char *buf, size_t len)
{
    wire_pack_t *w = data;
    if (w->overflow || len > w->cap - w->len) {
        w->overflow = true;
        return -1;
    }
    if (len == 0)
        return 0; /* an empty str/bin body may come with a NULL pointer */
    memcpy(w->p + w->len, buf, len);
    w->len += len;
    return 0;
}
