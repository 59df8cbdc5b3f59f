//! Reading template and event files: every way a file can be wrong is a clear message,
//! never a panic.

use std::fmt;
use std::io::Read;
use std::path::Path;

/// The largest file read (templates are a few KB; this guards against reading a 50 MB
/// file by mistake).
pub const MAX_FILE_BYTES: u64 = orch_codegen::limits::MAX_TEMPLATE_BYTES as u64;

/// A file that could not be used, with the reason.
#[derive(Debug)]
pub struct InputError {
    /// The path as given.
    pub path: String,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.reason)
    }
}

fn err(path: &str, reason: impl Into<String>) -> InputError {
    InputError {
        path: path.to_owned(),
        reason: reason.into(),
    }
}

/// The metadata of a file that must exist and not be a directory (`what` names what
/// it should be, for the message).
fn metadata(path: &str, what: &str) -> Result<std::fs::Metadata, InputError> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => err(path, "no such file"),
        std::io::ErrorKind::PermissionDenied => err(path, "permission denied"),
        _ => err(path, e.to_string()),
    })?;
    if meta.is_dir() {
        return Err(err(path, format!("is a directory, not {what}")));
    }
    Ok(meta)
}

/// Reads a text file: it must exist, be a file, be at most [`MAX_FILE_BYTES`], contain
/// no NUL byte and be UTF-8.
pub fn read_text(path: &str) -> Result<String, InputError> {
    let p = Path::new(path);
    let meta = metadata(path, "a template file")?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(err(
            path,
            format!(
                "the file is {:.1} MB; templates are limited to {} MB",
                meta.len() as f64 / 1e6,
                MAX_FILE_BYTES / (1024 * 1024)
            ),
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    std::fs::File::open(p)
        .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| err(path, e.to_string()))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(err(
            path,
            format!(
                "the file is larger than {} MB",
                MAX_FILE_BYTES / (1024 * 1024)
            ),
        ));
    }
    if let Some(at) = bytes.iter().position(|b| *b == 0) {
        return Err(err(
            path,
            format!("a binary file (NUL byte at offset {at}), not a JSON template"),
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let text = String::from_utf8_lossy(&e.as_bytes()[..at]);
        let line = text.matches('\n').count() + 1;
        err(
            path,
            format!("not UTF-8 text (invalid byte at offset {at}, line {line})"),
        )
    })
}

/// Opens a file to read as a stream (an events file): it must exist and not be a
/// directory; its lines are checked as they are read.
pub fn open_text(path: &str) -> Result<std::fs::File, InputError> {
    metadata(path, "an events file")?;
    std::fs::File::open(path).map_err(|e| err(path, e.to_string()))
}
