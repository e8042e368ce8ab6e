//! `example-2p1d-demo-proxy`: two prefills feeding one decode behind the
//! demo proxy, recorded live with prefill2 SIGKILLed mid-load. Replayed,
//! every request's outcome is the truth `lab/2p1d/analyze.py` wrote.

use std::collections::BTreeMap;
use std::process::Command;

use crate::common;

#[test]
fn every_request_of_two_prefills_and_one_decode_is_decided_right() {
    let dir = common::capture_dir("example-2p1d-demo-proxy");
    let out = Command::new(env!("CARGO_BIN_EXE_pdtop"))
        .args(["check", "--json", "--replay"])
        .arg(&dir)
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    let traces: BTreeMap<String, &serde_json::Value> =
        r["traces"].as_array().unwrap().iter().map(|t| (t["id"].as_str().unwrap().to_string(), t)).collect();
    let mut idless = BTreeMap::<String, usize>::new();
    for line in std::fs::read_to_string(dir.join("requests.jsonl")).unwrap().lines() {
        let q: serde_json::Value = serde_json::from_str(line).unwrap();
        let truth = q["outcome"].as_str().unwrap();
        let Some(id) = q["resp_id"].as_str() else {
            *idless.entry(truth.to_string()).or_default() += 1;
            continue;
        };
        // A request sent straight to decode keeps the client's id.
        let t = traces
            .get(id)
            .or_else(|| traces.get(q["id"].as_str().unwrap()))
            .unwrap_or_else(|| panic!("no trace for {} ({id})", q["id"]));
        assert_eq!(t["outcome"], truth, "{}: {}", q["id"], t["evidence"]);
    }
    // The one request the proxy failed before any vLLM saw it.
    assert_eq!(idless, BTreeMap::from([("error".to_string(), 1)]));
    let q = &r["requests"];
    assert_eq!(
        (q["seen"].as_u64(), q["unknown"].as_u64(), q["error"].as_u64()),
        (Some(65), Some(0), Some(1)),
        "{q}"
    );
    // Its prefill copy on prefill2 had no end logged when prefill2 was
    // killed 2 s later, but the decode had read its KV by then: loaded.
    let t = traces["cmpl-9fedbae2dca1e06b"];
    assert_eq!((&t["outcome"], &t["prefill"]), (&"loaded".into(), &"127.0.0.1:8101".into()), "{t}");
}
