//! A matrix answer (`/api/v1/query` of a range selector) read as it is
//! parsed: each series' labels borrowed from the body into one reused list,
//! each sample handed on as `(milliseconds, value text)` borrowed too, so
//! a refresh of 64 instances (~5 MB, ~40,000 samples) allocates nothing
//! per sample and nothing per series but the labels written with escapes.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::api::ms;

/// One label, borrowed from the answer unless the server escaped it.
pub type Label<'a> = (Cow<'a, str>, Cow<'a, str>);

/// What the answer is read into.
pub trait MatrixSink {
    /// A series begins; `false`: its samples are not wanted.
    fn series(&mut self, labels: &[Label<'_>]) -> bool;
    /// One sample of the last wanted series: its time in milliseconds and
    /// its value as the server wrote it (`"1"`, `"NaN"`, `"+Inf"`).
    fn sample(&mut self, ts_ms: i64, value: &str);
}

/// Reads `body` into `sink`; the server's own error text when it answered
/// one (`bad_data: parse error …`).
pub fn read<S: MatrixSink>(body: &[u8], sink: &mut S) -> Result<(), String> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let mut labels = Vec::new();
    let top = TopSeed { sink, labels: &mut labels }
        .deserialize(&mut de)
        .and_then(|t| de.end().map(|()| t))
        .map_err(|e| format!("not a Prometheus API answer: {e}"))?;
    if top.status.as_deref() != Some("success") {
        return Err(format!(
            "{}: {}",
            top.error_type.as_deref().unwrap_or("error"),
            top.error.as_deref().unwrap_or("no error text")
        ));
    }
    if !top.data {
        return Err("answer without data".into());
    }
    Ok(())
}

/// A string borrowed from the body when it holds no escape.
#[derive(Deserialize)]
struct Str<'a>(#[serde(borrow)] Cow<'a, str>);

#[derive(Default)]
struct Top {
    status: Option<String>,
    error: Option<String>,
    error_type: Option<String>,
    data: bool,
}

struct TopSeed<'s, 'l, 'de, S> {
    sink: &'s mut S,
    labels: &'l mut Vec<Label<'de>>,
}

impl<'de, S: MatrixSink> DeserializeSeed<'de> for TopSeed<'_, '_, 'de, S> {
    type Value = Top;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Top, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, S: MatrixSink> Visitor<'de> for TopSeed<'_, '_, 'de, S> {
    type Value = Top;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an API answer")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top, A::Error> {
        let mut top = Top::default();
        while let Some(Str(key)) = map.next_key()? {
            match key.as_ref() {
                "status" => top.status = Some(map.next_value::<Str>()?.0.into_owned()),
                "error" => top.error = map.next_value::<Option<String>>()?,
                "errorType" => top.error_type = map.next_value::<Option<String>>()?,
                "data" => {
                    top.data = map.next_value_seed(DataSeed { sink: self.sink, labels: self.labels })?
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(top)
    }
}

/// `{"resultType": "matrix", "result": [series…]}`; `null` is no data.
struct DataSeed<'s, 'l, 'de, S> {
    sink: &'s mut S,
    labels: &'l mut Vec<Label<'de>>,
}

impl<'de, S: MatrixSink> DeserializeSeed<'de> for DataSeed<'_, '_, 'de, S> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de, S: MatrixSink> Visitor<'de> for DataSeed<'_, '_, 'de, S> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("the answer's data")
    }
    fn visit_none<E>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_map(self)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        while let Some(Str(key)) = map.next_key()? {
            if key == "result" {
                map.next_value_seed(ResultSeed { sink: &mut *self.sink, labels: &mut *self.labels })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(true)
    }
}

/// The list of series.
struct ResultSeed<'s, 'l, 'de, S> {
    sink: &'s mut S,
    labels: &'l mut Vec<Label<'de>>,
}

impl<'de, S: MatrixSink> DeserializeSeed<'de> for ResultSeed<'_, '_, 'de, S> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, S: MatrixSink> Visitor<'de> for ResultSeed<'_, '_, 'de, S> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of series")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq
            .next_element_seed(SeriesSeed { sink: &mut *self.sink, labels: &mut *self.labels })?
            .is_some()
        {}
        Ok(())
    }
}

/// `{"metric": {labels}, "values": [[ts, "v"], …]}`. The server writes
/// `metric` first; samples that come before it are kept until it does.
struct SeriesSeed<'s, 'l, 'de, S> {
    sink: &'s mut S,
    labels: &'l mut Vec<Label<'de>>,
}

impl<'de, S: MatrixSink> DeserializeSeed<'de> for SeriesSeed<'_, '_, 'de, S> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, S: MatrixSink> Visitor<'de> for SeriesSeed<'_, '_, 'de, S> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a series")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        // None until the labels are read; then whether the samples are wanted.
        let mut wanted: Option<bool> = None;
        let mut early: Vec<(i64, Cow<'de, str>)> = Vec::new();
        while let Some(Str(key)) = map.next_key()? {
            match key.as_ref() {
                "metric" => {
                    self.labels.clear();
                    map.next_value_seed(LabelsSeed(&mut *self.labels))?;
                    let w = self.sink.series(self.labels);
                    if w {
                        for (ts, v) in early.drain(..) {
                            self.sink.sample(ts, &v);
                        }
                    }
                    wanted = Some(w);
                }
                "values" => match wanted {
                    Some(w) => map.next_value_seed(ValuesSeed { sink: w.then_some(&mut *self.sink) })?,
                    None => {
                        early = map
                            .next_value::<Vec<(f64, Str<'de>)>>()?
                            .into_iter()
                            .map(|(t, Str(v))| (ms(t), v))
                            .collect()
                    }
                },
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// A label set into the reused list.
struct LabelsSeed<'l, 'de>(&'l mut Vec<Label<'de>>);

impl<'de> DeserializeSeed<'de> for LabelsSeed<'_, 'de> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for LabelsSeed<'_, 'de> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a label set")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some((Str(k), Str(v))) = map.next_entry()? {
            self.0.push((k, v));
        }
        Ok(())
    }
}

/// The samples of one series, each handed to the sink (or skipped).
struct ValuesSeed<'s, S> {
    sink: Option<&'s mut S>,
}

impl<'de, S: MatrixSink> DeserializeSeed<'de> for ValuesSeed<'_, S> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, S: MatrixSink> Visitor<'de> for ValuesSeed<'_, S> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of [time, \"value\"]")
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        while let Some((t, Str(v))) = seq.next_element::<(f64, Str<'de>)>()? {
            if let Some(sink) = self.sink.as_deref_mut() {
                sink.sample(ms(t), &v);
            }
        }
        Ok(())
    }
}
