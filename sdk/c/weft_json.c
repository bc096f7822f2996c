/*
 * weft_json.c: the C SDK's small JSON reader and writer (see weft_plugin.h).
 *
 * Written for this SDK (no third-party code). The reader never allocates to
 * navigate: a weft_json_t is a view of one value inside the caller's text.
 * weft_json_parse() validates the whole document once (RFC 8259 grammar,
 * nesting depth bounded by WEFT_JSON_MAX_DEPTH so hostile input cannot
 * overflow the stack); every other function is also bounds-checked, so a
 * view made by hand cannot read past its end either.
 *
 * This file needs only the C library, so it also compiles natively for
 * unit tests (see sdk/c/test.sh).
 */
#include "weft_plugin.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Reader                                                              */
/* ------------------------------------------------------------------ */

static const char *skip_ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Skips a string starting at its opening quote; returns the byte after the
 * closing quote, or NULL when malformed. */
static const char *skip_string(const char *p, const char *end) {
    if (p >= end || *p != '"') return NULL;
    p++;
    while (p < end) {
        unsigned char c = (unsigned char)*p;
        if (c == '"') return p + 1;
        if (c < 0x20) return NULL;
        if (c == '\\') {
            p++;
            if (p >= end) return NULL;
            switch (*p) {
            case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
                p++;
                break;
            case 'u':
                if (end - p < 5) return NULL;
                for (int i = 1; i <= 4; i++)
                    if (hexval(p[i]) < 0) return NULL;
                p += 5;
                break;
            default:
                return NULL;
            }
        } else {
            p++;
        }
    }
    return NULL;
}

static const char *skip_digits(const char *p, const char *end) {
    while (p < end && *p >= '0' && *p <= '9') p++;
    return p;
}

static const char *skip_number(const char *p, const char *end) {
    if (p < end && *p == '-') p++;
    if (p >= end) return NULL;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        p = skip_digits(p, end);
    } else {
        return NULL;
    }
    if (p < end && *p == '.') {
        const char *q = skip_digits(p + 1, end);
        if (q == p + 1) return NULL;
        p = q;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        const char *q = skip_digits(p, end);
        if (q == p) return NULL;
        p = q;
    }
    return p;
}

static const char *skip_literal(const char *p, const char *end, const char *lit) {
    size_t n = strlen(lit);
    if ((size_t)(end - p) < n || memcmp(p, lit, n) != 0) return NULL;
    return p + n;
}

/* Skips one value (no leading whitespace); NULL when malformed or nested
 * deeper than WEFT_JSON_MAX_DEPTH. */
static const char *skip_value(const char *p, const char *end, int depth) {
    if (p >= end) return NULL;
    switch (*p) {
    case '"':
        return skip_string(p, end);
    case 't':
        return skip_literal(p, end, "true");
    case 'f':
        return skip_literal(p, end, "false");
    case 'n':
        return skip_literal(p, end, "null");
    case '{':
    case '[': {
        char close = *p == '{' ? '}' : ']';
        int object = *p == '{';
        if (depth >= WEFT_JSON_MAX_DEPTH) return NULL;
        p = skip_ws(p + 1, end);
        if (p < end && *p == close) return p + 1;
        for (;;) {
            if (object) {
                p = skip_string(p, end);
                if (!p) return NULL;
                p = skip_ws(p, end);
                if (p >= end || *p != ':') return NULL;
                p = skip_ws(p + 1, end);
            }
            p = skip_value(p, end, depth + 1);
            if (!p) return NULL;
            p = skip_ws(p, end);
            if (p >= end) return NULL;
            if (*p == close) return p + 1;
            if (*p != ',') return NULL;
            p = skip_ws(p + 1, end);
        }
    }
    default:
        return skip_number(p, end);
    }
}

static const weft_json_t NONE = {NULL, 0};

weft_json_t weft_json_parse(const char *text, size_t len) {
    if (!text) return NONE;
    const char *end = text + len;
    const char *p = skip_ws(text, end);
    const char *q = skip_value(p, end, 0);
    if (!q || skip_ws(q, end) != end) return NONE;
    weft_json_t v = {p, (size_t)(q - p)};
    return v;
}

weft_json_type_t weft_json_type(weft_json_t v) {
    if (!v.ptr || v.len == 0) return WEFT_JSON_INVALID;
    switch (v.ptr[0]) {
    case '{': return WEFT_JSON_OBJECT;
    case '[': return WEFT_JSON_ARRAY;
    case '"': return WEFT_JSON_STRING;
    case 't': return WEFT_JSON_TRUE;
    case 'f': return WEFT_JSON_FALSE;
    case 'n': return WEFT_JSON_NULL;
    default: return WEFT_JSON_NUMBER;
    }
}

bool weft_json_ok(weft_json_t v) { return weft_json_type(v) != WEFT_JSON_INVALID; }

weft_json_iter_t weft_json_iter(weft_json_t container) {
    weft_json_iter_t it = {NULL, NULL, false};
    weft_json_type_t t = weft_json_type(container);
    if (t != WEFT_JSON_OBJECT && t != WEFT_JSON_ARRAY) return it;
    it.object = t == WEFT_JSON_OBJECT;
    it.end = container.ptr + container.len;
    it.p = skip_ws(container.ptr + 1, it.end);
    if (it.p < it.end && *it.p == (it.object ? '}' : ']')) it.p = NULL; /* empty */
    return it;
}

bool weft_json_next(weft_json_iter_t *it, weft_json_t *key, weft_json_t *value) {
    if (!it || !it->p) return false;
    const char *p = it->p, *end = it->end;
    weft_json_t k = NONE;
    if (it->object) {
        const char *q = skip_string(p, end);
        if (!q) goto done;
        k.ptr = p;
        k.len = (size_t)(q - p);
        p = skip_ws(q, end);
        if (p >= end || *p != ':') goto done;
        p = skip_ws(p + 1, end);
    }
    const char *q = skip_value(p, end, 1);
    if (!q) goto done;
    if (key) *key = k;
    if (value) {
        value->ptr = p;
        value->len = (size_t)(q - p);
    }
    p = skip_ws(q, end);
    if (p < end && *p == ',') {
        it->p = skip_ws(p + 1, end);
    } else {
        it->p = NULL; /* the closing bracket, or malformed: stop */
    }
    return true;
done:
    it->p = NULL;
    return false;
}

size_t weft_json_count(weft_json_t container) {
    weft_json_iter_t it = weft_json_iter(container);
    size_t n = 0;
    while (weft_json_next(&it, NULL, NULL)) n++;
    return n;
}

weft_json_t weft_json_at(weft_json_t array, size_t index) {
    if (weft_json_type(array) != WEFT_JSON_ARRAY) return NONE;
    weft_json_iter_t it = weft_json_iter(array);
    weft_json_t v;
    for (size_t i = 0; weft_json_next(&it, NULL, &v); i++)
        if (i == index) return v;
    return NONE;
}

/* Appends the UTF-8 encoding of code point cp to out; returns bytes written. */
static size_t put_utf8(char *out, unsigned cp) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static unsigned hex4(const char *p) {
    return (unsigned)(hexval(p[0]) << 12 | hexval(p[1]) << 8 | hexval(p[2]) << 4 | hexval(p[3]));
}

/* Decodes the string view v (quotes included) into out, which has room for
 * v.len bytes (a decoded string is never longer than its JSON text).
 * Returns the decoded length, or (size_t)-1 when v is not a valid string. */
static size_t decode_string(weft_json_t v, char *out) {
    const char *p = v.ptr, *end = v.ptr + v.len;
    if (weft_json_type(v) != WEFT_JSON_STRING || skip_string(p, end) != end) return (size_t)-1;
    p++;
    end--; /* the closing quote */
    size_t n = 0;
    while (p < end) {
        if (*p != '\\') {
            out[n++] = *p++;
            continue;
        }
        p++;
        switch (*p++) {
        case 'b': out[n++] = '\b'; break;
        case 'f': out[n++] = '\f'; break;
        case 'n': out[n++] = '\n'; break;
        case 'r': out[n++] = '\r'; break;
        case 't': out[n++] = '\t'; break;
        case 'u': {
            unsigned cp = hex4(p);
            p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
                unsigned lo = hex4(p + 2);
                if (lo >= 0xDC00 && lo <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    p += 6;
                }
            }
            if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD; /* a lone surrogate */
            /* \uXXXX is 6 bytes of text and at most 3 of UTF-8; a pair is
             * 12 bytes of text and 4 of UTF-8: out never overtakes p. */
            n += put_utf8(out + n, cp);
            break;
        }
        default: out[n++] = p[-1]; break; /* " \ / */
        }
    }
    return n;
}

char *weft_json_str(weft_json_t v, size_t *len) {
    if (weft_json_type(v) != WEFT_JSON_STRING) return NULL;
    char *out = malloc(v.len + 1);
    if (!out) return NULL;
    size_t n = decode_string(v, out);
    if (n == (size_t)-1) {
        free(out);
        return NULL;
    }
    out[n] = '\0';
    if (len) *len = n;
    return out;
}

bool weft_json_str_eq(weft_json_t v, const char *s) {
    if (weft_json_type(v) != WEFT_JSON_STRING || !s) return false;
    size_t slen = strlen(s);
    /* Fast path: no escapes, compare the text between the quotes. */
    if (!memchr(v.ptr, '\\', v.len))
        return v.len == slen + 2 && memcmp(v.ptr + 1, s, slen) == 0;
    size_t n;
    char *d = weft_json_str(v, &n);
    bool eq = d && n == slen && memcmp(d, s, n) == 0;
    free(d);
    return eq;
}

weft_json_t weft_json_get(weft_json_t object, const char *key) {
    if (weft_json_type(object) != WEFT_JSON_OBJECT || !key) return NONE;
    weft_json_iter_t it = weft_json_iter(object);
    weft_json_t k, v, found = NONE;
    /* The last duplicate wins, as in most JSON libraries (serde_json too). */
    while (weft_json_next(&it, &k, &v))
        if (weft_json_str_eq(k, key)) found = v;
    return found;
}

weft_json_t weft_json_path(weft_json_t v, const char *path) {
    if (!path) return NONE;
    char seg[256];
    while (*path) {
        const char *dot = strchr(path, '.');
        size_t n = dot ? (size_t)(dot - path) : strlen(path);
        if (n >= sizeof seg) return NONE;
        memcpy(seg, path, n);
        seg[n] = '\0';
        if (weft_json_type(v) == WEFT_JSON_ARRAY) {
            char *endp;
            unsigned long i = strtoul(seg, &endp, 10);
            if (n == 0 || *endp) return NONE;
            v = weft_json_at(v, i);
        } else {
            v = weft_json_get(v, seg);
        }
        if (!weft_json_ok(v)) return NONE;
        path += n;
        if (*path == '.') path++;
    }
    return v;
}

char *weft_json_path_str(weft_json_t v, const char *path) {
    return weft_json_str(weft_json_path(v, path), NULL);
}

bool weft_json_number(weft_json_t v, double *out) {
    if (weft_json_type(v) != WEFT_JSON_NUMBER || v.len >= 64) return false;
    char tmp[64];
    memcpy(tmp, v.ptr, v.len);
    tmp[v.len] = '\0';
    char *endp;
    double d = strtod(tmp, &endp);
    if (*endp) return false;
    if (out) *out = d;
    return true;
}

bool weft_json_bool(weft_json_t v, bool *out) {
    weft_json_type_t t = weft_json_type(v);
    if (t != WEFT_JSON_TRUE && t != WEFT_JSON_FALSE) return false;
    if (out) *out = t == WEFT_JSON_TRUE;
    return true;
}

/* ------------------------------------------------------------------ */
/* Writer                                                              */
/* ------------------------------------------------------------------ */

static bool buf_reserve(weft_buf_t *b, size_t extra) {
    if (b->failed) return false;
    if (b->len + extra + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) cap *= 2;
    char *p = realloc(b->ptr, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->ptr = p;
    b->cap = cap;
    return true;
}

void weft_buf_putn(weft_buf_t *b, const char *s, size_t n) {
    if (!buf_reserve(b, n)) return;
    memcpy(b->ptr + b->len, s, n);
    b->len += n;
    b->ptr[b->len] = '\0';
}

void weft_buf_puts(weft_buf_t *b, const char *s) { weft_buf_putn(b, s, strlen(s)); }

void weft_buf_vprintf(weft_buf_t *b, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) {
        b->failed = true;
        return;
    }
    if (!buf_reserve(b, (size_t)n)) return;
    vsnprintf(b->ptr + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void weft_buf_printf(weft_buf_t *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    weft_buf_vprintf(b, fmt, ap);
    va_end(ap);
}

void weft_buf_json_strn(weft_buf_t *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    weft_buf_putn(b, "\"", 1);
    size_t run = 0; /* bytes copied as they are, flushed in one go */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[7];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (c < 0x20) {
                u[0] = '\\', u[1] = 'u', u[2] = '0', u[3] = '0';
                u[4] = hex[c >> 4], u[5] = hex[c & 15], u[6] = '\0';
                esc = u;
            }
        }
        if (esc) {
            weft_buf_putn(b, s + i - run, run);
            run = 0;
            weft_buf_puts(b, esc);
        } else {
            run++;
        }
    }
    weft_buf_putn(b, s + n - run, run);
    weft_buf_putn(b, "\"", 1);
}

void weft_buf_json_str(weft_buf_t *b, const char *s) { weft_buf_json_strn(b, s ? s : "", s ? strlen(s) : 0); }

void weft_buf_json(weft_buf_t *b, weft_json_t v) {
    if (weft_json_ok(v)) weft_buf_putn(b, v.ptr, v.len);
    else weft_buf_puts(b, "null");
}

void weft_buf_pod_specs(weft_buf_t *b, const char *const *pointers, size_t n) {
    weft_buf_t list = WEFT_BUF_INIT;
    weft_buf_puts(&list, "[");
    for (size_t i = 0; i < n; i++) {
        if (i) weft_buf_puts(&list, ",");
        weft_buf_json_str(&list, pointers[i]);
    }
    weft_buf_puts(&list, "]");
    char *text = weft_buf_finish(&list);
    if (!text) {
        b->failed = true;
        return;
    }
    weft_buf_json_str(b, WEFT_POD_SPECS_ANNOTATION);
    weft_buf_puts(b, ":");
    weft_buf_json_str(b, text);
    free(text);
}

char *weft_buf_finish(weft_buf_t *b) {
    if (b->failed) {
        weft_buf_free(b);
        return NULL;
    }
    if (!buf_reserve(b, 0)) return NULL;
    b->ptr[b->len] = '\0';
    char *out = b->ptr;
    b->ptr = NULL;
    b->len = b->cap = 0;
    return out;
}

void weft_buf_free(weft_buf_t *b) {
    free(b->ptr);
    b->ptr = NULL;
    b->len = b->cap = 0;
    b->failed = false;
}

char *weft_strdup(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s);
    char *p = malloc(n + 1);
    if (p) memcpy(p, s, n + 1);
    return p;
}

char *weft_vsprintf(const char *fmt, va_list ap) {
    weft_buf_t b = WEFT_BUF_INIT;
    weft_buf_vprintf(&b, fmt, ap);
    return weft_buf_finish(&b);
}

char *weft_sprintf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = weft_vsprintf(fmt, ap);
    va_end(ap);
    return s;
}
