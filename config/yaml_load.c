/*
 * YAML to a node tree, bounded.
 *
 * A config file crosses a trust boundary (a ConfigMap anyone with edit rights can change), so
 * the loader bounds everything before libyaml or the schema sees it: the size (CFG_FILE_MAX),
 * the encoding (strict UTF-8, no NUL: checked here so the error carries a line and column),
 * the nesting depth, the node count, the length of a scalar, and the keys in one mapping.
 * Aliases are refused outright rather than expanded: a config has no need for them, and
 * refusing them is the only bound on an alias bomb that costs nothing. Duplicate keys are an
 * error (YAML says so; libyaml does not check). `${VAR}` in a scalar value expands from the
 * environment, `$${` writes a literal `${`, and an unset variable is an error naming the path.
 *
 * libyaml is driven event by event: each event appends a node to the frame on top of a stack,
 * and the stack is also what names the path of an error. Nodes and their item arrays live in
 * one arena, so freeing a document is freeing a few chunks.
 */
#include "internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define MAP_KEYS_MAX 1024 /* keys in one mapping: keeps the duplicate check cheap */
#define ROOT_PATH "(root)"
#define PATH_SIZE 512

static void *arena_alloc(cfg_doc_t *doc, size_t n)
{
    return tt_arena_alloc(&doc->arena, n);
}

void cfg__doc_free(cfg_doc_t *doc)
{
    tt_arena_free(&doc->arena);
    doc->root = NULL;
}

/* ---- the builder ---- */

struct frame {
    cfg_node_t *node;
    cfg_node_t **items; /* malloc'd while open; copied into the arena when the node closes */
    size_t n, cap;
};

struct builder {
    cfg_doc_t *doc;
    cfg_report_t *report;
    struct frame stack[CFG_DEPTH_MAX];
    size_t depth;
    size_t nodes;
    int errors;
    int oom;
    bool expand; /* ${VAR} in values (our config); envoy ratelimit's files are read literally */
};

/* The path of the node most recently appended to the first `depth` open frames:
 * server.socket, governance.limits[2].burst. */
static const char *path_upto(const struct builder *b, size_t depth, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < depth && used < size; i++) {
        const struct frame *f = &b->stack[i];
        int n = 0;
        if (f->n == 0)
            break;
        if (f->node->kind == CFG_NODE_SEQ) {
            n = snprintf(buf + used, size - used, "[%zu]", f->n - 1);
        } else {
            const cfg_node_t *key = f->items[(f->n - 1) & ~(size_t)1];
            n = snprintf(buf + used, size - used, "%s%s", used ? "." : "", key->text);
        }
        if (n < 0)
            break;
        used += (size_t)n;
    }
    if (used >= size)
        buf[size - 1] = '\0';
    return used ? buf : ROOT_PATH;
}

static const char *path_of(const struct builder *b, char *buf, size_t size)
{
    return path_upto(b, b->depth, buf, size);
}

static void report(struct builder *b, const char *path, int line, int col, const char *msg,
                   const char *arg)
{
    b->errors++;
    cfg_pos_t at = {b->doc->name, line, col};
    if (cfg__report_add(b->report, false, CFG_EINVALID, path, &at, "%s%s", msg, arg ? arg : "") < 0)
        b->oom = 1;
}

static int is_null_text(const char *s)
{
    return !*s || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
           strcmp(s, "NULL") == 0;
}

/* Expands ${VAR} into out (at most CFG_SCALAR_MAX bytes). Returns 0, or -1 after reporting. */
static int expand(struct builder *b, const cfg_node_t *at, const char *path, const char *in,
                  size_t len, char *out, size_t *out_len)
{
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        const char *piece = in + i;
        size_t plen = 1;
        char name[CFG_NAME_MAX + 1];
        if (in[i] == '$' && i + 2 < len && in[i + 1] == '$' && in[i + 2] == '{') {
            piece = "${";
            plen = 2;
            i += 3;
        } else if (in[i] == '$' && i + 1 < len && in[i + 1] == '{') {
            size_t j = i + 2, k = 0;
            while (j < len && in[j] != '}' && k < CFG_NAME_MAX &&
                   (isalpha((unsigned char)in[j]) || in[j] == '_' ||
                    (k > 0 && isdigit((unsigned char)in[j]))))
                name[k++] = in[j++];
            name[k] = '\0';
            if (j >= len || in[j] != '}' || k == 0) {
                report(b, path, at->line, at->col,
                       "malformed environment reference: write ${NAME} with NAME made of "
                       "letters, digits and _ (or $${ for a literal ${)",
                       NULL);
                return -1;
            }
            piece = getenv(name);
            if (!piece) {
                b->errors++;
                cfg_pos_t pos = {b->doc->name, at->line, at->col};
                if (cfg__report_add(b->report, false, CFG_EINVALID, path, &pos,
                                    "environment variable %s is not set", name) < 0)
                    b->oom = 1;
                return -1;
            }
            plen = strlen(piece);
            i = j + 1;
        } else {
            i++;
        }
        if (plen > CFG_SCALAR_MAX - o) {
            report(b, path, at->line, at->col, "the value is longer than 4096 bytes", NULL);
            return -1;
        }
        memcpy(out + o, piece, plen);
        o += plen;
    }
    *out_len = o;
    return 0;
}

static cfg_node_t *new_node(struct builder *b, cfg_node_kind_t kind, yaml_mark_t mark)
{
    if (++b->nodes > CFG_NODES_MAX) {
        char path[PATH_SIZE];
        if (b->nodes == CFG_NODES_MAX + 1)
            report(b, path_of(b, path, sizeof(path)), (int)mark.line + 1, (int)mark.column + 1,
                   "the document has more than 100000 nodes", NULL);
        return NULL;
    }
    cfg_node_t *n = arena_alloc(b->doc, sizeof(*n));
    if (!n) {
        b->oom = 1;
        return NULL;
    }
    memset(n, 0, sizeof(*n));
    n->kind = kind;
    n->line = (int)mark.line + 1;
    n->col = (int)mark.column + 1;
    return n;
}

/* Appends a finished (scalar) or just opened (collection) node to the top frame. A key is
 * checked against the keys before it. Returns 0 or -1 (a fatal error was reported). */
static int append(struct builder *b, cfg_node_t *node)
{
    if (b->depth == 0) {
        b->doc->root = node;
        return 0;
    }
    struct frame *f = &b->stack[b->depth - 1];
    int is_key = f->node->kind == CFG_NODE_MAP && f->n % 2 == 0;
    char path[PATH_SIZE];
    if (is_key && node->kind != CFG_NODE_SCALAR) {
        report(b, path_upto(b, b->depth - 1, path, sizeof(path)), node->line, node->col,
               "a mapping key must be a plain scalar", NULL);
        return -1;
    }
    if (is_key && f->n / 2 >= MAP_KEYS_MAX) {
        report(b, path_upto(b, b->depth - 1, path, sizeof(path)), node->line, node->col,
               "a mapping has more than 1024 keys", NULL);
        return -1;
    }
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 8;
        cfg_node_t **items = realloc(f->items, cap * sizeof(*items));
        if (!items) {
            b->oom = 1;
            return -1;
        }
        f->items = items;
        f->cap = cap;
    }
    f->items[f->n++] = node;
    if (is_key) {
        for (size_t i = 0; i + 1 < f->n; i += 2) {
            if (strcmp(f->items[i]->text, node->text) == 0) {
                char first[64];
                snprintf(first, sizeof(first), " (first at line %d, column %d)", f->items[i]->line,
                         f->items[i]->col);
                report(b, path_of(b, path, sizeof(path)), node->line, node->col, "duplicate key",
                       first);
                break; /* reported; the schema reads the first occurrence */
            }
        }
    }
    return 0;
}

static int on_scalar(struct builder *b, const yaml_event_t *ev)
{
    cfg_node_t *node = new_node(b, CFG_NODE_SCALAR, ev->start_mark);
    if (!node)
        return -1;
    const char *in = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    char path[PATH_SIZE];
    if (len > CFG_SCALAR_MAX) {
        report(b, b->depth ? path_of(b, path, sizeof(path)) : ROOT_PATH, node->line, node->col,
               "a scalar is longer than 4096 bytes", NULL);
        return -1;
    }
    int plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    node->null = plain && is_null_text(in);
    /* provisional text so the key check and path_of can read it; values are expanded below */
    node->text = arena_alloc(b->doc, len + 1);
    if (!node->text) {
        b->oom = 1;
        return -1;
    }
    memcpy(node->text, in, len);
    node->text[len] = '\0';
    node->len = len;
    if (append(b, node) < 0)
        return -1;
    const struct frame *f = b->depth ? &b->stack[b->depth - 1] : NULL;
    int is_key = f && f->node->kind == CFG_NODE_MAP && f->n % 2 == 1;
    if (is_key || !b->expand || !memchr(in, '$', len))
        return 0;
    char buf[CFG_SCALAR_MAX];
    size_t out_len;
    if (expand(b, node, b->depth ? path_of(b, path, sizeof(path)) : ROOT_PATH, in, len, buf,
               &out_len) < 0) {
        node->failed = true;
        return 0; /* reported; keep going to find more */
    }
    node->text = arena_alloc(b->doc, out_len + 1);
    if (!node->text) {
        b->oom = 1;
        return -1;
    }
    memcpy(node->text, buf, out_len);
    node->text[out_len] = '\0';
    node->len = out_len;
    return 0;
}

static int on_open(struct builder *b, cfg_node_kind_t kind, yaml_mark_t mark)
{
    char path[PATH_SIZE];
    if (b->depth == CFG_DEPTH_MAX) {
        report(b, path_of(b, path, sizeof(path)), (int)mark.line + 1, (int)mark.column + 1,
               "nesting deeper than 32 levels", NULL);
        return -1;
    }
    cfg_node_t *node = new_node(b, kind, mark);
    if (!node || append(b, node) < 0)
        return -1;
    b->stack[b->depth++] = (struct frame){.node = node};
    return 0;
}

static int on_close(struct builder *b)
{
    struct frame *f = &b->stack[b->depth - 1];
    cfg_node_t *node = f->node;
    if (f->n) {
        node->items = arena_alloc(b->doc, f->n * sizeof(*node->items));
        if (!node->items) {
            b->oom = 1;
            return -1;
        }
        memcpy(node->items, f->items, f->n * sizeof(*node->items));
    }
    node->n = node->kind == CFG_NODE_MAP ? f->n / 2 : f->n;
    free(f->items);
    b->depth--;
    return 0;
}

/* Strict UTF-8 without NUL. Returns 0, or -1 after reporting the first bad byte. */
static int check_utf8(struct builder *b, const unsigned char *s, size_t len)
{
    int line = 1, col = 1;
    for (size_t i = 0; i < len;) {
        unsigned c = s[i];
        size_t n = c < 0x80             ? 1
                   : (c & 0xe0) == 0xc0 ? 2
                   : (c & 0xf0) == 0xe0 ? 3
                   : (c & 0xf8) == 0xf0 ? 4
                                        : 0;
        uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
        int ok = n > 0 && i + n <= len;
        for (size_t k = 1; ok && k < n; k++) {
            ok = (s[i + k] & 0xc0) == 0x80;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if (ok && ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
                   cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)))
            ok = 0;
        if (!ok || c == 0) {
            char byte[64];
            snprintf(byte, sizeof(byte), " (byte 0x%02x at offset %zu)", c, i);
            report(b, ROOT_PATH, line, col,
                   c == 0 ? "the file contains a NUL byte; a config is UTF-8 text"
                          : "the file is not valid UTF-8; a config is UTF-8 text",
                   byte);
            return -1;
        }
        if (c == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
        i += n;
    }
    return 0;
}

int cfg__yaml_load(const char *name, const char *text, size_t len, unsigned flags, cfg_doc_t *doc,
                   cfg_report_t *report_out)
{
    memset(doc, 0, sizeof(*doc));
    doc->name = name;
    struct builder b = {.doc = doc, .report = report_out, .expand = !(flags & CFG_YAML_LITERAL)};
    if (len > CFG_FILE_MAX) {
        char size[96];
        snprintf(size, sizeof(size), " (%zu bytes; the limit is %d)", len, CFG_FILE_MAX);
        report(&b, ROOT_PATH, 1, 1, "the file is larger than 1 MiB", size);
        return CFG_EINVALID;
    }
    if (check_utf8(&b, (const unsigned char *)text, len) < 0)
        return CFG_EINVALID;

    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
        cfg__report_add(report_out, false, CFG_ENOMEM, ROOT_PATH, NULL, "out of memory");
        return CFG_ENOMEM;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING);
    int documents = 0, done = 0, fatal = 0, parse_error = 0;
    char path[PATH_SIZE];
    while (!done && !fatal && !b.oom) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) {
            char msg[256];
            snprintf(msg, sizeof(msg), "%s%s%s", parser.problem ? parser.problem : "error",
                     parser.context ? " " : "", parser.context ? parser.context : "");
            report(&b, path_of(&b, path, sizeof(path)), (int)parser.problem_mark.line + 1,
                   (int)parser.problem_mark.column + 1, "YAML syntax: ", msg);
            parse_error = 1;
            break;
        }
        switch (ev.type) {
        case YAML_DOCUMENT_START_EVENT:
            if (++documents > 1) {
                report(&b, ROOT_PATH, (int)ev.start_mark.line + 1, (int)ev.start_mark.column + 1,
                       "a config file holds one YAML document; found a second", NULL);
                fatal = 1;
            }
            break;
        case YAML_SCALAR_EVENT:
            fatal = on_scalar(&b, &ev) < 0;
            break;
        case YAML_SEQUENCE_START_EVENT:
            fatal = on_open(&b, CFG_NODE_SEQ, ev.start_mark) < 0;
            break;
        case YAML_MAPPING_START_EVENT:
            fatal = on_open(&b, CFG_NODE_MAP, ev.start_mark) < 0;
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            fatal = on_close(&b) < 0;
            break;
        case YAML_ALIAS_EVENT:
            report(&b, path_of(&b, path, sizeof(path)), (int)ev.start_mark.line + 1,
                   (int)ev.start_mark.column + 1,
                   "aliases (*name) are not supported in a config; write the value out", NULL);
            fatal = 1;
            break;
        case YAML_STREAM_END_EVENT:
            done = 1;
            break;
        default:
            break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    while (b.depth) { /* an aborted parse leaves frames open */
        free(b.stack[b.depth - 1].items);
        b.depth--;
    }
    if (b.oom) {
        cfg__report_add(report_out, false, CFG_ENOMEM, ROOT_PATH, NULL, "out of memory");
        return CFG_ENOMEM;
    }
    /* Duplicate keys and unset variables leave a usable tree: the schema still runs on it
     * so one pass reports everything. Anything else stops here. */
    doc->errors = b.errors;
    return fatal || parse_error ? CFG_EINVALID : 0;
}

const cfg_node_t *cfg__map_get(const cfg_node_t *map, const char *key)
{
    if (!map || map->kind != CFG_NODE_MAP)
        return NULL;
    for (size_t i = 0; i < map->n; i++)
        if (strcmp(map->items[2 * i]->text, key) == 0)
            return map->items[2 * i + 1];
    return NULL;
}
