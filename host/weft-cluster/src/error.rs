//! Errors that stop the dev cluster from starting or serving. Errors a client
//! caused are not here: they become Kubernetes `Status` bodies (see
//! [`crate::status`]).

use std::path::PathBuf;

/// Why the dev cluster could not start, persist or stop.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or directory under the data directory could not be used.
    #[error("I/O error on {0}: {1}")]
    Io(PathBuf, #[source] std::io::Error),
    /// The embedded database failed; the message comes from redb.
    #[error("storage error: {0}")]
    Storage(String),
    /// The listening socket could not be bound.
    #[error("cannot listen on {0}: {1}")]
    Bind(std::net::SocketAddr, #[source] std::io::Error),
    /// A configuration value could not be understood (such as an unknown
    /// authorization mode).
    #[error("invalid configuration: {0}")]
    Config(String),
}

/// Result with the dev cluster's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
