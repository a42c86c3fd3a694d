//! How an error from a library is shown in one line: its message and each
//! of its causes, `outer: inner: innermost` (a refused connection, a TLS
//! failure, a timeout say what happened only in their causes).

/// `error` and its causes, joined by `: `.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
