//! `pdtop check` without `--json`, on a real capture: it names what the
//! JSON names (every count with `cancelled`, the miss ids with each one's
//! evidence, the other outcomes' ids, the verdict's own word) and reads at
//! 80 columns.

use std::process::Command;

use crate::common;

fn check(capture: &str, json: bool) -> (Option<i32>, String) {
    let d = common::capture_dir(capture).display().to_string();
    let mut args = vec!["check", "--replay", d.as_str()];
    if json {
        args.push("--json");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_pdtop")).args(&args).output().unwrap();
    (out.status.code(), String::from_utf8(out.stdout).unwrap())
}

#[test]
fn the_summary_says_what_the_json_says() {
    let capture = "demo-proxy-qwen3";
    let (code, text) = check(capture, false);
    let (json_code, json) = check(capture, true);
    let r: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(code, json_code);
    let verdict = r["verdict"].as_str().unwrap();
    assert!(text.ends_with(&format!("verdict: {verdict}\n")), "{text}");
    for (k, n) in r["requests"].as_object().unwrap() {
        assert!(text.contains(&format!("{k} {n}")), "count {k} {n} missing:\n{text}");
    }
    let traces = r["traces"].as_array().unwrap();
    // Every miss by id, with its evidence (wrapped, so compared word by word).
    let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let flat = words(&text);
    for t in traces.iter().filter(|t| t["outcome"] == "silent_miss") {
        let line =
            format!("{} ({})", t["id"].as_str().unwrap(), if t["sure"] == true { "sure" } else { "likely" });
        assert!(text.contains(&line), "{line}:\n{text}");
        assert!(flat.contains(&words(t["evidence"].as_str().unwrap())), "{t}");
    }
    // The other outcomes: counted in full, ids capped with "+N more".
    for outcome in ["error", "no_prefill", "cancelled"] {
        let of: Vec<&str> =
            traces.iter().filter(|t| t["outcome"] == outcome).map(|t| t["id"].as_str().unwrap()).collect();
        assert!(!of.is_empty(), "{capture} has {outcome} traces");
        assert!(text.contains(&format!("{outcome} ({}): {}", of.len(), of[0])), "{outcome}:\n{text}");
        if of.len() > 6 {
            assert!(text.contains(&format!("+{} more", of.len() - 6)), "{text}");
        }
    }
    for line in text.lines() {
        assert!(line.chars().count() <= 80, "over 80 columns: {line}");
    }
    insta::assert_snapshot!("demo_proxy_qwen3", text);
}
