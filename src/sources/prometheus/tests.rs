use super::api::{ApiData, decode, form_encode, ms, names_regex};
use super::collector::{ServerTime, better_reading};
use super::*;
use crate::feed::Role;
use std::time::Duration;

fn series(labels: &[(&str, &str)], values: &[(f64, &str)]) -> Series {
    Series {
        metric: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        value: None,
        values: values.iter().map(|(t, v)| (*t, v.to_string())).collect(),
    }
}

/// The server's answer to a window query holding these series.
fn matrix(series: &[Series]) -> Vec<u8> {
    let result: Vec<serde_json::Value> = series
        .iter()
        .map(|s| {
            let values: Vec<serde_json::Value> =
                s.values.iter().map(|(t, v)| serde_json::json!([t, v])).collect();
            serde_json::json!({"metric": s.metric, "values": values})
        })
        .collect();
    serde_json::to_vec(
        &serde_json::json!({"status": "success", "data": {"resultType": "matrix", "result": result}}),
    )
    .unwrap()
}

/// The tracker fed one window answer.
fn window(t: &mut Tracker, series: Vec<Series>) -> Vec<Out> {
    t.on_window(&matrix(&series)).unwrap()
}

/// `timestamp(up)` of each `(instance, job)`, at `ts`.
fn discovery(targets: &[(&str, &str)], ts: &str) -> Vec<Series> {
    targets
        .iter()
        .map(|(inst, job)| Series {
            metric: [("instance", *inst), ("job", *job)]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            value: Some((200.0, ts.to_string())),
            values: vec![],
        })
        .collect()
}

fn target(name: &str, inst: &str, extra: &[(&str, &str)]) -> Vec<(&'static str, String)> {
    let mut v: Vec<(&'static str, String)> =
        vec![("__name__", name.to_string()), ("instance", inst.to_string()), ("job", "vllm-decode".into())];
    for (k, val) in extra {
        v.push((Box::leak(k.to_string().into_boxed_str()), val.to_string()));
    }
    v
}

fn s(labels: Vec<(&'static str, String)>, values: &[(f64, &str)]) -> Series {
    let l: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
    series(&l, values)
}

#[test]
fn matchers_and_urls() {
    assert_eq!(matcher_inner(r#"{job="vllm-prefill"}"#).unwrap(), r#"job="vllm-prefill""#);
    assert_eq!(matcher_inner(r#" job=~"p.*", env="lab" "#).unwrap(), r#"job=~"p.*", env="lab""#);
    assert!(matcher_inner("{}").is_err());
    assert!(matcher_inner("vllm").is_err());
    assert!(matcher_inner(r#"{job="x""#).is_err());
    assert_eq!(
        window_query(
            ["10.0.0.1:8200", "x(y)\"z\\"],
            Some(["vllm-decode", "vllm-prefill"]),
            Duration::from_millis(2500)
        ),
        format!(
            r#"{{__name__=~"{}",job=~"vllm-decode|vllm-prefill",instance=~"10\\.0\\.0\\.1:8200|x\\(y\\)\"z\\\\"}}[2500ms]"#,
            names_regex()
        )
    );
    assert_eq!(
        window_query(["h:1"], None::<[&str; 0]>, Duration::ZERO),
        format!(r#"{{__name__=~"{}",instance=~"h:1"}}[1ms]"#, names_regex())
    );
    assert_eq!(
        discovery_query(&[(Role::Prefill, r#"job="p""#.into()), (Role::Decode, r#"job="d""#.into())]),
        r#"label_replace(timestamp(up{job="p"}),"pdtop_role","prefill","","") or label_replace(timestamp(up{job="d"}),"pdtop_role","decode","","")"#
    );
    let (u, a) = parse_url("https://bob:s3cret@mimir.example/prometheus/").unwrap();
    assert_eq!(u, "https://mimir.example/prometheus");
    assert_eq!(a, Auth::Basic { user: "bob".into(), password: "s3cret".into() });
    assert_eq!(parse_url("http://127.0.0.1:9090").unwrap(), ("http://127.0.0.1:9090".into(), Auth::None));
    assert!(parse_url("127.0.0.1:9090").is_err());
    // A password with an `@` or `:` in it, percent-encoded as URLs need.
    let (u, a) = parse_url("http://bob:p%40ss%3Aw@prom:9090").unwrap();
    assert_eq!(u, "http://prom:9090");
    assert_eq!(a, Auth::Basic { user: "bob".into(), password: "p@ss:w".into() });
    assert!(parse_url("http://").is_err());
    assert_eq!(form_encode(r#"{a="b c"}[1ms]"#), "%7Ba%3D%22b+c%22%7D%5B1ms%5D");
}

#[test]
fn groups_by_scrape_and_renders_exposition_text() {
    let mut t = Tracker::new(0);
    let a = "10.0.0.1:8200";
    let out = t.on_discovery(Role::Decode, discovery(&[(a, "vllm-decode")], "99"));
    assert!(
        matches!(&out[..], [Out::Discovered { index: 0, endpoint }] if endpoint.display == a && endpoint.role == Role::Decode)
    );
    let win = vec![
        s(target("up", a, &[]), &[(100.0, "1"), (101.0, "1")]),
        s(target("vllm:num_requests_running", a, &[("model_name", "m\"x")]), &[(100.0, "1"), (101.0, "2")]),
        s(
            target("vllm:time_to_first_token_seconds_bucket", a, &[("le", "+Inf"), ("model_name", "m")]),
            &[(100.0, "3"), (101.0, "NaN")],
        ),
    ];
    let out = window(&mut t, win);
    // First sight: only the newest scrape, as the baseline.
    assert_eq!(out.len(), 2, "{out:?}");
    assert!(matches!(&out[0], Out::Model { index: 0, name } if name == "m\"x"), "{out:?}");
    let Out::Scrape { index: 0, ts_ms: 101_000, body } = &out[1] else { panic!("{out:?}") };
    assert_eq!(
        body,
        "vllm:num_requests_running{model_name=\"m\\\"x\"} 2\n\
         vllm:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"m\"} NaN\n"
    );
    // The text reads back as pdtop reads an instance.
    let sample = crate::metrics::model::InstanceSample::from_text(body);
    assert_eq!(sample.running, Some(2.0));
    assert_eq!(sample.bad_lines, 0);

    // The next window overlaps: only the newer scrapes come out, in order.
    let win = vec![
        s(target("up", a, &[]), &[(101.0, "1"), (102.0, "1"), (103.0, "0")]),
        s(target("vllm:num_requests_running", a, &[]), &[(101.0, "2"), (102.0, "5")]),
    ];
    let out = window(&mut t, win);
    assert_eq!(out.len(), 2, "{out:?}");
    assert!(
        matches!(&out[0], Out::Scrape { ts_ms: 102_000, body, .. } if body == "vllm:num_requests_running 5\n")
    );
    assert!(matches!(&out[1], Out::Down { ts_ms: 103_000, instance, .. } if instance == a));
    // Nothing new: nothing out; stale only after three scrape intervals.
    assert!(window(&mut t, vec![]).is_empty());
    assert!(t.stale(105_000, Duration::from_secs(1)).is_empty());
    let st = t.stale(106_500, Duration::from_secs(1));
    assert!(matches!(st.as_slice(), [Out::Stale { index: 0, .. }]), "{st:?}");
    assert!(t.stale(107_000, Duration::from_secs(1)).is_empty(), "told once");
}

#[test]
fn instances_get_stable_indices_and_one_role() {
    let mut t = Tracker::new(2);
    let out = t.on_discovery(Role::Prefill, discovery(&[("b:1", "j"), ("a:1", "j")], "199.5"));
    let names: Vec<(usize, String)> = out
        .iter()
        .filter_map(|o| match o {
            Out::Discovered { index, endpoint } => Some((*index, endpoint.display.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(names, vec![(2, "a:1".to_string()), (3, "b:1".to_string())]);
    // Seen again by discovery: nothing new. Matched by the other role: a warning, once.
    assert!(t.on_discovery(Role::Prefill, discovery(&[("a:1", "j")], "200")).is_empty());
    let out = t.on_discovery(Role::Decode, discovery(&[("a:1", "j"), ("c:1", "j")], "200"));
    assert!(matches!(&out[0], Out::Warn(w) if w.contains("a:1")));
    assert!(matches!(&out[1], Out::Discovered { index: 4, .. }));
    assert!(t.on_discovery(Role::Decode, discovery(&[("a:1", "j")], "200")).is_empty());
    assert_eq!(t.len(), 3);
    let (instances, jobs) = t.targets();
    assert_eq!(instances, ["a:1", "b:1", "c:1"]);
    assert_eq!(jobs.unwrap().into_iter().collect::<Vec<_>>(), ["j"]);
}

#[test]
fn a_second_job_on_the_same_target_is_not_double_counted() {
    let mut t = Tracker::new(0);
    t.on_discovery(Role::Decode, discovery(&[("h:1", "vllm-decode")], "1"));
    let mut other = target("vllm:num_requests_running", "h:1", &[]);
    other[2].1 = "zzz-other".into();
    let out = window(
        &mut t,
        vec![s(other, &[(1.0, "7")]), s(target("vllm:num_requests_running", "h:1", &[]), &[(1.0, "1")])],
    );
    assert!(
        matches!(&out[..], [Out::Scrape { body, .. }] if body == "vllm:num_requests_running 1\n"),
        "{out:?}"
    );
}

#[test]
fn api_answers_and_errors() {
    let ok = br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"up","instance":"x:1"},"values":[[1700000000.123,"1"]]}]}}"#;
    let ApiData::Result { result, .. } = decode(ok).unwrap() else { panic!() };
    assert_eq!(ms(result[0].values[0].0), 1_700_000_000_123);
    let bad = br#"{"status":"error","errorType":"bad_data","error":"parse error"}"#;
    assert_eq!(decode(bad).unwrap_err(), "bad_data: parse error");
    assert!(decode(b"<html>").is_err());
    let targets = br#"{"status":"success","data":{"activeTargets":[{"labels":{"instance":"x:1","job":"j"},"lastError":"connection refused","health":"down"}],"droppedTargets":[]}}"#;
    let ApiData::Targets { active_targets } = decode(targets).unwrap() else { panic!() };
    assert_eq!(active_targets[0].last_error, "connection refused");
}

#[test]
fn odd_names_and_values_never_panic() {
    let mut t = Tracker::new(0);
    t.on_discovery(Role::Decode, discovery(&[("h:1", "vllm-decode"), ("h:2", "vllm-decode")], "1"));
    let out = window(
        &mut t,
        vec![
            s(target("vllm:ok", "h:1", &[("bad label", "v")]), &[(1.0, "x"), (1e300, "1")]),
            s(target("weird.name", "h:1", &[]), &[(1.0, "1")]),
            series(&[("__name__", "vllm:x")], &[(1.0, "1")]),
            series(&[("instance", "h:2")], &[(1.0, "1")]),
        ],
    );
    assert!(!out.is_empty());
    // Answers that are not a matrix, or are cut short, feed nothing.
    for body in [
        &b"<html>"[..],
        br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"vllm:x","instance":"h:1","job":"vllm-decode"},"values":[[5,"1"]"#,
        br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[["x",1]]}]}}"#,
        br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1"]}]}}"#,
        br#"{"status":"success"}"#,
    ] {
        let r = t.on_window(body);
        assert!(r.as_ref().is_err() || r.as_ref().is_ok_and(|o| o.is_empty()), "{r:?}");
    }
    assert!(window(&mut t, vec![]).is_empty(), "a cut answer left nothing behind");
}

#[test]
fn server_times_are_read_on_pdtops_clock() {
    // pdtop's clock at 1000 s (a fake one) running five times real speed;
    // the server's clock is real unix time.
    let st = ServerTime::from_answer(1_700_000_000.0, 999.0, 1001.0, 5.0);
    assert_eq!(st.server_at(1000.0), 1_700_000_000.0);
    // Ten of pdtop's seconds later the server is two seconds on.
    assert_eq!(st.server_at(1010.0), 1_700_000_002.0);
    // The fastest answer's reading is kept: a slower one replaces it only
    // once it is five minutes old.
    let minute = Duration::from_secs(60);
    assert!(better_reading(0.2, None));
    assert!(better_reading(0.01, Some((0.02, minute))));
    assert!(!better_reading(0.2, Some((0.02, minute))));
    assert!(better_reading(0.2, Some((0.02, 5 * minute))));
}

#[test]
fn a_window_answer_is_read_with_escapes_and_in_any_key_order() {
    let mut t = Tracker::new(0);
    t.on_discovery(Role::Prefill, discovery(&[("h:1", "p")], "1"));
    // `values` before `metric`, an escaped label value, unknown keys.
    let body = br#"{"data":{"result":[
        {"values":[[1,"1"],[2,"1"]],"metric":{"job":"p","instance":"h:1","__name__":"up"}},
        {"extra":[1,{"a":2}],"metric":{"__name__":"vllm:x","instance":"h:1","job":"p","path":"a\"b\\c\u00e9"},"values":[[1,"3"],[2,"4"]]},
        {"metric":{"__name__":"vllm:y","instance":"h:9","job":"p"},"values":[[2,"9"]]}
    ],"resultType":"matrix"},"status":"success","warnings":["w"]}"#;
    let out = t.on_window(body).unwrap();
    assert!(
        matches!(&out[..], [Out::Scrape { index: 0, ts_ms: 2000, body }] if body == "vllm:x{path=\"a\\\"b\\\\c\u{e9}\"} 4\n"),
        "{out:?}"
    );
    let err = br#"{"status":"error","errorType":"bad_data","error":"1:2: parse error"}"#;
    assert_eq!(t.on_window(err).unwrap_err(), "bad_data: 1:2: parse error");
}

#[test]
fn prefill_scrapes_reach_the_state_before_decode_scrapes() {
    // The miss detector pairs a decode's requests with the prefills that
    // completed before: within one answer every prefill comes first, even
    // when a decode instance's name sorts before it.
    let mut t = Tracker::new(0);
    t.on_discovery(Role::Prefill, discovery(&[("b:1", "p"), ("d:1", "p")], "1"));
    t.on_discovery(Role::Decode, discovery(&[("a:1", "d"), ("c:1", "d")], "1"));
    let one = |inst: &str, job: &str, ts: &[(f64, &str)]| {
        series(&[("__name__", "vllm:x"), ("instance", inst), ("job", job)], ts)
    };
    let all = |ts: &[(f64, &str)]| {
        vec![one("a:1", "d", ts), one("b:1", "p", ts), one("c:1", "d", ts), one("d:1", "p", ts)]
    };
    window(&mut t, all(&[(1.0, "1")]));
    let out = window(&mut t, all(&[(2.0, "2"), (3.0, "3")]));
    let order: Vec<(usize, i64)> = out
        .iter()
        .filter_map(|o| match o {
            Out::Scrape { index, ts_ms, .. } => Some((*index, *ts_ms)),
            _ => None,
        })
        .collect();
    // Indices: b:1 0, d:1 1 (prefill), a:1 2, c:1 3 (decode).
    assert_eq!(
        order,
        [(0, 2000), (0, 3000), (1, 2000), (1, 3000), (2, 2000), (2, 3000), (3, 2000), (3, 3000)]
    );
}
