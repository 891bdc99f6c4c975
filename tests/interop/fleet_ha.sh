# Fleet mode on a Redis Cluster and on Sentinel, sourced by tests/interop/run
# after fleet.sh, whose servers (gophernicus and agate behind stamping socats,
# Crawl-delay 0.5) and helpers (burst, gaps, served_in_the_end) it uses.
#
# For each shape, three proxies on it:
# - a burst over the three proxies: gophernicus and agate see their
#   Crawl-delay between starts;
# - the master holding the servers' gate (`{a/127.0.0.1}`) killed with
#   SIGKILL mid-burst, its replica promoted by the Cluster (node timeout) or
#   the Sentinels (down-after): every client is served in the end (after
#   slow-downs while no master answers), without restarting a proxy; no two
#   starts closer than the Crawl-delay across the failover; each proxy counts
#   the failover and names the new master on its status page.
#
# The failover's detection time (3 s) is longer than a proxy's health check
# period (1 s) plus its store deadline (0.5 s), as src/store/gate.rs asks.

failover_after_ms=3000
mkdir -p "$work/ha"

ha_node() { # ha_node NAME PORT ARGS...: a redis-server on loopback, no persistence; sets ha_pid
  local dir=$work/ha/$1 port=$2
  shift 2
  mkdir -p "$dir"
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" "$@" \
    > "$dir/log" 2>&1 &
  ha_pid=$!
  pids+=($ha_pid)
}

until_true() { # until_true SECONDS WHAT COMMAND...: a bounded poll; exits the suite if never
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || { echo "never happened: $what"; exit 1; }
    sleep 0.1
  done
}

# --- a Cluster: three masters, three replicas ----------------------------------
declare -A cluster_pid
cluster_ports=()
for i in 0 1 2 3 4 5; do
  p=$(free_port)
  ha_node "n$i" "$p" --cluster-enabled yes --cluster-port "$(free_port)" \
    --cluster-config-file "$work/ha/n$i/nodes.conf" --cluster-node-timeout "$failover_after_ms" \
    --cluster-replica-validity-factor 0
  cluster_pid[$p]=$ha_pid
  cluster_ports+=("$p")
done
for p in "${cluster_ports[@]}"; do wait_port "$p" "$work/ha/n0/log"; done
redis-cli --cluster create $(printf '127.0.0.1:%s ' "${cluster_ports[@]}") --cluster-replicas 1 --cluster-yes \
  < /dev/null > "$work/ha/create.log" 2>&1
cluster_whole() {
  local p
  for p in "$@"; do
    redis-cli -p "$p" cluster info | grep -q 'cluster_state:ok' || return 1
    redis-cli -p "$p" cluster info | grep -q 'cluster_known_nodes:6' || return 1
  done
}
until_true 30 "the Cluster whole on every node" cluster_whole "${cluster_ports[@]}"
replicas_in_sync() {
  local p n=0
  for p in "${cluster_ports[@]}"; do
    redis-cli -p "$p" info replication | grep -q 'master_link_status:up' && n=$((n + 1))
  done
  [ "$n" -eq 3 ]
}
until_true 30 "three replicas in sync" replicas_in_sync

# The master serving a key, as a live node at port $1 sees it.
master_of() { # master_of NODE_PORT KEY
  local slot
  slot=$(redis-cli -p "$1" cluster keyslot "$2")
  redis-cli -p "$1" cluster nodes | awk -v s="$slot" '
    $3 ~ /master/ && $3 !~ /fail/ {
      for (i = 9; i <= NF; i++) {
        n = split($i, r, "-"); lo = r[1]; hi = (n > 1 ? r[2] : r[1])
        if (s + 0 >= lo + 0 && s + 0 <= hi + 0) { split($2, a, "@"); sub(/.*:/, "", a[1]); print a[1] }
      }
    }'
}

# --- Sentinel: a master, its replica, three Sentinels (quorum two) -------------
sentinel_master=$(free_port)
ha_node master "$sentinel_master"
sentinel_master_pid=$ha_pid
sentinel_replica=$(free_port)
ha_node replica "$sentinel_replica" --replicaof 127.0.0.1 "$sentinel_master"
wait_port "$sentinel_master"; wait_port "$sentinel_replica"
until_true 30 "the Sentinel setup's replica in sync" \
  bash -c "redis-cli -p $sentinel_replica info replication | grep -q 'master_link_status:up'"
sentinel_ports=()
for i in 0 1 2; do
  p=$(free_port)
  mkdir -p "$work/ha/s$i"
  printf 'port %s\nbind 127.0.0.1\nsentinel monitor crawl 127.0.0.1 %s 2\nsentinel down-after-milliseconds crawl %s\nsentinel failover-timeout crawl 10000\n' \
    "$p" "$sentinel_master" "$failover_after_ms" > "$work/ha/s$i/sentinel.conf"
  redis-server "$work/ha/s$i/sentinel.conf" --sentinel --dir "$work/ha/s$i" > "$work/ha/s$i/log" 2>&1 &
  pids+=($!)
  sentinel_ports+=("$p")
done
for p in "${sentinel_ports[@]}"; do wait_port "$p" "$work/ha/s0/log"; done
sentinels_know_all() {
  local p o
  for p in "${sentinel_ports[@]}"; do
    redis-cli -p "$p" sentinel replicas crawl | grep -qx "$sentinel_replica" || return 1
    for o in "${sentinel_ports[@]}"; do
      [ "$o" = "$p" ] || redis-cli -p "$p" sentinel sentinels crawl | grep -qx "$o" || return 1
    done
  done
}
until_true 30 "each Sentinel to know the replica and the other two" sentinels_know_all

# --- the same checks on each shape --------------------------------------------

within_30s() { # within_30s COMMAND...: true once COMMAND is, false if not within 30 s
  local deadline=$((SECONDS + 30))
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.2
  done
}

failovers_seen() { # every proxy counted a failover
  local m n
  for m in "${fleet_metrics[@]}"; do
    n=$(curl -s --max-time 5 "http://127.0.0.1:$m/metrics" |
      awk '$1 == "robots_proxy_store_events_total{event=\"failover\"}" { n = $2 } END { print n + 0 }')
    [ "$n" -ge 1 ] || return 1
  done
}

names_master() { # names_master PORT: every proxy's status page names the master on PORT
  local m
  for m in "${fleet_metrics[@]}"; do
    curl -s --max-time 5 "http://127.0.0.1:$m/api/status" | grep -qE "\"addr\": *\"[^\"]*:$1\"" || return 1
  done
}

ha_checks() { # ha_checks NAME KIND KILL: a burst, then KILL (a function) mid-burst; KILL sets new_master
  local name=$1 kind=$2 kill=$3 job all_served=true killed_at first_after
  sleep 1
  afresh
  burst "$name" "${fleet_gemini[*]}" "${fleet_gopher[*]}" || true
  check "$name: nine Gopher requests over three proxies all answered" \
    bash -c "cat $work/$name.gopher.* | grep -c '^fleet' | grep -qx 9"
  check "$name: nine Gemini requests over three proxies all answered" \
    bash -c "cat $work/$name.gemini.* | grep -c '^# fleet' | grep -qx 9"
  local hs hmin hmean cs cmin cmean
  read -r hs hmin hmean <<< "$(gaps hole)"
  read -r cs cmin cmean <<< "$(gaps capsule)"
  echo "$name: gophernicus saw $hs connections, smallest gap $hmin s, mean $hmean s; agate saw $cs, smallest $cmin s, mean $cmean s"
  check "$name: no two starts at gophernicus closer than 0.5 s minus jitter (smallest $hmin s)" \
    awk -v g="$hmin" -v n="$hs" 'BEGIN { exit !(n >= 9 && g >= 0.45) }'
  check "$name: no two starts at agate closer than 0.5 s minus jitter (smallest $cmin s)" \
    awk -v g="$cmin" -v n="$cs" 'BEGIN { exit !(n >= 9 && g >= 0.45) }'
  check "$name: the status page says $kind" \
    bash -c "curl -s http://127.0.0.1:${fleet_metrics[0]}/api/status | grep -qE '\"kind\": *\"$kind\"'"

  # The master killed mid-burst: twelve clients, each asking again after a
  # slow-down as a polite crawler does.
  sleep 1
  afresh
  local jobs_=()
  for i in $(seq 0 11); do
    served_in_the_end "${fleet_gopher[$((i % 3))]}" "$work/$name-kill.gopher.$i" &
    jobs_+=($!)
  done
  two_starts() { [ "$(stamps hole | wc -l)" -ge 2 ]; }
  until_true 20 "two starts before the kill" two_starts
  killed_at=$(date +%s.%N)
  "$kill"
  for job in "${jobs_[@]}"; do wait "$job" || all_served=false; done
  local ks kmin kmean
  read -r ks kmin kmean <<< "$(gaps hole)"
  first_after=$(stamps hole | sort -n | awk -v k="$killed_at" '$1 > k { printf "%.1f", $1 - k; exit }')
  echo "$name: master killed mid-burst: gophernicus saw $ks connections, smallest gap $kmin s, mean $kmean s; the first start after the kill came ${first_after:-never} s after it"
  check "$name: master killed mid-burst, every client served in the end without restarting a proxy" $all_served
  check "$name: master killed mid-burst, no two starts at gophernicus closer than 0.5 s minus jitter (smallest $kmin s)" \
    awk -v g="$kmin" -v n="$ks" 'BEGIN { exit !(n >= 12 && g >= 0.45) }'
  check "$name: each proxy counted the failover" within_30s failovers_seen
  check "$name: each proxy's status page names the new master ($new_master)" within_30s names_master "$new_master"
}

gate_key='robots-proxy:{a/127.0.0.1}:gate' # the servers' gate: both listen on 127.0.0.1

kill_cluster_master() {
  local live=${cluster_ports[0]} old
  old=$(master_of "$live" "$gate_key")
  [ "$old" = "$live" ] && live=${cluster_ports[1]}
  kill -9 "${cluster_pid[$old]}"
  another_master_serves() {
    new_master=$(master_of "$live" "$gate_key")
    [ -n "$new_master" ] && [ "$new_master" != "$old" ] &&
      redis-cli -p "$live" cluster info | grep -q 'cluster_state:ok'
  }
  until_true 30 "a replica promoted in the Cluster, serving the servers' gate" another_master_serves
}

kill_sentinel_master() {
  kill -9 "$sentinel_master_pid"
  until_true 30 "the Sentinels naming the replica" \
    bash -c "redis-cli -p ${sentinel_ports[0]} sentinel get-master-addr-by-name crawl | grep -qx $sentinel_replica"
  new_master=$sentinel_replica
}

start_fleet cluster "redis+cluster://127.0.0.1:${cluster_ports[0]},127.0.0.1:${cluster_ports[1]},127.0.0.1:${cluster_ports[2]}"
ha_checks cluster cluster kill_cluster_master
start_fleet sentinel "redis+sentinel://127.0.0.1:${sentinel_ports[0]},127.0.0.1:${sentinel_ports[1]},127.0.0.1:${sentinel_ports[2]}/crawl"
ha_checks sentinel sentinel kill_sentinel_master
