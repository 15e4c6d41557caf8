/*
 * The one clock the shells read (SPEC §2): int64 nanoseconds since the Unix epoch,
 * CLOCK_REALTIME. Pure cores never call it; they take `now` as an argument. Membership's
 * protocol timers run on tt_mono_ns instead (SPEC §7: a wall-clock step must not kill anyone).
 */
#ifndef TT_CLOCK_H
#define TT_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t tt_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * INT64_C(1000000000) + ts.tv_nsec;
}

/* CLOCK_MONOTONIC in nanoseconds: for timers a wall-clock step must not move. */
static inline int64_t tt_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * INT64_C(1000000000) + ts.tv_nsec;
}

#endif
