//! ExampleConnector's folder: the prefill writes KV there and decode reads
//! it back, so both must see one folder and the servers must write it.

use crate::doctor::facts::{InstanceFacts, PairFacts};
use crate::doctor::finding::{Finding, Severity};
use crate::feed::Role;

fn example(i: &InstanceFacts) -> bool {
    i.connector().is_some_and(|c| c == "ExampleConnector" || c.ends_with("StorageConnector"))
}

/// Not one folder for both: two paths on this host that are two folders,
/// or a local (not network) filesystem while the other side is elsewhere.
pub fn not_shared(f: &PairFacts) -> Vec<Finding> {
    let mut out = Vec::new();
    for p in f.of(Role::Prefill).filter(|i| example(i)) {
        for d in f.of(Role::Decode).filter(|i| example(i)) {
            let (Some(pd), Some(dd)) = (&p.kv_dir, &d.kv_dir) else {
                // Only one side here: shared only through a network filesystem.
                let local = [p, d].into_iter().find_map(|i| i.kv_dir.as_ref().map(|k| (i, k)));
                if let Some((i, k)) = local
                    && !f.one_host()
                    && let Ok(m) = &k.meta
                    && !m.network_fs
                {
                    out.push(
                        Finding::new("kv_dir_not_shared", Severity::Problem, format!("{}, {}", p.name(), d.name()), format!("{} keeps its KV in {} on a local filesystem, and the other side runs on another host: decode never finds what the prefill stored", i.name(), k.path))
                            .evidence(format!("{}: not on a network filesystem (/proc/mounts)", k.path))
                            .fix("shared_storage_path on a filesystem both hosts mount (NFS, Lustre...)"),
                    );
                }
                continue;
            };
            if let (Ok(a), Ok(b)) = (&pd.meta, &dd.meta)
                && a.id != b.id
            {
                out.push(
                    Finding::new("kv_dir_not_shared", Severity::Problem, format!("{}, {}", p.name(), d.name()), format!("prefill stores KV in {} and decode reads {}: two different folders, so decode never finds it", pd.path, dd.path))
                        .evidence(format!("{}: device {} inode {}; {}: device {} inode {}", pd.path, a.id.0, a.id.1, dd.path, b.id.0, b.id.1))
                        .fix("the same shared_storage_path on both"),
                );
            }
        }
    }
    out
}

/// A folder that is missing or that no one may write.
pub fn not_writable(f: &PairFacts) -> Vec<Finding> {
    let mut seen: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for i in f.instances.iter().filter(|i| example(i)) {
        let Some(k) = &i.kv_dir else { continue };
        if seen.contains(&k.path.as_str()) {
            continue;
        }
        seen.push(&k.path);
        let cause = match &k.meta {
            Err(e) => format!("its KV folder {} cannot be read: {e}", k.path),
            Ok(m) if !m.writable => {
                format!("its KV folder {} has no write permission: the prefill cannot store KV", k.path)
            }
            Ok(_) => continue,
        };
        out.push(
            Finding::new("kv_dir_not_writable", Severity::Problem, i.name(), cause)
                .evidence(format!("shared_storage_path '{}' ({})", k.path, super::roles::config_source(i)))
                .fix(format!("mkdir -p {} and make it writable by the user vLLM runs as", k.path)),
        );
    }
    out
}
