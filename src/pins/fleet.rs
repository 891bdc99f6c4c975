//! Pins in fleet mode (`[store] url`): the fleet's pin comes first, and is
//! copied into this process's book, which stands in while the store does not
//! answer.

use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::{Book, Keeper, Mismatch};
use crate::store::Store;

/// Pins shared by the fleet through the store.
pub struct Fleet {
    store: Arc<Store>,
}

impl Fleet {
    pub fn new(store: Arc<Store>) -> Fleet {
        Fleet { store }
    }
}

impl Keeper for Fleet {
    fn check<'a>(
        &'a self,
        book: &'a Book,
        host: &'a str,
        port: u16,
        seen: &'a str,
    ) -> BoxFuture<'a, Result<(), Mismatch>> {
        Box::pin(async move {
            let fleet = if self.store.is_up() {
                self.store.pin(host, port, seen).await.ok()
            } else {
                None
            };
            book.check(host, port, seen, fleet)
        })
    }

    fn forget<'a>(&'a self, book: &'a Book, host: &'a str, port: u16) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            if let Err(e) = self.store.forget_pin(host, port).await {
                tracing::warn!(host, port, error = %e, "forgetting the fleet's pin failed");
            }
            book.forget(host, port)
        })
    }
}
