//! HTTP face of the push bus: `GET /push/events` (SSE) and `GET /push/state` (JSON).

use std::convert::Infallible;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::get;
use futures::Stream;
use futures::stream::{self, StreamExt};
use serde_json::{Value, json};

use super::{Delivery, Filter, PushBus, kinds};

/// The push routes, with their own state; merge into the server's router.
pub fn router(bus: Arc<PushBus>) -> Router {
    Router::new().route("/push/events", get(events)).route("/push/state", get(state)).with_state(bus)
}

fn sse_event(kind: &str, id: Option<u64>, data: &Value) -> Event {
    let event = Event::default().event(kind).data(data.to_string());
    match id {
        Some(id) => event.id(id.to_string()),
        None => event,
    }
}

/// `hello` first, then every matching event as it is published, until the bus is
/// closed (the server stopping).
pub fn event_stream(bus: Arc<PushBus>, filter: Filter) -> impl Stream<Item = Result<Event, Infallible>> + Send {
    // Subscribe before building hello so nothing published in between is lost.
    let subscription = bus.subscribe(filter.clone());
    let hello = bus.hello(&filter);
    let first = stream::once(async move { Ok(sse_event(kinds::HELLO, None, &hello)) });
    let rest = stream::unfold(subscription, |sub| async move {
        let event = match sub.next().await {
            Delivery::Event(e) => sse_event(&e.kind, Some(e.seq), &e.data),
            Delivery::Lagged { dropped } => sse_event(kinds::LAGGED, None, &json!({"dropped": dropped})),
        };
        Some((Ok(event), sub))
    });
    let closed = bus.closed();
    first.chain(rest).take_until(closed)
}

async fn events(
    State(bus): State<Arc<PushBus>>,
    Query(filter): Query<Filter>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let keep_alive = KeepAlive::new().interval(bus.config().keep_alive).text("keep-alive");
    Sse::new(event_stream(Arc::clone(&bus), filter)).keep_alive(keep_alive)
}

async fn state(State(bus): State<Arc<PushBus>>, Query(filter): Query<Filter>) -> Json<Value> {
    let mut body = bus.hello(&filter);
    body["ok"] = json!(true);
    Json(body)
}
