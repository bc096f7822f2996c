/*
 * The isolation guest (C): each call keeps its task's config.secret in a
 * static buffer and reports what an earlier call left there, in
 * build-resource's ConfigMap (data.seen) and get-task-phase's outputs
 * (seen). A host that gives every call a fresh (or reset) instance shows
 * it nothing; one that reuses an instance leaks the secret. With
 * config.fail true it stores the secret, then traps. The Rust twin is
 * plugins/testing/leak; host/weft/tests/isolation.rs drives all four.
 */
#include <stdlib.h>
#include <string.h>

#include "weft_plugin.h"

static char seen[256];

/* Swaps the buffer for this task's secret; the earlier value (freed by
 * the caller). */
static char *swap(const weft_task_context_t *ctx) {
    char *before = weft_sprintf("%s", seen);
    char *secret = weft_json_str(weft_json_get(ctx->config, "secret"), NULL);
    strncpy(seen, secret ? secret : "", sizeof seen - 1);
    free(secret);
    return before;
}

weft_resource_t weft_build_resource(const weft_task_context_t *ctx) {
    char *before = swap(ctx);
    bool fail = false;
    if (weft_json_bool(weft_json_get(ctx->config, "fail"), &fail) && fail) __builtin_trap();
    weft_buf_t b = WEFT_BUF_INIT;
    weft_buf_puts(&b, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":");
    weft_buf_json_str(&b, ctx->resource_name);
    weft_buf_puts(&b, "},\"data\":{\"seen\":");
    weft_buf_json_str(&b, before);
    weft_buf_puts(&b, "}}");
    free(before);
    return weft_resource_json(weft_buf_finish(&b));
}

weft_phase_t weft_get_task_phase(const weft_task_context_t *ctx, weft_json_t observed) {
    (void)observed;
    char *before = swap(ctx);
    weft_buf_t b = WEFT_BUF_INIT;
    weft_buf_puts(&b, "{\"seen\":");
    weft_buf_json_str(&b, before);
    weft_buf_puts(&b, "}");
    free(before);
    return weft_phase_success_owned(weft_buf_finish(&b));
}
