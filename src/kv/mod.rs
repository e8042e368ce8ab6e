//! KV-cache size arithmetic (filled in by the kv work).
