//! A TCP relay between a link and its edge that a test can cut, to lose a
//! socket at a chosen moment without touching either process. Included with
//! `#[path]` by the link tests that need it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

/// A TCP relay between the link and the edge that the test can cut (every open
/// stream dropped, new ones refused) and restore.
pub struct CutProxy {
    pub url: String,
    open: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<AbortHandle>>>,
}

impl CutProxy {
    pub async fn start(upstream: SocketAddr) -> CutProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let open = Arc::new(AtomicBool::new(true));
        let streams: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let (is_open, all) = (Arc::clone(&open), Arc::clone(&streams));
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if !is_open.load(Ordering::SeqCst) {
                    continue; // dropped: the link sees its connection refused
                }
                let relay = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                all.lock().unwrap().push(relay.abort_handle());
            }
        });
        CutProxy { url, open, streams }
    }

    pub fn cut(&self) {
        self.open.store(false, Ordering::SeqCst);
        for relay in self.streams.lock().unwrap().drain(..) {
            relay.abort();
        }
    }

    pub fn restore(&self) {
        self.open.store(true, Ordering::SeqCst);
    }
}
