#!/usr/bin/env bash
# Instructions per relayed request of the whole proxy, by protocol: Gemini
# (a TLS connection per request), Gopher (a TCP connection per request) and
# HTTP (absolute-form GETs on one keep-alive connection), counted by
# valgrind's callgrind over the proxy's process (examples/exchange_load.rs
# sends them, checked, one after another, to an origin it starts on
# loopback). Each protocol runs 200 and 600 requests on a fresh proxy with one
# worker thread (the count of a multi-threaded runtime depends on how its
# threads happen to steal and park); the difference / 400 is one request,
# start-up, robots.txt's one fetch and shutdown cancelled out. Unlike time,
# the count hardly depends on what else the machine is doing; what varies is
# how often the runtime finds a socket not ready yet and parks (about ±3 % of
# a Gopher request, measured), so each figure is the median of three runs,
# the two builds' runs interleaved.
#
# Both builds are made with one codegen unit (in target/instructions): with
# the release profile's sixteen, how a change splits the crate between units
# moves what is inlined where, and a request's count by several per cent
# either way with no change on the request path (measured: the same
# comparison read +4.4 % for Gopher with sixteen units, -2.7 % with one).
#
# With BASE_COMMIT, that commit is built too (in a git worktree sharing the
# target directory) and counted beside this tree, with the ratio.
#
#   benches/exchange-instructions.sh [BASE_COMMIT]
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-}
# shellcheck source=../tests/interop/common.sh
. tests/interop/common.sh
if ! command -v valgrind >/dev/null; then
  apt-get install -y -qq valgrind >/dev/null
fi
start_work
cleanup_more() { git worktree remove --force "$work/base" 2>/dev/null || true; }
target=$(pwd)/target/instructions
export CARGO_TARGET_DIR=$target CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1
# The proxy is built alone: built in one go with an example, it would link
# the tokio of the dev-dependencies (test-util: a clock that can be paused,
# whose every reading takes a lock), not the one it ships with.
cargo build --release --locked --quiet --bin robots-proxy
cp "$target/release/robots-proxy" "$work/robots-proxy"
cargo build --release --locked --quiet --example exchange_load
cp "$target/release/examples/exchange_load" "$work/exchange_load"
builds=(robots-proxy)
if [ -n "$base" ]; then
  git worktree add --detach --quiet "$work/base" "$base"
  (cd "$work/base" && cargo build --release --quiet --bin robots-proxy)
  cp "$target/release/robots-proxy" "$work/robots-proxy-base"
  builds=(robots-proxy-base robots-proxy)
fi

# count BUILD PROTOCOL REQUESTS -> instructions of the whole run
count() {
  local gport oport hport mport out
  gport=$(free_port) oport=$(free_port) hport=$(free_port) mport=$(free_port)
  out="$work/callgrind.$1.$2.$3"
  rm -rf "$work/state"
  printf '[limits]\nworker_threads = 1\n' > "$work/proxy.toml"
  RUST_LOG=warn valgrind --tool=callgrind --callgrind-out-file=/dev/null --log-file="$out" \
    "$work/$1" run --config "$work/proxy.toml" --gemini-listen "127.0.0.1:$gport" --gopher-listen "127.0.0.1:$oport" \
    --http-listen "127.0.0.1:$hport" --metrics-listen "127.0.0.1:$mport" --agent benchbot \
    --allow-private-upstreams --state-dir "$work/state" --default-delay 0s > /dev/null 2>&1 &
  local pid=$!
  for port in "$gport" "$oport" "$hport"; do wait_port "$port" "$out"; done
  local proxy
  case "$2" in
    gemini) proxy=127.0.0.1:$gport ;;
    gopher) proxy=127.0.0.1:$oport ;;
    http) proxy=127.0.0.1:$hport ;;
  esac
  "$work/exchange_load" "$2" "$proxy" "$3"
  kill -TERM "$pid"
  wait "$pid" || true
  sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$out"
}

printf '%-8s' protocol
for b in "${builds[@]}"; do printf ' %18s' "$b"; done
[ -n "$base" ] && printf ' %8s' "new/old"
printf '\n'
median() { printf '%s\n' "$@" | sort -n | sed -n 2p; }
for protocol in gemini gopher http; do
  declare -A runs=()
  for round in 1 2 3; do
    for b in "${builds[@]}"; do
      one=$(( ($(count "$b" "$protocol" 600) - $(count "$b" "$protocol" 200)) / 400 ))
      runs[$b]="${runs[$b]:-} $one"
    done
  done
  printf '%-8s' "$protocol"
  per=()
  for b in "${builds[@]}"; do
    # shellcheck disable=SC2086
    m=$(median ${runs[$b]})
    per+=("$m")
    printf ' %18d' "$m"
  done
  if [ -n "$base" ]; then
    printf ' %8s' "$(awk -v a="${per[1]}" -v b="${per[0]}" 'BEGIN { printf "%.3f", a / b }')"
  fi
  printf '   (runs:'
  for b in "${builds[@]}"; do printf ' %s' "${runs[$b]}"; done
  printf ')\n'
  unset runs
done
