//! Pins in fleet mode (`[store] url`): the fleet's pin comes first, and is
//! copied into this process's book, which stands in while the store does not
//! answer.

use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::{Book, Keeper, Mismatch};
use crate::store::Store;

/// Pins shared by the fleet through the store, copied into this process's
/// `book`.
pub struct Fleet {
    store: Arc<Store>,
    book: Book,
}

impl Fleet {
    pub fn new(store: Arc<Store>, book: Book) -> Fleet {
        Fleet { store, book }
    }
}

impl Keeper for Fleet {
    fn check<'a>(
        &'a self,
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
            self.book.check(host, port, seen, fleet)
        })
    }

    fn forget<'a>(&'a self, host: &'a str, port: u16) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            if let Err(e) = self.store.forget_pin(host, port).await {
                tracing::warn!(host, port, error = %e, "forgetting the fleet's pin failed");
            }
            self.book.forget(host, port)
        })
    }

    fn book(&self) -> &Book {
        &self.book
    }
}
