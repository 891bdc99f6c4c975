//! The protocols served to crawlers, each one folder: its wire format, its
//! listener's or drop-in's serve, its answers, its robots.txt fetcher. None
//! imports another (tests/suite/docs.rs checks it); what they share lives below
//! them (`protocol` for the line reader, the ports table and sniffing;
//! `proxy` for the pump and `serve_admitted`; `refusal` for the answer
//! families). Adding one is a folder here plus the registration rows listed
//! in docs/architecture.md.

pub mod gemini;
pub mod gopher;
pub mod nex;
pub mod spartan;
