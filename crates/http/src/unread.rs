//! A request answered before its body was read to the end — a refusal sent at once (401, 403,
//! 413, 415), whatever the route — leaves unread bytes on an HTTP/1.1 connection, which hyper
//! then closes. Closing is right (reading an unknown body to reuse the connection is work done
//! for a caller who was refused), but it must be said: without `Connection: close` a client's
//! next request on that connection meets a closed socket. This layer watches the body and says
//! so on such answers. hyper's server sees the header and closes after the answer.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Body as HttpBody, Frame, SizeHint};

/// The middleware: `Connection: close` on an answer whose request body was not read to its end.
pub(crate) async fn say_close_when_unread(req: Request, next: Next) -> Response {
    if req.body().is_end_stream() {
        return next.run(req).await;
    }
    let read = Arc::new(AtomicBool::new(false));
    let req = req.map(|body| {
        Body::new(Watched {
            inner: body,
            read: read.clone(),
        })
    });
    let mut response = next.run(req).await;
    if !read.load(Ordering::Acquire) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// A body that notes when it has been read to its end.
struct Watched {
    inner: Body,
    read: Arc<AtomicBool>,
}

impl HttpBody for Watched {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || self.inner.is_end_stream() {
            self.read.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
