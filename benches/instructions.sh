#!/usr/bin/env bash
# Instructions per "parse + select FooBot's groups" on benches/data/robots-50-rules.txt,
# ours against robotxt and texting_robots, counted by valgrind's callgrind
# (examples/parse_loop.rs). Unlike time, the count is the same on every run,
# whatever else the machine is doing: a change's effect can be read off exactly.
# Each engine runs 1,000 and 2,000 times; the difference / 1,000 is one call,
# with start-up and loading cancelled out. Installs valgrind if missing.
#
#   benches/instructions.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v valgrind >/dev/null; then
  apt-get install -y -qq valgrind >/dev/null
fi
cargo build --quiet --release --example parse_loop
bin=target/release/examples/parse_loop
count() { # engine runs -> instructions
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$1" "$2" 2>&1 |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
per_call() { echo $(( ($(count "$1" 2000) - $(count "$1" 1000)) / 1000 )); }
ours=$(per_call ours)
printf '%-16s %10s %12s\n' engine "instr/call" "vs ours"
printf '%-16s %10d %12s\n' robots-proxy "$ours" 1.00
for engine in robotxt texting; do
  theirs=$(per_call "$engine")
  printf '%-16s %10d %11sx\n' "$engine" "$theirs" "$(awk -v a="$theirs" -v b="$ours" 'BEGIN { printf "%.2f", a / b }')"
done
