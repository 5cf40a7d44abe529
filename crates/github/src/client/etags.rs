//! Conditional GETs: the last `ETag` (with body and `Link` header) GitHub gave for each path,
//! sent back as `If-None-Match`, so that an unchanged answer comes back `304 Not Modified` —
//! which GitHub does not count against the rate limit — and is served from here.
//!
//! Bounded: past [`CAP`] paths, the oldest is forgotten (its next GET is unconditional).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use bytes::Bytes;
use http::HeaderValue;

/// How many paths are remembered per client.
pub const CAP: usize = 512;

#[derive(Debug, Clone)]
struct Entry {
    etag: HeaderValue,
    body: Bytes,
    link: Option<HeaderValue>,
}

/// What a cached answer holds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Cached {
    pub body: Bytes,
    pub link: Option<HeaderValue>,
}

#[derive(Debug, Default)]
pub(crate) struct Etags {
    inner: Mutex<(HashMap<String, Entry>, VecDeque<String>)>,
}

impl Etags {
    /// The `If-None-Match` value to send for `path`, if an answer is remembered.
    pub fn tag(&self, path: &str) -> Option<HeaderValue> {
        self.lock().0.get(path).map(|e| e.etag.clone())
    }

    /// The remembered answer for `path` (on `304`).
    pub fn recall(&self, path: &str) -> Option<Cached> {
        self.lock().0.get(path).map(|e| Cached {
            body: e.body.clone(),
            link: e.link.clone(),
        })
    }

    /// Remember a `200` answer that carried an `ETag`.
    pub fn remember(&self, path: &str, etag: HeaderValue, body: Bytes, link: Option<HeaderValue>) {
        let mut guard = self.lock();
        let (map, order) = &mut *guard;
        if map
            .insert(path.to_owned(), Entry { etag, body, link })
            .is_none()
        {
            order.push_back(path.to_owned());
        }
        while order.len() > CAP {
            if let Some(old) = order.pop_front() {
                map.remove(&old);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (HashMap<String, Entry>, VecDeque<String>)> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_by_path_and_forgets_the_oldest_past_the_cap() {
        let etags = Etags::default();
        assert_eq!(etags.tag("/a"), None);
        etags.remember(
            "/a",
            HeaderValue::from_static("W/\"1\""),
            Bytes::from("one"),
            None,
        );
        assert_eq!(etags.tag("/a").unwrap(), "W/\"1\"");
        etags.remember(
            "/a",
            HeaderValue::from_static("W/\"2\""),
            Bytes::from("two"),
            None,
        );
        assert_eq!(etags.recall("/a").unwrap().body, "two");
        for i in 0..CAP {
            etags.remember(
                &format!("/p{i}"),
                HeaderValue::from_static("x"),
                Bytes::new(),
                None,
            );
        }
        assert_eq!(etags.tag("/a"), None, "the oldest is forgotten");
        assert!(etags.tag(&format!("/p{}", CAP - 1)).is_some());
    }
}
