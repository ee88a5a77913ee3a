//! One bidder's accept loop: each connection to the hyper server (`server`, TLS included) or,
//! for benchmarks, the lean one (`lean`).

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::Transport;
use crate::ctx::{BidderCtx, shutdown_signalled};

/// Accepts until the fleet stops; a failed accept (EMFILE, say) backs off instead of spinning.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    transport: Transport,
    tls: Option<Arc<http_front::ServerTls>>,
    ctx: Arc<BidderCtx>,
) {
    let stop = shutdown_signalled(ctx.shutdown.clone());
    tokio::pin!(stop);
    loop {
        let accepted = tokio::select! {
            biased;
            () = &mut stop => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                // Small request/response exchanges: Nagle would add delay for nothing.
                let _ = stream.set_nodelay(true);
                match tls.as_ref().map(|t| t.acceptor()) {
                    None if transport == Transport::Lean => {
                        tokio::spawn(crate::lean::serve(stream, peer, ctx.clone()));
                    }
                    None => {
                        tokio::spawn(crate::server::serve_connection(stream, peer, ctx.clone()));
                    }
                    Some(acceptor) => {
                        let ctx = ctx.clone();
                        tokio::spawn(async move {
                            match acceptor.accept(stream).await {
                                Ok(stream) => {
                                    crate::server::serve_connection(stream, peer, ctx).await
                                }
                                Err(e) => {
                                    tracing::debug!(%peer, error = %e, "TLS handshake failed")
                                }
                            }
                        });
                    }
                }
            }
            Err(e) => {
                // E.g. EMFILE: back off instead of spinning; the listener stays usable.
                tracing::warn!(bidder = %ctx.profile.name, error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    tracing::debug!(bidder = %ctx.profile.name, "listener closed");
}
