//! Tokens, TLS and prompt text, through the real binary: the token reaches
//! a gateway that checks it and appears nowhere pdtop writes; https goes
//! through rustls with verification on; prompt text in logs never comes out.
//! (No listening port: see tests/terminal.rs, which inspects the running
//! dashboard, `check` and `demo` through /proc.)

use crate::common;

use std::io::Write;
use std::net::TcpListener;
use std::process::{Command, Output};
use std::thread;

/// A gateway: the idle scrape for `Authorization: Bearer <token>`, else 401.
fn gateway(token: &'static str) -> String {
    let body =
        std::fs::read_to_string(common::capture_dir("qwen3-shape-restart").join("decode-metrics-idle.txt"))
            .unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let body = body.clone();
            thread::spawn(move || {
                let req = String::from_utf8_lossy(&common::read_request(&mut s)).to_lowercase();
                let want = format!("authorization: bearer {}\r\n", token.to_lowercase());
                let _ = if req.contains(&want) {
                    write!(
                        s,
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                } else {
                    // A gateway that echoes what it got, the worst case.
                    let echo = req.replace("\r\n", " | ");
                    write!(
                        s,
                        "HTTP/1.1 401 Unauthorized\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{echo}",
                        echo.len()
                    )
                };
            });
        }
    });
    addr
}

fn check(env: &[(&str, &str)], args: &[&str]) -> (serde_json::Value, Output) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pdtop"));
    c.args(["check", "--json", "--duration", "1.5", "--interval", "0.2", "--timeout", "1"]).args(args);
    c.env_remove("PDTOP_BEARER_TOKEN");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    (serde_json::from_slice(&out.stdout).unwrap(), out)
}

fn assert_nowhere(token: &str, out: &Output) {
    assert!(!String::from_utf8_lossy(&out.stdout).contains(token), "token in the report");
    assert!(!String::from_utf8_lossy(&out.stderr).contains(token), "token on stderr");
}

const GLOBAL: &str = "glob-7d2e0c-SECRET";
const OWN: &str = "own-19ab44-SECRET";

#[test]
fn the_bearer_token_is_sent_and_never_shown() {
    let a = gateway(GLOBAL);
    let b = gateway(OWN);
    let port_b = b.rsplit_once(':').unwrap().1;
    let own_var = format!("PDTOP_BEARER_TOKEN_127_0_0_1_{port_b}");
    // Global for a, per-endpoint for b.
    let (r, out) =
        check(&[("PDTOP_BEARER_TOKEN", GLOBAL), (&own_var, OWN)], &["--prefill", &a, "--decode", &b]);
    for i in r["instances"].as_array().unwrap() {
        assert_eq!(i["up"], true, "{i}");
        assert_eq!(i["scrapes_failed"], 0, "{i}");
    }
    assert_nowhere(GLOBAL, &out);
    assert_nowhere(OWN, &out);

    // A wrong token: a 401, said as such, with neither token in any output,
    // even though this gateway echoes the request into its error body.
    let (r, out) = check(&[("PDTOP_BEARER_TOKEN", OWN)], &["--decode", &a]);
    let i = &r["instances"][0];
    assert_eq!(i["up"], false);
    assert!(i["last_error"].as_str().unwrap().contains("401"), "{i}");
    assert_nowhere(OWN, &out);
    assert_nowhere(GLOBAL, &out);
    // The human summary too.
    let out = Command::new(env!("CARGO_BIN_EXE_pdtop"))
        .args(["check", "--duration", "1", "--interval", "0.2", "--decode", &a])
        .env("PDTOP_BEARER_TOKEN", OWN)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("HTTP 401"));
    assert_nowhere(OWN, &out);
}

#[test]
fn https_goes_through_rustls_and_does_not_fall_back_to_plain_http() {
    // A plain-HTTP server asked for TLS: the handshake fails, and the
    // instance is down with a TLS cause; nothing is scraped in clear.
    let plain = gateway(GLOBAL);
    let (r, out) = check(&[("PDTOP_BEARER_TOKEN", GLOBAL)], &["--decode", &format!("https://{plain}")]);
    let i = &r["instances"][0];
    assert_eq!(i["up"], false, "{i}");
    assert_eq!(i["scrapes_ok"], 0, "{i}");
    let err = i["last_error"].as_str().unwrap().to_lowercase();
    // This server waits for an HTTP request that never comes (the client
    // speaks TLS), so the cause is the handshake timing out or failing.
    assert!(["cannot connect", "tls", "record", "timed out"].iter().any(|c| err.contains(c)), "{err}");
    assert_nowhere(GLOBAL, &out);
}

#[test]
fn prompt_text_in_logs_never_comes_out() {
    let dir = std::env::temp_dir().join(format!("pdtop-prompt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("decode.log");
    // Both forms vLLM has used: prompt before params (≤0.11) and a prompt
    // line of its own; plus prompt_token_ids.
    let secret = "SECRET-PROMPT-4b1d the patient's record";
    std::fs::write(
        &log,
        format!(
            "INFO 11-30 06:26:48 [logger.py:43] Received request cmpl-lab-1-0: prompt: '{secret}', params: SamplingParams(n=1, max_tokens=8), prompt_token_ids: [1, 2], lora_request: None.\n\
             (APIServer pid=3126) INFO 11-30 06:26:48 [logger.py:43] Received request cmpl-lab-2-0: prompt: '{secret}', params: SamplingParams(n=1, max_tokens=8), lora_request: None.\n\
             (APIServer pid=3126) INFO 11-30 06:26:49 [logger.py:50] Received request cmpl-lab-3-0: params: SamplingParams(n=1, max_tokens=8), lora_request: None.\n\
             (APIServer pid=3126) INFO 11-30 06:26:49 [logger.py:52] cmpl-lab-3-0 prompt: '{secret}'\n"
        ),
    )
    .unwrap();
    let refused = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    // Lines of long ago: read whole (`--since` reaches back to them).
    let (r, out) =
        check(&[], &["--decode", &refused, "--decode-log", log.to_str().unwrap(), "--since", "1e9"]);
    assert!(r["requests"]["seen"].as_u64().unwrap() >= 2, "{}", r["requests"]);
    for s in ["SECRET-PROMPT", "patient"] {
        assert_nowhere(s, &out);
    }
    // And on screen: the requests view and an opened trace, drawn from a
    // state that read the same lines.
    use pdtop::app::App;
    use pdtop::feed::LogOrigin;
    use pdtop::feed::Role;
    use pdtop::feed::{Endpoint, Msg};
    use pdtop::feed::{TailCounts, TailState};
    use pdtop::keymap::Action;
    use pdtop::state::AppState;
    let logs = vec![(LogOrigin::Decode(0), log.display().to_string())];
    let mut st =
        AppState::new(vec![Endpoint::parse(Role::Decode, "127.0.0.1:8200").unwrap()], 60.0).with_logs(&logs);
    let lines: Vec<String> = std::fs::read_to_string(&log).unwrap().lines().map(str::to_owned).collect();
    st.apply(Msg::LogLines {
        source: LogOrigin::Decode(0),
        at: 1.0,
        lines,
        state: TailState::Following,
        counts: TailCounts::default(),
    });
    let mut app = App::new(st, pdtop::theme::Theme::builtin("dark").unwrap());
    for actions in [&[][..], &[Action::NextView][..], &[Action::Open][..], &[Action::NextView][..]] {
        for a in actions {
            app.on_action(*a);
        }
        let mut term = ratatui::Terminal::new(ratatui::backend::TestBackend::new(200, 50)).unwrap();
        term.draw(|f| app.draw(f)).unwrap();
        let buf = term.backend().buffer();
        let text: String = buf.content().iter().map(|c| c.symbol()).collect();
        assert!(!text.contains("SECRET") && !text.contains("patient"), "{text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
