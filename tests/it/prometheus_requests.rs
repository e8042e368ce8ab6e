//! What the `--prometheus` collector asks a server: one discovery for both
//! roles, then one data request per refresh for every instance of both
//! roles. The server is a small fake of the query API on loopback that
//! counts the requests and answers what each one selects (by the job and
//! `instance` names written in the query); refreshes are stepped by the
//! test through the collector's clock.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use pdtop::clock::Clock;
use pdtop::feed::{Msg, Role};
use pdtop::sources::prometheus;

/// `(instance, job, role)` of the fake fleet.
const FLEET: [(&str, &str, &str); 2] =
    [("pre-0.lab:8100", "vllm-prefill", "prefill"), ("dec-0.lab:8200", "vllm-decode", "decode")];

/// A clock whose sleeps end when the test says: one permit, one refresh.
struct Steps(Arc<Semaphore>);

impl Clock for Steps {
    fn now(&self) -> f64 {
        1000.0
    }

    fn sleep(&self, _: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        let steps = self.0.clone();
        Box::pin(async move { steps.acquire().await.expect("open").forget() })
    }
}

#[derive(Default)]
struct Seen {
    discoveries: usize,
    /// The instances each data request was answered with.
    data: Vec<BTreeSet<&'static str>>,
    other: usize,
}

fn form_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).unwrap()
}

/// The answer to one query, recorded in `seen`.
fn answer(query: &str, seen: &Mutex<Seen>) -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64().floor();
    let mut seen = seen.lock().unwrap();
    let selected = |inst: &str, job: &str| {
        query.contains(job) && (!query.contains("instance=~") || query.contains(&inst.replace('.', "\\\\.")))
    };
    let result: Vec<serde_json::Value> = if query.contains("timestamp(up") {
        seen.discoveries += 1;
        FLEET
            .iter()
            .filter(|(_, job, _)| query.contains(&format!("up{{job=\"{job}\"}}")))
            .map(|(inst, job, role)| {
                let mut metric = serde_json::json!({"instance": inst, "job": job});
                if query.contains(&format!("\"pdtop_role\",\"{role}\"")) {
                    metric["pdtop_role"] = (*role).into();
                }
                serde_json::json!({"metric": metric, "value": [now, format!("{}", now - 0.5)]})
            })
            .collect()
    } else {
        // Each data request sees one more server scrape (and the one before).
        let n = seen.data.len() as f64;
        let served: BTreeSet<&'static str> =
            FLEET.iter().filter(|(i, j, _)| selected(i, j)).map(|(i, _, _)| *i).collect();
        seen.data.push(served.clone());
        let mut series = Vec::new();
        for (inst, job, _) in FLEET.iter().filter(|(i, _, _)| served.contains(i)) {
            let values = |v: [f64; 2]| {
                serde_json::json!([[now + n - 1.0, format!("{}", v[0])], [now + n, format!("{}", v[1])]])
            };
            series.push(serde_json::json!({
                "metric": {"__name__": "up", "instance": inst, "job": job},
                "values": values([1.0, 1.0]),
            }));
            series.push(serde_json::json!({
                "metric": {"__name__": "vllm:num_requests_running", "instance": inst, "job": job, "model_name": "m"},
                "values": values([n, n + 1.0]),
            }));
        }
        series
    };
    let kind = if query.contains("timestamp(up") { "vector" } else { "matrix" };
    serde_json::json!({"status": "success", "data": {"resultType": kind, "result": result}}).to_string()
}

/// Serves the fake API (HTTP/1.1, connections kept) until the test ends.
async fn serve(listener: TcpListener, seen: Arc<Mutex<Seen>>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else { return };
        let seen = seen.clone();
        tokio::spawn(async move {
            let mut stream = BufReader::new(stream);
            loop {
                let mut head = Vec::new();
                loop {
                    let mut line = String::new();
                    if stream.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    if line == "\r\n" {
                        break;
                    }
                    head.push(line);
                }
                let len: usize = head
                    .iter()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse().unwrap())
                    })
                    .unwrap_or(0);
                let mut body = vec![0; len];
                stream.read_exact(&mut body).await.unwrap();
                let body = String::from_utf8(body).unwrap();
                let text = match body.strip_prefix("query=") {
                    Some(q) if head[0].starts_with("POST /api/v1/query ") => answer(&form_decode(q), &seen),
                    _ => {
                        seen.lock().unwrap().other += 1;
                        r#"{"status":"success","data":{"activeTargets":[]}}"#.to_string()
                    }
                };
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{text}",
                    text.len()
                );
                if stream.get_mut().write_all(reply.as_bytes()).await.is_err() {
                    return;
                }
            }
        });
    }
}

async fn scrapes(rx: &mut tokio::sync::mpsc::Receiver<Msg>, want: &[usize]) -> Vec<usize> {
    let mut got = Vec::new();
    while !want.iter().all(|i| got.contains(i)) {
        let msg =
            tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.expect("in time").expect("open");
        if let Msg::Scrape { instance, body, .. } = &msg {
            assert!(body.starts_with("vllm:num_requests_running{model_name=\"m\"} "), "{body}");
            got.push(*instance);
        }
    }
    got
}

#[tokio::test]
async fn one_request_per_refresh_feeds_both_roles() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Seen::default()));
    tokio::spawn(serve(listener, seen.clone()));
    let steps = Arc::new(Semaphore::new(0));
    let opts = prometheus::PromOptions {
        url,
        auth: prometheus::Auth::None,
        roles: vec![
            (Role::Prefill, r#"job="vllm-prefill""#.into()),
            (Role::Decode, r#"job="vllm-decode""#.into()),
        ],
        interval: Duration::from_secs(1),
        timeout: Duration::from_secs(5),
        clock_speed: 1.0,
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    prometheus::spawn(opts, 0, Arc::new(Steps(steps.clone())), tx).unwrap();

    // The first refresh: one discovery, one data request, both instances'
    // baselines (prefill 0, decode 1: the order of the command line).
    let got = scrapes(&mut rx, &[0, 1]).await;
    assert_eq!(got.len(), 2, "{got:?}");
    let both: BTreeSet<&str> = FLEET.iter().map(|f| f.0).collect();
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.data, vec![both.clone()], "one data request for both roles");
        assert_eq!(seen.discoveries, 1, "one discovery for both roles");
        assert_eq!(seen.other, 0);
    }
    // Two more refreshes: each one request, each feeding both.
    for refresh in 2..=3 {
        steps.add_permits(1);
        let got = scrapes(&mut rx, &[0, 1]).await;
        assert_eq!(got.len(), 2, "{got:?}");
        let seen = seen.lock().unwrap();
        assert_eq!(seen.data, vec![both.clone(); refresh], "refresh {refresh}");
        assert_eq!(seen.discoveries, 1, "no discovery within {:?}", prometheus::REDISCOVER);
    }
}
