//! The HTTP client of an HTTP upstream: rmcp's, watched for the standalone stream's
//! answer, reading a `tools/call` answer as bytes first and fixing a refused request's id.

use super::*;

/// Where an HTTP upstream's standalone stream (the GET the MCP SDK opens once the
/// upstream has named a session) is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Standalone {
    /// No session named in answer to `initialize`: none will be opened.
    NotExpected,
    /// A session was named: the stream is being opened.
    Expected,
    /// The upstream answered the stream's request (opened, refused or failed).
    Settled,
}

/// The HTTP client of an HTTP upstream: rmcp's reqwest client, watched for when the
/// standalone stream has been answered ([`Standalone`]).
#[derive(Clone)]
pub(super) struct Watched {
    pub(super) http: reqwest::Client,
    /// Kept-alive connections for `tools/call` ([`Pooled`](crate::pooled::Pooled)),
    /// unless a proxy is set.
    pub(super) pooled: Option<crate::pooled::Pooled>,
    pub(super) standalone: Arc<tokio::sync::watch::Sender<Standalone>>,
}

/// How many redirects an upstream's HTTP client follows for one request.
pub(super) const MAX_REDIRECTS: usize = 10;

impl Watched {
    /// A session's client: the SDK-side client every session shares ([`sdk_client`]),
    /// and, for `tools/call`, kept-alive connections of the session's own that
    /// acknowledge at once ([`Pooled`](crate::pooled::Pooled)).
    pub(super) fn new() -> Result<Self, String> {
        Ok(Watched {
            http: sdk_client()?,
            pooled: crate::pooled::Pooled::unless_proxied(),
            standalone: Arc::new(tokio::sync::watch::channel(Standalone::NotExpected).0),
        })
    }

    /// Resolves when no standalone stream is being opened.
    pub(super) async fn standalone_settled(&self) {
        let mut seen = self.standalone.subscribe();
        let _ = seen.wait_for(|s| *s != Standalone::Expected).await;
    }

    /// The answer to the `initialize` handshake named the upstream's session.
    pub(super) fn session_named(&self) {
        self.standalone.send_if_modified(|s| {
            let first = *s == Standalone::NotExpected;
            if first {
                *s = Standalone::Expected;
            }
            first
        });
    }
}

/// The client requests other than pooled `tools/call`s go through, built as rmcp builds
/// its own — no idle pooled connections (on a kept-alive connection, an upstream that
/// leaves Nagle's algorithm on stalls 40 ms on the gateway's delayed acknowledgements),
/// redirects followed only when they keep the method and body (307, 308) on the same
/// origin. Built once and shared by every upstream session: building one loads the
/// system's root certificates (a few milliseconds of CPU, which a client per session paid
/// on every session's start), and it keeps nothing of a session (no idle connections, no
/// cookies).
fn sdk_client() -> Result<reqwest::Client, String> {
    static CLIENT: std::sync::OnceLock<Result<reqwest::Client, String>> =
        std::sync::OnceLock::new();
    CLIENT
        .get_or_init(|| {
            let redirects = reqwest::redirect::Policy::custom(|attempt| {
                let keeps_body = matches!(attempt.status().as_u16(), 307 | 308);
                let same_origin = attempt
                    .previous()
                    .first()
                    .is_some_and(|first| first.origin() == attempt.url().origin());
                if !keeps_body || !same_origin {
                    attempt.stop()
                } else if attempt.previous().len() > MAX_REDIRECTS {
                    attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
                } else {
                    attempt.follow()
                }
            });
            reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .redirect(redirects)
                .build()
                .map_err(|e| e.to_string())
        })
        .clone()
}

impl rmcp::transport::streamable_http_client::StreamableHttpClient for Watched {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: rmcp::model::ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: std::collections::HashMap<http::HeaderName, http::HeaderValue>,
    ) -> Result<
        rmcp::transport::streamable_http_client::StreamableHttpPostResponse,
        rmcp::transport::streamable_http_client::StreamableHttpError<Self::Error>,
    > {
        self.post_message_with_max_sse_event_size(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            usize::MAX,
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: rmcp::model::ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: std::collections::HashMap<http::HeaderName, http::HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<
        rmcp::transport::streamable_http_client::StreamableHttpPostResponse,
        rmcp::transport::streamable_http_client::StreamableHttpError<Self::Error>,
    > {
        use rmcp::transport::streamable_http_client::StreamableHttpPostResponse as Response;
        // An error the upstream answers a POST with is the answer to that POST's request,
        // even where it could not say so (`"id": null`, as a server that refuses the
        // request before reading it answers): otherwise the request would wait for an
        // answer that never comes, until its timeout.
        let asked = match &message {
            rmcp::model::ClientJsonRpcMessage::Request(request) => Some(request.id.clone()),
            _ => None,
        };
        let answering = |response: Response| match (response, &asked) {
            (Response::Json(rmcp::model::JsonRpcMessage::Error(mut error), session), Some(id))
                if error.id.is_none() =>
            {
                error.id = Some(id.clone());
                Response::Json(rmcp::model::JsonRpcMessage::Error(error), session)
            }
            (response, _) => response,
        };
        // The answer to a `tools/call` is read here, so that a result naming a task is
        // never taken for a complete one (`unfinished`).
        if let rmcp::model::ClientJsonRpcMessage::Request(request) = &message {
            if matches!(request.request, ClientRequest::CallToolRequest(_)) {
                return crate::unfinished::post_call(
                    &self.http,
                    self.pooled.as_ref(),
                    uri,
                    message,
                    session_id,
                    auth_header,
                    custom_headers,
                )
                .await
                .map(answering);
            }
        }
        // The MCP SDK opens the standalone stream for a session named in answer to the
        // `initialize` handshake (never for a revision without one).
        let initialize = matches!(
            &message,
            rmcp::model::ClientJsonRpcMessage::Request(request)
                if matches!(request.request, ClientRequest::InitializeRequest(_))
        );
        let response = self
            .http
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await?;
        if let (true, Response::Json(_, Some(_)) | Response::Sse(_, Some(_))) =
            (initialize, &response)
        {
            self.session_named();
        }
        Ok(answering(response))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: std::collections::HashMap<http::HeaderName, http::HeaderValue>,
    ) -> Result<(), rmcp::transport::streamable_http_client::StreamableHttpError<Self::Error>> {
        self.http
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: std::collections::HashMap<http::HeaderName, http::HeaderValue>,
    ) -> Result<
        futures::stream::BoxStream<
            'static,
            Result<sse_stream::Sse, rmcp::transport::streamable_http_client::SseError>,
        >,
        rmcp::transport::streamable_http_client::StreamableHttpError<Self::Error>,
    > {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            usize::MAX,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: std::collections::HashMap<http::HeaderName, http::HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<
        futures::stream::BoxStream<
            'static,
            Result<sse_stream::Sse, rmcp::transport::streamable_http_client::SseError>,
        >,
        rmcp::transport::streamable_http_client::StreamableHttpError<Self::Error>,
    > {
        // The standalone stream: a session's first GET (a resumed one names its last
        // event).
        let standalone = session_id.is_some() && last_event_id.is_none();
        let stream = self
            .http
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        if standalone {
            self.standalone.send_replace(Standalone::Settled);
        }
        // A resumed stream may carry the answer to a `tools/call`.
        stream.map(crate::unfinished::marked_events)
    }
}
