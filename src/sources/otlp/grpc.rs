//! OTLP/gRPC: `opentelemetry.proto.collector.trace.v1.TraceService/Export`,
//! vLLM's default exporter. tonic decodes (and answers a malformed message
//! with a gRPC error itself); messages are capped at [`MAX_BODY`].

use std::sync::Arc;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use tokio::net::TcpListener;
use tonic::codec::CompressionEncoding;
use tonic::{Request, Response, Status};

use super::{ExportTraceServiceRequest, ExportTraceServiceResponse, MAX_BODY, Sink};

struct Receiver(Arc<Sink>);

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        self.0.deliver(request.get_ref());
        Ok(Response::new(ExportTraceServiceResponse::default()))
    }
}

pub(super) async fn serve(listener: TcpListener, sink: Arc<Sink>) {
    let svc = TraceServiceServer::new(Receiver(sink.clone()))
        .accept_compressed(CompressionEncoding::Gzip)
        .max_decoding_message_size(MAX_BODY);
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    if let Err(e) = tonic::transport::Server::builder()
        .concurrency_limit_per_connection(32)
        .add_service(svc)
        .serve_with_incoming(incoming)
        .await
    {
        sink.reject(format!("OTLP/gRPC server stopped: {e}"));
    }
}
