/*
 * Runs every line of every tests/vectors file through ratealg, on its own (each line names its
 * limiter and its state), and checks that the tables themselves hold together: inside a
 * sequence (lines not separated by a blank line) each line continues the previous one.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ratealg.h"
#include "vecfile.h"

#define VEC_DIR TT_SOURCE_DIR "/tests/vectors"
#define MAX_FILES 64

static char paths[MAX_FILES][512];

/* Checks one step line against ra_step; returns true when every field matched. */
static bool run_step(const char *path, const vec_step_t *s)
{
    ra_limiter_t l;
    int err = vec_limiter(s, &l);
    cr_expect_eq(err, 0, "%s:%d: limiter does not arm: %s", path, s->line, ra_strerror(err));
    if (err)
        return false;
    ra_result_t r = ra_step(&l, s->state_before, s->now, s->cost);
    bool ok = r.admit == s->admit && r.unfittable == s->unfittable && r.remaining == s->remaining &&
              r.retry_after_s == s->retry_after_s && r.reset_after_s == s->reset_after_s &&
              r.next_state == s->state_after;
    cr_expect(ok,
              "%s:%d: got admit %d unfittable %d remaining %lld retry %lld reset %lld state %lld,"
              " want %d %d %lld %lld %lld %lld",
              path, s->line, r.admit, r.unfittable, (long long)r.remaining,
              (long long)r.retry_after_s, (long long)r.reset_after_s, (long long)r.next_state,
              s->admit, s->unfittable, (long long)s->remaining, (long long)s->retry_after_s,
              (long long)s->reset_after_s, (long long)s->state_after);
    return ok;
}

/* The table's own coherence, independent of the implementation. */
static void check_table(const char *path, const vec_file_t *f)
{
    for (size_t i = 0; i < f->n; i++) {
        const vec_step_t *s = &f->steps[i];
        cr_expect(!(s->admit && s->unfittable), "%s:%d: admitted and unfittable", path, s->line);
        if (!s->admit)
            cr_expect_eq(s->state_after, s->state_before,
                         "%s:%d: a denied step must leave the state untouched", path, s->line);
        if (s->admit || s->unfittable)
            cr_expect_eq(s->retry_after_s, 0, "%s:%d: retry_after only on a denial", path, s->line);
        if (s->opens_sequence)
            continue;
        const vec_step_t *p = &f->steps[i - 1];
        cr_expect(vec_same_limiter(p, s), "%s:%d: a sequence changes limiter (line %d)", path,
                  s->line, p->line);
        cr_expect_eq(s->state_before, p->state_after,
                     "%s:%d: state_before %lld does not continue line %d's state_after %lld", path,
                     s->line, (long long)s->state_before, p->line, (long long)p->state_after);
    }
}

Test(vectors, every_line_of_every_table_holds)
{
    size_t nfiles = vec_list(VEC_DIR, paths, MAX_FILES);
    cr_assert_gt(nfiles, 0, "no vector files in %s", VEC_DIR);
    size_t lines = 0, passed = 0;
    for (size_t i = 0; i < nfiles; i++) {
        vec_file_t f;
        char err[600];
        cr_assert_eq(vec_load(paths[i], &f, err, sizeof(err)), 0, "%s", err);
        cr_expect_gt(f.n, 0, "%s holds no steps", paths[i]);
        check_table(paths[i], &f);
        for (size_t k = 0; k < f.n; k++)
            passed += run_step(paths[i], &f.steps[k]);
        lines += f.n;
        vec_free(&f);
    }
    cr_log_info("%zu vector lines in %zu files, %zu passed", lines, nfiles, passed);
}

Test(vectors, the_tables_cover_every_algorithm_and_the_edges)
{
    static const struct {
        const char *file;
        size_t min_steps;
    } want[] = {{"gcra.vec", 80},           {"effective.vec", 20},   {"fixed_window.vec", 20},
                {"sliding_window.vec", 18}, {"token_bucket.vec", 5}, {"overflow.vec", 20},
                {"envoy_window.vec", 30}};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", VEC_DIR, want[i].file);
        vec_file_t f;
        char err[600];
        cr_assert_eq(vec_load(path, &f, err, sizeof(err)), 0, "%s", err);
        cr_expect_geq(f.n, want[i].min_steps, "%s: %zu steps", want[i].file, f.n);
        vec_free(&f);
    }
}

/* Loads `text` as a vector file; returns vec_load's result. */
static int load_text(const char *text, vec_file_t *v, char *err, size_t err_size)
{
    char path[] = "/tmp/tt_vec_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
    int rc = vec_load(path, v, err, err_size);
    unlink(path);
    return rc;
}

Test(vectors, blank_lines_and_only_blank_lines_start_a_new_sequence)
{
    /* The continuity check relies on the loader marking sequence starts at blank lines. */
    vec_file_t v;
    char err[600];
    cr_assert_eq(load_text("# comment\ngcra 1 1000 1 1 1 1 0 0 1 1 0 0 0 1 1000\n"
                           "# a comment does not end a sequence\n"
                           "gcra 1 1000 1 1 1 1 1000 0 1 0 0 0 1 1 1000\n\n"
                           "gcra 1 1000 1 1 1 1 5 0 1 0 0 0 1 1 5\n",
                           &v, err, sizeof(err)),
                 0, "%s", err);
    cr_assert_eq(v.n, 3);
    cr_expect(v.steps[0].opens_sequence);
    cr_expect_not(v.steps[1].opens_sequence);
    cr_expect(v.steps[2].opens_sequence);
    cr_expect_eq(v.steps[1].line, 4);
    vec_free(&v);
}

Test(vectors, a_malformed_line_is_reported_with_its_number)
{
    vec_file_t v;
    char err[600];
    cr_assert_eq(load_text("gcra 1 1000 1 1 1 1 0 0 1 1 0 0 0 1 1000\n"
                           "gcra 1 1000 1 1 1 1 0 0 1 2 0 0 0 1 1000\n",
                           &v, err, sizeof(err)),
                 -1);
    cr_expect(strstr(err, ":2: admit and unfittable must be 0 or 1") != NULL, "%s", err);
    cr_expect_eq(load_text("gcra 1 1000 1 1 1 1 0 0 1 1 0 0 0 1\n", &v, err, sizeof(err)), -1);
    cr_expect(strstr(err, ":1: expected 16 whitespace-separated fields") != NULL, "%s", err);
}
