#!/usr/bin/env bash
# Holds 10,000 Gopher requests waiting on one slow host (Crawl-delay 2 ms) and
# reports the proxy's RSS and how late each request is admitted when its turn
# comes. The driver and the proxy each need a little over N open files.
#   benches/hold-10k.sh [--requests N] [--delay-ms MS]
set -euo pipefail
cd "$(dirname "$0")/.."
ulimit -n "$(ulimit -Hn)" # each process needs a little over N sockets
cargo build --release --locked --quiet
cargo run --release --locked --quiet --example hold_10k -- "$@"
