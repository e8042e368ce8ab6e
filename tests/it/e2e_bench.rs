//! End to end on `nixl-1p2d-bench`, live: the recording served over
//! loopback by the lab (one prefill, two decodes, their logs growing, the
//! proxy's log, and vLLM's spans sent to pdtop's OTLP receiver as vLLM's
//! exporter sent them), `pdtop check --json` run as a process against it,
//! and every request's verdict held against the capture's truth. Spans can
//! come before the log lines that name their request: they wait for them.

use crate::common;

use std::process::Command;

use pdtop::feed::Role;
use pdtop::lab::{self, LabOptions};

/// Lab seconds per real second.
const SPEED: f64 = 4.0;

#[tokio::test]
async fn check_live_on_the_bench_run_is_never_sure_and_wrong_and_names_every_id_less_miss() {
    let _turn = common::real_time_turn().await;
    let name = "nixl-1p2d-bench";
    let cap = common::capture(name).clone();
    let secs = (cap.t_end - cap.t0) / SPEED + 2.0;
    let dir = std::env::temp_dir().join(format!("pdtop-e2e-{name}-{}", std::process::id()));
    let otlp = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let opts = LabOptions { speed: SPEED, looping: false, dir: dir.clone(), otlp_to: Some(otlp) };
    let lab = lab::start(cap, opts).await.unwrap();
    assert_eq!(lab.instances.len(), 3, "one prefill, two decodes");
    let mut args: Vec<String> = vec!["check".into(), "--json".into()];
    for (flag, role) in [("--prefill", Role::Prefill), ("--decode", Role::Decode)] {
        args.push(flag.into());
        args.extend(lab.instances.iter().filter(|i| i.role == role).map(|i| i.addr.to_string()));
    }
    for (flag, role) in [("--prefill-log", Role::Prefill), ("--decode-log", Role::Decode)] {
        args.push(flag.into());
        args.extend(lab.instances.iter().filter(|i| i.role == role).map(|i| i.log.display().to_string()));
    }
    if let Some(p) = &lab.proxy_log {
        args.extend(["--proxy-log".into(), p.display().to_string()]);
    }
    for (k, v) in [
        ("--otlp-listen", otlp.to_string()),
        ("--interval", "0.1".into()),
        ("--timeout", common::LAB_TIMEOUT.into()),
        ("--clock-speed", SPEED.to_string()),
        ("--clock-origin", lab.clock.stamp_origin().to_string()),
        ("--duration", secs.to_string()),
    ] {
        args.extend([k.to_string(), v]);
    }
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_pdtop")).args(&args).output().unwrap()
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let r: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    eprintln!("{}", r["requests"]);
    assert!(r["spans"]["count"].as_u64().unwrap() > 400, "the lab sent the spans: {}", r["spans"]);
    let traces = r["traces"].as_array().unwrap();
    let names = |t: &serde_json::Value, id: &str| {
        t["vllm_ids"].as_array().unwrap().iter().any(|v| {
            let v = v["id"].as_str().unwrap();
            v == id || v.rsplit_once('-').is_some_and(|(h, s)| h == id && s.len() == 8)
        })
    };
    let truth = std::fs::read_to_string(common::capture_dir(name).join("requests.jsonl")).unwrap();
    let (mut right, mut unknown, mut wrong, mut id_less) = (0, 0, Vec::new(), (0, 0));
    for q in truth.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()) {
        let (id, want) = (q["id"].as_str().unwrap(), q["outcome"].as_str().unwrap());
        let d = q["decode_request_id"].as_str().unwrap();
        let Some(t) = traces.iter().rev().find(|t| names(t, d)) else {
            wrong.push(format!("{id}: no trace"));
            continue;
        };
        match t["outcome"].as_str().unwrap() {
            o if o == want => right += 1,
            "unknown" => unknown += 1,
            o => wrong.push(format!("{id}: {o} (sure {}), truth {want}: {}", t["sure"], t["evidence"])),
        }
        if q["flow"] == "proxy_noid" {
            id_less.0 += 1;
            id_less.1 += usize::from(t["outcome"] == "silent_miss");
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert_eq!(id_less, (18, 18), "every id-less miss named, live");
    assert!(right >= 272 && unknown <= 2, "right {right}, unknown {unknown}");
}
