//! The buffer convention of vegas.h: (buf, capacity, size_t *needed), where a short buffer
//! gives BUFFER_TOO_SMALL, the size in *needed, and no other effect.
use std::ffi::CString;
use std::os::raw::c_char;
use std::path::Path;

use crate::error::{check, Error, Result, Status};
use vegas_sys as sys;

/// Runs a byte-filling call, once more with the size it asked for after BUFFER_TOO_SMALL.
pub(crate) fn read_bytes<F>(capacity: usize, mut call: F) -> Result<Vec<u8>>
where
    F: FnMut(*mut c_char, usize, *mut usize) -> sys::vegas_status,
{
    let mut buf = vec![0u8; capacity.max(1)];
    let mut n = 0usize;
    let mut status = call(buf.as_mut_ptr() as *mut c_char, capacity, &mut n);
    if status == sys::VEGAS_ERR_BUFFER_TOO_SMALL {
        buf = vec![0u8; n.max(1)];
        status = call(buf.as_mut_ptr() as *mut c_char, n, &mut n);
    }
    check(status)?;
    buf.truncate(n);
    Ok(buf)
}

/// As read_bytes, for text the library guarantees to be UTF-8.
pub(crate) fn read_string<F>(capacity: usize, call: F) -> Result<String>
where
    F: FnMut(*mut c_char, usize, *mut usize) -> sys::vegas_status,
{
    let bytes = read_bytes(capacity, call)?;
    Ok(String::from_utf8(bytes)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

/// As read_bytes, for calls filling an int32_t array.
pub(crate) fn read_ids<F>(capacity: usize, mut call: F) -> Result<Vec<i32>>
where
    F: FnMut(*mut i32, usize, *mut usize) -> sys::vegas_status,
{
    let mut buf = vec![0i32; capacity.max(1)];
    let mut n = 0usize;
    let mut status = call(buf.as_mut_ptr(), capacity, &mut n);
    if status == sys::VEGAS_ERR_BUFFER_TOO_SMALL {
        buf = vec![0i32; n.max(1)];
        status = call(buf.as_mut_ptr(), n, &mut n);
    }
    check(status)?;
    buf.truncate(n);
    Ok(buf)
}

/// A C string of `text`; an interior NUL is INVALID_ARGUMENT (the library never sees it).
pub(crate) fn c_string(text: &str, what: &str) -> Result<CString> {
    CString::new(text).map_err(|_| {
        Error::new(
            Status::InvalidArgument,
            format!("{} contains a NUL byte", what),
        )
    })
}

/// A C string of a path (its bytes on Unix, UTF-8 elsewhere).
pub(crate) fn c_path(path: &Path) -> Result<CString> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        CString::new(path.as_os_str().as_bytes()).map_err(|_| {
            Error::new(
                Status::InvalidArgument,
                format!("path {:?} contains a NUL byte", path),
            )
        })
    }
    #[cfg(not(unix))]
    {
        let text = path.to_str().ok_or_else(|| {
            Error::new(
                Status::InvalidArgument,
                format!("path {:?} is not UTF-8", path),
            )
        })?;
        c_string(text, "the path")
    }
}
