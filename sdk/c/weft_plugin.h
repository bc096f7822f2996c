/*
 * weft_plugin.h: write Weft task plugins in C.
 *
 * A task plugin turns a workflow task into a Kubernetes object and says what
 * the object's observed state means (Flyte's BuildResource / GetTaskPhase).
 * It is a WebAssembly component of the world `k8s-task-plugin` of the WIT
 * package weft:plugin@0.1.0 (wit/plugin/world.wit). This header hides the
 * bindings wit-bindgen generates for that world: the plugin sees
 * NUL-terminated C strings and plain structs, never canonical-ABI
 * string/list structs, and returns values built with the helpers below.
 *
 * Implement two functions (a third, weft_properties, is optional):
 *
 *     #include "weft_plugin.h"
 *
 *     weft_resource_t weft_build_resource(const weft_task_context_t *ctx) {
 *         weft_buf_t b = WEFT_BUF_INIT;
 *         weft_buf_printf(&b, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":");
 *         weft_buf_json_str(&b, ctx->resource_name);
 *         weft_buf_puts(&b, "}}");
 *         return weft_resource_json(weft_buf_finish(&b));
 *     }
 *
 *     weft_phase_t weft_get_task_phase(const weft_task_context_t *ctx, weft_json_t observed) {
 *         if (weft_json_ok(weft_json_path(observed, "metadata.uid")))
 *             return weft_phase_success("{}");
 *         return weft_phase_queued();
 *     }
 *
 * and build with `sdk/c/build.sh <plugin-dir> <out-dir>`.
 *
 * Memory: every string the SDK hands back from a constructor (weft_sprintf,
 * weft_buf_finish, weft_json_str, ...) is malloc'd and owned by the caller;
 * every `char *` given to a weft_resource_... or weft_phase_... function is
 * taken over by the SDK (it is freed once the host has read it), while
 * `const char *` arguments are copied. Each call runs in a fresh instance,
 * so a forgotten free() costs nothing beyond that call's memory limit.
 *
 * Errors: returning an error (weft_resource_error, weft_phase_error) is the
 * plugin saying "this task cannot be built/judged": retryable when a new
 * attempt may succeed, permanent when the user must change something. A
 * trap (abort(), out-of-bounds) is a plugin bug; get-task-phase must answer
 * a phase for any object, even an empty, partial or unknown one.
 */
#ifndef WEFT_PLUGIN_H
#define WEFT_PLUGIN_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define WEFT_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define WEFT_PRINTF(f, a)
#endif

/* ================================================================== */
/* JSON: a small reader (views into text, no allocation) and writer.  */
/* ================================================================== */

/* Deepest nesting weft_json_parse accepts (deeper documents are invalid). */
#define WEFT_JSON_MAX_DEPTH 128

typedef enum {
    WEFT_JSON_INVALID = 0, /* missing, or not valid JSON */
    WEFT_JSON_NULL,
    WEFT_JSON_FALSE,
    WEFT_JSON_TRUE,
    WEFT_JSON_NUMBER,
    WEFT_JSON_STRING,
    WEFT_JSON_ARRAY,
    WEFT_JSON_OBJECT,
} weft_json_type_t;

/* A view of one JSON value's text inside a larger document: ptr/len cover
 * exactly the value (e.g. `"abc"` with its quotes, or `{...}`). An invalid
 * or missing value has ptr == NULL. Views stay valid as long as the text
 * they point into (the context's and observed object's text lives for the
 * whole call). */
typedef struct {
    const char *ptr;
    size_t len;
} weft_json_t;

/* Validates a whole document and returns a view of its top-level value, or
 * an invalid view when the text is not exactly one JSON value. */
weft_json_t weft_json_parse(const char *text, size_t len);
/* The value's type (WEFT_JSON_INVALID for a missing value). */
weft_json_type_t weft_json_type(weft_json_t v);
/* Whether the value is present (any type but INVALID). */
bool weft_json_ok(weft_json_t v);

/* A member of an object (invalid view if `object` is not an object or has
 * no such key; the last of duplicate keys wins). */
weft_json_t weft_json_get(weft_json_t object, const char *key);
/* Follows a dotted path of object keys and array indices:
 * weft_json_path(pod, "status.containerStatuses.0.state"). */
weft_json_t weft_json_path(weft_json_t v, const char *path);
/* An array element, or an invalid view. */
weft_json_t weft_json_at(weft_json_t array, size_t index);
/* Members of an object or elements of an array; 0 for anything else. */
size_t weft_json_count(weft_json_t container);

/* The decoded text of a string value (escapes resolved, UTF-8), malloc'd
 * and NUL-terminated; NULL if v is not a string. *len (if given) gets the
 * length, which matters only for strings that contain "\u0000". */
char *weft_json_str(weft_json_t v, size_t *len);
/* weft_json_str(weft_json_path(v, path), NULL). */
char *weft_json_path_str(weft_json_t v, const char *path);
/* Whether v is a string equal to s. */
bool weft_json_str_eq(weft_json_t v, const char *s);
/* Reads a number / a boolean; false (and *out untouched) for other types. */
bool weft_json_number(weft_json_t v, double *out);
bool weft_json_bool(weft_json_t v, bool *out);

/* Iterates an object's members or an array's elements, in document order:
 *
 *     weft_json_iter_t it = weft_json_iter(obj);
 *     weft_json_t key, value;      // key is a JSON string view (quotes included)
 *     while (weft_json_next(&it, &key, &value)) { ... }
 */
typedef struct {
    const char *p, *end;
    bool object;
} weft_json_iter_t;
weft_json_iter_t weft_json_iter(weft_json_t container);
bool weft_json_next(weft_json_iter_t *it, weft_json_t *key, weft_json_t *value);

/* A growing text buffer for writing JSON (or any text). Start with
 * WEFT_BUF_INIT; weft_buf_finish hands over the NUL-terminated text
 * (NULL if memory ran out) and resets the buffer. */
typedef struct {
    char *ptr;
    size_t len, cap;
    bool failed;
} weft_buf_t;
#define WEFT_BUF_INIT {NULL, 0, 0, false}

void weft_buf_puts(weft_buf_t *b, const char *s);
void weft_buf_putn(weft_buf_t *b, const char *s, size_t n);
void weft_buf_printf(weft_buf_t *b, const char *fmt, ...) WEFT_PRINTF(2, 3);
void weft_buf_vprintf(weft_buf_t *b, const char *fmt, va_list ap);
/* Writes s as a quoted, escaped JSON string. */
void weft_buf_json_str(weft_buf_t *b, const char *s);
void weft_buf_json_strn(weft_buf_t *b, const char *s, size_t n);
/* Copies a JSON value's text as it is (`null` for an invalid view). */
void weft_buf_json(weft_buf_t *b, weft_json_t v);
char *weft_buf_finish(weft_buf_t *b);
void weft_buf_free(weft_buf_t *b);

/* Artifacts in a resource's pods: the annotation that tells the host where
 * the pod specs of an object that is not a Pod are (JSON Pointers, the
 * one that reports the outputs first), so that it moves the task's
 * artifacts in their pods as in a Pod task. Write the pair inside the
 * object's metadata.annotations, e.g.
 *   const char *specs[] = {"/spec/template/spec"};
 *   weft_buf_puts(&b, "\"annotations\":{");
 *   weft_buf_pod_specs(&b, specs, 1);
 *   weft_buf_puts(&b, "}");  */
#define WEFT_POD_SPECS_ANNOTATION "weft.dev/pod-specs"
/* Writes "weft.dev/pod-specs":"[\"<pointer>\",...]" (key and value). */
void weft_buf_pod_specs(weft_buf_t *b, const char *const *pointers, size_t n);

/* malloc'd copies / formatted strings. */
char *weft_strdup(const char *s);
char *weft_sprintf(const char *fmt, ...) WEFT_PRINTF(1, 2);
char *weft_vsprintf(const char *fmt, va_list ap);

/* ================================================================== */
/* The task plugin.                                                   */
/* ================================================================== */

/* One label the host puts on every resource of the task. */
typedef struct {
    const char *key;
    const char *value;
} weft_label_t;

/* Everything a task plugin knows about the task (WIT `task-context`).
 * Strings are NUL-terminated and live for the whole call. */
typedef struct {
    const char *workflow;      /* the owning Workflow's name */
    const char *namespace_;    /* its namespace; the host forces every resource into it */
    const char *node_id;       /* the node's id inside the workflow */
    uint32_t attempt;          /* 0 on the first attempt; retries increment it */
    const char *task_type;     /* the task type the node asked for */
    const char *resource_name; /* deterministic DNS-1123 name for this attempt's resource */
    const weft_label_t *labels;
    size_t labels_len;
    /* JSON objects, as text and as parsed views (invalid view if the host
     * ever sent something that is not JSON). */
    const char *config_text;        /* the node's task.config */
    const char *inputs_text;        /* the node's resolved inputs */
    const char *plugin_config_text; /* manifest `config` merged with the operator's overrides */
    weft_json_t config, inputs, plugin_config;
} weft_task_context_t;

/* Writes the context's labels as a JSON object {"k":"v",...}. */
void weft_buf_labels(weft_buf_t *b, const weft_task_context_t *ctx);
/* The value of one label, or NULL. */
const char *weft_label(const weft_task_context_t *ctx, const char *key);

/* Where a task stands (WIT `phase`; same order). */
typedef enum {
    WEFT_PHASE_NOT_READY,
    WEFT_PHASE_QUEUED,
    WEFT_PHASE_WAITING_FOR_RESOURCES,
    WEFT_PHASE_INITIALIZING,
    WEFT_PHASE_RUNNING,
    WEFT_PHASE_SUCCESS,
    WEFT_PHASE_RETRYABLE_FAILURE,
    WEFT_PHASE_PERMANENT_FAILURE,
} weft_phase_kind_t;

typedef struct {
    char *name; /* e.g. "Pod logs" */
    char *uri;  /* where to find them */
} weft_log_link_t;

/* A plugin error: the plugin refuses on purpose (WIT `plugin-error`).
 * message == NULL means "no error". */
typedef struct {
    char *message;
    bool retryable;
} weft_error_t;

/* What weft_build_resource returns: the object as JSON text, or an error.
 * Build it with weft_resource_json / weft_resource_error. */
typedef struct {
    char *json;
    weft_error_t error;
} weft_resource_t;

/* Takes over a malloc'd JSON text (e.g. from weft_buf_finish); NULL (out of
 * memory) becomes a retryable error. */
weft_resource_t weft_resource_json(char *json);
/* A printf-formatted error. A permanent one means the user must change the
 * task (bad config); a retryable one that a new attempt may succeed. */
weft_resource_t weft_resource_error(bool retryable, const char *fmt, ...) WEFT_PRINTF(2, 3);

/* What weft_get_task_phase returns (WIT `phase-info`), or an error. Make
 * it with a constructor, then adjust it with the weft_phase_set_* /
 * weft_phase_add_log_link functions:
 *
 *     weft_phase_t p = weft_phase_retryable("OOMKilled", "container %s exited with 137", name);
 *     weft_phase_add_log_link(&p, "Pod logs", uri);
 *     return p;
 */
typedef struct {
    weft_phase_kind_t phase;
    char *reason;  /* short machine-readable reason, or NULL */
    char *message; /* human-readable message, or NULL */
    char *outputs; /* JSON object text (success only), or NULL */
    weft_log_link_t *log_links;
    size_t log_links_len;
    weft_error_t error; /* set by weft_phase_error: the call returns plugin-error */
} weft_phase_t;

weft_phase_t weft_phase(weft_phase_kind_t phase);
weft_phase_t weft_phase_not_ready(const char *fmt, ...) WEFT_PRINTF(1, 2);
weft_phase_t weft_phase_queued(void);
weft_phase_t weft_phase_waiting_for_resources(const char *fmt, ...) WEFT_PRINTF(1, 2);
weft_phase_t weft_phase_initializing(void);
weft_phase_t weft_phase_running(void);
/* Success with outputs, a JSON object text (copied), or NULL for none. */
weft_phase_t weft_phase_success(const char *outputs_json);
/* Success taking over a malloc'd outputs text (e.g. from weft_buf_finish). */
weft_phase_t weft_phase_success_owned(char *outputs_json);
/* Failures a new attempt may fix / no retry will fix. */
weft_phase_t weft_phase_retryable(const char *reason, const char *fmt, ...) WEFT_PRINTF(2, 3);
weft_phase_t weft_phase_permanent(const char *reason, const char *fmt, ...) WEFT_PRINTF(2, 3);
/* A retryable failure that is the platform's fault, not the task's
 * (eviction, node loss): its reason is prefixed with "System:". */
weft_phase_t weft_phase_system(const char *reason, const char *fmt, ...) WEFT_PRINTF(2, 3);
/* The call fails with a plugin-error instead of answering a phase. Rarely
 * right: an odd object should get a phase (usually queued), not an error. */
weft_phase_t weft_phase_error(bool retryable, const char *fmt, ...) WEFT_PRINTF(2, 3);

void weft_phase_set_reason(weft_phase_t *p, const char *reason);
void weft_phase_set_message(weft_phase_t *p, const char *fmt, ...) WEFT_PRINTF(2, 3);
void weft_phase_set_outputs(weft_phase_t *p, const char *outputs_json);
void weft_phase_add_log_link(weft_phase_t *p, const char *name, const char *uri);

/* What the host does with the resource when the workflow is aborted. */
typedef enum {
    WEFT_ABORT_DELETE, /* delete it (the default) */
    WEFT_ABORT_LEAVE,  /* leave it in place */
} weft_abort_t;

typedef struct {
    weft_abort_t abort;
    bool delete_on_finish; /* delete the resource once the task succeeded or failed */
} weft_task_properties_t;

/* ---- Implement these --------------------------------------------- */

/* The Kubernetes object (JSON with apiVersion, kind, metadata, ...) that
 * runs the task. Must be deterministic for the same context: a re-run after
 * a crash must build the same object. */
weft_resource_t weft_build_resource(const weft_task_context_t *ctx);

/* Where the task stands, given the object as last observed in the cluster
 * (its parsed view: an invalid view if the text was not JSON). Must answer
 * a phase for any object, even an empty, partial or unknown one. */
weft_phase_t weft_get_task_phase(const weft_task_context_t *ctx, weft_json_t observed);

/* Optional: static facts asked once per load. The SDK's default (a weak
 * definition) deletes the resource on abort and keeps it after the task
 * finished. */
weft_task_properties_t weft_properties(void);

/* ================================================================== */
/* Host imports: logging, clocks, per-plugin state.                   */
/* ================================================================== */

typedef enum {
    WEFT_LOG_TRACE,
    WEFT_LOG_DEBUG,
    WEFT_LOG_INFO,
    WEFT_LOG_WARN,
    WEFT_LOG_ERROR,
} weft_log_level_t;

/* One printf-formatted line in the host's log, tagged with the plugin's name. */
void weft_log(weft_log_level_t level, const char *fmt, ...) WEFT_PRINTF(2, 3);
#define weft_log_trace(...) weft_log(WEFT_LOG_TRACE, __VA_ARGS__)
#define weft_log_debug(...) weft_log(WEFT_LOG_DEBUG, __VA_ARGS__)
#define weft_log_info(...) weft_log(WEFT_LOG_INFO, __VA_ARGS__)
#define weft_log_warn(...) weft_log(WEFT_LOG_WARN, __VA_ARGS__)
#define weft_log_error(...) weft_log(WEFT_LOG_ERROR, __VA_ARGS__)

/* Wall-clock milliseconds since the Unix epoch (no WASI clock needed). */
uint64_t weft_now_millis(void);
/* A monotonic clock in nanoseconds, for durations inside one call. */
uint64_t weft_monotonic_nanos(void);

/* The plugin's key/value store: instances are fresh for every call, so it
 * is the only memory that outlives one. Keys are private to the plugin. */
/* Reads a value: true and a malloc'd copy in *value / *len (free it), or
 * false when missing or expired. */
bool weft_state_get(const char *key, uint8_t **value, size_t *len); /* *value is NULL for an empty value */
/* Stores a value, expiring after ttl_millis (< 0: never). On failure (key
 * or value too large) returns false and, if err is given, a malloc'd
 * message in *err. */
bool weft_state_set(const char *key, const uint8_t *value, size_t len, int64_t ttl_millis, char **err);
/* Removes a value; removing a missing key is not an error. */
void weft_state_delete(const char *key);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_PLUGIN_H */
