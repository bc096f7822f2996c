//! Native stand-in for `wasi:http` (not in a component): tests answer the
//! plugin's requests themselves.
//!
//! ```
//! use weft_plugin_sdk::http::{self, native, ErrorKind, HttpError, Response};
//!
//! native::set_responder(|req| match (req.method(), req.url()) {
//!     ("GET", "http://ray:8265/api/jobs/wf-0") => Ok(Response::new(200, r#"{"status":"RUNNING"}"#)),
//!     _ => Err(HttpError::new(ErrorKind::Denied, "HTTP request denied")),
//! });
//! let resp = http::Request::get("http://ray:8265/api/jobs/wf-0").send().unwrap();
//! assert_eq!(resp.status, 200);
//! let e = http::Request::get("http://example.com/").send().unwrap_err();
//! assert_eq!(e.to_string(), "GET http://example.com/: HTTP request denied");
//! native::clear_responder();
//! ```

use std::cell::RefCell;

use super::{ErrorKind, HttpError, Request, Response};

type Responder = Box<dyn FnMut(&Request) -> Result<Response, HttpError>>;

thread_local! {
    static RESPONDER: RefCell<Option<Responder>> = RefCell::new(None);
}

/// Answers this thread's requests with `f` from now on.
pub fn set_responder(f: impl FnMut(&Request) -> Result<Response, HttpError> + 'static) {
    RESPONDER.with(|r| *r.borrow_mut() = Some(Box::new(f)));
}

/// Removes this thread's responder: requests fail again.
pub fn clear_responder() {
    RESPONDER.with(|r| *r.borrow_mut() = None);
}

pub(super) fn respond(req: &Request) -> Result<Response, HttpError> {
    // Taken out while it runs, so a responder may itself send.
    let taken = RESPONDER.with(|r| r.borrow_mut().take());
    let Some(mut f) = taken else {
        return Err(HttpError::new(
            ErrorKind::Transport,
            "no wasi:http outside a component: install a responder with http::native::set_responder",
        ));
    };
    let out = f(req);
    RESPONDER.with(|r| {
        let mut slot = r.borrow_mut();
        if slot.is_none() {
            *slot = Some(f);
        }
    });
    out
}
