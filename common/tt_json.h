/*
 * The one JSON string escaper, for every JSON the daemon and the CLI write (HTTP answers, the
 * CLI's --json, JSON log lines) and the quoted values of logfmt. The rule:
 *   - '"' and '\\' are escaped with a backslash; \b \f \n \r \t in their short forms, which a log
 *     reader can read; every other byte below 0x20, and 0x7f (DEL, which RFC 8259 lets through
 *     but a terminal acts on), as \u00XX;
 *   - well-formed UTF-8 (RFC 3629: no overlong form, no surrogate, nothing above U+10FFFF) is
 *     copied as it is; a byte that does not start one is written \ufffd (U+FFFD, the
 *     replacement character), so the output is always valid JSON (RFC 8259 section 8.1) and a
 *     client's id cannot make an answer or a log line unreadable;
 *   - runs of plain bytes are copied whole.
 */
#ifndef TT_JSON_H
#define TT_JSON_H

#include <stddef.h>

#include "tt_buf.h"

/* The most bytes one input byte is written as ("\ufffd", "\u001f"). */
#define TT_JSON_ESCAPE_MAX 6

/*
 * Escapes in[0, n) into out[0, cap) (no quotes, no NUL) and returns the bytes written; *used
 * says how much of the input that was. Stops short of an escape or a UTF-8 sequence that does
 * not fit whole, so a fixed buffer (a log line) is cut between characters, never inside one.
 */
size_t tt_json_escape(char *out, size_t cap, const char *in, size_t n, size_t *used);

/* Appends in[0, n) as a quoted JSON string; 0, or -1 when memory ran out (b->failed). */
int tt_json_str(tt_buf_t *b, const char *in, size_t n);

#endif
