//! Log line parsers (filled in by the logs work).
