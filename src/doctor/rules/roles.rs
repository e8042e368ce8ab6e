//! Roles: every instance runs a connector, prefill produces, decode consumes.

use crate::doctor::facts::{InstanceFacts, PairFacts};
use crate::doctor::finding::{Finding, Severity};
use crate::feed::Role;

/// The start-up arguments were seen and held no `kv_transfer_config`.
pub fn roles_missing(f: &PairFacts) -> Vec<Finding> {
    f.instances
        .iter()
        .filter(|i| i.startup.connector.as_deref() == Some("none"))
        .map(|i| {
            Finding::new(
                "connector_missing",
                Severity::Problem,
                i.name(),
                "started without --kv-transfer-config: it neither stores nor loads KV, every prompt is computed here",
            )
            .evidence(format!("{}: no kv_transfer_config in its start-up arguments", config_source(i)))
            .fix(format!(
                "start it with --kv-transfer-config '{{\"kv_connector\":\"...\",\"kv_role\":\"{}\"}}'",
                expected_role(i.role)
            ))
        })
        .collect()
}

fn expected_role(r: Role) -> &'static str {
    match r {
        Role::Prefill => "kv_producer",
        Role::Decode => "kv_consumer",
    }
}

/// Where an instance's config was read, for evidence.
pub fn config_source(i: &InstanceFacts) -> String {
    match (&i.log, &i.process) {
        (Some(l), _) if l.start.is_some() => {
            let line = l.start.as_ref().map_or(0, |a| a.line);
            format!("{} line {line} (non-default args)", l.file)
        }
        (_, Some(p)) => format!("argv of PID {}", p.pid),
        _ => "its start-up".into(),
    }
}

/// What says this instance consumes or produces: its `kv_role`, else the
/// consumer-only metric family.
fn role_evidence(i: &InstanceFacts, version_has_family: bool) -> Option<(&'static str, String)> {
    if let Some(r) = i.startup.kv_role.as_deref() {
        let r: &'static str = match r {
            "kv_consumer" => "kv_consumer",
            "kv_producer" => "kv_producer",
            _ => return None,
        };
        return Some((r, format!("kv_role='{r}' ({})", config_source(i))));
    }
    let m = i.metrics.as_ref()?;
    if m.kv_fetch_family {
        return Some((
            "kv_consumer",
            "its /metrics serves vllm:num_requests_kv_fetch_by_stage, registered only for kv_consumer or kv_both".into(),
        ));
    }
    version_has_family.then(|| {
        (
            "kv_producer",
            "its /metrics lacks vllm:num_requests_kv_fetch_by_stage, which its version serves on consumers"
                .into(),
        )
    })
}

/// A consumer behind `--prefill`, a producer behind `--decode`.
pub fn roles_swapped(f: &PairFacts) -> Vec<Finding> {
    // The family's absence says something only where the same version
    // serves it on another instance.
    let has_family = |i: &InstanceFacts| {
        f.instances.iter().any(|o| {
            o.metrics.as_ref().is_some_and(|m| m.kv_fetch_family)
                && o.version.is_some()
                && o.version == i.version
        })
    };
    let wrong: Vec<(&InstanceFacts, String)> = f
        .instances
        .iter()
        .filter_map(|i| {
            let (role, ev) = role_evidence(i, i.role == Role::Decode && has_family(i))?;
            let bad = match i.role {
                Role::Prefill => role == "kv_consumer",
                Role::Decode => role == "kv_producer",
            };
            bad.then_some((i, ev))
        })
        .collect();
    if wrong.is_empty() {
        return Vec::new();
    }
    let both_sides = wrong.iter().any(|(i, _)| i.role == Role::Prefill)
        && wrong.iter().any(|(i, _)| i.role == Role::Decode);
    // NixlConnector takes the direction from each request's
    // kv_transfer_params, not from kv_role (pull_scheduler.py, 0.33).
    let nixl = f.instances.iter().all(InstanceFacts::is_nixl);
    let (severity, effect) = if nixl {
        (
            Severity::Warning,
            "NixlConnector takes each transfer's direction from the request, so this works, but the consumer-only bookkeeping runs on the wrong side",
        )
    } else {
        (
            Severity::Problem,
            "the prefill stores nothing for decode, or decode loads nothing: every prompt is recomputed",
        )
    };
    let cause = if both_sides {
        format!("the roles are swapped: {effect}")
    } else {
        format!("a role on the wrong side: {effect}")
    };
    let subject: Vec<String> = wrong.iter().map(|(i, _)| i.name()).collect();
    let mut out = Finding::new("roles_swapped", severity, subject.join(", "), cause);
    for (i, ev) in &wrong {
        out = out.evidence(format!("{}: {ev}", i.name()));
    }
    vec![out.fix("\"kv_role\":\"kv_producer\" in --kv-transfer-config of the prefill, \"kv_role\":\"kv_consumer\" on the decode")]
}
