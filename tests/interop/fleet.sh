# Fleet mode, sourced by tests/interop/run: three proxy processes on one
# redis-server (Debian's, on a unix socket), concurrent clients spread over all
# three, to gophernicus and agate whose robots.txt asks for Crawl-delay: 0.5.
# socat logs when it accepts each connection to a server (microseconds, before it
# forks); the servers must see
# starts at least 0.5 s apart whichever proxy sent them, and one robots.txt
# fetch for the fleet.

if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
fi
mkdir -p "$work/redis"
start_redis() { # no persistence, as the compose store: a restart comes back empty
  redis-server --port 0 --unixsocket "$work/redis/redis.sock" --unixsocketperm 700 --save '' \
    --appendonly no --dir "$work/redis" >> "$work/redis.log" 2>&1 &
  redis_pid=$!
  pids+=($redis_pid)
}
start_redis
deadline=$((SECONDS + 30))
until redis-cli -s "$work/redis/redis.sock" ping 2>/dev/null | grep -qx PONG; do
  [ "$SECONDS" -lt "$deadline" ] || { echo "redis-server did not start"; cat "$work/redis.log"; exit 1; }
  sleep 0.05
done
store="unix://$work/redis/redis.sock"

# The servers: Crawl-delay 0.5 for everyone; socat in front of each logs every connection.
mkdir -p "$work/fleet-hole" "$work/fleet-capsule"
printf 'User-agent: *\nCrawl-delay: 0.5\n' > "$work/fleet-hole/robots.txt"
printf 'User-agent: *\nCrawl-delay: 0.5\n' > "$work/fleet-capsule/robots.txt"
printf 'fleet\n' > "$work/fleet-hole/page.txt"
printf '# fleet\n' > "$work/fleet-capsule/index.gmi"
chmod -R a+rX "$work/fleet-hole" "$work/fleet-capsule"
fhport=$(free_port)
socat -d -d -lu -lf "$work/fleet-hole.socat.log" "TCP-LISTEN:$fhport,bind=127.0.0.1,fork,reuseaddr" \
  "EXEC:$gophernicus -h 127.0.0.1 -p $fhport -r $work/fleet-hole$as_user" > /dev/null 2>&1 &
pids+=($!)
agport=$(free_port)
RUST_LOG=info "$agate" --content "$work/fleet-capsule" --certs "$work/fleet-certs" --addr "127.0.0.1:$agport" \
  --hostname localhost --skip-port-check > "$work/fleet-agate.log" 2>&1 &
pids+=($!)
fcport=$(free_port)
socat -d -d -lu -lf "$work/fleet-capsule.socat.log" "TCP-LISTEN:$fcport,bind=127.0.0.1,fork,reuseaddr" \
  "TCP:127.0.0.1:$agport" > /dev/null 2>&1 &
pids+=($!)
wait_port "$fhport"
wait_port "$agport"
wait_port "$fcport"
# Connections counted from now on (the readiness probes were connections too).
afresh() { since=$(date +%s.%N); }
afresh

# Three proxies, one store.
start_fleet() { # start_fleet NAME STORE_URL: three proxies on it; sets fleet_gemini fleet_gopher fleet_metrics
  local name=$1 url=$2 i fg fo fm
  fleet_gemini=(); fleet_gopher=(); fleet_metrics=()
  for i in 1 2 3; do
    fg=$(free_port); fo=$(free_port); fm=$(free_port)
    RUST_LOG=info "$proxy_bin" run --gemini-listen "127.0.0.1:$fg" --gopher-listen "127.0.0.1:$fo" \
      --metrics-listen "127.0.0.1:$fm" --agent interopbot --allow-private-upstreams \
      --state-dir "$work/state-$name-$i" --default-delay 0s --max-wait 30s --store "$url" \
      > "$work/$name-proxy-$i.log" 2>&1 &
    pids+=($!)
    fleet_gemini+=("$fg"); fleet_gopher+=("$fo"); fleet_metrics+=("$fm")
  done
  for i in 0 1 2; do
    wait_port "${fleet_gemini[$i]}" "$work/$name-proxy-$((i + 1)).log"
    wait_port "${fleet_gopher[$i]}"; wait_port "${fleet_metrics[$i]}"
  done
}
start_fleet fleet "$store"
check "fleet: each proxy says the store answers" \
  bash -c "grep -q 'fleet store answers' $work/fleet-proxy-1.log && grep -q 'fleet store answers' $work/fleet-proxy-2.log && grep -q 'fleet store answers' $work/fleet-proxy-3.log"

burst() { # burst NAME GEMINI_PORTS GOPHER_PORTS: nine Gopher and nine Gemini clients at once, spread over the proxies
  local name=$1 i p
  local -a gem=($2) gop=($3)
  for i in $(seq 0 8); do
    p=$((i % ${#gem[@]}))
    curl -s "gopher://127.0.0.1:${gop[$p]}/0gopher://127.0.0.1:$fhport/0/page.txt" > "$work/$name.gopher.$i" &
    printf 'gemini://localhost:%s/\r\n' "$fcport" | timeout 60 openssl s_client -connect "127.0.0.1:${gem[$p]}" \
      -servername localhost -quiet > "$work/$name.gemini.$i" 2>/dev/null &
  done
  local ok=true job
  for job in $(jobs -p); do
    case " ${pids[*]} " in *" $job "*) ;; *) wait "$job" || ok=false ;; esac
  done
  $ok
}
stamps() { # stamps hole|capsule: when the server's socat accepted each connection since `afresh`
  accepts "$work/fleet-$1.socat.log" "$since"
}
# Gaps between consecutive connection stamps of `stamps NAME`: how many
# connections, the smallest gap, the mean gap.
gaps() {
  stamps "$1" | sort -n | awk 'NR > 1 { g = $1 - p; n++; s += g; if (min == "" || g < min) min = g } { p = $1 }
    END { printf "%d %.3f %.3f", n + 1, min, (n ? s / n : 0) }'
}

burst fleet "${fleet_gemini[*]}" "${fleet_gopher[*]}" || true
check "fleet: nine Gopher requests over three proxies all answered" \
  bash -c "cat $work/fleet.gopher.* | grep -c '^fleet' | grep -qx 9"
check "fleet: nine Gemini requests over three proxies all answered" \
  bash -c "cat $work/fleet.gemini.* | grep -c '^# fleet' | grep -qx 9"
read -r hstamps hmin hmean <<< "$(gaps hole)"
read -r cstamps cmin cmean <<< "$(gaps capsule)"

fetches() { # fetches PROTOCOL: robots.txt fetches summed over the three proxies
  local total=0 n
  for m in "${fleet_metrics[@]}"; do
    n=$(curl -s "http://127.0.0.1:$m/metrics" |
      awk -v p="$1" '$1 ~ "^robots_proxy_robots_fetches_total\\{.*protocol=\"" p "\"" { s += $2 } END { print s + 0 }')
    total=$((total + n))
  done
  echo "$total"
}
gopher_fetches=$(fetches gopher)
gemini_fetches=$(fetches gemini)
check "fleet: one Gopher robots.txt fetch for three proxies ($gopher_fetches)" test "$gopher_fetches" -eq 1
check "fleet: one Gemini robots.txt fetch for three proxies ($gemini_fetches)" test "$gemini_fetches" -eq 1
check "fleet: agate logged robots.txt once" \
  test "$(grep -c 'robots.txt' "$work/fleet-agate.log" || true)" -eq 1
check "fleet: every key in the store has a time to live" bash -c \
  "redis-cli -s $work/redis/redis.sock --scan --pattern 'robots-proxy:*' | while read -r k; do t=\$(redis-cli -s $work/redis/redis.sock pttl \"\$k\"); [ \"\$t\" != -1 ] || exit 1; done"

# The jitter of this setup, measured: the same burst through one proxy with its
# own gate (no store) after the servers' spacing has passed. socat stamps a
# connection when its accept loop gets to it, late by however long the machine,
# busy with 18 TLS and TCP handshakes, takes to schedule it.
sleep 1
afresh
lg=$(free_port); lo=$(free_port); lm=$(free_port)
"$proxy_bin" run --gemini-listen "127.0.0.1:$lg" --gopher-listen "127.0.0.1:$lo" --metrics-listen "127.0.0.1:$lm" \
  --agent interopbot --allow-private-upstreams --state-dir "$work/state-fleet-control" \
  --default-delay 0s --max-wait 30s > "$work/fleet-control.log" 2>&1 &
pids+=($!)
wait_port "$lg"; wait_port "$lo"
burst control "$lg" "$lo" || true
read -r _ hcmin hcmean <<< "$(gaps hole)"
read -r _ ccmin cccmean <<< "$(gaps capsule)"
echo "fleet: gophernicus saw $hstamps connections over three proxies: smallest gap $hmin s, mean $hmean s (one proxy, own gate: smallest $hcmin s, mean $hcmean s)"
echo "fleet: agate saw $cstamps connections over three proxies: smallest gap $cmin s, mean $cmean s (one proxy, own gate: smallest $ccmin s, mean $cccmean s)"
# Without sharing, three proxies would give a mean gap near 0.17 s. The mean must
# be the Crawl-delay (10 ms allowed: a late first stamp shortens it); the smallest gap may lose the measured
# jitter of one stamp (up to 50 ms on this 2-core machine).
check "fleet: gophernicus saw starts 0.5 s apart on average over three proxies (mean $hmean s)" \
  awk -v m="$hmean" -v n="$hstamps" 'BEGIN { exit !(n >= 10 && m >= 0.49) }'
check "fleet: agate saw starts 0.5 s apart on average over three proxies (mean $cmean s)" \
  awk -v m="$cmean" -v n="$cstamps" 'BEGIN { exit !(n >= 10 && m >= 0.49) }'
check "fleet: no two starts at gophernicus closer than 0.5 s minus jitter (smallest $hmin s; alone $hcmin s)" \
  awk -v g="$hmin" 'BEGIN { exit !(g >= 0.45) }'
check "fleet: no two starts at agate closer than 0.5 s minus jitter (smallest $cmin s; alone $ccmin s)" \
  awk -v g="$cmin" 'BEGIN { exit !(g >= 0.45) }'

# The store killed and restarted empty (no persistence) right after a start,
# with requests of three proxies queued at gophernicus: the gaps it sees stay
# the Crawl-delay across the restart. A request that meets the store down is
# told to slow down (on_unavailable = "refuse"), never relayed early; each
# client asks again after a slow-down, as a polite crawler does, until served.
served_in_the_end() { # PROXY_PORT OUT: asks until relayed (at most 50 tries)
  local try
  for try in $(seq 1 50); do
    curl -s --max-time 60 "gopher://127.0.0.1:$1/0gopher://127.0.0.1:$fhport/0/page.txt" > "$2"
    head -1 "$2" | grep -q '^fleet' && return 0
    head -1 "$2" | grep -q '^3503 ' || return 1
    sleep 0.2
  done
  return 1
}
sleep 1
afresh
restart_jobs=()
for i in $(seq 0 11); do
  served_in_the_end "${fleet_gopher[$((i % 3))]}" "$work/restart.gopher.$i" &
  restart_jobs+=($!)
done
deadline=$((SECONDS + 20))
until [ "$(stamps hole | wc -l)" -ge 2 ] || [ "$SECONDS" -ge "$deadline" ]; do sleep 0.01; done
kill -9 "$redis_pid" 2>/dev/null || true
wait "$redis_pid" 2>/dev/null || true
start_redis
all_served=true
for job in "${restart_jobs[@]}"; do wait "$job" || all_served=false; done
read -r rstamps rmin rmean <<< "$(gaps hole)"
echo "fleet: store restarted mid-burst: gophernicus saw $rstamps connections, smallest gap $rmin s, mean $rmean s"
check "fleet: across a store restart every client was served in the end (after slow-downs)" $all_served
check "fleet: store restarted empty mid-burst, no two starts at gophernicus closer than 0.5 s minus jitter (smallest $rmin s)" \
  awk -v g="$rmin" -v n="$rstamps" 'BEGIN { exit !(n >= 12 && g >= 0.45) }'
restart_counts() { # each proxy's count of store restarts seen, space-separated
  local m
  for m in "${fleet_metrics[@]}"; do
    curl -s --max-time 5 "http://127.0.0.1:$m/metrics" |
      awk '$1 == "robots_proxy_store_events_total{event=\"restart\"}" { n = $2 } END { printf "%d ", n + 0 }'
  done
}
restart_seen() { # every proxy counted the restart (a count above 1 is printed, not failed)
  local counts
  counts=$(restart_counts)
  ! grep -qw 0 <<< "$counts"
}
# Each proxy's health check asks the store once a second; on a loaded machine a
# reconnect can take a few of those.
deadline=$((SECONDS + 30))
until restart_seen || [ "$SECONDS" -ge "$deadline" ]; do sleep 0.2; done
echo "fleet: restarts counted by each proxy: $(restart_counts)"
if ! restart_seen; then
  for i in 1 2 3; do echo "proxy $i:"; grep -i 'fleet store' "$work/fleet-proxy-$i.log" | tail -5; done
fi
check "fleet: each proxy saw the store restart" restart_seen
