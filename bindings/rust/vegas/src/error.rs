//! `vegas_status` as a Rust enum, and the error every fallible call returns.
use std::ffi::CStr;
use std::fmt;

use vegas_sys as sys;

/// A non-OK status of libvegas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    InvalidArgument,
    StructSize,
    Io,
    Format,
    Unsupported,
    OutOfMemory,
    KvFull,
    TokenOutOfRange,
    BufferTooSmall,
    Cancelled,
    Backend,
    NotBuilt,
    NotFound,
    WrongState,
    Internal,
    /// A code this crate does not know (a newer library).
    Other(i32),
}

impl Status {
    /// The status of a raw code; `None` for `VEGAS_OK`.
    pub fn from_raw(code: i32) -> Option<Status> {
        Some(match code {
            sys::VEGAS_OK => return None,
            sys::VEGAS_ERR_INVALID_ARGUMENT => Status::InvalidArgument,
            sys::VEGAS_ERR_STRUCT_SIZE => Status::StructSize,
            sys::VEGAS_ERR_IO => Status::Io,
            sys::VEGAS_ERR_FORMAT => Status::Format,
            sys::VEGAS_ERR_UNSUPPORTED => Status::Unsupported,
            sys::VEGAS_ERR_OUT_OF_MEMORY => Status::OutOfMemory,
            sys::VEGAS_ERR_KV_FULL => Status::KvFull,
            sys::VEGAS_ERR_TOKEN_OUT_OF_RANGE => Status::TokenOutOfRange,
            sys::VEGAS_ERR_BUFFER_TOO_SMALL => Status::BufferTooSmall,
            sys::VEGAS_ERR_CANCELLED => Status::Cancelled,
            sys::VEGAS_ERR_BACKEND => Status::Backend,
            sys::VEGAS_ERR_NOT_BUILT => Status::NotBuilt,
            sys::VEGAS_ERR_NOT_FOUND => Status::NotFound,
            sys::VEGAS_ERR_WRONG_STATE => Status::WrongState,
            sys::VEGAS_ERR_INTERNAL => Status::Internal,
            other => Status::Other(other),
        })
    }

    /// The raw `vegas_status` code.
    pub fn raw(self) -> i32 {
        match self {
            Status::InvalidArgument => sys::VEGAS_ERR_INVALID_ARGUMENT,
            Status::StructSize => sys::VEGAS_ERR_STRUCT_SIZE,
            Status::Io => sys::VEGAS_ERR_IO,
            Status::Format => sys::VEGAS_ERR_FORMAT,
            Status::Unsupported => sys::VEGAS_ERR_UNSUPPORTED,
            Status::OutOfMemory => sys::VEGAS_ERR_OUT_OF_MEMORY,
            Status::KvFull => sys::VEGAS_ERR_KV_FULL,
            Status::TokenOutOfRange => sys::VEGAS_ERR_TOKEN_OUT_OF_RANGE,
            Status::BufferTooSmall => sys::VEGAS_ERR_BUFFER_TOO_SMALL,
            Status::Cancelled => sys::VEGAS_ERR_CANCELLED,
            Status::Backend => sys::VEGAS_ERR_BACKEND,
            Status::NotBuilt => sys::VEGAS_ERR_NOT_BUILT,
            Status::NotFound => sys::VEGAS_ERR_NOT_FOUND,
            Status::WrongState => sys::VEGAS_ERR_WRONG_STATE,
            Status::Internal => sys::VEGAS_ERR_INTERNAL,
            Status::Other(code) => code,
        }
    }

    /// The library's name of the status, e.g. "VEGAS_ERR_KV_FULL".
    pub fn name(self) -> &'static str {
        // SAFETY: vegas_status_name returns a static NUL-terminated string, never NULL.
        unsafe { CStr::from_ptr(sys::vegas_status_name(self.raw())) }
            .to_str()
            .unwrap_or("VEGAS_ERR_?")
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A failed call: the status and the library's message (`vegas_last_error`), or a message
/// of this crate for input it refused before calling the library (e.g. a NUL in a path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    status: Status,
    message: String,
}

impl Error {
    pub fn new(status: Status, message: impl Into<String>) -> Error {
        Error {
            status,
            message: message.into(),
        }
    }

    /// The error of a call that just returned `status`, with this thread's last message.
    pub(crate) fn last(status: Status) -> Error {
        // SAFETY: vegas_last_error never returns NULL; the string is copied at once, before
        // any other libvegas call on this thread can replace it.
        let message = unsafe { CStr::from_ptr(sys::vegas_last_error()) };
        Error::new(status, message.to_string_lossy().into_owned())
    }

    pub fn status(&self) -> Status {
        self.status
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{}", self.status)
        } else {
            write!(f, "{}: {}", self.status, self.message)
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// Ok for VEGAS_OK, else the error with the library's message.
pub(crate) fn check(code: sys::vegas_status) -> Result<()> {
    match Status::from_raw(code) {
        None => Ok(()),
        Some(status) => Err(Error::last(status)),
    }
}
