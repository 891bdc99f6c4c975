//! Gemini, as one unit: its wire format ([`wire`]: requests, headers, status
//! lines), serving a request on the Gemini listener and answering each fate
//! ([`serve`]), and fetching a capsule's robots.txt ([`robots`]).

pub mod answer;
pub mod robots;
pub mod serve;
pub mod titan;
pub mod wire;
