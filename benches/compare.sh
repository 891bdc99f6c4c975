#!/usr/bin/env bash
# Two builds of robots-proxy side by side in one run: an older commit (the
# baseline) and this tree, both in release, against the same servers on
# loopback, measured interleaved by the same drivers (the ways rotate each
# round, so the machine's drift falls on both):
#   Gemini: agate, 16 clients, a new TLS connection per request
#           (examples/gemini_load.rs --baseline): requests/s, and CPU
#           per request of each build (/proc/PID/stat).
#   Gopher: a server that answers at once (examples/gopher_instant.rs):
#           latency p50/p99 and MB/s of a 16 MiB answer
#           (examples/gopher_load.rs --baseline).
# The baseline is built in a git worktree sharing this tree's target
# directory (its dependencies are not built twice).
#
#   benches/compare.sh BASE_COMMIT [--seconds 4] [--rounds 3]
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: benches/compare.sh BASE_COMMIT [--seconds N] [--rounds N]" >&2; exit 2; }
base=$1; shift
seconds=4 rounds=3
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "unknown flag $1" >&2; exit 2 ;;
  esac
done
# shellcheck source=../tests/interop/common.sh
. tests/interop/common.sh
agate=$(find_agate)
start_work
cleanup_more() { git worktree remove --force "$work/base" 2>/dev/null || true; }

target=$(pwd)/target
git worktree add --detach --quiet "$work/base" "$base"
(cd "$work/base" && CARGO_TARGET_DIR=$target cargo build --release --quiet --bin robots-proxy)
cp target/release/robots-proxy "$work/robots-proxy-base"
# The proxy is built alone: built in one go with an example, it would link
# the tokio of the dev-dependencies (test-util: a clock that can be paused,
# whose every reading takes a lock), not the one it ships with.
cargo build --release --locked --quiet --bin robots-proxy
cargo build --release --locked --quiet --example gemini_load --example gopher_load \
  --example gopher_instant
echo "baseline: $(git rev-parse --short "$base") $(git log -1 --format=%s "$base" | cut -c1-60)"
echo "proxied:  this tree, $(git rev-parse --short HEAD)$(git diff --quiet || echo ' + changes')"

mkdir -p "$work/content"
printf 'User-agent: *\nDisallow: /private\n' > "$work/content/robots.txt"
printf '# A page\nJust a page.\n' > "$work/content/page.gmi"
gport=$(free_port) iport=$(free_port)
"$agate" --content "$work/content" --certs "$work/certs" --addr "127.0.0.1:$gport" \
  --hostname localhost > "$work/agate.log" 2>&1 &
pids+=($!)
target/release/examples/gopher_instant "127.0.0.1:$iport" 2> /dev/null &
pids+=($!)

# Both proxies at their defaults, but for private upstreams (all is on
# loopback) and 16 requests in flight to the one capsule, as many as the load
# has clients (benches/relay.sh says why).
printf '[politeness]\nper_host_concurrency = 16\n' > "$work/proxy.toml"
start_proxy() { # start_proxy NAME BINARY: sets ${NAME}_gemini, ${NAME}_gopher, ${NAME}_pid
  local g o m
  g=$(free_port) o=$(free_port) m=$(free_port)
  "$2" run --config "$work/proxy.toml" --gemini-listen "127.0.0.1:$g" --gopher-listen "127.0.0.1:$o" \
    --metrics-listen "127.0.0.1:$m" --agent benchbot --allow-private-upstreams \
    --state-dir "$work/state-$1" --default-delay 0s > "$work/$1.log" 2>&1 &
  pids+=($!)
  printf -v "${1}_gemini" %s "$g"
  printf -v "${1}_gopher" %s "$o"
  printf -v "${1}_pid" %s "$!"
  wait_port "$g"; wait_port "$o"
}
start_proxy base "$work/robots-proxy-base"
start_proxy new target/release/robots-proxy
wait_port "$gport"; wait_port "$iport"

echo "== Gemini: agate directly, through the baseline, through this tree"
target/release/examples/gemini_load --direct "127.0.0.1:$gport" --baseline "127.0.0.1:$base_gemini" \
  --proxy "127.0.0.1:$new_gemini" --url "gemini://localhost:$gport/page.gmi" --clients 16 \
  --seconds "$seconds" --rounds "$rounds" --proxy-pid "$new_pid" --baseline-pid "$base_pid"
echo "== Gopher: an instant server directly, through the baseline, through this tree"
target/release/examples/gopher_load --direct "127.0.0.1:$iport" --baseline "127.0.0.1:$base_gopher" \
  --proxy "127.0.0.1:$new_gopher" --small /hello.txt --big /big \
  --requests 1000 --big-requests 20 --rounds "$rounds"
