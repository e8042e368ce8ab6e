//! What a verdict is made of: the hops of a request, the outcomes, how
//! the two sides were joined and how sure a verdict is.

use std::fmt;

/// One step of a disaggregated request, in the order a healthy one takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hop {
    Proxy,
    /// The prefill instance (`kv_producer`).
    Producer,
    /// The KV connector moving (or loading) the prefill's KV.
    Connector,
    /// The decode instance (`kv_consumer`).
    Consumer,
}

impl Hop {
    /// The hop's one name, on screen and in `check --json` alike.
    pub fn name(self) -> &'static str {
        match self {
            Hop::Proxy => "proxy",
            Hop::Producer => "prefill",
            Hop::Connector => "connector",
            Hop::Consumer => "decode",
        }
    }
}

impl fmt::Display for Hop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The verdict on one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Not decidable yet: waiting for a hit line, the decode side, a deadline.
    Pending,
    /// The decode instance loaded KV it did not compute.
    Loaded,
    /// The prefill ran, the decode instance recomputed the prompt, and nothing
    /// reported an error. The one verdict pdtop exists for.
    SilentMiss,
    /// The decode instance served a request no prefill instance saw.
    NoPrefill,
    /// A hop failed visibly (non-2xx, engine death, proxy error).
    Error,
    /// The client went away mid-request (`Aborted request(s)`): neither an
    /// error of the pair nor a miss, whatever was loaded before.
    Cancelled,
    /// The logs do not allow a verdict (no shared ids, connector that logs
    /// nothing per request, proxy lines only, ambiguous concurrent hits).
    Unknown,
}

impl Outcome {
    /// The outcome's machine name (`check --json`, recordings, per-request
    /// ledgers).
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Pending => "pending",
            Outcome::Loaded => "loaded",
            Outcome::SilentMiss => "silent_miss",
            Outcome::NoPrefill => "no_prefill",
            Outcome::Error => "error",
            Outcome::Cancelled => "cancelled",
            Outcome::Unknown => "unknown",
        }
    }

    /// The same outcome in words on screen: loud where it is the alarm.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::SilentMiss => "SILENT MISS",
            Outcome::NoPrefill => "no prefill",
            Outcome::Error => "ERROR",
            o => o.name(),
        }
    }
}

/// How the prefill side and the decode side of a trace were put together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Join {
    /// Both sides logged the same request id (or the decode's
    /// `kv_transfer_params` named the prefill's internal id).
    ById,
    /// No shared id: the prefill copy and the decode request reported the
    /// same prompt length (spans, request details) and no other prefill
    /// in the window did. As exact as an id.
    ByPromptTokens,
    /// No shared id: paired by arrival order within a time window. A guess.
    ByOrder,
}

impl Join {
    /// How the two sides were joined, in words.
    pub fn words(self) -> &'static str {
        match self {
            Join::ById => "joined by id",
            Join::ByPromptTokens => "joined by prompt length",
            Join::ByOrder => "joined by arrival order",
        }
    }
}

impl Join {
    /// Whether the two sides are known to be one request (not a guess).
    pub fn exact(self) -> bool {
        self != Join::ByOrder
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Confidence {
    /// Per-request evidence, no alternative reading.
    Sure,
    /// Evidence that fits, with a plausible alternative (concurrency, a busy queue).
    Likely,
    /// Built on a guess (an order join); never enough for a miss on its own.
    Unsure,
}

impl Confidence {
    /// How sure, in a word.
    pub fn word(self) -> &'static str {
        match self {
            Confidence::Sure => "sure",
            Confidence::Likely => "likely",
            Confidence::Unsure => "unsure",
        }
    }
}
