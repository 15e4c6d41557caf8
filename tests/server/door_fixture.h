/* A door (server/door.c) over a test's engine, with metrics of its own: for the tests that
 * call the engine the way the daemon's doors do (tests/server, tests/rls). */
#ifndef TT_TESTS_SERVER_DOOR_FIXTURE_H
#define TT_TESTS_SERVER_DOOR_FIXTURE_H

#include <criterion/criterion.h>

#include "door.h"

typedef struct door_fixture {
    srv_metrics_t *metrics;
    door_t *door;
} door_fixture_t;

static inline door_t *door_fixture_open(door_fixture_t *f, gov_engine_t *engine)
{
    cr_assert_not_null(f->metrics = srv_metrics_new());
    tt_err_t err;
    cr_assert_eq(door_new(&f->door, engine, f->metrics, NULL, &err), 0);
    return f->door;
}

static inline void door_fixture_close(door_fixture_t *f)
{
    door_free(f->door);
    srv_metrics_free(f->metrics);
    *f = (door_fixture_t){0};
}

#endif
