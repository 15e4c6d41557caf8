/*
 * The rule language's matching tree (SPEC §12): which rule a descriptor of a domain meets.
 * Pure: built once per configuration generation from its limits (those with a rule.domain),
 * walked per descriptor without allocating. Internal to the engine; fuzz_match checks it
 * against envoy ratelimit's algorithm written out plainly (tests/fuzz/fuzz_match.c).
 *
 * envoy ratelimit's GetLimit, which this is: a descriptor's entries walk the domain's tree
 * from the top, one level per entry. At each level the entry (key, value) takes the child
 *   1. written for exactly that value (a glob whose text is the value itself counts too),
 *   2. else the first glob, in config order, whose pattern matches the value,
 *   3. else the child written for the key alone;
 * none: no rule. The rule is the one at the node the last entry reaches; a node that has no
 * children ends the walk, so a descriptor deeper than the tree meets no rule, and the walk never
 * backtracks to try a key-only sibling after a value child led nowhere.
 */
#ifndef TT_ENGINE_MATCH_H
#define TT_ENGINE_MATCH_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

typedef struct gov_rules gov_rules_t;

#define GOV_RULE_NONE (-1) /* no rule: the descriptor is not limited (OK, no current_limit) */

/*
 * Builds the tree of every rule among limits[0, n) (rule.domain set, and not an override
 * counter). Returns 0 with *out (NULL when there is no rule at all), GOV_ENOMEM, or GOV_ELIMITS
 * with err naming the limit when two rules sit at the same place (config/ refuses that first).
 */
int gov_rules_build(const cfg_limit_t *limits, size_t n, gov_rules_t **out, tt_err_t *err);
void gov_rules_free(gov_rules_t *r);

/* Whether any rule is written for `domain`: its descriptors are matched by the tree only. */
bool gov_rules_has_domain(const gov_rules_t *r, const char *domain, size_t len);

/* The index (into the limits it was built from) of the rule the descriptor `entries` (key =
 * level, value = id) of `domain` meets, or GOV_RULE_NONE. */
int gov_rules_match(const gov_rules_t *r, const char *domain, size_t domain_len,
                    const gov_pair_t *entries, size_t n);

#endif
