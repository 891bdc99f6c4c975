//! Gopher, as one unit: its wire format ([`wire`]: selectors, error menus),
//! its menus as they stream ([`menu`]: cut into items, rewritten), serving
//! a request on the Gopher listener and answering each fate ([`serve`]), and
//! fetching a gopherhole's robots.txt ([`robots`]: `/robots.txt`, then the
//! fallbacks).

pub mod menu;
pub mod robots;
pub mod serve;
pub mod wire;
