//! Wire formats of the protocols the proxy speaks.

pub mod gemini;
