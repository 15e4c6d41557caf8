/*
 * A tiny HTTP/1.1 client for tests, over TCP or a unix socket: send raw bytes, read whole
 * responses (framed by Content-Length) with a deadline. Raw on purpose: the tests send bytes
 * no real client would.
 */
#ifndef TT_TESTS_HTTPC_H
#define TT_TESTS_HTTPC_H

#include <stdbool.h>
#include <stddef.h>

#define HTTPC_MAX (256 * 1024)

typedef struct httpc_response {
    int status; /* 0: no response (closed, timed out or unparsable) */
    char *head; /* status line and headers, NUL-terminated, inside raw */
    char *body; /* NUL-terminated */
    size_t body_len;
    char raw[HTTPC_MAX + 1];
} httpc_response_t;

/* Connects to 127.0.0.1:port, or -1. */
int httpc_tcp(int port);
/* Connects to a unix socket, or -1. */
int httpc_unix(const char *path);
/* Writes all of s; 0 or -1. */
int httpc_send(int fd, const char *s, size_t len);
/* Reads one response within timeout_ms; fills r (r->status 0 when none came). Bytes beyond
 * it (the next pipelined response) stay buffered for the next call on the same fd: call
 * httpc_reset(fd) when switching connections. */
int httpc_read(int fd, httpc_response_t *r, int timeout_ms);
void httpc_reset(void);
/* The value of header `name` in r (case-insensitive), copied into buf; NULL when absent. */
const char *httpc_header(const httpc_response_t *r, const char *name, char *buf, size_t size);
/* True when the peer closed fd within timeout_ms (reads and drops what comes first). */
bool httpc_closed(int fd, int timeout_ms);
/* One request on a new TCP connection with Connection: close. Returns the status. */
int httpc_get(int port, const char *target, httpc_response_t *r);
/* The value of `series` (a sample's name and labels, as /metrics writes them) on the daemon's
 * HTTP port, or -1 when /metrics does not answer or does not show it. */
long long httpc_metric(int port, const char *series);
/* Polls /metrics until `series` is at least `want` (counters the daemon may still be making),
 * within timeout_ms; its last value. */
long long httpc_metric_reaching(int port, const char *series, long long want, int timeout_ms);

#endif
