/*
 * server.tokens_file: the bearer tokens the TCP doors accept (SPEC §9, issue 31 item 4) and the
 * subjects each may spend. The file is YAML, read with the config's own loader (positions,
 * bounds, unknown keys with a suggestion), when the config is armed: at start, on every reload
 * (so tokens rotate without a restart) and by `validate --arm`.
 *
 *   tokens:
 *     - name: team-a                # the client: its reservations are its own (engine.md)
 *       sha256: 5e884898da28...     # the token's SHA-256 in hex, so this file holds no secret;
 *       # token: "..."              #   or the token itself (16-512 bytes of RFC 6750 token68)
 *       subjects:                   # level -> the ids the token may name there
 *         team: [a]
 *         key: ["a-*"]              # "p*": any id that starts with p; "*": any id
 *
 * A token may name a subject only when every (level, id) it names is granted: a token for team
 * a cannot decide, charge or settle for team b, and cannot reach a key it was not given. Entries
 * that share a name are one client (rotation: add the new token under the same name, then
 * remove the old). The token itself is never kept (only its SHA-256), never logged, never echoed
 * in a finding.
 */
#include "schema.h"

#include <ctype.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const file_keys[] = {"tokens", NULL};
static const char *const token_keys[] = {"name", "sha256", "token", "subjects", NULL};

/* RFC 6750's b64token (token68): ALPHA DIGIT - . _ ~ + / then '=' padding. */
static int token68_char(int ch)
{
    return isalnum(ch) || (ch && strchr("-._~+/", ch));
}

/* The token's own bytes: length and alphabet, reported without echoing them. 0 or -1. */
static int check_token(struct cfg__ctx *c, const cfg_node_t *n, const char *path, const char *s)
{
    size_t len = strlen(s), end = len;
    while (end > 0 && s[end - 1] == '=')
        end--;
    if (len < CFG_TOKEN_MIN || len > CFG_TOKEN_MAX) {
        cfg__err(c, path, n,
                 "is %zu bytes; a token is %d to %d bytes (e.g. head -c 32 /dev/urandom "
                 "| base64)",
                 len, CFG_TOKEN_MIN, CFG_TOKEN_MAX);
        return -1;
    }
    for (size_t i = 0; i < end; i++)
        if (!token68_char((unsigned char)s[i])) {
            cfg__err(c, path, n,
                     "byte %zu is outside the token alphabet (A-Z a-z 0-9 - . _ ~ + /, then = "
                     "padding: RFC 6750's token68)",
                     i);
            return -1;
        }
    return 0;
}

/* Room for one more grant of `len` id bytes; -1 when out of memory (c->oom). */
static int grow(struct cfg__ctx *c, cfg_tokens_t *t, size_t len)
{
    if (t->n_grants == t->grants_cap) {
        size_t cap = t->grants_cap ? 2 * t->grants_cap : 64;
        cfg_grant_t *g = realloc(t->grants, cap * sizeof(*g));
        if (!g)
            return c->oom = 1, -1;
        t->grants = g;
        t->grants_cap = cap;
    }
    if (t->ids_len + len > t->ids_cap) {
        size_t cap = t->ids_cap ? 2 * t->ids_cap : 1024;
        while (cap < t->ids_len + len)
            cap *= 2;
        char *ids = realloc(t->ids, cap);
        if (!ids)
            return c->oom = 1, -1;
        t->ids = ids;
        t->ids_cap = cap;
    }
    return 0;
}

/* One level's ids, appended to the grants. */
static void load_ids(struct cfg__ctx *c, cfg_tokens_t *t, const char *level, const cfg_node_t *v,
                     const char *path)
{
    char p[PATH_SIZE + 24];
    if (v->failed)
        return;
    if (v->kind != CFG_NODE_SEQ || v->n == 0) {
        cfg__err(c, path, v,
                 "expected a sequence of ids (\"*\" for any, \"p*\" for a prefix), got %s",
                 v->kind == CFG_NODE_SEQ ? "an empty one"
                 : v->null               ? "an empty value"
                                         : cfg__kind_name(v));
        return;
    }
    for (size_t i = 0; i < v->n; i++) {
        snprintf(p, sizeof(p), "%.*s[%zu]", PATH_SIZE, path, i);
        const char *id = cfg__want_scalar(c, v->items[i], p);
        if (!id)
            continue;
        size_t len = strlen(id);
        bool prefix = len > 0 && id[len - 1] == '*';
        if (len == 0 || len - prefix > CFG_SUBJECT_ID_MAX) {
            cfg__err(c, p, v->items[i], "an id is 1 to %d bytes (and a \"*\" to make it a prefix)",
                     CFG_SUBJECT_ID_MAX);
            continue;
        }
        if (t->n_grants == CFG_GRANTS_MAX) {
            cfg__err(c, p, v->items[i], "more than %d ids in the file", CFG_GRANTS_MAX);
            return;
        }
        if (grow(c, t, len) < 0)
            return;
        cfg_grant_t *g = &t->grants[t->n_grants];
        *g = (cfg_grant_t){
            .id_off = (uint32_t)t->ids_len, .id_len = (uint32_t)(len - prefix), .prefix = prefix};
        snprintf(g->level, sizeof(g->level), "%s", level);
        memcpy(t->ids + t->ids_len, id, len - prefix);
        t->ids_len += len - prefix;
        t->n_grants++;
    }
}

/* subjects: level -> ids. */
static void load_subjects(struct cfg__ctx *c, cfg_tokens_t *t, const cfg_node_t *v,
                          const char *path)
{
    char p[PATH_SIZE];
    if (v->failed)
        return;
    if (v->kind != CFG_NODE_MAP || v->n == 0) {
        cfg__err(c, path, v, "expected a mapping of levels to the ids this token may name, got %s",
                 v->kind == CFG_NODE_MAP ? "an empty one"
                 : v->null               ? "an empty value"
                                         : cfg__kind_name(v));
        return;
    }
    if (v->n > CFG_TOKEN_LEVELS_MAX) {
        cfg__err(c, path, v, "%zu levels; at most %d", v->n, CFG_TOKEN_LEVELS_MAX);
        return;
    }
    for (size_t i = 0; i < v->n; i++) {
        const cfg_node_t *k = v->items[2 * i];
        char level[CFG_LEVEL_MAX + 1];
        cfg__join(p, path, k->text);
        if (cfg__get_string(c, k, p, level, CFG_LEVEL_MAX, false, cfg__level_char,
                            "a level name (letters, digits, _ - .)"))
            continue;
        if (strcmp(level, "global") == 0) {
            cfg__err(c, p, k,
                     "\"global\" is one counter for every request and takes no id: "
                     "every token spends it");
            continue;
        }
        load_ids(c, t, level, v->items[2 * i + 1], p);
    }
}

static int hexval(int ch)
{
    return ch >= '0' && ch <= '9'   ? ch - '0'
           : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
           : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                    : -1;
}

/* The entry's secret: sha256 (64 hex digits) or token (hashed here, then forgotten). */
static int load_secret(struct cfg__ctx *c, const cfg_node_t *m, const char *base, cfg_token_t *tok)
{
    char p[PATH_SIZE];
    const cfg_node_t *hex = cfg__at(m, "sha256"), *plain = cfg__at(m, "token");
    if (hex && plain) {
        cfg__err(c, cfg__join(p, base, "token"), plain, "give sha256 or token, not both");
        return -1;
    }
    if (!hex && !plain) {
        cfg__err(c, cfg__join(p, base, "sha256"), m,
                 "missing; give the token's SHA-256 (sha256: <64 hex digits>, e.g. printf %%s "
                 "\"$TOKEN\" | sha256sum) or the token itself (token: ...)");
        return -1;
    }
    if (hex) {
        const char *s = cfg__want_scalar(c, hex, cfg__join(p, base, "sha256"));
        if (!s)
            return -1;
        bool ok = strlen(s) == 2 * CFG_TOKEN_DIGEST;
        for (size_t i = 0; ok && i < CFG_TOKEN_DIGEST; i++) {
            int hi = hexval((unsigned char)s[2 * i]), lo = hexval((unsigned char)s[2 * i + 1]);
            ok = hi >= 0 && lo >= 0;
            tok->digest[i] = (uint8_t)(hi << 4 | lo);
        }
        if (!ok)
            cfg__err(c, p, hex, "not %d hexadecimal digits (a SHA-256)", 2 * CFG_TOKEN_DIGEST);
        return ok ? 0 : -1;
    }
    const char *s = cfg__want_scalar(c, plain, cfg__join(p, base, "token"));
    if (!s || check_token(c, plain, p, s) < 0)
        return -1;
    crypto_hash_sha256(tok->digest, (const unsigned char *)s, strlen(s));
    return 0;
}

/* The index slot of `digest`: the one holding the token of that digest, else the empty one where
 * it goes. Each candidate is compared in constant time; which slots are probed depends on a
 * hash keyed per load, not on what an outsider can choose. */
static uint32_t *index_slot(const cfg_tokens_t *t, const uint8_t digest[CFG_TOKEN_DIGEST])
{
    uint64_t h;
    crypto_shorthash((unsigned char *)&h, digest, CFG_TOKEN_DIGEST, t->index_key);
    size_t at = (size_t)h & (t->index_cap - 1);
    while (t->index[at] &&
           sodium_memcmp(t->tokens[t->index[at] - 1].digest, digest, CFG_TOKEN_DIGEST) != 0)
        at = (at + 1) & (t->index_cap - 1);
    return &t->index[at];
}

static void load_token(struct cfg__ctx *c, cfg_tokens_t *t, const cfg_node_t *n, size_t i)
{
    char base[PATH_SIZE], p[PATH_SIZE];
    snprintf(base, sizeof(base), "tokens[%zu]", i);
    const cfg_node_t *m = cfg__want_map(c, n, base, token_keys), *v;
    if (!m)
        return;
    cfg_token_t *tok = &t->tokens[t->n];
    *tok = (cfg_token_t){.first = t->n_grants};
    int errors = c->errors;
    if (!(v = cfg__at(m, "name")))
        cfg__err(c, cfg__join(p, base, "name"), m,
                 "missing; name the client this token speaks for (letters, digits, _ - .)");
    else
        cfg__get_string(c, v, cfg__join(p, base, "name"), tok->name, CFG_NAME_MAX, false,
                        cfg__level_char, "a client name (letters, digits, _ - .)");
    load_secret(c, m, base, tok);
    if (!(v = cfg__at(m, "subjects")))
        cfg__err(c, cfg__join(p, base, "subjects"), m,
                 "missing; map each level this token may name to its ids (team: [a])");
    else
        load_subjects(c, t, v, cfg__join(p, base, "subjects"));
    tok->n_grants = t->n_grants - tok->first;
    tok->at = i;
    /* a client is named by its hash (the engine's reservation owner): never 0 */
    unsigned char h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(h, (const unsigned char *)tok->name, strlen(tok->name));
    memcpy(&tok->client, h, sizeof(tok->client));
    tok->client |= UINT64_C(1) << 63;
    uint32_t *slot = c->errors == errors ? index_slot(t, tok->digest) : NULL;
    if (slot && *slot)
        cfg__err(c, base, n, "the same token as tokens[%zu]: one token, one grant",
                 t->tokens[*slot - 1].at);
    if (c->errors == errors) {
        *slot = (uint32_t)++t->n;
    } else {
        t->n_grants = tok->first;
    }
}

int cfg__load_tokens(cfg_tokens_t *t, const char *path, cfg_report_t *report)
{
    memset(t, 0, sizeof(*t));
    if (sodium_init() < 0) {
        cfg__report_add(report, false, CFG_ENOMEM, "server.tokens_file", NULL,
                        "libsodium did not initialise");
        return CFG_ENOMEM;
    }
    char *text = NULL;
    size_t len = 0;
    int rc = cfg__read_file(path, &text, &len, report);
    if (rc < 0)
        return rc;
    cfg_doc_t doc;
    rc = cfg__yaml_load(path, text, len, CFG_YAML_LITERAL, &doc, report); /* as it is: no ${VAR} */
    free(text);
    if (rc < 0) {
        cfg__doc_free(&doc);
        return rc;
    }
    struct cfg__ctx c = {.file = path, .report = report, .errors = doc.errors};
    const cfg_node_t *root = doc.root, *v = NULL;
    if (!root || (root->kind == CFG_NODE_SCALAR && root->null))
        cfg__err(&c, "(root)", root, "the tokens file is empty; expected tokens: [...]");
    else if (cfg__want_map(&c, root, "", file_keys) && !(v = cfg__at(root, "tokens")))
        cfg__err(&c, "tokens", root,
                 "missing; expected tokens: [...] (an empty list accepts none)");
    if (v && !v->failed && v->kind != CFG_NODE_SEQ)
        cfg__err(&c, "tokens", v, "expected a sequence of tokens, got %s",
                 v->null ? "an empty value" : cfg__kind_name(v));
    else if (v && v->n > CFG_TOKENS_MAX)
        cfg__err(&c, "tokens", v, "%zu tokens; at most %d", v->n, CFG_TOKENS_MAX);
    else if (v && !v->failed) {
        t->index_cap = 16;
        while (t->index_cap < 2 * v->n)
            t->index_cap *= 2;
        randombytes_buf(t->index_key, sizeof(t->index_key));
        if (!(t->tokens = calloc(v->n ? v->n : 1, sizeof(*t->tokens))) ||
            !(t->index = calloc(t->index_cap, sizeof(*t->index))))
            c.oom = 1;
        for (size_t i = 0; !c.oom && i < v->n; i++)
            load_token(&c, t, v->items[i], i);
    }
    cfg__doc_free(&doc);
    if (c.oom || c.errors) {
        cfg__tokens_free(t);
        if (c.oom)
            cfg__report_add(report, false, CFG_ENOMEM, "(root)", NULL, "out of memory");
        return c.oom ? CFG_ENOMEM : CFG_EINVALID;
    }
    return 0;
}

void cfg__tokens_free(cfg_tokens_t *t)
{
    free(t->index);
    free(t->tokens);
    free(t->grants);
    free(t->ids);
    memset(t, 0, sizeof(*t));
}

const cfg_token_t *cfg_token_find(const cfg_tokens_t *t, const char *token, size_t len)
{
    if (!t->index_cap)
        return NULL;
    unsigned char digest[CFG_TOKEN_DIGEST];
    crypto_hash_sha256(digest, (const unsigned char *)token, len);
    uint32_t k = *index_slot(t, digest);
    sodium_memzero(digest, sizeof(digest));
    return k ? &t->tokens[k - 1] : NULL;
}

bool cfg_token_allows(const cfg_tokens_t *t, const cfg_token_t *tok, const char *level,
                      size_t level_len, const char *id, size_t id_len)
{
    for (size_t i = tok->first; i < tok->first + tok->n_grants; i++) {
        const cfg_grant_t *g = &t->grants[i];
        if (strlen(g->level) != level_len || memcmp(g->level, level, level_len) != 0)
            continue;
        if (g->prefix ? id_len >= g->id_len : id_len == g->id_len)
            if (memcmp(t->ids + g->id_off, id, g->id_len) == 0)
                return true;
    }
    return false;
}
