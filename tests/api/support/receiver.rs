//! A webhook receiver on loopback: a real HTTP server that records every request it gets and
//! answers from a script (fail this many times, hang, then 200), and can go down and come back
//! on the same port.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{KeyInit, Mac};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// How the receiver answers one request.
#[derive(Debug, Clone, Copy)]
pub enum Answer {
    Status(u16),
    /// Never answers (until the receiver stops).
    Hang,
}

/// One request as received.
#[derive(Debug, Clone)]
pub struct Received {
    pub id: String,
    pub timestamp: String,
    pub signature: String,
    pub body: Vec<u8>,
}

impl Received {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    /// Whether the signature is the Standard Webhooks one under `secret` (`whsec_…`),
    /// recomputed here from the specification, not with docket's code.
    pub fn signed_by(&self, secret: &str) -> bool {
        let key = STANDARD
            .decode(secret.strip_prefix("whsec_").expect("a whsec_ secret"))
            .expect("base64 secret");
        let mut mac = hmac::Hmac::<sha2_011::Sha256>::new_from_slice(&key).expect("any key");
        mac.update(format!("{}.{}.", self.id, self.timestamp).as_bytes());
        mac.update(&self.body);
        let expected = format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()));
        self.signature.split(' ').any(|s| s == expected)
    }
}

#[derive(Default)]
struct Shared {
    received: Mutex<Vec<Received>>,
    script: Mutex<VecDeque<Answer>>,
}

/// The receiver; stops when dropped.
pub struct Receiver {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<CancellationToken>,
}

impl Receiver {
    /// A receiver on a free loopback port answering `script` in order, then 200.
    pub async fn start(script: &[Answer]) -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let shared = Arc::new(Shared::default());
        shared.script.lock().expect("lock").extend(script);
        let mut receiver = Receiver {
            addr,
            shared,
            stop: None,
        };
        receiver.serve(listener);
        receiver
    }

    fn serve(&mut self, listener: tokio::net::TcpListener) {
        let stop = CancellationToken::new();
        let app = axum::Router::new()
            .fallback(receive)
            .with_state(self.shared.clone());
        let shutdown = stop.clone().cancelled_owned();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
                .expect("receiver serves");
        });
        self.stop = Some(stop);
    }

    /// Stops listening: connections are refused until [`Receiver::restart`].
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            stop.cancel();
        }
    }

    /// Listens again on the same port.
    pub async fn restart(&mut self) {
        let listener = tokio::net::TcpListener::bind(self.addr)
            .await
            .expect("bind the same port again");
        self.serve(listener);
    }

    /// `http://127.0.0.1:PORT/hook`.
    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    /// Everything received so far, in order.
    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().expect("lock").clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn receive(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    shared.received.lock().expect("lock").push(Received {
        id: header("webhook-id"),
        timestamp: header("webhook-timestamp"),
        signature: header("webhook-signature"),
        body: body.to_vec(),
    });
    let answer = shared.script.lock().expect("lock").pop_front();
    match answer {
        None => StatusCode::OK,
        Some(Answer::Status(code)) => StatusCode::from_u16(code).expect("a status"),
        Some(Answer::Hang) => std::future::pending().await,
    }
}
