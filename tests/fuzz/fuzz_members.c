/*
 * libFuzzer target for the members file (membership/swim_proto.h: what a node knew of the fleet,
 * read from its state directory at a restart): any bytes through swim_known_decode and
 * swim_known_load of a fresh core whose node id is "rx" and cluster label "" (a file of another
 * node is refused before its members are read, so the seeds and the fuzzer's finds use those).
 * Properties beyond "no crash, no leak, no UB": a refused file calls nothing and remembers
 * nothing; an accepted one remembers exactly its members, and re-encodes, through the encoder,
 * to a file that decodes to the same members (msgpack has several spellings of one value, so the
 * bytes may differ). Seeds: tests/fuzz/members/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_swim.h"
#include "swim_proto.h"

static swim_known_t seen[SWIM_REMEMBER_MAX];
static size_t n_seen;

static void each(void *ud, const swim_known_t *m)
{
    (void)ud;
    check(n_seen < SWIM_REMEMBER_MAX && m->id_len >= 1 && m->id_len <= SWIM_ID_MAX);
    seen[n_seen++] = *m;
}

static void get(const void *ctx, size_t i, swim_known_t *m)
{
    (void)ctx;
    *m = seen[i];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    n_seen = 0;
    tt_err_t err;
    int rc = swim_known_decode(data, size, "rx", 2, "", 0, each, NULL, &err);
    check(rc == 0 || (rc == SWIM_EMALFORMED && n_seen == 0));
    if (rc == 0) { /* the same members back */
        static uint8_t again[1 << 20];
        static swim_known_t first[SWIM_REMEMBER_MAX];
        size_t n = n_seen;
        memcpy(first, seen, n * sizeof(first[0]));
        wire_pack_t w = {again, 0, sizeof again, false};
        swim_known_encode(&w, "rx", 2, "", 0, n, get, NULL);
        check(!w.overflow);
        n_seen = 0;
        check(swim_known_decode(again, w.len, "rx", 2, "", 0, each, NULL, NULL) == 0);
        check(n_seen == n);
        for (size_t k = 0; k < n; k++)
            check(seen[k].id_len == first[k].id_len &&
                  memcmp(seen[k].id, first[k].id, first[k].id_len) == 0 &&
                  seen[k].generation == first[k].generation &&
                  swim_addr_eq(&seen[k].addr, &first[k].addr));
        memcpy(seen, first, n * sizeof(first[0])); /* pointers into data, for what follows */
        n_seen = n;
    }
    swim_core_t *c = fuzz_core();
    int n = swim_known_load(c, data, size, &err);
    check(rc == 0 ? n == (int)n_seen : n < 0);
    /* each remembered member is missing from the fresh table, but for one named as ourselves */
    size_t self = 0;
    for (size_t k = 0; rc == 0 && k < n_seen; k++)
        self += seen[k].id_len == 2 && memcmp(seen[k].id, "rx", 2) == 0;
    check(swim_known_missing(c, NULL, 0) == (rc == 0 ? n_seen - self : 0));
    swim_free(c);
    return 0;
}
