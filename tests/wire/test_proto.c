/* The socket codec: framing, bounded decoding with named errors, encoders round-tripping. */
#include <criterion/criterion.h>
#include <msgpack.h>
#include <string.h>

#include "json.h"
#include "proto.h"

static int wr(void *data, const char *buf, size_t len)
{
    return tt_buf_append(data, buf, len);
}

/* A scratch message built with msgpack-c's packer. */
static tt_buf_t out;
static msgpack_packer pk;

static void start(void)
{
    out.len = 0;
    msgpack_packer_init(&pk, &out, wr);
}

static void str(const char *s)
{
    msgpack_pack_str(&pk, strlen(s));
    msgpack_pack_str_body(&pk, s, strlen(s));
}

static void fini(void)
{
    tt_buf_free(&out);
}

TestSuite(proto, .fini = fini);

/* A decode error as an answer's error.message shows it: `path: message`. */
static const char *msg(const tt_err_t *err)
{
    static char text[TT_ERR_TEXT_MAX];
    return tt_err_format(err, text, sizeof(text));
}

static int decode(proto_request_t *req, tt_err_t *err)
{
    size_t n;
    bool deep;
    cr_assert_eq(proto_frame(out.data, out.len, &n, &deep), 0);
    cr_assert_eq(n, out.len);
    return proto_decode_request(out.data, n, req, err);
}

Test(proto, decodes_a_decide_request_without_copying)
{
    start();
    msgpack_pack_map(&pk, 4);
    str("op"), str("decide");
    str("seq"), msgpack_pack_uint64(&pk, 7);
    str("subject"), msgpack_pack_map(&pk, 2), str("team"), str("t-42"), str("key"), str("k-1");
    str("tokens"), msgpack_pack_int(&pk, 1200);
    proto_request_t req;
    tt_err_t err;
    cr_assert_eq(decode(&req, &err), 0, "%s", msg(&err));
    cr_assert_eq(req.op, PROTO_OP_DECIDE);
    cr_assert_eq(req.seq, 7);
    cr_assert_eq(req.nsubject, 2);
    cr_assert(wire_str_eq(req.subject[0].level, "team"));
    cr_assert(wire_str_eq(req.subject[0].id, "t-42"));
    cr_assert(wire_str_eq(req.subject[1].id, "k-1"));
    cr_assert((const uint8_t *)req.subject[1].id.ptr > out.data);
    cr_assert(req.has_tokens);
    cr_assert_eq(req.tokens, 1200);
}

Test(proto, frames_the_first_of_pipelined_messages)
{
    start();
    msgpack_pack_map(&pk, 1), str("op"), str("ping");
    size_t first = out.len;
    msgpack_pack_map(&pk, 1), str("op"), str("fleet");
    size_t n;
    bool deep;
    cr_assert_eq(proto_frame(out.data, out.len, &n, &deep), 0);
    cr_assert_eq(n, first);
    cr_assert_eq(proto_frame(out.data + n, out.len - n, &n, &deep), 0);
    cr_assert_eq(n, out.len - first);
}

Test(proto, a_truncated_map_needs_more_bytes_at_every_cut)
{
    start();
    msgpack_pack_map(&pk, 2), str("op"), str("decide");
    str("subject"), msgpack_pack_map(&pk, 1), str("team"), str("t");
    for (size_t cut = 0; cut < out.len; cut++) {
        size_t n;
        bool deep;
        cr_assert_eq(proto_frame(out.data, cut, &n, &deep), PROTO_EMORE, "cut at %zu", cut);
    }
}

Test(proto, garbage_cannot_be_framed)
{
    const uint8_t text[] = "GET / HTTP/1.1\r\n";
    const uint8_t reserved[] = {0x81, 0xc1, 0x00};
    size_t n;
    bool deep;
    cr_assert_eq(proto_frame(text, sizeof(text) - 1, &n, &deep), PROTO_EFRAME);
    cr_assert_eq(proto_frame(reserved, sizeof(reserved), &n, &deep), PROTO_EFRAME);
}

Test(proto, an_array_header_of_2_to_the_32_is_refused_before_the_bytes_arrive)
{
    /* {"op": [ <array32 of 0xffffffff elements> */
    const uint8_t msg[] = {0x81, 0xa2, 'o', 'p', 0xdd, 0xff, 0xff, 0xff, 0xff};
    size_t n;
    bool deep;
    cr_assert_eq(proto_frame(msg, sizeof(msg), &n, &deep), PROTO_ETOOBIG);
    const uint8_t map[] = {0xdf, 0xff, 0xff, 0xff, 0xff};
    cr_assert_eq(proto_frame(map, sizeof(map), &n, &deep), PROTO_ETOOBIG);
    const uint8_t s[] = {0x81, 0xa2, 'o', 'p', 0xdb, 0x00, 0x10, 0x00, 0x00};
    cr_assert_eq(proto_frame(s, sizeof(s), &n, &deep), PROTO_ETOOBIG);
}

Test(proto, a_message_over_64_kib_is_too_large)
{
    start();
    msgpack_pack_map(&pk, 1), str("op");
    static char big[PROTO_MAX_MESSAGE];
    memset(big, 'x', sizeof(big));
    msgpack_pack_str(&pk, sizeof(big));
    msgpack_pack_str_body(&pk, big, sizeof(big));
    size_t n;
    bool deep;
    cr_assert_eq(proto_frame(out.data, out.len, &n, &deep), PROTO_ETOOBIG);
    cr_assert_eq(proto_frame(out.data, 20, &n, &deep), PROTO_ETOOBIG);
}

Test(proto, deep_nesting_is_framed_exactly_and_flagged)
{
    start();
    msgpack_pack_map(&pk, 2), str("seq"), msgpack_pack_uint64(&pk, 3), str("x");
    for (int i = 0; i < 1000; i++)
        msgpack_pack_array(&pk, 1);
    msgpack_pack_nil(&pk);
    size_t len = out.len;
    msgpack_pack_map(&pk, 1), str("op"), str("ping");
    size_t n;
    bool deep;
    cr_assert_eq(proto_frame(out.data, out.len, &n, &deep), 0);
    cr_assert_eq(n, len);
    cr_assert(deep);
    proto_request_t req;
    tt_err_t err;
    cr_assert_lt(proto_decode_request(out.data, n, &req, &err), 0);
    cr_assert_eq(req.seq, 3);
}

Test(proto, wrong_types_name_the_field_and_keep_the_seq)
{
    start();
    msgpack_pack_map(&pk, 3);
    str("op"), str("decide");
    str("subject"), str("team=t");
    str("seq"), msgpack_pack_uint64(&pk, 9);
    proto_request_t req;
    tt_err_t err;
    cr_assert_eq(decode(&req, &err), PROTO_ETYPE);
    cr_assert_str_eq(msg(&err), "subject: must be a map of level to id");
    cr_assert_eq(req.seq, 9);
    cr_assert_str_eq(tt_err_name(err.code), "wrong_type");
}

Test(proto, an_unknown_op_is_named)
{
    start();
    msgpack_pack_map(&pk, 1), str("op"), str("launch");
    proto_request_t req;
    tt_err_t err;
    cr_assert_eq(decode(&req, &err), PROTO_EOP);
    cr_assert(strstr(msg(&err), "\"launch\""));
}

Test(proto, missing_fields_are_named)
{
    proto_request_t req;
    tt_err_t err;
    start();
    msgpack_pack_map(&pk, 1), str("op"), str("decide");
    cr_assert_eq(decode(&req, &err), PROTO_EMISSING);
    cr_assert_str_eq(msg(&err), "op \"decide\" needs \"subject\"");
    start();
    msgpack_pack_map(&pk, 1), str("seq"), msgpack_pack_uint64(&pk, 1);
    cr_assert_eq(decode(&req, &err), PROTO_EMISSING);
    cr_assert_str_eq(msg(&err), "missing \"op\"");
    start();
    msgpack_pack_map(&pk, 2), str("op"), str("settle");
    str("reservation"), msgpack_pack_uint64(&pk, 10);
    cr_assert_eq(decode(&req, &err), PROTO_EMISSING);
    cr_assert_str_eq(msg(&err), "op \"settle\" needs \"actual\"");
    start();
    msgpack_pack_map(&pk, 2), str("op"), str("charge");
    str("subject"), msgpack_pack_map(&pk, 1), str("team"), str("t");
    cr_assert_eq(decode(&req, &err), PROTO_EMISSING);
    cr_assert_str_eq(msg(&err), "op \"charge\" needs \"tokens\"");
}

Test(proto, the_settle_before_reservations_is_refused_naming_what_replaced_it)
{
    /* issue 23, item 2: settle by subject and reserved count let any client refund any key */
    proto_request_t req;
    tt_err_t err;
    start();
    msgpack_pack_map(&pk, 4), str("op"), str("settle");
    str("subject"), msgpack_pack_map(&pk, 1), str("team"), str("t");
    str("reserved"), msgpack_pack_int(&pk, 1000000);
    str("actual"), msgpack_pack_int(&pk, 0);
    cr_assert_eq(decode(&req, &err), PROTO_EFIELD);
    cr_assert_str_eq(msg(&err), "reserved: no longer taken: settle takes \"reservation\" (a "
                                "tpm decision's id) and \"actual\"; tokens counted without one: "
                                "op \"charge\"");
    start();
    msgpack_pack_map(&pk, 4), str("op"), str("settle");
    str("subject"), msgpack_pack_map(&pk, 1), str("team"), str("t");
    str("reservation"), msgpack_pack_uint64(&pk, 77);
    str("actual"), msgpack_pack_int(&pk, 0);
    cr_assert_eq(decode(&req, &err), PROTO_EFIELD);
    static const char no_subject[] = "op \"settle\" takes no \"subject\": settle takes";
    cr_assert(strncmp(msg(&err), no_subject, sizeof(no_subject) - 1) == 0, "%s", msg(&err));
    start();
    msgpack_pack_map(&pk, 3), str("op"), str("settle");
    str("reservation"), msgpack_pack_uint64(&pk, 0);
    str("actual"), msgpack_pack_int(&pk, 0);
    cr_assert_eq(decode(&req, &err), PROTO_EVALUE);
    cr_assert_str_eq(msg(&err), "reservation: must be the id a tpm decision answered");
    start();
    msgpack_pack_map(&pk, 3), str("op"), str("settle");
    str("reservation"), msgpack_pack_int(&pk, -5);
    str("actual"), msgpack_pack_int(&pk, 0);
    cr_assert_neq(decode(&req, &err), 0);
}

Test(proto, unknown_and_misplaced_fields_are_refused)
{
    proto_request_t req;
    tt_err_t err;
    start();
    msgpack_pack_map(&pk, 2), str("op"), str("ping"), str("colour"), str("red");
    cr_assert_eq(decode(&req, &err), PROTO_EFIELD);
    cr_assert_str_eq(msg(&err), "unknown field \"colour\"");
    start();
    msgpack_pack_map(&pk, 2), str("op"), str("ping"), str("tokens"), msgpack_pack_int(&pk, 1);
    cr_assert_eq(decode(&req, &err), PROTO_EFIELD);
    cr_assert_str_eq(msg(&err), "op \"ping\" takes no \"tokens\"");
}

Test(proto, subject_bounds_are_enforced)
{
    proto_request_t req;
    tt_err_t err;
    char id[PROTO_MAX_ID + 2];
    memset(id, 'a', sizeof(id) - 1);
    id[sizeof(id) - 1] = 0;
    start();
    msgpack_pack_map(&pk, 2), str("op"), str("decide");
    str("subject"), msgpack_pack_map(&pk, 1), str("team"), str(id);
    cr_assert_eq(decode(&req, &err), PROTO_EVALUE);
    cr_assert_str_eq(msg(&err), "subject.team: id of 257 bytes, must be 1 to 256");

    start();
    msgpack_pack_map(&pk, 2), str("op"), str("decide");
    str("subject"), msgpack_pack_map(&pk, 17);
    for (int i = 0; i < 17; i++) {
        char level[8];
        snprintf(level, sizeof(level), "l%d", i);
        str(level), str("x");
    }
    cr_assert_eq(decode(&req, &err), PROTO_EVALUE);
    cr_assert_str_eq(msg(&err), "subject: 17 levels, at most 16");

    start();
    msgpack_pack_map(&pk, 2), str("op"), str("decide");
    str("subject"), msgpack_pack_map(&pk, 2), str("team"), str("a"), str("team"), str("b");
    cr_assert_eq(decode(&req, &err), PROTO_EVALUE);
    cr_assert_str_eq(msg(&err), "subject.team: level given twice");
}

Test(proto, counts_must_be_between_0_and_2_to_the_40)
{
    proto_request_t req;
    tt_err_t err;
    const int64_t bad[] = {-1, (INT64_C(1) << 40) + 1, INT64_MIN};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        start();
        msgpack_pack_map(&pk, 3), str("op"), str("settle");
        str("reservation"), msgpack_pack_uint64(&pk, 100);
        str("actual"), msgpack_pack_int64(&pk, bad[i]);
        cr_assert_eq(decode(&req, &err), PROTO_EVALUE);
        cr_assert_str_eq(msg(&err), "actual: must be between 0 and 2^40");
    }
    start();
    msgpack_pack_map(&pk, 2), str("op"), str("release"), str("lease"),
        msgpack_pack_double(&pk, 1.5);
    cr_assert_eq(decode(&req, &err), PROTO_ETYPE);
}

Test(proto, requests_round_trip_through_the_client_encoder)
{
    proto_request_t in = {
        .op = PROTO_OP_SETTLE, .seq = 1ull << 63, .reservation = UINT64_MAX, .actual = 900};
    out.len = 0;
    cr_assert_eq(proto_enc_request(&out, &in), 0);
    proto_request_t req;
    tt_err_t err;
    cr_assert_eq(decode(&req, &err), 0, "%s", msg(&err));
    cr_assert_eq(req.op, PROTO_OP_SETTLE);
    cr_assert_eq(req.seq, 1ull << 63);
    cr_assert_eq(req.reservation, UINT64_MAX);
    cr_assert_eq(req.actual, 900);
    proto_request_t charge = {
        .op = PROTO_OP_CHARGE, .seq = 2, .nsubject = 1, .has_tokens = true, .tokens = 1 << 20};
    charge.subject[0] = (proto_pair_t){{"team", 4}, {"t", 1}};
    out.len = 0;
    cr_assert_eq(proto_enc_request(&out, &charge), 0);
    cr_assert_eq(decode(&req, &err), 0, "%s", msg(&err));
    cr_assert_eq(req.op, PROTO_OP_CHARGE);
    cr_assert_eq(req.tokens, 1 << 20);
    cr_assert(wire_str_eq(req.subject[0].level, "team"));
}

Test(proto, a_decision_reads_back_as_json)
{
    proto_header_t h[] = {{{"Ratelimit-Policy", 16}, {"\"team_rpm\";q=300;w=60", 21}}};
    proto_decision_t d = {.admit = true,
                          .verdict = {"admit", 5},
                          .limit = {"team_rpm", 8},
                          .remaining = 59,
                          .reset_after = 1,
                          .send_headers = true,
                          .nheaders = 1,
                          .headers = h};
    out.len = 0;
    cr_assert_eq(proto_enc_decision(&out, 7, &d), 0);
    wire_reader_t r = {.pos = out.data, .end = out.data + out.len};
    tt_buf_t json = {0};
    cr_assert_eq(json_from_msgpack(&r, &json), 0);
    tt_buf_append(&json, "", 1);
    cr_assert_str_eq((char *)json.data,
                     "{\"seq\":7,\"admit\":true,\"verdict\":\"admit\",\"limit\":\"team_rpm\","
                     "\"remaining\":59,\"retry_after\":0,\"reset_after\":1,\"soft_denied\":[],"
                     "\"headers\":{\"Ratelimit-Policy\":\"\\\"team_rpm\\\";q=300;w=60\"}}");
    tt_buf_free(&json);
}

Test(proto, a_demand_mode_fleet_row_carries_its_division_figures_and_others_do_not)
{
    proto_fleet_limit_t rows[] = {
        {.id = {"a", 1}, .type = {"rpm", 3}, .store = {"local", 5}, .algorithm = {"gcra", 4}},
        {.id = {"d", 1},
         .type = {"rpm", 3},
         .store = {"share", 5},
         .algorithm = {"gcra", 4},
         .state = {"armed", 5},
         .demand = true,
         .keys_leased = 2,
         .keys_owned = 3,
         .largest_lease_age_ms = 1400,
         .largest_lease = 190,
         .moving = true}};
    out.len = 0;
    cr_assert_eq(proto_enc_fleet(&out, 9, "r0", 4, 3, NULL, 2500, rows, 2, NULL, 0), 0);
    wire_reader_t r = {.pos = out.data, .end = out.data + out.len};
    tt_buf_t json = {0};
    cr_assert_eq(json_from_msgpack(&r, &json), 0);
    tt_buf_append(&json, "", 1);
    const char *j = (const char *)json.data;
    const char *d = strstr(j, "\"id\":\"d\"");
    cr_assert(d, "%s", j);
    cr_assert(strstr(d, "\"converged\":false,\"division\":\"demand\",\"keys_leased\":2,"
                        "\"keys_owned\":3,\"largest_lease_age_ms\":1400,\"largest_lease\":190,"
                        "\"moving\":true}"),
              "%s", j);
    cr_assert(strstr(j, "division") > d, "the local row has no demand fields");
    cr_assert(strstr(j, "\"n\":4,\"unheard\":3,\"snapshot_age_ms\":2500,"), "%s", j);
    tt_buf_free(&json);
}

Test(proto, every_prefix_of_every_response_is_either_more_or_whole)
{
    out.len = 0;
    proto_enc_error(&out, 1, "bad_value", "x");
    proto_enc_pong(&out, 2, "0.1.0");
    proto_enc_settled(&out, 3, 1, true);
    size_t n;
    bool deep;
    size_t total = 0;
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(proto_frame(out.data + total, out.len - total, &n, &deep), 0);
        total += n;
    }
    cr_assert_eq(total, out.len);
}

/* msgpack-c, the reference implementation, reads every answer back as the same map. */
static void expect_msgpack_c_reads(const tt_buf_t *o, const char *json)
{
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    cr_assert_eq(msgpack_unpack_next(&u, (const char *)o->data, o->len, &off),
                 MSGPACK_UNPACK_SUCCESS);
    cr_assert_eq(off, o->len);
    cr_assert_eq(u.data.type, MSGPACK_OBJECT_MAP);
    msgpack_unpacked_destroy(&u);
    wire_reader_t r = {.pos = o->data, .end = o->data + o->len};
    tt_buf_t j = {0};
    cr_assert_eq(json_from_msgpack(&r, &j), 0);
    tt_buf_append(&j, "", 1);
    cr_assert_str_eq((char *)j.data, json);
    tt_buf_free(&j);
}

Test(proto, msgpack_c_reads_every_answer_including_wide_integers)
{
    proto_decision_t d = {.verdict = {"deny", 4},
                          .limit = {"l", 1},
                          .remaining = 70000,
                          .retry_after = 300,
                          .reset_after = 5000000000LL,
                          .send_headers = true};
    out.len = 0;
    proto_enc_decision(&out, UINT64_MAX, &d);
    expect_msgpack_c_reads(&out, "{\"seq\":18446744073709551615,\"admit\":false,\"verdict\":"
                                 "\"deny\",\"limit\":\"l\",\"remaining\":70000,\"retry_after\":300,"
                                 "\"reset_after\":5000000000,\"soft_denied\":[],\"headers\":{}}");
    out.len = 0;
    proto_enc_settled(&out, 200, -129, false);
    expect_msgpack_c_reads(&out, "{\"seq\":200,\"settled\":-129,\"already_settled\":false}");
    out.len = 0;
    proto_enc_settled(&out, 65536, INT64_MIN, true);
    expect_msgpack_c_reads(
        &out, "{\"seq\":65536,\"settled\":-9223372036854775808,\"already_settled\":true}");
    out.len = 0;
    proto_enc_charged(&out, 9, 2);
    expect_msgpack_c_reads(&out, "{\"seq\":9,\"charged\":2}");
    out.len = 0;
    d.reservation = UINT64_MAX;
    proto_enc_decision(&out, 1, &d);
    expect_msgpack_c_reads(&out, "{\"seq\":1,\"admit\":false,\"verdict\":\"deny\",\"limit\":"
                                 "\"l\",\"remaining\":70000,\"retry_after\":300,\"reset_after\":"
                                 "5000000000,\"soft_denied\":[],\"headers\":{},\"reservation\":"
                                 "18446744073709551615}");
    out.len = 0;
    char msg[300];
    memset(msg, 'm', sizeof(msg) - 1);
    msg[sizeof(msg) - 1] = 0;
    proto_enc_error(&out, 1, "bad_value", msg);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    cr_assert_eq(msgpack_unpack_next(&u, (const char *)out.data, out.len, &off),
                 MSGPACK_UNPACK_SUCCESS);
    cr_assert_eq(u.data.via.map.ptr[1].val.via.map.ptr[1].val.via.str.size, 299);
    msgpack_unpacked_destroy(&u);
}

Test(proto, a_listing_too_long_for_one_message_is_truncated_to_fit)
{
    enum { N = 2000 };
    static proto_member_t rows[N];
    for (int i = 0; i < N; i++)
        rows[i] = (proto_member_t){.id = {"node-with-a-long-name-0123456789", 32},
                                   .address = {"10.0.0.1:7946", 13},
                                   .state = {"alive", 5}};
    out.len = 0;
    cr_assert_eq(proto_enc_members(&out, 1, &(proto_members_head_t){.live = N}, rows, N), 0);
    cr_assert_leq(out.len, PROTO_MAX_MESSAGE);
    size_t n;
    bool deep;
    cr_assert_eq(proto_frame(out.data, out.len, &n, &deep), 0);
    wire_reader_t r = {.pos = out.data, .end = out.data + out.len};
    tt_buf_t json = {0};
    cr_assert_eq(json_from_msgpack(&r, &json), 0);
    tt_buf_append(&json, "", 1);
    cr_assert(strstr((char *)json.data,
                     "\"live\":2000,\"unheard\":0,\"unheard_for_ms\":0,\"truncated\":true,"
                     "\"members\":["));
    tt_buf_free(&json);
    out.len = 0;
    cr_assert_eq(proto_enc_members(&out, 1, &(proto_members_head_t){.live = 3}, rows, 3), 0);
    r = (wire_reader_t){.pos = out.data, .end = out.data + out.len};
    json = (tt_buf_t){0};
    json_from_msgpack(&r, &json);
    tt_buf_append(&json, "", 1);
    cr_assert(strstr((char *)json.data, "\"truncated\":false"));
    tt_buf_free(&json);
}

Test(proto, members_a_restart_remembers_but_has_not_heard_are_rows_the_head_counts)
{
    proto_member_t rows[] = {
        {.id = {"r0", 2}, .address = {"10.0.0.1:7946", 13}, .state = {"alive", 5}, .self = true},
        {.id = {"r1", 2},
         .address = {"10.0.0.2:7946", 13},
         .state = {"unheard", 7},
         .generation = 7,
         .last_heard_ms = -1}};
    out.len = 0;
    proto_members_head_t head = {.live = 1, .unheard = 1, .unheard_for_ms = 27500};
    cr_assert_eq(proto_enc_members(&out, 4, &head, rows, 2), 0);
    expect_msgpack_c_reads(
        &out, "{\"seq\":4,\"live\":1,\"unheard\":1,\"unheard_for_ms\":27500,\"truncated\":false,"
              "\"members\":[{\"id\":\"r0\",\"address\":\"10.0.0.1:7946\",\"state\":\"alive\","
              "\"incarnation\":0,\"generation\":0,\"last_heard_ms\":0,\"self\":true},"
              "{\"id\":\"r1\",\"address\":\"10.0.0.2:7946\",\"state\":\"unheard\","
              "\"incarnation\":0,\"generation\":7,\"last_heard_ms\":-1,\"self\":false}]}");
}

/* {"op":"decide","seq":5,"subject":{"key":"k"}} plus what extra() packs (n_extra entries). */
static int decide_with(int n_extra, void (*extra)(void), proto_request_t *req, tt_err_t *err)
{
    start();
    msgpack_pack_map(&pk, 3 + (size_t)n_extra);
    str("op"), str("decide");
    str("seq"), msgpack_pack_uint64(&pk, 5);
    str("subject"), msgpack_pack_map(&pk, 1), str("key"), str("k");
    if (extra)
        extra();
    return decode(req, err);
}

static void v2(void)
{
    str("v"), msgpack_pack_uint64(&pk, 2);
}
static void v2_headers(void)
{
    v2();
    str("headers"), msgpack_pack_true(&pk);
}
static void v3(void)
{
    str("v"), msgpack_pack_uint64(&pk, 3);
}
static void v1_headers_false(void)
{
    str("headers"), msgpack_pack_false(&pk);
}
static void headers_not_bool(void)
{
    v2();
    str("headers"), msgpack_pack_int(&pk, 1);
}

/* Protocol 1 (no "v") keeps its one answer form, the rendered headers; protocol 2 asks for the
 * numbers, and "headers": true for the map as well. */
Test(proto, the_version_picks_the_answer_form)
{
    proto_request_t req;
    tt_err_t err;
    cr_assert_eq(decide_with(0, NULL, &req, &err), 0, "%s", msg(&err));
    cr_assert_eq(req.version, PROTO_V1);
    cr_assert(req.headers, "a protocol 1 answer carries the headers");
    cr_assert_eq(decide_with(1, v2, &req, &err), 0, "%s", msg(&err));
    cr_assert_eq(req.version, PROTO_V2);
    cr_assert_not(req.headers, "protocol 2: numbers only unless asked");
    cr_assert_eq(decide_with(2, v2_headers, &req, &err), 0, "%s", msg(&err));
    cr_assert(req.headers);
}

Test(proto, an_unknown_version_or_form_is_refused_naming_it)
{
    proto_request_t req;
    tt_err_t err;
    cr_assert_eq(decide_with(1, v3, &req, &err), PROTO_EVALUE);
    cr_assert(strstr(msg(&err), "v: protocol 3 is not served") != NULL, "%s", msg(&err));
    cr_assert_eq(req.seq, 5, "the error echoes the seq");
    cr_assert_eq(decide_with(1, v1_headers_false, &req, &err), PROTO_EVALUE);
    cr_assert(strstr(msg(&err), "headers: false needs \"v\": 2") != NULL, "%s", msg(&err));
    cr_assert_eq(decide_with(2, headers_not_bool, &req, &err), PROTO_ETYPE);
    cr_assert(strstr(msg(&err), "headers: must be true or false") != NULL, "%s", msg(&err));
    /* "headers" belongs to decisions; "v" goes everywhere */
    start();
    msgpack_pack_map(&pk, 4);
    str("op"), str("settle");
    str("reservation"), msgpack_pack_uint64(&pk, 9);
    str("actual"), msgpack_pack_uint64(&pk, 1);
    str("headers"), msgpack_pack_true(&pk);
    cr_assert_eq(decode(&req, &err), PROTO_EFIELD);
    cr_assert_str_eq(msg(&err), "op \"settle\" takes no \"headers\"");
    start();
    msgpack_pack_map(&pk, 2);
    str("op"), str("ping");
    v2();
    cr_assert_eq(decode(&req, &err), 0, "%s", msg(&err));
    cr_assert_eq(req.version, PROTO_V2);
}

/* A protocol 2 decision: the numbers under the vector table's line names, no empty soft_denied,
 * and the map only when asked for; msgpack-c reads it back. */
Test(proto, a_protocol_2_decision_carries_the_numbers)
{
    proto_disclosed_t x = {.has_policy = true,
                           .policy_tpm = true,
                           .policy_id = "team_tpm",
                           .period_ms = 60000,
                           .quota = 100000,
                           .remaining = 10000,
                           .t_s = 1,
                           .has_requests = true,
                           .requests = {300, 59, 200},
                           .has_tokens = true,
                           .tokens = {100000, 10000, 6000},
                           .retry_s = 7};
    proto_decision_t d = {.verdict = {"deny", 4},
                          .limit = {"team_tpm", 8},
                          .remaining = 0,
                          .retry_after = 7,
                          .reset_after = 6,
                          .disclosed = &x};
    out.len = 0;
    cr_assert_eq(proto_enc_decision(&out, 3, &d), 0);
    expect_msgpack_c_reads(&out,
                           "{\"seq\":3,\"admit\":false,\"verdict\":\"deny\",\"limit\":\"team_tpm\","
                           "\"remaining\":0,\"retry_after\":7,\"reset_after\":6,"
                           "\"policy\":[\"team_tpm\",\"tpm\",60000,100000,10000,1],"
                           "\"requests\":[300,59,200],\"tokens\":[100000,10000,6000],\"retry\":7}");
    proto_header_t h[] = {{{"Retry-After", 11}, {"7", 1}}};
    x = (proto_disclosed_t){.retry_s = -1};
    d.send_headers = true, d.nheaders = 1, d.headers = h;
    out.len = 0;
    cr_assert_eq(proto_enc_decision(&out, 4, &d), 0);
    expect_msgpack_c_reads(&out, "{\"seq\":4,\"admit\":false,\"verdict\":\"deny\",\"limit\":"
                                 "\"team_tpm\",\"remaining\":0,\"retry_after\":7,\"reset_after\":6,"
                                 "\"headers\":{\"Retry-After\":\"7\"}}");
}

static void expect_first_equals_general(void)
{
    proto_request_t a, b;
    tt_err_t err;
    size_t used;
    cr_assert_eq(proto_decode_first(out.data, out.len, &used, &a, &err), 0, "%s", msg(&err));
    cr_assert_eq(used, out.len);
    cr_assert_eq(decode(&b, &err), 0, "%s", msg(&err));
    cr_assert(a.op == b.op && a.seq == b.seq && a.version == b.version && a.headers == b.headers);
    cr_assert(a.has_tokens == b.has_tokens && a.tokens == b.tokens && a.nsubject == b.nsubject);
    for (uint32_t i = 0; i < a.nsubject; i++)
        cr_assert(a.subject[i].id.len == b.subject[i].id.len &&
                  memcmp(a.subject[i].id.ptr, b.subject[i].id.ptr, a.subject[i].id.len) == 0);
}

/* The one-pass decoder's decide path reads the forms clients write; the rarer forms (a 256-byte
 * id in a str16, 16 levels in a map16, a uint64 seq) go through the general decoder: both read
 * the same request. fuzz_proto checks the same on arbitrary bytes. */
Test(proto, the_specialised_decide_path_reads_what_the_general_decoder_reads)
{
    char id[257];
    memset(id, 'x', 256);
    id[256] = 0;
    start();
    msgpack_pack_map(&pk, 5);
    str("subject"), msgpack_pack_map(&pk, 2), str("team"), str("t-42"), str("key"), str("k-1");
    str("headers"), msgpack_pack_true(&pk);
    str("v"), msgpack_pack_uint64(&pk, 2);
    str("op"), str("decide");
    str("tokens"), msgpack_pack_uint64(&pk, PROTO_MAX_COUNT);
    expect_first_equals_general();
    start();
    msgpack_pack_map(&pk, 3);
    str("op"), str("decide");
    str("seq"), msgpack_pack_uint64(&pk, UINT64_MAX);
    str("subject"), msgpack_pack_map(&pk, 16);
    for (int i = 0; i < 16; i++) {
        char level[8];
        snprintf(level, sizeof(level), "l%d", i);
        str(level), str(i ? "i" : id);
    }
    expect_first_equals_general();
}
