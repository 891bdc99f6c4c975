//! Gopher, as one unit: its wire format ([`wire`]: selectors, error menus,
//! the menu rewriter), serving a request on the Gopher listener and answering
//! each fate ([`serve`]), and fetching a gopherhole's robots.txt
//! ([`robots`]: `/robots.txt`, then the fallbacks).

pub mod robots;
pub mod serve;
pub mod wire;
