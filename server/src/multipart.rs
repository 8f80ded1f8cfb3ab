//! The `multipart/form-data` bodies of uploads (RFC 7578): the parts with a
//! file name. The body is already bounded in size, so it is parsed in memory.

use hyper::StatusCode;

use crate::http::{ApiError, Result};

pub struct FilePart<'a> {
    pub filename: String,
    pub data: &'a [u8],
}

fn unprocessable(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, message)
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if from > haystack.len() {
        return None;
    }
    haystack[from..].windows(needle.len()).position(|w| w == needle).map(|p| p + from)
}

/// A parameter of a header value (`boundary=…`, `filename="…"`).
fn param(header: &str, key: &str) -> Option<String> {
    header.split(';').skip(1).find_map(|p| {
        let (k, v) = p.trim().split_once('=')?;
        k.trim().eq_ignore_ascii_case(key).then(|| v.trim().trim_matches('"').to_string())
    })
}

/// The file parts of a form whose field is `file` (LightRAG's name) or any
/// field with a file name.
pub fn files<'a>(content_type: Option<&str>, body: &'a [u8]) -> Result<Vec<FilePart<'a>>> {
    let ct = content_type.unwrap_or_default();
    if !ct.to_ascii_lowercase().starts_with("multipart/form-data") {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "an upload is multipart/form-data with a `file` field",
        ));
    }
    let boundary = param(ct, "boundary")
        .filter(|b| !b.is_empty() && b.len() <= 200)
        .ok_or_else(|| unprocessable("the multipart Content-Type has no boundary"))?;
    let delimiter = format!("--{boundary}").into_bytes();
    let mut at = find(body, &delimiter, 0).ok_or_else(|| unprocessable("the multipart body has no parts"))?;
    let mut out = Vec::new();
    loop {
        at += delimiter.len();
        if body[at..].starts_with(b"--") {
            return Ok(out);
        }
        let headers_start = at + 2;
        let headers_end = find(body, b"\r\n\r\n", headers_start)
            .ok_or_else(|| unprocessable("a multipart part has no header end"))?;
        let headers = String::from_utf8_lossy(&body[headers_start.min(headers_end)..headers_end]);
        let data_start = headers_end + 4;
        let mut closing = b"\r\n".to_vec();
        closing.extend_from_slice(&delimiter);
        let data_end =
            find(body, &closing, data_start).ok_or_else(|| unprocessable("the multipart body ends inside a part"))?;
        let disposition =
            headers.lines().find(|l| l.to_ascii_lowercase().starts_with("content-disposition:")).unwrap_or_default();
        if let Some(filename) = param(disposition, "filename") {
            out.push(FilePart { filename, data: &body[data_start..data_end] });
        }
        at = data_end + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_with_file_names() {
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhi\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\nContent-Type: text/plain\r\n\r\nline 1\r\nline 2\r\n--XyZ--\r\n";
        let parts = files(Some("multipart/form-data; boundary=XyZ"), body).unwrap();
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].filename, "a.txt");
        assert_eq!(parts[0].data, b"line 1\r\nline 2");
        assert!(files(Some("application/json"), body).is_err());
        assert!(files(Some("multipart/form-data"), body).is_err());
        assert!(files(
            Some("multipart/form-data; boundary=XyZ"),
            b"--XyZ\r\nContent-Disposition: form-data; filename=\"a\"\r\n\r\nno end"
        )
        .is_err());
        assert!(files(Some("multipart/form-data; boundary=Q"), b"garbage").is_err());
    }
}
