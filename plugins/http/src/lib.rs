//! One HTTP request as a task: Argo Workflows' HTTP template as a web-API
//! task plugin (`weft:plugin@0.2.0`, `webapi-task-plugin`). The request is
//! made once per attempt; CEL over the answer says whether it succeeded
//! and reads the task's outputs from it.
//!
//! # Task config
//!
//! | field              | type                   | default                                          |
//! |--------------------|------------------------|--------------------------------------------------|
//! | `method`           | string                 | `GET` (upper-cased)                              |
//! | `url`              | string, required       |                                                  |
//! | `headers`          | map of strings         |                                                  |
//! | `body`             | string, or any JSON    | none; a string is sent as it is, anything else as JSON (`content-type: application/json` unless `headers` set one) |
//! | `successCondition` | CEL                    | `response.status >= 200 && response.status < 300` |
//! | `outputs`          | map of name -> CEL     | none                                             |
//!
//! ```yaml
//! - id: order
//!   dependsOn: [quote]
//!   inputs: {price: "${nodes.quote.outputs.price}"}
//!   task:
//!     type: http
//!     config:
//!       method: POST
//!       url: https://shop.example.com/orders?price=${inputs.price}
//!       headers: {Accept: application/json}
//!       body: {item: widget, price: "${inputs.price}"}
//!       successCondition: response.status == 201 && response.json.state == 'accepted'
//!       outputs: {id: response.json.id, total: response.json.total}
//! ```
//!
//! Any other field, or one of the wrong type, fails the task for good with
//! an error naming it.
//!
//! # Inputs in the request
//!
//! The host resolves `${...}` in a node's `inputs` (from the workflow's
//! inputs and the outputs of the nodes it depends on), not in its task
//! config. So the plugin substitutes `${inputs.<name>}` in `method`, `url`,
//! header values and `body`, from the node's resolved inputs, as the
//! k8s-resource plugin does: a string that is exactly one placeholder
//! takes the input's value with its type (in a JSON body, `"${inputs.n}"`
//! is the number), inside a longer string the input is text (strings as
//! they are, anything else as JSON). An input the node does not have is a
//! permanent error naming the field; any other `${...}` is left as it is.
//! Inputs are not URL-encoded: pass URL-safe values in a URL.
//!
//! # CEL
//!
//! `successCondition` and `outputs` are CEL (the `cel` crate, as the
//! host's `when`) over:
//!
//! | variable           | type                                                      |
//! |--------------------|-----------------------------------------------------------|
//! | `response.status`  | int                                                       |
//! | `response.headers` | map of lower-case name -> string (repeats joined by `, `) |
//! | `response.body`    | string                                                    |
//! | `response.json`    | the parsed body when it is JSON, else `null`              |
//! | `inputs`           | the node's inputs                                         |
//!
//! Whole JSON numbers are `int`s, others `double`s. Every expression is
//! compiled before the request is sent: a syntax error is a permanent
//! error naming its field (`outputs.total: "..." is not valid CEL: ...`)
//! and nothing is sent.
//!
//! # create, get, delete
//!
//! `create` sends the request **once** (an HTTP call is not idempotent in
//! general) with the header `Idempotency-Key: <key>`, the host's key of
//! the attempt (`<workflow>-<node>-<attempt>`), unless `headers` set one:
//! a server that supports the header answers a create repeated after a
//! controller crash without acting twice. It judges the answer right away
//! and returns the verdict as the meta (`{request, status, verdict}`, at
//! most 4 KiB), which `get` turns into the phase without any request:
//!
//! | the answer                                         | phase             | reason                   |
//! |----------------------------------------------------|-------------------|--------------------------|
//! | `successCondition` true, outputs evaluate          | success           |                          |
//! | `successCondition` false, or fails to evaluate     | retryable-failure | `SuccessConditionFailed` |
//! | `successCondition` gives a non-boolean             | permanent-failure | `InvalidCondition`       |
//! | an output fails to evaluate                        | permanent-failure | `InvalidOutputs`         |
//! | the outputs are over 4 KiB as JSON                 | permanent-failure | `OutputsTooLarge`        |
//!
//! A failure's message names the request, the status and the condition
//! (`POST http://svc/orders answered 503: successCondition "..." is false;
//! the body: ...`). `SuccessConditionFailed` is retryable so that a node's
//! `retries` apply (a new attempt sends a new request, with its own key);
//! without `retries` the node fails. No answer at all is the `http`
//! client's error: retryable for transport failures, permanent for a URL
//! the egress allow-list denies or an answer over `egress.maxResponse`.
//! `delete` has nothing to stop.

pub mod config;
pub mod verdict;

use serde_json::{Map, Value};
use weft_plugin_sdk::http::Request;
use weft_plugin_sdk::{log, PhaseInfo, PluginError, TaskContext, WebApiPlugin};

use config::Body;
use verdict::Meta;

/// The plugin.
pub struct Http;

/// The header that carries the attempt's idempotency key.
pub const IDEMPOTENCY_KEY: &str = "Idempotency-Key";

impl WebApiPlugin for Http {
    fn create(ctx: TaskContext, idempotency_key: &str) -> Result<String, PluginError> {
        let config = config::parse(&ctx.config)?;
        let exprs = config.compile()?;
        let inputs = match &ctx.inputs {
            Value::Object(m) => m.clone(),
            _ => Map::new(),
        };
        let resolved = config.resolve(&inputs)?;
        let request = format!("{} {}", resolved.method, resolved.url);
        let mut req = Request::new(resolved.method, resolved.url);
        for (name, value) in &resolved.headers {
            req = req.with_header(name, value);
        }
        if req.header(IDEMPOTENCY_KEY).is_none() {
            req = req.with_header(IDEMPOTENCY_KEY, idempotency_key);
        }
        req = match resolved.body {
            None => req,
            Some(Body::Text(s)) => req.with_body(s),
            Some(Body::Json(v)) => req.with_json(&v),
        };
        let resp = req.send()?;
        let meta = exprs.judge(request, &resp, &inputs);
        log::info(&format!("{} answered {}", meta.request, meta.status));
        Ok(meta.to_json())
    }

    fn get(_ctx: TaskContext, meta: &str) -> Result<PhaseInfo, PluginError> {
        Ok(Meta::parse(meta)?.phase())
    }

    fn delete(_ctx: TaskContext, _meta: &str) -> Result<(), PluginError> {
        // The request was made and answered in create: nothing runs.
        Ok(())
    }
}

weft_plugin_sdk::export_webapi_plugin!(Http);

#[cfg(test)]
mod tests;
