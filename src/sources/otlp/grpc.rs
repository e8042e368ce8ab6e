//! OTLP/gRPC: `opentelemetry.proto.collector.trace.v1.TraceService/Export`,
//! vLLM's default exporter. tonic frames, decompresses and decodes (and
//! answers a malformed message with a gRPC error itself); messages are
//! capped at [`MAX_BODY`]. The one method is served by hand, as tonic's
//! generated server would, so that the build needs neither tonic's router
//! (axum) nor the opentelemetry crates' client.

use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper::{Request, Response, header};
use tokio::net::TcpListener;
use tonic::body::Body;
use tonic::codec::CompressionEncoding;
use tonic::server::{Grpc, NamedService, UnaryService};
use tonic::{Code, Status};

use super::proto::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use super::sink::{MAX_BODY, Sink};

const SERVICE: &str = "opentelemetry.proto.collector.trace.v1.TraceService";
const EXPORT: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/// The `Export` call: hand the request's spans to the sink, accept all.
struct Export(Arc<Sink>);

impl UnaryService<ExportTraceServiceRequest> for Export {
    type Response = ExportTraceServiceResponse;
    type Future = Ready<Result<tonic::Response<ExportTraceServiceResponse>, Status>>;

    fn call(&mut self, request: tonic::Request<ExportTraceServiceRequest>) -> Self::Future {
        self.0.deliver(request.get_ref());
        ready(Ok(tonic::Response::new(ExportTraceServiceResponse::default())))
    }
}

/// The `TraceService`: `Export`, and `Unimplemented` for any other path.
#[derive(Clone)]
struct TraceService(Arc<Sink>);

impl NamedService for TraceService {
    const NAME: &'static str = SERVICE;
}

impl tower_service::Service<Request<Body>> for TraceService {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        if req.uri().path() != EXPORT {
            let mut res = Response::new(Body::default());
            res.headers_mut().insert(Status::GRPC_STATUS, (Code::Unimplemented as i32).into());
            res.headers_mut().insert(header::CONTENT_TYPE, tonic::metadata::GRPC_CONTENT_TYPE);
            return Box::pin(ready(Ok(res)));
        }
        let export = Export(self.0.clone());
        Box::pin(async move {
            let mut grpc = Grpc::new(tonic_prost::ProstCodec::default())
                .accept_compressed(CompressionEncoding::Gzip)
                .max_decoding_message_size(MAX_BODY);
            Ok(grpc.unary(export, req).await)
        })
    }
}

pub(super) async fn serve(listener: TcpListener, sink: Arc<Sink>) {
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    if let Err(e) = tonic::transport::Server::builder()
        .concurrency_limit_per_connection(32)
        .serve_with_incoming(TraceService(sink.clone()), incoming)
        .await
    {
        sink.reject(format!("OTLP/gRPC server stopped: {e}"));
    }
}
