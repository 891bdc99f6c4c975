#!/usr/bin/env bash
# Whole-process relay figures, side by side in one run, on loopback:
#   Gemini: agate directly, through HAProxy (TLS-terminating and re-encrypting,
#           the same job's TLS part) and through robots-proxy; requests/s with
#           16 clients, a new TLS connection per request (examples/gemini_load.rs),
#           and the CPU per request of HAProxy and of the proxy (/proc/PID/stat
#           around their own runs), against two floors: the proxy's two
#           handshakes in memory (examples/handshake_floor.rs), and the least
#           relay with the proxy's TLS, sockets and all (examples/relay_floor.rs),
#           under the same load.
#   Gopher: gophernicus directly (behind socat, inetd style), through a plain
#           socat TCP relay and through robots-proxy; latency and MB/s
#           (examples/gopher_load.rs). Then robots-proxy against a server that
#           answers at once and one that sleeps 3 ms first (examples/
#           gopher_instant.rs: no fork, no exec): what the proxy itself adds,
#           and what an idle CPU's wake-up adds to it, each beside the least
#           plain relay (examples/relay_floor.rs --plain).
# Installs what it lacks (haproxy, gophernicus, socat, openssl from Debian;
# agate from crates.io). `tests/interop/run --measure` runs it too.
#
#   benches/relay.sh [--seconds 5] [--rounds 3] [--resume] [--only gemini|gopher]
#   PERF=1 benches/relay.sh --only gemini   # also: perf record of the proxy -> $work/perf.data
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=5 rounds=3 resume="" only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --resume) resume=--resume; shift ;;
    --only) only=$2; shift 2 ;;
    *) echo "unknown flag $1" >&2; exit 2 ;;
  esac
done
# shellcheck source=../tests/interop/common.sh
. tests/interop/common.sh
need haproxy haproxy gophernicus gophernicus socat socat openssl openssl
agate=$(find_agate)
start_work
# The proxy is built alone: built in one go with an example, it would link
# the tokio of the dev-dependencies (test-util: a clock that can be paused,
# whose every reading takes a lock), not the one it ships with.
cargo build --release --locked --quiet --bin robots-proxy
cargo build --release --locked --quiet --example gemini_load --example gopher_load \
  --example gopher_instant --example handshake_floor --example relay_floor

# agate, with a robots.txt that allows the bench bot everything.
mkdir -p "$work/content" "$work/gopher/docs"
printf 'User-agent: *\nDisallow: /private\n' > "$work/content/robots.txt"
printf '# A page\nJust a page.\n' > "$work/content/page.gmi"
gport=$(free_port)
"$agate" --content "$work/content" --certs "$work/certs" --addr "127.0.0.1:$gport" \
  --hostname localhost > "$work/agate.log" 2>&1 &
pids+=($!)

# HAProxy: TLS on both sides, ECDSA P-256 like the proxy's generated certificate.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
  -subj /CN=localhost -keyout "$work/haproxy.key" -out "$work/haproxy.crt" 2>/dev/null
cat "$work/haproxy.crt" "$work/haproxy.key" > "$work/haproxy.pem"
xport=$(free_port)
cat > "$work/haproxy.cfg" <<CFG
global
  maxconn 4096
defaults
  mode tcp
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend gemini
  bind 127.0.0.1:$xport ssl crt $work/haproxy.pem
  default_backend agate
backend agate
  server agate 127.0.0.1:$gport ssl verify none sni str(localhost)
CFG
haproxy -db -f "$work/haproxy.cfg" > "$work/haproxy.log" 2>&1 &
haproxy_pid=$!
pids+=($haproxy_pid)

# The floor with its sockets: the least a relay with the proxy's own TLS does
# (examples/relay_floor.rs: blocking, a thread per connection in flight).
fport=$(free_port)
target/release/examples/relay_floor "127.0.0.1:$fport" "127.0.0.1:$gport" > /dev/null 2> "$work/relay_floor.log" &
minimal_pid=$!
pids+=($minimal_pid)

# gophernicus, inetd style behind socat, and a plain socat relay in front of it.
# gophernicus slows a client down to a request a second once it has moved
# 4 GiB, counted in a shared memory segment that outlives it: start afresh
# (one run of this bench moves about 3 GiB).
ipcrm -M 0xbeeb0008 2> /dev/null || true
printf 'Hello from gophernicus.\n' > "$work/gopher/hello.txt"
head -c 16777216 /dev/urandom > "$work/gopher/docs/big.bin"
chmod -R a+rX "$work"
hport=$(free_port)
as_user=""
[ "$(id -u)" = 0 ] && as_user=",su=nobody" # gophernicus refuses to run as root
socat "TCP-LISTEN:$hport,bind=127.0.0.1,fork,reuseaddr" \
  "EXEC:$(command -v gophernicus) -h 127.0.0.1 -p $hport -r $work/gopher$as_user" > /dev/null 2>&1 &
pids+=($!)
rport=$(free_port)
socat "TCP-LISTEN:$rport,bind=127.0.0.1,fork,reuseaddr" "TCP:127.0.0.1:$hport" > /dev/null 2>&1 &
pids+=($!)

# An instant server, and one that sleeps 3 ms before each answer (no fork either).
iport=$(free_port) tport=$(free_port)
target/release/examples/gopher_instant "127.0.0.1:$iport" 2> /dev/null &
pids+=($!)
target/release/examples/gopher_instant "127.0.0.1:$tport" 3 2> /dev/null &
pids+=($!)
# The least plain relay in front of each (examples/relay_floor.rs --plain: blocking, no fork).
ifport=$(free_port) tfport=$(free_port)
target/release/examples/relay_floor "127.0.0.1:$ifport" "127.0.0.1:$iport" --plain > /dev/null 2>&1 &
least_pid=$!
pids+=($least_pid)
target/release/examples/relay_floor "127.0.0.1:$tfport" "127.0.0.1:$tport" --plain > /dev/null 2>&1 &
pids+=($!)
# And the same on tokio's multi-thread runtime, as the proxy runs: the runtime's share.
ikport=$(free_port)
target/release/examples/relay_floor "127.0.0.1:$ikport" "127.0.0.1:$iport" --plain --tokio > /dev/null 2>&1 &
least_tokio_pid=$!
pids+=($least_tokio_pid)

# The proxy at its defaults, but for private upstreams (everything here is on
# loopback) and for the requests it lets into one server at once: at the
# default of 1 (`politeness.per_host_concurrency`), every request to the one
# capsule here would wait for the one before it, and the rate measured would
# be that of one upstream round trip after another, not the relay's. 16, as
# many as the load's clients, as HAProxy has.
pport=$(free_port) oport=$(free_port) mport=$(free_port)
printf '[politeness]\nper_host_concurrency = 16\n' > "$work/proxy.toml"
RUST_LOG=info target/release/robots-proxy run --config "$work/proxy.toml" --gemini-listen "127.0.0.1:$pport" \
  --gopher-listen "127.0.0.1:$oport" --metrics-listen "127.0.0.1:$mport" --agent benchbot \
  --allow-private-upstreams --state-dir "$work/state" --default-delay 0s > "$work/proxy.log" 2>&1 &
proxy_pid=$!
pids+=($proxy_pid)
for port in "$gport" "$xport" "$fport" "$hport" "$rport" "$iport" "$tport" "$ifport" "$tfport" "$ikport" "$pport" "$oport" "$mport"; do wait_port "$port"; done
if [ -n "${PERF:-}" ]; then
  perf record -F 2000 -g --call-graph dwarf,16384 -p "$proxy_pid" -o "$work/perf.data" > /dev/null 2>&1 &
  perf_pid=$!
fi

if [ "$only" != gopher ]; then
  echo "== Gemini: the floor: the proxy's two handshakes in memory (examples/handshake_floor.rs)"
  floor=$(target/release/examples/handshake_floor)
  echo "$floor"
  floor_us=$(echo "$floor" | sed -E 's/^handshake floor: ([0-9]+) .*/\1/')
  echo "== Gemini: agate directly, through HAProxy $(haproxy -v | head -1 | cut -d' ' -f3), through the least relay (minimal), through robots-proxy"
  target/release/examples/gemini_load --direct "127.0.0.1:$gport" --relay "127.0.0.1:$xport" \
    --minimal "127.0.0.1:$fport" --minimal-pid "$minimal_pid" --proxy "127.0.0.1:$pport" --url "gemini://localhost:$gport/page.gmi" --clients 16 \
    --seconds "$seconds" --rounds "$rounds" $resume \
    --proxy-pid "$proxy_pid" --relay-pid "$haproxy_pid" --floor-us "$floor_us"
  echo "upstream TLS handshakes, by kind:"
  curl -s "127.0.0.1:$mport/metrics" | grep '^robots_proxy_tls_handshakes_total' || true
  echo "the least relay's $(grep '^upstream handshakes' "$work/relay_floor.log" | tail -n 1)"
fi
if [ "$only" != gemini ]; then
  echo "== Gopher: gophernicus directly, through socat, through robots-proxy"
  target/release/examples/gopher_load --direct "127.0.0.1:$hport" --relay "127.0.0.1:$rport" \
    --proxy "127.0.0.1:$oport" --proxy-pid "$proxy_pid" --small /hello.txt --big /docs/big.bin \
    --requests 400 --big-requests 20 --rounds "$rounds"
  # The least relay rather than socat beside them: socat's fork per
  # connection, interleaved, would land on the requests beside it.
  echo "== Gopher: an instant server directly, through the least relay and through robots-proxy (what the proxy itself adds)"
  target/release/examples/gopher_load --direct "127.0.0.1:$iport" --relay "127.0.0.1:$ifport" \
    --relay-pid "$least_pid" --proxy "127.0.0.1:$oport" --proxy-pid "$proxy_pid" --small /hello.txt --big /big \
    --requests 1000 --big-requests 20 --rounds "$rounds"
  echo "== Gopher: the instant server through the least relay on tokio (relay) and through robots-proxy"
  target/release/examples/gopher_load --direct "127.0.0.1:$iport" --relay "127.0.0.1:$ikport" \
    --relay-pid "$least_tokio_pid" --proxy "127.0.0.1:$oport" --proxy-pid "$proxy_pid" --small /hello.txt \
    --requests 1000 --big-requests 0 --rounds "$rounds"
  echo "== Gopher: a server answering after 3 ms asleep, directly, through the least relay and through robots-proxy"
  target/release/examples/gopher_load --direct "127.0.0.1:$tport" --relay "127.0.0.1:$tfport" \
    --proxy "127.0.0.1:$oport" --proxy-pid "$proxy_pid" --small /hello.txt \
    --requests 300 --big-requests 0 --rounds "$rounds"
fi
if [ -n "${PERF:-}" ]; then
  kill -INT "$perf_pid"; wait "$perf_pid" || true
  KEEP_WORK=1
  echo "perf data: $work/perf.data"
fi
