use pdtop::sources::{Endpoint, Msg};
use pdtop::state::{AppState, Role, report::Report};

#[test]
fn scratch() {
    for cap in ["qwen3-shape-restart", "nixl-llama-shape"] {
        let path = format!(
            "{}/../shared/lab-captures/{cap}/scrapes.jsonl.xz",
            env!("CARGO_MANIFEST_DIR")
        );
        let raw = std::fs::read(path).unwrap();
        let mut out = Vec::new();
        lzma_rs::xz_decompress(&mut &raw[..], &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let eps = vec![
            Endpoint::parse(Role::Prefill, "127.0.0.1:8100").unwrap(),
            Endpoint::parse(Role::Decode, "127.0.0.1:8200").unwrap(),
        ];
        let mut st = AppState::new(eps, 60.0);
        let mut n = 0;
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            n += 1;
            if std::env::var("ALL").is_err() && (n / 2) % 2 == 1 {
                continue;
            }
            let inst = if v["instance"] == "prefill" { 0 } else { 1 };
            let at = v["t"].as_f64().unwrap();
            if let Some(body) = v["text"].as_str() {
                st.apply(Msg::Scrape {
                    instance: inst,
                    at,
                    body: body.to_string(),
                });
            } else {
                st.apply(Msg::ScrapeFailed {
                    instance: inst,
                    at,
                    error: v["error"].as_str().unwrap_or("?").to_string(),
                });
            }
        }
        println!(
            "{}",
            serde_json::to_string_pretty(&Report::from_state(&st)).unwrap()
        );
        for e in &st.events {
            println!("{:.1} {:?} {}", e.t, e.kind, e.text);
        }
    }
}
