//! Each rule of the table over typed facts: what it says (its `Reason`s),
//! when it keeps quiet, and which of two speaking rules wins.

use super::*;
use crate::traces::evidence::Facts;
use crate::traces::model::{CorrelatorOptions, Trace};
use crate::traces::reason::{Finished, Group};
use crate::traces::store::Track;

const P: LogOrigin = LogOrigin::Prefill(0);
const D: LogOrigin = LogOrigin::Decode(0);

/// A request joined by id on prefill#0 and decode#0, with `facts` said at t=10.
fn entry(facts: Vec<(LogOrigin, F)>) -> Entry {
    let mut trace = Trace::new("req-1".into(), 1.0);
    trace.prefill = Some(0);
    trace.decode = Some(0);
    let track = Track { decode_at: Some(2.0), prefill_done: Some(9.5), ..Default::default() };
    let mut f = Facts::default();
    for (src, kind) in facts {
        f.push(10.0, src, kind);
    }
    Entry { trace, track, facts: f, retired: false }
}

fn ctx(opts: &CorrelatorOptions, style: Style) -> Ctx<'_> {
    Ctx {
        now: 20.0,
        force: false,
        opts,
        style,
        connector: "ExampleConnector".into(),
        guaranteed: false,
        proxy_read: false,
        prefill_read: true,
        decode_read: true,
        bypass: false,
        flow_established: false,
        id_known: true,
        ids_shared: true,
        waiting_copies: Vec::new(),
        direct: false,
        copy_unread: false,
        began_unread: false,
    }
}

/// The rule named `name` alone.
fn rule(name: &str, e: &Entry, cx: &Ctx) -> Option<Verdict> {
    let (_, f) = RULES.iter().find(|(n, _)| *n == name).expect("a rule of that name");
    f(e, cx, &Seen::of(e))
}

fn params() -> F {
    F::Params { remote: "cmpl-x-0".into(), tokens: Some(512), blocks: Some(32) }
}

fn no_hit() -> F {
    F::NoHit { decode: 0, waited: 2.0, busy: false, added_at: 10.0 }
}

#[test]
fn every_rule_keeps_quiet_without_its_facts() {
    let opts = CorrelatorOptions::default();
    let e = entry(Vec::new());
    for style in [Style::Hits, Style::Params, Style::Unknown] {
        for (name, f) in RULES {
            assert_eq!(f(&e, &ctx(&opts, style), &Seen::of(&e)), None, "{name} spoke on no facts");
        }
    }
}

#[test]
fn names_are_unique() {
    let mut names: Vec<_> = RULES.iter().map(|(n, _)| *n).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), RULES.len());
}

#[test]
fn a_settled_group_decides_surely_either_way() {
    let opts = CorrelatorOptions::default();
    let group =
        Group { members: vec![("a".into(), Some(100)), ("b".into(), Some(200))], hits: vec![Some(96)] };
    let settled =
        |hit| F::GroupSettled { decode: 0, hit, inject: Some(96), own: Some(100), group: group.clone() };
    let v = rule("group settled", &entry(vec![(D, settled(true))]), &ctx(&opts, Style::Hits)).unwrap();
    assert_eq!((v.outcome, v.confidence), (Outcome::Loaded, Confidence::Sure));
    assert_eq!(v.reasons, vec![R::GroupLoaded { decode: 0, inject: Some(96), group: group.clone() }]);
    let v = rule("group settled", &entry(vec![(D, settled(false))]), &ctx(&opts, Style::Hits)).unwrap();
    assert_eq!(v.outcome, Outcome::SilentMiss);
    assert_eq!(v.reasons, vec![R::GroupMiss { decode: 0, own: Some(100), group }]);
}

#[test]
fn a_shared_step_is_unknown_and_names_the_others() {
    let opts = CorrelatorOptions::default();
    let step = F::SharedStep { decode: 0, others: vec!["req-2".into()], hits: 1, inject: None, rival: false };
    let v = rule("shared step", &entry(vec![(D, step)]), &ctx(&opts, Style::Hits)).unwrap();
    assert_eq!((v.outcome, v.confidence), (Outcome::Unknown, Confidence::Unsure));
    assert!(
        matches!(&v.reasons[..], [R::SharedStep { others, id, .. }] if others == &["req-2"] && id == "req-1"),
        "{v:?}"
    );
}

#[test]
fn params_load_surely_with_the_prefill_seen() {
    let opts = CorrelatorOptions::default();
    let e = entry(vec![(D, params()), (D, F::TransferCounted { counted: 3, loads: 3 })]);
    let v = rule("params", &e, &ctx(&opts, Style::Params)).unwrap();
    assert_eq!((v.outcome, v.confidence), (Outcome::Loaded, Confidence::Sure));
    assert_eq!(
        v.reasons,
        vec![
            R::ParamsLoaded {
                prefill: 0,
                remote: "cmpl-x-0".into(),
                tokens: Some(512),
                blocks: Some(32),
                finished: Finished::UnderASecond
            },
            R::TransferCounted { decode: 0, counted: 3, loads: 3 },
        ]
    );
    // Uncounted, its read may still fail: likely, until the run ends.
    let e = entry(vec![(D, params())]);
    let v = rule("params", &e, &ctx(&opts, Style::Params)).unwrap();
    assert_eq!((v.outcome, v.confidence), (Outcome::Loaded, Confidence::Likely));
    assert_eq!(v.reasons.get(1), Some(&R::ReadMayFail), "{v:?}");
    let mut cx = ctx(&opts, Style::Params);
    cx.force = true;
    let v = rule("params", &e, &cx).unwrap();
    assert_eq!(v.confidence, Confidence::Sure);
    assert!(!v.reasons.contains(&R::ReadMayFail), "{v:?}");
    // Without the prefill's side: likely.
    let mut e = entry(vec![(D, params())]);
    e.trace.prefill = None;
    let v = rule("params", &e, &ctx(&opts, Style::Params)).unwrap();
    assert_eq!(v.confidence, Confidence::Likely);
    assert!(matches!(v.reasons[0], R::ParamsUnseenPrefill { .. }), "{v:?}");
}

#[test]
fn params_whose_kv_expired_unread_wait_for_the_decodes_read_or_failure() {
    let opts = CorrelatorOptions::default();
    let e = entry(vec![(D, params()), (P, F::KvExpiredUnread)]);
    // No recompute: the decode reads late, or fails on a line of its own.
    let v = rule("params", &e, &ctx(&opts, Style::Params)).unwrap();
    assert_eq!((v.outcome, v.confidence), (Outcome::Pending, Confidence::Sure));
    assert_eq!(v.reasons, vec![R::NotReadYet { remote: Some("cmpl-x-0".into()) }]);
    // The run ended before either: not known, and never a miss.
    let mut cx = ctx(&opts, Style::Params);
    cx.force = true;
    let v = rule("params", &e, &cx).unwrap();
    assert_eq!((v.outcome, v.confidence), (Outcome::Unknown, Confidence::Likely));
    // The decode's own prefix cache explains the expiry: loaded, likely.
    let notify = F::NotifyFailed { text: "notification_failed".into() };
    let e = entry(vec![(D, params()), (P, F::KvExpiredUnread), (P, notify)]);
    let v = rule("params", &e, &ctx(&opts, Style::Params)).unwrap();
    assert_eq!((v.outcome, v.confidence), (Outcome::Loaded, Confidence::Likely));
}

#[test]
fn params_whose_instance_died_are_an_error_at_its_hop() {
    let opts = CorrelatorOptions::default();
    let cut = F::CutUndated { instance: P, gap_s: 4.0, stats_seen: true };
    let e = entry(vec![(D, params()), (P, F::KvExpiredUnread), (P, cut.clone())]);
    let v = rule("params", &e, &ctx(&opts, Style::Params)).unwrap();
    assert_eq!((v.outcome, v.error_at), (Outcome::Error, Some(crate::traces::model::Hop::Producer)));
    assert_eq!(v.reasons, vec![R::DiedBeforePull { instance: P, src: P }]);
    // No expiry: the kill may have cut the stream after the load.
    let v = rule("params", &entry(vec![(D, params()), (P, cut)]), &ctx(&opts, Style::Params)).unwrap();
    assert_eq!(v.outcome, Outcome::Unknown);
    assert!(
        matches!(&v.reasons[..], [R::CutUndated { .. }, R::Was { outcome: Outcome::Loaded, .. }]),
        "{v:?}"
    );
}

#[test]
fn params_stuck_waiting_are_not_loaded() {
    let opts = CorrelatorOptions::default();
    let stuck = F::Stuck { id: "req-1".into(), secs: 40.0, begun: true, since: 1.0, last: 41.0, limit: 30.0 };
    let v = rule("params", &entry(vec![(D, params()), (D, stuck)]), &ctx(&opts, Style::Params)).unwrap();
    assert_eq!(v.outcome, Outcome::Unknown);
    assert!(matches!(&v.reasons[..], [R::Stuck { secs, .. }, R::Was { .. }] if *secs == 40.0), "{v:?}");
}

#[test]
fn a_hit_loads_surely_alone_and_likely_contested() {
    let opts = CorrelatorOptions::default();
    let hit = |contested| F::Hit { decode: 0, contested, from_orphan: false };
    let v = rule("hit", &entry(vec![(D, hit(0))]), &ctx(&opts, Style::Hits)).unwrap();
    assert_eq!((v.outcome, v.confidence), (Outcome::Loaded, Confidence::Sure));
    assert!(matches!(v.reasons[0], R::HitLoaded { how: HitHow::Alone, prefill: Some(0), .. }), "{v:?}");
    let v = rule("hit", &entry(vec![(D, hit(2))]), &ctx(&opts, Style::Hits)).unwrap();
    assert_eq!(v.confidence, Confidence::Likely);
    assert!(matches!(v.reasons[0], R::HitLoaded { how: HitHow::Contested, .. }), "{v:?}");
    let mut e = entry(vec![(D, hit(0))]);
    e.trace.join = Join::ByOrder;
    assert!(matches!(
        rule("hit", &e, &ctx(&opts, Style::Hits)).unwrap().reasons[0],
        R::HitLoaded { how: HitHow::PairedByOrder, .. }
    ));
}

#[test]
fn a_tensor_received_loads_likely() {
    let opts = CorrelatorOptions::default();
    let f = F::TensorReceived { decode: 0, peer: "10.0.0.1:14579".into(), tensor: "req-1#layer0".into() };
    let v = rule("tensor received", &entry(vec![(D, f)]), &ctx(&opts, Style::Unknown)).unwrap();
    assert_eq!((v.outcome, v.confidence), (Outcome::Loaded, Confidence::Likely));
    assert!(matches!(&v.reasons[..], [R::TensorReceived { decode: 0, .. }]));
}

#[test]
fn lmcache_lookups_load_or_miss() {
    let opts = CorrelatorOptions::default();
    let lookup = |hit| F::LmcacheLookup { decode: 0, hit, total: 512.0, id: "req-1".into() };
    let v = rule("lmcache lookup", &entry(vec![(D, lookup(512.0))]), &ctx(&opts, Style::Unknown)).unwrap();
    assert_eq!((v.outcome, v.confidence), (Outcome::Loaded, Confidence::Sure));
    let v = rule("lmcache lookup", &entry(vec![(D, lookup(0.0))]), &ctx(&opts, Style::Unknown)).unwrap();
    assert_eq!((v.outcome, v.confidence), (Outcome::SilentMiss, Confidence::Likely));
    assert_eq!(
        v.reasons,
        vec![R::Lmcache { decode: 0, hit: 0.0, total: 512.0, id: "req-1".into(), assumed_prefill: false }]
    );
    let short = entry(vec![(D, F::LmcacheShortAmong { decode: 0 })]);
    let v = rule("lmcache short among", &short, &ctx(&opts, Style::Unknown)).unwrap();
    assert_eq!((v.outcome, v.reasons), (Outcome::Unknown, vec![R::LmcacheShortAmong { decode: 0 }]));
}

#[test]
fn no_params_is_a_miss_only_for_a_pull_connector() {
    let opts = CorrelatorOptions::default();
    let e = entry(vec![(D, F::NoParams)]);
    let v = rule("no params", &e, &ctx(&opts, Style::Params)).unwrap();
    assert_eq!((v.outcome, v.confidence), (Outcome::SilentMiss, Confidence::Sure));
    assert_eq!(v.reasons, vec![R::NoParams { prefill: 0, connector: "ExampleConnector".into() }]);
    assert_eq!(rule("no params", &e, &ctx(&opts, Style::Hits)), None);
    // The producer's expiry confirms it.
    let e = entry(vec![(D, F::NoParams), (P, F::KvExpiredUnread)]);
    let v = rule("no params", &e, &ctx(&opts, Style::Params)).unwrap();
    assert_eq!(v.reasons.last(), Some(&R::ExpiryConfirms { src: P }));
}

#[test]
fn a_full_hit_queue_is_unknown() {
    let opts = CorrelatorOptions::default();
    let v =
        rule("hit queue full", &entry(vec![(D, F::HitQueueFull { decode: 0 })]), &ctx(&opts, Style::Hits));
    assert_eq!(
        v.map(|v| (v.outcome, v.reasons)),
        Some((Outcome::Unknown, vec![R::HitQueueFull { decode: 0 }]))
    );
}

#[test]
fn no_hit_is_a_miss_sure_after_the_wait_likely_early() {
    let opts = CorrelatorOptions::default();
    let v = rule("no hit", &entry(vec![(D, no_hit())]), &ctx(&opts, Style::Hits)).unwrap();
    assert_eq!((v.outcome, v.confidence), (Outcome::SilentMiss, Confidence::Sure));
    assert_eq!(
        v.reasons,
        vec![R::NoHit {
            prefill: 0,
            by_order: false,
            finished: Finished::UnderASecond,
            waited: 2.0,
            busy: false,
            early: None
        }]
    );
    let early = F::NoHitYet { decode: 0, waited: 0.5, added_at: 10.0 };
    let v = rule("no hit", &entry(vec![(D, early)]), &ctx(&opts, Style::Hits)).unwrap();
    assert_eq!(v.confidence, Confidence::Likely);
    assert!(matches!(v.reasons[0], R::NoHit { early: Some(Early::Due), .. }), "{v:?}");
    // Paired by order (the proxy read says nothing of it): the words say
    // which prefill is a guess, as a load paired so says it.
    let mut e = entry(vec![(D, no_hit())]);
    e.trace.join = Join::ByOrder;
    let mut cx = ctx(&opts, Style::Hits);
    cx.proxy_read = false;
    let v = rule("no hit", &e, &cx).unwrap();
    assert!(matches!(v.reasons[0], R::NoHit { by_order: true, .. }), "{v:?}");
    assert!(v.reasons[0].to_string().contains("(prefill paired by arrival order only)"), "{v:?}");
    // A connector of unknown style cannot miss a hit.
    let v = rule("no hit", &entry(vec![(D, no_hit())]), &ctx(&opts, Style::Unknown)).unwrap();
    assert_eq!(v.reasons, vec![R::StyleUnknown { decode: 0, connector: "ExampleConnector".into() }]);
}

#[test]
fn no_hit_joined_by_order_waits_for_the_proxy() {
    let opts = CorrelatorOptions::default();
    let mut e = entry(vec![(D, no_hit())]);
    e.trace.join = Join::ByOrder;
    let mut cx = ctx(&opts, Style::Hits);
    cx.proxy_read = true;
    cx.now = 10.0 + PROXY_WAIT_S / 2.0;
    assert_eq!(rule("no hit", &e, &cx), Some(Verdict::pending()));
    cx.now = 10.0 + PROXY_WAIT_S + 1.0;
    assert_eq!(rule("no hit", &e, &cx).map(|v| v.outcome), Some(Outcome::SilentMiss));
}

#[test]
fn an_expiry_after_the_decode_ran_it_is_a_likely_miss() {
    let opts = CorrelatorOptions::default();
    let e = entry(vec![(P, F::KvExpiredUnread)]);
    let v = rule("expired after decode", &e, &ctx(&opts, Style::Params)).unwrap();
    assert_eq!((v.outcome, v.confidence), (Outcome::SilentMiss, Confidence::Likely));
    assert_eq!(v.reasons, vec![R::ExpiredAfterDecode { decode: 0, src: P }]);
    let notify = F::NotifyFailed { text: "notification_failed".into() };
    let v = rule(
        "expired after decode",
        &entry(vec![(P, F::KvExpiredUnread), (P, notify)]),
        &ctx(&opts, Style::Params),
    );
    assert!(matches!(
        &v.unwrap().reasons[..],
        [R::NotifyExplains { .. }, R::Was { outcome: Outcome::SilentMiss, .. }]
    ));
    let mut e = entry(vec![(P, F::KvExpiredUnread)]);
    e.trace.join = Join::ByOrder;
    assert_eq!(
        rule("expired after decode", &e, &ctx(&opts, Style::Params)),
        None,
        "not the same id: not its run"
    );
}

#[test]
fn the_single_line_rules() {
    let opts = CorrelatorOptions::default();
    let cx = ctx(&opts, Style::Hits);
    let v = rule("restarted before load", &entry(vec![(D, F::RestartedBeforeLoad)]), &cx).unwrap();
    assert_eq!(v.reasons, vec![R::RestartedBeforeLoad { decode: 0 }]);
    let cut = F::CutUndated { instance: D, gap_s: 3.0, stats_seen: false };
    let v = rule("cut undated", &entry(vec![(D, cut)]), &cx).unwrap();
    assert_eq!(v.reasons, vec![R::CutUndated { instance: D, gap_s: 3.0, stats_seen: false }]);
    let v = rule("served alone", &entry(vec![(P, F::ServedAlone { max_tokens: 64 })]), &cx).unwrap();
    assert_eq!((v.outcome, v.confidence), (Outcome::Unknown, Confidence::Sure));
    assert_eq!(v.reasons, vec![R::ServedAlone { src: P, max_tokens: 64 }]);
    let mut alone = entry(vec![(P, F::KvExpiredUnread), (P, F::NotifyFailed { text: "x".into() })]);
    alone.trace.prefill = None;
    alone.trace.decode = None;
    alone.track.decode_at = None;
    assert_eq!(rule("expired alone", &alone, &cx).unwrap().reasons, vec![R::ExpiredAlone { src: P }]);
    assert_eq!(
        rule("notify alone", &alone, &cx).unwrap().reasons,
        vec![R::Notify { src: P, text: "x".into() }]
    );
    // With both sides seen, deadlines judge them instead.
    let both = entry(vec![(P, F::KvExpiredUnread)]);
    assert_eq!(rule("expired alone", &both, &cx), None);
}

#[test]
fn proof_of_a_load_outranks_its_absence() {
    let opts = CorrelatorOptions::default();
    // A hit and a later no-hit call: the hit is the decode's own line.
    let e = entry(vec![(D, no_hit()), (D, F::Hit { decode: 0, contested: 0, from_orphan: false })]);
    assert_eq!(pair(&e, &ctx(&opts, Style::Hits)).outcome, Outcome::Loaded);
    // Params and NoParams both: the params were logged.
    let e = entry(vec![(D, F::NoParams), (D, params())]);
    assert_eq!(pair(&e, &ctx(&opts, Style::Params)).outcome, Outcome::Loaded);
    // A settled group outranks the step it settled.
    let step = F::SharedStep { decode: 0, others: vec![], hits: 0, inject: None, rival: false };
    let group = Group { members: vec![], hits: vec![] };
    let settled = F::GroupSettled { decode: 0, hit: false, inject: None, own: None, group };
    let e = entry(vec![(D, step), (D, settled)]);
    assert!(matches!(pair(&e, &ctx(&opts, Style::Hits)).reasons[0], R::GroupMiss { .. }));
}

#[test]
fn with_no_rule_speaking_time_decides() {
    let opts = CorrelatorOptions::default();
    let e = entry(Vec::new());
    let cx = ctx(&opts, Style::Hits);
    assert_eq!(pair(&e, &cx), time::deadline(&e, &cx));
}
