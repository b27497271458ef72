//! The one error type of the crate.

use std::path::PathBuf;

/// Everything that can go wrong in wginfer. Library code returns this instead
/// of panicking on bad files, bad arguments or device failures.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O error, with the path that caused it when there is one.
    #[error("{}: {source}", path.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "i/o".into()))]
    Io {
        /// The file involved, if any.
        path: Option<PathBuf>,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A GGUF file is malformed; `offset` is the byte position where reading failed.
    #[error("invalid GGUF at byte {offset}: {msg}")]
    Gguf {
        /// Byte offset in the file.
        offset: u64,
        /// What is wrong.
        msg: String,
    },
    /// A tensor type that wginfer cannot compute with.
    #[error("unsupported type: {0}")]
    UnsupportedType(String),
    /// Shapes, strides or dtypes that do not fit the operation.
    #[error("shape error: {0}")]
    Shape(String),
    /// An argument outside its allowed range.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// An allocation that the backend could not satisfy.
    #[error("out of memory: {0}")]
    OutOfMemory(String),
    /// A backend could not run an operation or a graph.
    #[error("backend {backend}: {msg}")]
    Backend {
        /// Backend name.
        backend: String,
        /// What failed.
        msg: String,
    },
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A shape error from anything printable.
    pub fn shape(msg: impl Into<String>) -> Self {
        Error::Shape(msg.into())
    }

    /// An invalid-argument error from anything printable.
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidArgument(msg.into())
    }

    /// An I/O error tied to a path.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: Some(path.into()),
            source,
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(source: std::io::Error) -> Self {
        Error::Io { path: None, source }
    }
}
