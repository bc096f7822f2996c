/*
 * configmap-writer: a Weft task plugin in C. Task type `configmap` writes
 * the task's inputs into a ConfigMap and succeeds once the ConfigMap exists.
 *
 *   task.config    {"key": "prefix-"}   optional: prefix for every data key
 *   task.inputs    {"a": "x", "n": 3}   each becomes one data entry; strings
 *                                       as they are, other values as their
 *                                       JSON text ("3", "true", "{...}")
 *   outputs        {"configMap": "<name>", "keys": <entries in data>}
 */
#include <stdlib.h>
#include <string.h>

#include "weft_plugin.h"

/* A ConfigMap data key: [-._a-zA-Z0-9]+, at most 253 characters. */
static bool valid_key(const char *k, size_t n) {
    if (n == 0 || n > 253) return false;
    for (size_t i = 0; i < n; i++) {
        char c = k[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return false;
    }
    return true;
}

typedef struct {
    char *key; /* decoded input name */
    weft_json_t value;
} entry_t;

static int by_key(const void *a, const void *b) {
    return strcmp(((const entry_t *)a)->key, ((const entry_t *)b)->key);
}

weft_resource_t weft_build_resource(const weft_task_context_t *ctx) {
    /* config.key: an optional string prefix. A wrong type is the user's
     * mistake, which no retry fixes: a permanent error. */
    weft_json_t prefix_v = weft_json_get(ctx->config, "key");
    char *prefix = NULL;
    if (weft_json_ok(prefix_v)) {
        prefix = weft_json_str(prefix_v, NULL);
        if (!prefix) return weft_resource_error(false, "config.key must be a string");
    }
    if (weft_json_type(ctx->inputs) != WEFT_JSON_OBJECT) {
        free(prefix);
        return weft_resource_error(false, "the task's inputs must be a JSON object");
    }

    /* Collect the inputs and sort them by name: the object is the same
     * whatever order the inputs arrive in (build-resource is deterministic). */
    size_t n = weft_json_count(ctx->inputs), len = 0;
    entry_t *entries = calloc(n ? n : 1, sizeof *entries);
    if (!entries) return weft_resource_error(true, "out of memory");
    weft_json_iter_t it = weft_json_iter(ctx->inputs);
    weft_json_t k, v;
    while (len < n && weft_json_next(&it, &k, &v)) {
        entries[len].key = weft_json_str(k, NULL);
        entries[len].value = v;
        if (!entries[len].key) break;
        len++;
    }
    qsort(entries, len, sizeof *entries, by_key);

    weft_buf_t b = WEFT_BUF_INIT;
    weft_buf_puts(&b, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":");
    weft_buf_json_str(&b, ctx->resource_name);
    weft_buf_puts(&b, ",\"namespace\":");
    weft_buf_json_str(&b, ctx->namespace_);
    weft_buf_puts(&b, ",\"labels\":");
    weft_buf_labels(&b, ctx);
    weft_buf_puts(&b, "},\"data\":{");

    weft_resource_t result = {0};
    for (size_t i = 0; i < len; i++) {
        char *key = weft_sprintf("%s%s", prefix ? prefix : "", entries[i].key);
        if (!key || !valid_key(key, strlen(key))) {
            result = weft_resource_error(false,
                "input %s: \"%s\" is not a valid ConfigMap key ([-._a-zA-Z0-9]+, at most 253 characters)",
                entries[i].key, key ? key : "");
            free(key);
            goto out;
        }
        if (i) weft_buf_puts(&b, ",");
        weft_buf_json_str(&b, key);
        weft_buf_puts(&b, ":");
        free(key);
        if (weft_json_type(entries[i].value) == WEFT_JSON_STRING) {
            weft_buf_json(&b, entries[i].value); /* already a JSON string */
        } else {
            /* A number, boolean, null, array or object: its JSON text. */
            weft_buf_json_strn(&b, entries[i].value.ptr, entries[i].value.len);
        }
    }
    weft_buf_puts(&b, "}}");
    weft_log_info("configmap %s/%s: %zu key(s) for node %s (attempt %u)", ctx->namespace_,
                  ctx->resource_name, len, ctx->node_id, (unsigned)ctx->attempt);
    result = weft_resource_json(weft_buf_finish(&b));
out:
    weft_buf_free(&b);
    for (size_t i = 0; i < len; i++) free(entries[i].key);
    free(entries);
    free(prefix);
    return result;
}

weft_phase_t weft_get_task_phase(const weft_task_context_t *ctx, weft_json_t observed) {
    /* The API server sets metadata.uid when it stores an object: with it
     * the ConfigMap exists, and writing it was the whole task. Anything
     * else (nothing yet, a partial or odd object) is not an error: the
     * ConfigMap is simply not there yet. */
    weft_json_t uid = weft_json_path(observed, "metadata.uid");
    char *uid_s = weft_json_str(uid, NULL);
    bool exists = uid_s && uid_s[0];
    free(uid_s);
    if (!exists) return weft_phase_queued();

    char *name = weft_json_path_str(observed, "metadata.name");
    weft_buf_t out = WEFT_BUF_INIT;
    weft_buf_puts(&out, "{\"configMap\":");
    weft_buf_json_str(&out, name && name[0] ? name : ctx->resource_name);
    /* `data` of the wrong shape counts 0 entries. */
    weft_json_t data = weft_json_get(observed, "data");
    size_t keys = weft_json_type(data) == WEFT_JSON_OBJECT ? weft_json_count(data) : 0;
    weft_buf_printf(&out, ",\"keys\":%zu}", keys);
    free(name);
    return weft_phase_success_owned(weft_buf_finish(&out));
}

/* The ConfigMap is the task's result: leave it after the task finished
 * (delete-on-finish false); delete it when the workflow is aborted. */
weft_task_properties_t weft_properties(void) {
    weft_task_properties_t p = {WEFT_ABORT_DELETE, false};
    return p;
}
