//! The harness of the edge's negative corpora (`edge_negative`,
//! `edge_devices_negative`, `edge_connectors_negative`): each case drives a fresh
//! in-process edge into one failure and names the exact HTTP status and error code
//! it must end in. Every case runs, a panic or a hang counting as that case's
//! failure, and the failures are reported together so one broken case does not
//! hide the others.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use crate::edge_support::InProc;

/// What a case ended in: the HTTP status and the error code.
pub type Outcome = (u16, String);

pub struct Case {
    pub name: &'static str,
    pub status: u16,
    pub code: &'static str,
    pub run: fn(Arc<InProc>) -> BoxFuture<'static, Outcome>,
}

/// `case!(name, status, code, |edge| { … })`: a case whose body runs on a fresh edge.
macro_rules! case {
    ($name:expr, $status:expr, $code:expr, |$e:ident| $body:block) => {
        $crate::corpus::Case {
            name: $name,
            status: $status,
            code: $code,
            run: |$e: std::sync::Arc<$crate::edge_support::InProc>| Box::pin(async move $body),
        }
    };
}
pub(crate) use case;

/// Longest a single case may take before it counts as hung.
const CASE_DEADLINE: Duration = Duration::from_secs(60);

/// Runs every case on its own fresh edge and fails listing each case that ended
/// in anything but its expected status and code.
pub async fn run_all(what: &str, cases: Vec<Case>) {
    let total = cases.len();
    let mut failures = Vec::new();
    for c in cases {
        let edge = Arc::new(InProc::start().await);
        let run = tokio::spawn((c.run)(edge));
        match tokio::time::timeout(CASE_DEADLINE, run).await {
            Ok(Ok((status, code))) if (status, code.as_str()) == (c.status, c.code) => {}
            Ok(Ok((status, code))) => failures.push(format!("{}: expected {} {:?}, got {} {:?}", c.name, c.status, c.code, status, code)),
            Ok(Err(panic)) => failures.push(format!("{}: panicked: {panic}", c.name)),
            Err(_) => failures.push(format!("{}: timed out after {CASE_DEADLINE:?}", c.name)),
        }
    }
    println!("{total} {what} cases run, {} failed", failures.len());
    assert!(failures.is_empty(), "{} of {total} {what} cases failed:\n{}", failures.len(), failures.join("\n"));
}
