//! The ExampleConnector's `shared_storage_path`: one folder per stored
//! prompt (`<md5 of the token ids>/<layer>.safetensors`). A new folder is a
//! prompt stored; the bytes of its files are what was written. For this
//! connector those bytes are the transfer.

use std::path::Path;

use crate::feed::{FolderStat, KvDirSnapshot};

/// Lists the folders and sums their files. A missing directory is an error
/// the UI shows ("connector directory missing"), never a panic.
pub fn scan(dir: &Path) -> Result<KvDirSnapshot, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut out = KvDirSnapshot::new();
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_dir() {
            continue;
        }
        let mut stat = FolderStat::default();
        // A folder may vanish while it is read: count what is there.
        if let Ok(files) = std::fs::read_dir(entry.path()) {
            for f in files.flatten() {
                if let Ok(m) = f.metadata()
                    && m.is_file()
                {
                    stat.files += 1;
                    stat.bytes += m.len();
                }
            }
        }
        out.insert(entry.file_name().to_string_lossy().into_owned(), stat);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_files_and_bytes() {
        let dir = std::env::temp_dir().join(format!("pdtop-kvdir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("abc")).unwrap();
        std::fs::write(dir.join("abc/model.layers.0.self_attn.attn.safetensors"), vec![0u8; 100]).unwrap();
        std::fs::write(dir.join("abc/model.layers.1.self_attn.attn.safetensors"), vec![0u8; 50]).unwrap();
        std::fs::write(dir.join("stray-file"), b"x").unwrap();
        let s = scan(&dir).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s["abc"], FolderStat { files: 2, bytes: 150 });
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(scan(&dir).unwrap_err().contains("pdtop-kvdir"));
    }
}
