/*
 * A Weft task plugin in C: copy this folder, rename the plugin in
 * weft-plugin.yaml, and change the two functions below.
 *
 * Task type `my-task` runs `config.image` (required) as a Pod with the task's
 * inputs as environment variables, and maps the Pod's status.phase.
 * Build: sdk/c/build.sh <this-folder> <out-dir>
 */
#include <stdlib.h>

#include "weft_plugin.h"

weft_resource_t weft_build_resource(const weft_task_context_t *ctx) {
    /* A missing image is the user's mistake: a permanent error. */
    char *image = weft_json_str(weft_json_get(ctx->config, "image"), NULL);
    if (!image || !image[0]) {
        free(image);
        return weft_resource_error(false, "config.image (a string) is required");
    }

    weft_buf_t b = WEFT_BUF_INIT;
    weft_buf_puts(&b, "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":");
    /* Use the host's name: a re-run after a crash finds the same Pod. */
    weft_buf_json_str(&b, ctx->resource_name);
    weft_buf_puts(&b, ",\"labels\":");
    weft_buf_labels(&b, ctx);
    weft_buf_puts(&b, "},\"spec\":{\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"main\",\"image\":");
    weft_buf_json_str(&b, image);
    weft_buf_puts(&b, ",\"env\":[");
    /* Each input as WEFT_INPUT_<NAME>; strings as they are, other values as JSON. */
    weft_json_iter_t it = weft_json_iter(ctx->inputs);
    weft_json_t key, value;
    for (int i = 0; weft_json_next(&it, &key, &value); i++) {
        char *k = weft_json_str(key, NULL);
        weft_buf_printf(&b, "%s{\"name\":", i ? "," : "");
        char *env = weft_sprintf("WEFT_INPUT_%s", k ? k : "");
        weft_buf_json_str(&b, env);
        weft_buf_puts(&b, ",\"value\":");
        if (weft_json_type(value) == WEFT_JSON_STRING) weft_buf_json(&b, value);
        else weft_buf_json_strn(&b, value.ptr, value.len);
        weft_buf_puts(&b, "}");
        free(env);
        free(k);
    }
    weft_buf_puts(&b, "]}]}}");
    weft_log_info("pod %s runs %s", ctx->resource_name, image);
    free(image);
    return weft_resource_json(weft_buf_finish(&b));
}

weft_phase_t weft_get_task_phase(const weft_task_context_t *ctx, weft_json_t observed) {
    /* Must answer for any object, even one without a status yet. */
    weft_json_t phase = weft_json_path(observed, "status.phase");
    if (weft_json_str_eq(phase, "Succeeded")) return weft_phase_success(NULL);
    if (weft_json_str_eq(phase, "Failed")) {
        char *msg = weft_json_path_str(observed, "status.message");
        weft_phase_t p = weft_phase_retryable("Failed", "the pod failed: %s", msg ? msg : "no message");
        free(msg);
        return p;
    }
    if (weft_json_str_eq(phase, "Running")) return weft_phase_running();
    return weft_phase_queued();
}

/* Optional: without it the SDK deletes the resource on abort and keeps it
 * once the task finished. */
weft_task_properties_t weft_properties(void) {
    weft_task_properties_t p = {WEFT_ABORT_DELETE, false};
    return p;
}
