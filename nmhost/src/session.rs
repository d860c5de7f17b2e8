//! One Native Messaging connection: read frames until end of input, answer each call as it
//! completes.
//!
//! The same loop serves both of Chrome's modes. `connectNative` keeps stdin open and sends many
//! calls; `sendNativeMessage` sends one and reads the first reply. Rule: the host handles every
//! message as it arrives and keeps reading; it stops reading at end of input or after a message
//! with `"oneshot": true`, then lets the calls in flight finish (push streams are stopped, as no
//! one will read them), writes their frames and exits. So a one-shot caller may either close
//! stdin or mark its message, and gets exactly its answer.

use crate::allow::{self, RouteKind};
use crate::chunking::{encode_json, failure_frame, response_frames, stream_chunk_frames};
use crate::framing::{read_frame, write_encoded, ReadOutcome, MAX_INBOUND_FRAME};
use crate::messages::{ErrorCode, HostError, Inbound, InboundKind, MessageId, Outbound, RequestMsg, StreamMsg};
use crate::outbox::{CallKey, CallKind, CancelOutcome, Outbox};
use crate::runtime_client::{ForwardRequest, RuntimeClient};
use bytes::Bytes;
use http_body_util::BodyExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinSet;

/// How long `identity` waits for the runtime's `/health`.
pub const IDENTITY_HEALTH_TIMEOUT: Duration = Duration::from_secs(2);

pub struct HostContext {
    pub client: RuntimeClient,
    pub extension_origin: String,
}

/// Why a session ended.
#[derive(Debug, PartialEq, Eq)]
pub enum SessionEnd {
    InputClosed,
    OneShotDone,
    /// The input ended inside a frame; reported with `invalid_native_message`.
    Truncated,
    /// A length prefix too large to skip; reported with `native_message_too_large`.
    Desync,
    /// Stdout is gone (the browser closed the port).
    OutputClosed,
}

pub async fn run_session<R, W>(mut input: R, output: W, ctx: Arc<HostContext>) -> SessionEnd
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (outbox, mut rx) = Outbox::new();
    let mut writer = tokio::spawn(async move {
        let mut output = output;
        while let Some(frame) = rx.recv().await {
            if let Err(e) = write_encoded(&mut output, &frame).await {
                tracing::info!(error = %e, "stdout closed; stopping");
                return;
            }
        }
    });
    let mut tasks = JoinSet::new();

    let end = loop {
        // Reap finished tasks so the set does not grow over a long-lived port.
        while tasks.try_join_next().is_some() {}
        let outcome = tokio::select! {
            outcome = read_frame(&mut input) => outcome,
            _ = &mut writer => break SessionEnd::OutputClosed,
        };
        let payload = match outcome {
            Ok(ReadOutcome::Frame(payload)) => payload,
            Ok(ReadOutcome::Eof) => break SessionEnd::InputClosed,
            Ok(ReadOutcome::TooLarge { len }) => {
                let e = HostError::new(
                    ErrorCode::NativeMessageTooLarge,
                    format!("a {len}-byte message exceeds the {MAX_INBOUND_FRAME}-byte limit; it was skipped"),
                );
                outbox.send_unattached(failure_frame("error", None, &e)).await;
                continue;
            }
            Ok(ReadOutcome::Truncated { expected, got }) => {
                let e = HostError::new(
                    ErrorCode::InvalidNativeMessage,
                    format!("input ended inside a frame ({got} of {expected} bytes)"),
                );
                outbox.send_unattached(failure_frame("error", None, &e)).await;
                break SessionEnd::Truncated;
            }
            Ok(ReadOutcome::Desync { len }) => {
                let e = HostError::new(
                    ErrorCode::NativeMessageTooLarge,
                    format!("a length prefix of {len} bytes is not a plausible message; closing"),
                );
                outbox.send_unattached(failure_frame("error", None, &e)).await;
                break SessionEnd::Desync;
            }
            Err(e) => {
                let e = HostError::new(ErrorCode::InvalidNativeMessage, format!("reading stdin failed: {e}"));
                outbox.send_unattached(failure_frame("error", None, &e)).await;
                break SessionEnd::Truncated;
            }
        };
        let oneshot = match crate::messages::parse_inbound(&payload) {
            Ok(message) => {
                let oneshot = message.oneshot;
                dispatch(message, &outbox, &ctx, &mut tasks).await;
                oneshot
            }
            Err(rejected) => {
                tracing::debug!(error = %rejected.error, "refused a message");
                outbox.send_unattached(failure_frame("error", rejected.id.as_ref(), &rejected.error)).await;
                rejected.oneshot
            }
        };
        if oneshot {
            break SessionEnd::OneShotDone;
        }
    };

    if end != SessionEnd::OutputClosed {
        outbox.abort_all(Some(CallKind::Stream));
        while tasks.join_next().await.is_some() {}
        drop(outbox);
        let _ = writer.await;
    } else {
        outbox.abort_all(None);
    }
    end
}

async fn dispatch(message: Inbound, outbox: &Outbox, ctx: &Arc<HostContext>, tasks: &mut JoinSet<()>) {
    let id = message.id;
    match message.kind {
        InboundKind::Cancel => {
            let id = id.expect("parse_inbound requires an id on cancel");
            let frame = match outbox.cancel(&id) {
                CancelOutcome::Cancelled => encode_json(&Outbound::Cancelled { id: &id })
                    .unwrap_or_else(|e| failure_frame("error", Some(&id), &e)),
                CancelOutcome::NotLive => failure_frame(
                    "error",
                    Some(&id),
                    &HostError::new(ErrorCode::UnknownRequestId, "nothing with this id is in flight"),
                ),
            };
            outbox.send_unattached(frame).await;
        }
        InboundKind::Request(request) => {
            let prepared = prepare_request(request);
            spawn_call(CallKind::Request, id, "response", prepared, outbox, tasks, {
                let ctx = ctx.clone();
                move |outbox, key, id, (forward, timeout)| async move {
                    run_request(&ctx, &outbox, key, id.as_ref(), forward, timeout).await
                }
            })
            .await;
        }
        InboundKind::Stream(stream) => {
            let prepared = prepare_stream(stream);
            spawn_call(CallKind::Stream, id, "stream_error", prepared, outbox, tasks, {
                let ctx = ctx.clone();
                move |outbox, key, id, (pq, timeout)| async move {
                    run_stream(&ctx, &outbox, key, id.as_ref(), pq, timeout).await
                }
            })
            .await;
        }
        InboundKind::Identity => {
            spawn_call(CallKind::Identity, id, "error", Ok(()), outbox, tasks, {
                let ctx = ctx.clone();
                move |outbox, key, id, ()| async move { run_identity(&ctx, &outbox, key, id.as_ref()).await }
            })
            .await;
        }
    }
}

/// Registers the call, or reports why it cannot run, then starts its task.
async fn spawn_call<P, F, Fut>(
    kind: CallKind,
    id: Option<MessageId>,
    failure_kind: &'static str,
    prepared: Result<P, HostError>,
    outbox: &Outbox,
    tasks: &mut JoinSet<()>,
    run: F,
) where
    F: FnOnce(Outbox, CallKey, Option<MessageId>, P) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let registered = prepared.and_then(|p| outbox.register(kind, id.as_ref()).map(|key| (key, p)));
    match registered {
        Ok((key, prepared)) => {
            let abort = tasks.spawn(run(outbox.clone(), key, id, prepared));
            outbox.attach(key, abort);
        }
        Err(e) => {
            outbox.send_unattached(failure_frame(failure_kind, id.as_ref(), &e)).await;
        }
    }
}

fn prepare_request(request: RequestMsg) -> Result<(ForwardRequest, Duration), HostError> {
    allow::check_base_url(request.base_url.as_deref())?;
    let (path_and_query, route) = allow::check_path(&request.path, RouteKind::Request)?;
    let method = allow::check_method(&request.method, route)?;
    if request.body.len() > allow::MAX_REQUEST_BODY {
        return Err(HostError::new(
            ErrorCode::NativeRequestTooLarge,
            format!("request body exceeds {} bytes", allow::MAX_REQUEST_BODY),
        ));
    }
    let headers = allow::forwarded_headers(&request.headers)?;
    let forward = ForwardRequest { method, path_and_query, headers, body: Bytes::from(request.body) };
    Ok((forward, allow::clamp_timeout(request.timeout_ms)))
}

fn prepare_stream(stream: StreamMsg) -> Result<(http::uri::PathAndQuery, Duration), HostError> {
    allow::check_base_url(stream.base_url.as_deref())?;
    let (pq, _route) = allow::check_path(&stream.path, RouteKind::Stream)?;
    Ok((pq, allow::clamp_timeout(stream.timeout_ms)))
}

async fn send_all(outbox: &Outbox, key: CallKey, frames: Vec<Vec<u8>>) {
    let count = frames.len();
    for (i, frame) in frames.into_iter().enumerate() {
        if !outbox.send(key, frame, i + 1 == count).await {
            return;
        }
    }
}

async fn run_request(
    ctx: &HostContext,
    outbox: &Outbox,
    key: CallKey,
    id: Option<&MessageId>,
    forward: ForwardRequest,
    timeout: Duration,
) {
    let frames = match ctx.client.send(forward, timeout).await {
        Ok(response) => response_frames(id, &response),
        Err(e) => vec![failure_frame("response", id, &e)],
    };
    send_all(outbox, key, frames).await;
}

async fn run_stream(
    ctx: &HostContext,
    outbox: &Outbox,
    key: CallKey,
    id: Option<&MessageId>,
    pq: http::uri::PathAndQuery,
    timeout: Duration,
) {
    let mut open = match ctx.client.open_stream(&pq, timeout).await {
        Ok(open) => open,
        Err(e) => {
            outbox.send(key, failure_frame("stream_error", id, &e), true).await;
            return;
        }
    };
    let opened = encode_json(&Outbound::StreamOpen { id, status: open.status, transport: "ipc" })
        .expect("a stream_open frame is small");
    if !outbox.send(key, opened, false).await {
        return;
    }
    if open.status >= 400 {
        // An error answer is not an event stream: read it away (bounded) and end the stream.
        let drain = http_body_util::Limited::new(open.body, allow::MAX_RESPONSE_BODY).collect();
        let _ = tokio::time::timeout(timeout, drain).await;
        let end = encode_json(&Outbound::StreamEnd { id }).expect("a stream_end frame is small");
        outbox.send(key, end, true).await;
        return;
    }
    loop {
        match open.body.frame().await {
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else { continue };
                for chunk in stream_chunk_frames(id, &data) {
                    if !outbox.send(key, chunk, false).await {
                        return;
                    }
                }
            }
            Some(Err(e)) => {
                let e = HostError::new(ErrorCode::NativeStreamFailed, format!("the push stream broke: {e}"));
                outbox.send(key, failure_frame("stream_error", id, &e), true).await;
                return;
            }
            None => {
                let end = encode_json(&Outbound::StreamEnd { id }).expect("a stream_end frame is small");
                outbox.send(key, end, true).await;
                drop(open.connection);
                return;
            }
        }
    }
}

async fn run_identity(ctx: &HostContext, outbox: &Outbox, key: CallKey, id: Option<&MessageId>) {
    let available = ctx.client.is_healthy(IDENTITY_HEALTH_TIMEOUT).await;
    let socket = ctx.client.socket().display().to_string();
    let frame = encode_json(&Outbound::Identity {
        id,
        ok: true,
        active: true,
        transport: "native",
        version: env!("CARGO_PKG_VERSION"),
        extension_origin: &ctx.extension_origin,
        runtime_socket: &socket,
        runtime_available: available,
    })
    .unwrap_or_else(|e| failure_frame("error", id, &e));
    outbox.send(key, frame, true).await;
}
