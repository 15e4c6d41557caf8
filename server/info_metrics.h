/*
 * The /metrics families that describe the daemon rather than its traffic, so a dashboard can
 * draw a limit next to its decisions and an alert can tell one process from the next:
 *  - tokentriage_build_info{version,commit} 1;
 *  - the process, under the names Prometheus' client libraries use (process_cpu_seconds_total,
 *    process_resident_memory_bytes, process_virtual_memory_bytes, process_open_fds,
 *    process_max_fds, process_start_time_seconds), read from /proc at each scrape;
 *  - each configured limit: tokentriage_limit_info{limit,type,store,algorithm,mode} 1 and its
 *    tokentriage_limit_amount, _period_seconds (rate-class limits) and _burst (gcra and
 *    token_bucket), from the configuration serving now (a reload changes them at once).
 * docs/metrics.md lists every family the daemon exposes.
 */
#ifndef TT_SERVER_INFO_METRICS_H
#define TT_SERVER_INFO_METRICS_H

#include "config.h"
#include "proto.h"

/* What the source reads; the caller owns it and keeps it alive while /metrics can be scraped.
 * `cfg` points at the daemon's current configuration pointer, which a reload replaces. */
typedef struct srv_info_metrics {
    const char *version;
    const char *commit;
    cfg_config_t *const *cfg;
} srv_info_metrics_t;

/* A srv_metrics_source_fn: appends the families above. ud is a srv_info_metrics_t. */
void srv_info_metrics_render(tt_buf_t *out, void *ud);

#endif
