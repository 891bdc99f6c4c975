#!/usr/bin/env bash
# Holds 10,000 Gopher requests waiting on one slow host (Crawl-delay 2 ms) and
# reports the proxy's RSS and how late each request is admitted when its turn
# comes. The driver and the proxy each need a little over N open files.
#   benches/hold-10k.sh [--requests N] [--delay-ms MS]
set -euo pipefail
cd "$(dirname "$0")/.."
# Each process needs a little over N sockets, and the proxy sizes its
# connection cap by its limit (3 descriptors a connection): raise the hard
# limit where allowed (root), else use what there is.
ulimit -Hn 65536 2>/dev/null || true
ulimit -n "$(ulimit -Hn)"
cargo build --release --locked --quiet
# The proxy serves at most a third of its open-files limit as connections
# (client, upstream and a robots.txt fetch each): where the limit cannot be
# raised far enough, hold what it allows and say so.
fits=$(( $(ulimit -n) / 3 - 200 ))
args=("$@")
if [[ " $* " != *" --requests "* ]] && [ "$fits" -lt 10000 ]; then
  echo "open files limited to $(ulimit -n) here: holding $fits requests, not 10000"
  args+=(--requests "$fits")
fi
cargo run --release --locked --quiet --example hold_10k -- "${args[@]}"
