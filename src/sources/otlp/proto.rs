//! The OTLP trace messages, as far as pdtop reads them (field numbers and
//! types of opentelemetry-proto's `collector/trace/v1/trace_service.proto`,
//! `trace/v1/trace.proto`, `common/v1/common.proto` and
//! `resource/v1/resource.proto`). Protobuf decoders skip the fields a
//! message type does not name, so a full export decodes into these; defining
//! them here spares the build the opentelemetry crates and tonic's client.

/// `ExportTraceServiceRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportTraceServiceRequest {
    #[prost(message, repeated, tag = "1")]
    pub resource_spans: Vec<ResourceSpans>,
}

/// `ExportTraceServiceResponse`: pdtop sends the empty one (all accepted).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportTraceServiceResponse {
    #[prost(message, optional, tag = "1")]
    pub partial_success: Option<ExportTracePartialSuccess>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportTracePartialSuccess {
    #[prost(int64, tag = "1")]
    pub rejected_spans: i64,
    #[prost(string, tag = "2")]
    pub error_message: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ResourceSpans {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    pub scope_spans: Vec<ScopeSpans>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Resource {
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ScopeSpans {
    #[prost(message, repeated, tag = "2")]
    pub spans: Vec<Span>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Span {
    #[prost(bytes = "vec", tag = "1")]
    pub trace_id: Vec<u8>,
    #[prost(string, tag = "5")]
    pub name: String,
    #[prost(fixed64, tag = "7")]
    pub start_time_unix_nano: u64,
    #[prost(fixed64, tag = "8")]
    pub end_time_unix_nano: u64,
    #[prost(message, repeated, tag = "9")]
    pub attributes: Vec<KeyValue>,
    #[prost(message, optional, tag = "15")]
    pub status: Option<Status>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Status {
    #[prost(string, tag = "2")]
    pub message: String,
    /// `STATUS_CODE_UNSET` 0, `OK` 1, `ERROR` 2.
    #[prost(int32, tag = "3")]
    pub code: i32,
}

/// `Status.code` of a failed span.
pub const STATUS_CODE_ERROR: i32 = 2;

#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

/// `AnyValue`: the scalar kinds; an array, a key-value list or bytes decode
/// as no value (none of pdtop's attributes is one).
#[derive(Clone, PartialEq, prost::Message)]
pub struct AnyValue {
    #[prost(oneof = "Value", tags = "1, 2, 3, 4")]
    pub value: Option<Value>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Value {
    #[prost(string, tag = "1")]
    StringValue(String),
    #[prost(bool, tag = "2")]
    BoolValue(bool),
    #[prost(int64, tag = "3")]
    IntValue(i64),
    #[prost(double, tag = "4")]
    DoubleValue(f64),
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::collector::trace::v1 as full_collector;
    use opentelemetry_proto::tonic::common::v1 as full_common;
    use opentelemetry_proto::tonic::resource::v1 as full_resource;
    use opentelemetry_proto::tonic::trace::v1 as full_trace;
    use prost::Message;

    use super::*;

    fn kv(key: &str, v: full_common::any_value::Value) -> full_common::KeyValue {
        full_common::KeyValue {
            key: key.into(),
            value: Some(full_common::AnyValue { value: Some(v) }),
            key_strindex: 0,
        }
    }

    /// Every field of the full schema set: what pdtop reads survives, the
    /// rest is skipped, and nothing fails to decode.
    #[test]
    fn a_full_export_decodes_into_the_subset() {
        use full_common::any_value::Value as V;
        let array = V::ArrayValue(full_common::ArrayValue {
            values: vec![full_common::AnyValue { value: Some(V::IntValue(1)) }],
        });
        let span = full_trace::Span {
            trace_id: vec![0xab; 16],
            span_id: vec![1; 8],
            trace_state: "k=v".into(),
            parent_span_id: vec![2; 8],
            flags: 1,
            name: "llm_request".into(),
            kind: 2,
            start_time_unix_nano: 1_700_000_000_000_000_000,
            end_time_unix_nano: 1_700_000_001_500_000_000,
            attributes: vec![
                kv("gen_ai.request.id", V::StringValue("cmpl-1".into())),
                kv("gen_ai.usage.prompt_tokens", V::IntValue(512)),
                kv("gen_ai.latency.e2e", V::DoubleValue(1.5)),
                kv("flag", V::BoolValue(true)),
                kv("list", array),
                kv("raw", V::BytesValue(vec![0, 255])),
            ],
            dropped_attributes_count: 3,
            events: vec![full_trace::span::Event {
                time_unix_nano: 5,
                name: "ev".into(),
                attributes: vec![kv("a", V::IntValue(1))],
                dropped_attributes_count: 0,
            }],
            dropped_events_count: 1,
            links: vec![full_trace::span::Link {
                trace_id: vec![3; 16],
                span_id: vec![4; 8],
                ..Default::default()
            }],
            dropped_links_count: 2,
            status: Some(full_trace::Status { message: "boom".into(), code: 2 }),
        };
        let full = full_collector::ExportTraceServiceRequest {
            resource_spans: vec![full_trace::ResourceSpans {
                resource: Some(full_resource::Resource {
                    attributes: vec![kv("service.name", V::StringValue("vllm-decode".into()))],
                    dropped_attributes_count: 1,
                    entity_refs: vec![],
                }),
                scope_spans: vec![full_trace::ScopeSpans {
                    scope: Some(full_common::InstrumentationScope {
                        name: "vllm".into(),
                        ..Default::default()
                    }),
                    spans: vec![span],
                    schema_url: "https://opentelemetry.io/schemas/1.0".into(),
                }],
                schema_url: "s".into(),
            }],
        };
        let ours = ExportTraceServiceRequest::decode(full.encode_to_vec().as_slice()).expect("decodes");
        let rs = &ours.resource_spans[0];
        let attr = |kvs: &[KeyValue], k: &str| kvs.iter().find(|a| a.key == k).and_then(|a| a.value.clone());
        let resource = rs.resource.as_ref().expect("resource");
        assert_eq!(
            attr(&resource.attributes, "service.name"),
            Some(AnyValue { value: Some(Value::StringValue("vllm-decode".into())) })
        );
        let s = &rs.scope_spans[0].spans[0];
        assert_eq!((s.trace_id.as_slice(), s.name.as_str()), (&[0xab; 16][..], "llm_request"));
        assert_eq!(
            (s.start_time_unix_nano, s.end_time_unix_nano),
            (1_700_000_000_000_000_000, 1_700_000_001_500_000_000)
        );
        assert_eq!(s.status, Some(Status { message: "boom".into(), code: STATUS_CODE_ERROR }));
        assert_eq!(
            attr(&s.attributes, "gen_ai.usage.prompt_tokens").and_then(|v| v.value),
            Some(Value::IntValue(512))
        );
        assert_eq!(
            attr(&s.attributes, "gen_ai.latency.e2e").and_then(|v| v.value),
            Some(Value::DoubleValue(1.5))
        );
        assert_eq!(attr(&s.attributes, "flag").and_then(|v| v.value), Some(Value::BoolValue(true)));
        // Kinds pdtop never reads: the attribute is there, its value is not.
        assert_eq!(attr(&s.attributes, "list"), Some(AnyValue { value: None }));
        assert_eq!(attr(&s.attributes, "raw"), Some(AnyValue { value: None }));
        assert_eq!(s.attributes.len(), 6);
    }

    /// The response pdtop sends is the one the full schema reads.
    #[test]
    fn the_response_is_an_export_response() {
        let ours = ExportTraceServiceResponse {
            partial_success: Some(ExportTracePartialSuccess { rejected_spans: 2, error_message: "x".into() }),
        };
        let full =
            full_collector::ExportTraceServiceResponse::decode(ours.encode_to_vec().as_slice()).unwrap();
        let p = full.partial_success.expect("partial_success");
        assert_eq!((p.rejected_spans, p.error_message.as_str()), (2, "x"));
    }
}
