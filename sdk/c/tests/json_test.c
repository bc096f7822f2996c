/* Native unit tests of the SDK's JSON reader and writer (sdk/c/test.sh). */
#include "../weft_plugin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed;
#define CHECK(cond)                                                      \
    do {                                                                 \
        if (cond) {                                                      \
            passed++;                                                    \
        } else {                                                         \
            failed++;                                                    \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
        }                                                                \
    } while (0)

static weft_json_t P(const char *s) { return weft_json_parse(s, strlen(s)); }

static bool str_is(weft_json_t v, const char *want) {
    char *s = weft_json_str(v, NULL);
    bool ok = s && strcmp(s, want) == 0;
    free(s);
    return ok;
}

int main(void) {
    /* Validity. */
    const char *valid[] = {"{}", "[]", " 1 ", "-0.5e+3", "\"a\\u00e9\\n\"", "null", "true",
                           "{\"a\":[1,{\"b\":null}],\"c\":\"\"}", "[[[[]]]]"};
    for (size_t i = 0; i < sizeof valid / sizeof *valid; i++) CHECK(weft_json_ok(P(valid[i])));
    const char *invalid[] = {"", " ", "{", "}", "{\"a\"}", "{\"a\":}", "[1,]", "01", "1.", "-",
                             "\"abc", "\"\\x\"", "\"\\u12\"", "tru", "{} {}", "{'a':1}", "[1 2]",
                             "\"a\nb\"", "nul", "{\"a\":1,}", "garbage"};
    for (size_t i = 0; i < sizeof invalid / sizeof *invalid; i++) CHECK(!weft_json_ok(P(invalid[i])));
    CHECK(!weft_json_ok(weft_json_parse(NULL, 0)));

    /* Depth: bounded, no stack overflow on hostile input. */
    size_t deep = 100000;
    char *d = malloc(2 * deep + 1);
    memset(d, '[', deep);
    memset(d + deep, ']', deep);
    d[2 * deep] = '\0';
    CHECK(!weft_json_ok(weft_json_parse(d, 2 * deep)));
    CHECK(weft_json_ok(weft_json_parse(d + deep - 100, 200)));
    free(d);

    /* The pod-specs annotation: a JSON list, as a JSON string value. */
    {
        const char *specs[] = {"/spec/template/spec", "/spec/a~1b"};
        weft_buf_t b = WEFT_BUF_INIT;
        weft_buf_puts(&b, "{");
        weft_buf_pod_specs(&b, specs, 2);
        weft_buf_puts(&b, "}");
        char *text = weft_buf_finish(&b);
        CHECK(text && strcmp(text, "{\"weft.dev/pod-specs\":\"[\\\"/spec/template/spec\\\",\\\"/spec/a~1b\\\"]\"}") == 0);
        weft_json_t v = P(text);
        CHECK(str_is(weft_json_get(v, "weft.dev/pod-specs"), "[\"/spec/template/spec\",\"/spec/a~1b\"]"));
        free(text);
    }

    /* Navigation. */
    weft_json_t doc = P("{\"metadata\":{\"name\":\"cm\",\"uid\":\"u-1\",\"labels\":{}},"
                        "\"data\":{\"a\":\"1\",\"b\":\"2\"},\"list\":[10,\"x\",{\"k\":true}],"
                        "\"dup\":1,\"dup\":2,\"esc\\u0061pe\":\"ok\"}");
    CHECK(weft_json_type(doc) == WEFT_JSON_OBJECT);
    CHECK(str_is(weft_json_path(doc, "metadata.uid"), "u-1"));
    CHECK(weft_json_str_eq(weft_json_path(doc, "metadata.name"), "cm"));
    CHECK(!weft_json_ok(weft_json_path(doc, "metadata.missing")));
    CHECK(!weft_json_ok(weft_json_path(doc, "metadata.name.deeper")));
    CHECK(weft_json_count(weft_json_get(doc, "data")) == 2);
    CHECK(weft_json_count(weft_json_path(doc, "metadata.labels")) == 0);
    CHECK(weft_json_count(weft_json_get(doc, "list")) == 3);
    CHECK(weft_json_type(weft_json_path(doc, "list.2.k")) == WEFT_JSON_TRUE);
    CHECK(!weft_json_ok(weft_json_path(doc, "list.3")));
    CHECK(!weft_json_ok(weft_json_path(doc, "list.x")));
    double num = 0;
    CHECK(weft_json_number(weft_json_path(doc, "list.0"), &num) && num == 10);
    CHECK(weft_json_number(weft_json_get(doc, "dup"), &num) && num == 2);
    CHECK(!weft_json_number(weft_json_path(doc, "list.1"), &num));
    CHECK(str_is(weft_json_get(doc, "escape"), "ok"));
    CHECK(weft_json_count(P("\"str\"")) == 0);
    CHECK(!weft_json_ok(weft_json_get(P("[1]"), "a")));
    CHECK(!weft_json_ok(weft_json_get((weft_json_t){NULL, 0}, "a")));

    /* Iteration, in document order. */
    weft_json_iter_t it = weft_json_iter(weft_json_get(doc, "data"));
    weft_json_t k, v;
    CHECK(weft_json_next(&it, &k, &v) && weft_json_str_eq(k, "a") && weft_json_str_eq(v, "1"));
    CHECK(weft_json_next(&it, &k, &v) && weft_json_str_eq(k, "b") && weft_json_str_eq(v, "2"));
    CHECK(!weft_json_next(&it, &k, &v));

    /* String decoding: escapes, \u, surrogate pairs, lone surrogates. */
    CHECK(str_is(P("\"a\\\"b\\\\c\\/d\\n\""), "a\"b\\c/d\n"));
    CHECK(str_is(P("\"\\u00e9\\u20ac\""), "\xc3\xa9\xe2\x82\xac"));
    CHECK(str_is(P("\"\\ud83d\\ude00\""), "\xf0\x9f\x98\x80"));
    CHECK(str_is(P("\"\\ud83d!\""), "\xef\xbf\xbd!"));
    size_t n = 0;
    char *z = weft_json_str(P("\"a\\u0000b\""), &n);
    CHECK(z && n == 3 && z[1] == '\0');
    free(z);
    CHECK(weft_json_str(P("12"), NULL) == NULL);

    /* Writer: escaping round-trips through the reader. */
    weft_buf_t b = WEFT_BUF_INIT;
    const char *nasty = "q\"b\\s\n\t\x01 \xc3\xa9 end";
    weft_buf_puts(&b, "{\"k\":");
    weft_buf_json_str(&b, nasty);
    weft_buf_printf(&b, ",\"n\":%d,\"raw\":", 42);
    weft_buf_json(&b, weft_json_path(doc, "list"));
    weft_buf_puts(&b, "}");
    char *out = weft_buf_finish(&b);
    CHECK(out != NULL);
    weft_json_t round = P(out);
    CHECK(weft_json_ok(round));
    CHECK(str_is(weft_json_get(round, "k"), nasty));
    CHECK(weft_json_number(weft_json_get(round, "n"), &num) && num == 42);
    CHECK(weft_json_count(weft_json_get(round, "raw")) == 3);
    free(out);
    CHECK(b.ptr == NULL);

    /* A large buffer grows. */
    for (int i = 0; i < 10000; i++) weft_buf_puts(&b, "0123456789");
    out = weft_buf_finish(&b);
    CHECK(out && strlen(out) == 100000);
    free(out);
    char *s = weft_sprintf("%s-%d", "x", 7);
    CHECK(s && strcmp(s, "x-7") == 0);
    free(s);

    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
