/*
 * weft_plugin.c: the C SDK's glue between the plugin's functions
 * (weft_plugin.h) and the bindings wit-bindgen generates for the world
 * k8s-task-plugin (k8s_task_plugin.h, made by build.sh).
 *
 * Ownership, per the canonical ABI as wit-bindgen's C generator maps it:
 * the exports receive their arguments owned (we free them after the call),
 * and every string/list they return is freed by the generated post-return
 * function with free(), so what we return must be malloc'd.
 */
#include "weft_plugin.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "k8s_task_plugin.h"

typedef k8s_task_plugin_string_t wstr_t;

/* ------------------------------------------------------------------ */
/* Strings across the boundary                                         */
/* ------------------------------------------------------------------ */

/* A NUL-terminated malloc'd copy of a canonical-ABI string ("" if OOM). */
static char *cstr(const wstr_t *s) {
    char *p = malloc(s->len + 1);
    if (!p) return NULL;
    if (s->len) memcpy(p, s->ptr, s->len);
    p[s->len] = '\0';
    return p;
}

/* Hands a malloc'd C string to the host as a canonical-ABI string; the
 * generated post-return frees it. */
static wstr_t wstr_own(char *s) {
    wstr_t w = {(uint8_t *)s, s ? strlen(s) : 0};
    return w;
}

static k8s_task_plugin_option_string_t wopt_own(char *s) {
    k8s_task_plugin_option_string_t o;
    memset(&o, 0, sizeof o);
    if (s) {
        o.is_some = true;
        o.val = wstr_own(s);
    }
    return o;
}

/* ------------------------------------------------------------------ */
/* The task context                                                    */
/* ------------------------------------------------------------------ */

typedef struct {
    weft_task_context_t pub;
    weft_label_t *labels;
    char *strings[9];
} ctx_holder_t;

static const char EMPTY[] = "";
#define OR_EMPTY(s) ((s) ? (s) : EMPTY)

static void ctx_from_wit(ctx_holder_t *h, const weft_plugin_types_task_context_t *w) {
    memset(h, 0, sizeof *h);
    char **s = h->strings;
    s[0] = cstr(&w->workflow);
    s[1] = cstr(&w->namespace_);
    s[2] = cstr(&w->node_id);
    s[3] = cstr(&w->task_type);
    s[4] = cstr(&w->config);
    s[5] = cstr(&w->inputs);
    s[6] = cstr(&w->resource_name);
    s[7] = cstr(&w->plugin_config);
    weft_task_context_t *c = &h->pub;
    c->workflow = OR_EMPTY(s[0]);
    c->namespace_ = OR_EMPTY(s[1]);
    c->node_id = OR_EMPTY(s[2]);
    c->attempt = w->attempt;
    c->task_type = OR_EMPTY(s[3]);
    c->config_text = OR_EMPTY(s[4]);
    c->inputs_text = OR_EMPTY(s[5]);
    c->resource_name = OR_EMPTY(s[6]);
    c->plugin_config_text = OR_EMPTY(s[7]);
    c->config = weft_json_parse(c->config_text, strlen(c->config_text));
    c->inputs = weft_json_parse(c->inputs_text, strlen(c->inputs_text));
    c->plugin_config = weft_json_parse(c->plugin_config_text, strlen(c->plugin_config_text));
    size_t n = w->labels.len;
    h->labels = n ? calloc(n, sizeof *h->labels) : NULL;
    if (h->labels) {
        for (size_t i = 0; i < n; i++) {
            h->labels[i].key = cstr(&w->labels.ptr[i].f0);
            h->labels[i].value = cstr(&w->labels.ptr[i].f1);
            if (!h->labels[i].key) h->labels[i].key = EMPTY;
            if (!h->labels[i].value) h->labels[i].value = EMPTY;
        }
        c->labels = h->labels;
        c->labels_len = n;
    }
}

static void ctx_free(ctx_holder_t *h) {
    for (size_t i = 0; i < h->pub.labels_len; i++) {
        if (h->labels[i].key != EMPTY) free((char *)h->labels[i].key);
        if (h->labels[i].value != EMPTY) free((char *)h->labels[i].value);
    }
    free(h->labels);
    for (size_t i = 0; i < sizeof h->strings / sizeof *h->strings; i++) free(h->strings[i]);
}

void weft_buf_labels(weft_buf_t *b, const weft_task_context_t *ctx) {
    weft_buf_puts(b, "{");
    for (size_t i = 0; i < ctx->labels_len; i++) {
        if (i) weft_buf_puts(b, ",");
        weft_buf_json_str(b, ctx->labels[i].key);
        weft_buf_puts(b, ":");
        weft_buf_json_str(b, ctx->labels[i].value);
    }
    weft_buf_puts(b, "}");
}

const char *weft_label(const weft_task_context_t *ctx, const char *key) {
    for (size_t i = 0; i < ctx->labels_len; i++)
        if (strcmp(ctx->labels[i].key, key) == 0) return ctx->labels[i].value;
    return NULL;
}

/* ------------------------------------------------------------------ */
/* Results                                                             */
/* ------------------------------------------------------------------ */

static weft_error_t make_error(bool retryable, const char *fmt, va_list ap) {
    weft_error_t e;
    e.message = weft_vsprintf(fmt, ap);
    if (!e.message) e.message = weft_strdup("out of memory");
    e.retryable = retryable;
    return e;
}

weft_resource_t weft_resource_json(char *json) {
    weft_resource_t r;
    memset(&r, 0, sizeof r);
    if (json) {
        r.json = json;
    } else {
        r.error.message = weft_strdup("out of memory while building the resource");
        r.error.retryable = true;
    }
    return r;
}

weft_resource_t weft_resource_error(bool retryable, const char *fmt, ...) {
    weft_resource_t r;
    memset(&r, 0, sizeof r);
    va_list ap;
    va_start(ap, fmt);
    r.error = make_error(retryable, fmt, ap);
    va_end(ap);
    return r;
}

weft_phase_t weft_phase(weft_phase_kind_t phase) {
    weft_phase_t p;
    memset(&p, 0, sizeof p);
    p.phase = phase;
    return p;
}

static weft_phase_t phase_with_message(weft_phase_kind_t kind, const char *reason, const char *fmt,
                                       va_list ap) {
    weft_phase_t p = weft_phase(kind);
    if (reason) p.reason = weft_strdup(reason);
    if (fmt) p.message = weft_vsprintf(fmt, ap);
    return p;
}

#define PHASE_VARIADIC(kind, reason)                          \
    va_list ap;                                               \
    va_start(ap, fmt);                                        \
    weft_phase_t p = phase_with_message(kind, reason, fmt, ap); \
    va_end(ap);                                               \
    return p

weft_phase_t weft_phase_not_ready(const char *fmt, ...) { PHASE_VARIADIC(WEFT_PHASE_NOT_READY, NULL); }
weft_phase_t weft_phase_queued(void) { return weft_phase(WEFT_PHASE_QUEUED); }
weft_phase_t weft_phase_waiting_for_resources(const char *fmt, ...) {
    PHASE_VARIADIC(WEFT_PHASE_WAITING_FOR_RESOURCES, NULL);
}
weft_phase_t weft_phase_initializing(void) { return weft_phase(WEFT_PHASE_INITIALIZING); }
weft_phase_t weft_phase_running(void) { return weft_phase(WEFT_PHASE_RUNNING); }
weft_phase_t weft_phase_retryable(const char *reason, const char *fmt, ...) {
    PHASE_VARIADIC(WEFT_PHASE_RETRYABLE_FAILURE, reason);
}
weft_phase_t weft_phase_permanent(const char *reason, const char *fmt, ...) {
    PHASE_VARIADIC(WEFT_PHASE_PERMANENT_FAILURE, reason);
}

weft_phase_t weft_phase_system(const char *reason, const char *fmt, ...) {
    char *r = weft_sprintf("System:%s", reason ? reason : "");
    va_list ap;
    va_start(ap, fmt);
    weft_phase_t p = phase_with_message(WEFT_PHASE_RETRYABLE_FAILURE, NULL, fmt, ap);
    va_end(ap);
    p.reason = r;
    return p;
}

weft_phase_t weft_phase_success(const char *outputs_json) {
    return weft_phase_success_owned(outputs_json ? weft_strdup(outputs_json) : NULL);
}

weft_phase_t weft_phase_success_owned(char *outputs_json) {
    weft_phase_t p = weft_phase(WEFT_PHASE_SUCCESS);
    p.outputs = outputs_json;
    return p;
}

weft_phase_t weft_phase_error(bool retryable, const char *fmt, ...) {
    weft_phase_t p = weft_phase(WEFT_PHASE_QUEUED);
    va_list ap;
    va_start(ap, fmt);
    p.error = make_error(retryable, fmt, ap);
    va_end(ap);
    return p;
}

void weft_phase_set_reason(weft_phase_t *p, const char *reason) {
    free(p->reason);
    p->reason = weft_strdup(reason);
}

void weft_phase_set_message(weft_phase_t *p, const char *fmt, ...) {
    free(p->message);
    va_list ap;
    va_start(ap, fmt);
    p->message = fmt ? weft_vsprintf(fmt, ap) : NULL;
    va_end(ap);
}

void weft_phase_set_outputs(weft_phase_t *p, const char *outputs_json) {
    free(p->outputs);
    p->outputs = weft_strdup(outputs_json);
}

void weft_phase_add_log_link(weft_phase_t *p, const char *name, const char *uri) {
    weft_log_link_t *links = realloc(p->log_links, (p->log_links_len + 1) * sizeof *links);
    if (!links) return;
    links[p->log_links_len].name = weft_strdup(name ? name : "");
    links[p->log_links_len].uri = weft_strdup(uri ? uri : "");
    p->log_links = links;
    p->log_links_len++;
}

static void phase_free(weft_phase_t *p) {
    free(p->reason);
    free(p->message);
    free(p->outputs);
    for (size_t i = 0; i < p->log_links_len; i++) {
        free(p->log_links[i].name);
        free(p->log_links[i].uri);
    }
    free(p->log_links);
    free(p->error.message);
    memset(p, 0, sizeof *p);
}

/* ------------------------------------------------------------------ */
/* The exports                                                         */
/* ------------------------------------------------------------------ */

__attribute__((weak)) weft_task_properties_t weft_properties(void) {
    weft_task_properties_t p = {WEFT_ABORT_DELETE, false};
    return p;
}

void exports_weft_plugin_k8s_task_properties(exports_weft_plugin_k8s_task_task_properties_t *ret) {
    weft_task_properties_t p = weft_properties();
    ret->abort = p.abort == WEFT_ABORT_LEAVE ? EXPORTS_WEFT_PLUGIN_K8S_TASK_ABORT_BEHAVIOUR_LEAVE
                                             : EXPORTS_WEFT_PLUGIN_K8S_TASK_ABORT_BEHAVIOUR_DELETE;
    ret->delete_on_finish = p.delete_on_finish;
}

static void set_error(exports_weft_plugin_k8s_task_plugin_error_t *err, weft_error_t e) {
    err->message = wstr_own(e.message ? e.message : weft_strdup("plugin error"));
    err->retryable = e.retryable;
}

bool exports_weft_plugin_k8s_task_build_resource(exports_weft_plugin_k8s_task_task_context_t *wctx,
                                                 k8s_task_plugin_string_t *ret,
                                                 exports_weft_plugin_k8s_task_plugin_error_t *err) {
    ctx_holder_t h;
    ctx_from_wit(&h, wctx);
    exports_weft_plugin_k8s_task_task_context_free(wctx);
    weft_resource_t r = weft_build_resource(&h.pub);
    ctx_free(&h);
    if (r.error.message || !r.json) {
        free(r.json);
        set_error(err, r.error.message ? r.error : (weft_error_t){NULL, true});
        return false;
    }
    *ret = wstr_own(r.json);
    return true;
}

bool exports_weft_plugin_k8s_task_get_task_phase(exports_weft_plugin_k8s_task_task_context_t *wctx,
                                                 k8s_task_plugin_string_t *wobserved,
                                                 exports_weft_plugin_k8s_task_phase_info_t *ret,
                                                 exports_weft_plugin_k8s_task_plugin_error_t *err) {
    ctx_holder_t h;
    ctx_from_wit(&h, wctx);
    exports_weft_plugin_k8s_task_task_context_free(wctx);
    weft_json_t observed = weft_json_parse((const char *)wobserved->ptr, wobserved->len);
    weft_phase_t p = weft_get_task_phase(&h.pub, observed);
    k8s_task_plugin_string_free(wobserved);
    ctx_free(&h);

    if (p.error.message) {
        set_error(err, p.error);
        p.error.message = NULL; /* now the host's */
        phase_free(&p);
        return false;
    }
    memset(ret, 0, sizeof *ret);
    ret->phase = (weft_plugin_types_phase_t)p.phase;
    ret->reason = wopt_own(p.reason);
    ret->message = wopt_own(p.message);
    ret->outputs = wopt_own(p.outputs);
    if (p.log_links_len) {
        weft_plugin_types_log_link_t *links = malloc(p.log_links_len * sizeof *links);
        if (links) {
            for (size_t i = 0; i < p.log_links_len; i++) {
                links[i].name = wstr_own(p.log_links[i].name);
                links[i].uri = wstr_own(p.log_links[i].uri);
            }
            ret->log_links.ptr = links;
            ret->log_links.len = p.log_links_len;
        } else {
            for (size_t i = 0; i < p.log_links_len; i++) {
                free(p.log_links[i].name);
                free(p.log_links[i].uri);
            }
        }
    }
    free(p.log_links);
    return true;
}

/* ------------------------------------------------------------------ */
/* Host imports                                                        */
/* ------------------------------------------------------------------ */

void weft_log(weft_log_level_t level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *line = weft_vsprintf(fmt, ap);
    va_end(ap);
    if (!line) return;
    wstr_t msg = {(uint8_t *)line, strlen(line)};
    weft_plugin_log_log((weft_plugin_log_level_t)level, &msg);
    free(line);
}

uint64_t weft_now_millis(void) { return weft_plugin_clock_now_millis(); }
uint64_t weft_monotonic_nanos(void) { return weft_plugin_clock_monotonic_nanos(); }

bool weft_state_get(const char *key, uint8_t **value, size_t *len) {
    wstr_t k = {(uint8_t *)key, strlen(key)};
    k8s_task_plugin_list_u8_t v;
    if (!weft_plugin_state_get(&k, &v)) return false;
    if (value) {
        /* The bindings allocated a non-empty value with cabi_realloc
         * (malloc): hand it over. An empty one has no allocation. */
        *value = v.len ? v.ptr : NULL;
    } else {
        k8s_task_plugin_list_u8_free(&v);
    }
    if (len) *len = v.len;
    return true;
}

bool weft_state_set(const char *key, const uint8_t *value, size_t len, int64_t ttl_millis, char **err) {
    wstr_t k = {(uint8_t *)key, strlen(key)};
    k8s_task_plugin_list_u8_t v = {(uint8_t *)value, len};
    uint64_t ttl = (uint64_t)ttl_millis;
    wstr_t e = {NULL, 0};
    if (weft_plugin_state_set(&k, &v, ttl_millis < 0 ? NULL : &ttl, &e)) return true;
    if (err) *err = cstr(&e);
    k8s_task_plugin_string_free(&e);
    return false;
}

void weft_state_delete(const char *key) {
    wstr_t k = {(uint8_t *)key, strlen(key)};
    weft_plugin_state_delete(&k);
}
