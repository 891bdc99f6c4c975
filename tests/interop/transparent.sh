# Transparent mode, sourced by tests/interop/run (needs its check, $work, $agate,
# $gophernicus, $proxy_bin). In a network namespace of its own (nothing leaves
# it: it has only a loopback device), agate and gophernicus serve on 10.200.0.2
# at Gemini's and Gopher's own ports, the proxy runs with a transparent listener
# and an upstream mark, and the rules printed by `robots-proxy transparent-rules`
# send every other connection to those ports into it. The clients are
# unmodified and know no proxy: curl, openssl s_client with SNI, and a small
# Python Gemini client; socat for Spartan (port 300) and Nex (port 1900), whose
# servers (tests/interop/small_web_server.py) serve there too.

if [ "$(id -u)" != 0 ]; then
  check "transparent: needs root for a network namespace (run as root, as CI does)" false
  return 0
fi
if ! command -v iptables >/dev/null || ! command -v nft >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iptables nftables >/dev/null
fi
ns=robots-proxy-interop-$$
tp=$work/transparent
mkdir -p "$tp/capsule/private" "$tp/hole/private"
in_ns() { ip netns exec "$ns" "$@"; }
ns_cleanup() {
  for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "/etc/netns/$ns"
}
trap 'ns_cleanup; cleanup' EXIT
ip netns add "$ns"
ip -n "$ns" link set lo up
ip -n "$ns" addr add 10.200.0.2/32 dev lo
# The capsule's name, from the namespace's own hosts file (ip netns exec mounts
# it over /etc/hosts); the namespace has no route out, so no lookup can leave it.
mkdir -p "/etc/netns/$ns"
printf '127.0.0.1 localhost\n::1 localhost\n10.200.0.2 capsule.test\n' > "/etc/netns/$ns/hosts"

printf 'User-agent: interopbot\nDisallow: /private\n' > "$tp/capsule/robots.txt"
printf '# Behind a transparent proxy\n' > "$tp/capsule/index.gmi"
printf 'Not for robots.\n' > "$tp/capsule/private/secret.gmi"
printf 'User-agent: interopbot\nDisallow: /private\nCrawl-delay: 0.5\n' > "$tp/hole/robots.txt"
printf 'Hello through the kernel.\n' > "$tp/hole/hello.txt"
printf 'Not for robots.\n' > "$tp/hole/private/secret.txt"
mkdir -p "$tp/small/private"
printf 'User-agent: interopbot\nDisallow: /private\n' > "$tp/small/robots.txt"
printf 'Small web text.\n' > "$tp/small/public.txt"
printf 'Not for robots.\n' > "$tp/small/private/secret.txt"
: > "$tp/stamps.log"
chmod -R a+rX "$tp"
chmod a+w "$tp/stamps.log"
RUST_LOG=info in_ns "$agate" --content "$tp/capsule" --certs "$tp/certs" --addr 10.200.0.2:1965 \
  --hostname capsule.test > "$tp/agate.log" 2>&1 &
pids+=($!)
# socat stamps each connection as the server sees it.
in_ns socat TCP-LISTEN:70,bind=10.200.0.2,fork,reuseaddr \
  "SYSTEM:date +%s.%N >> $tp/stamps.log; exec $gophernicus -h 10.200.0.2 -p 70 -r $tp/hole$as_user" \
  > /dev/null 2>&1 &
pids+=($!)
for small in spartan:300 nex:1900; do
  in_ns python3 tests/interop/small_web_server.py --protocol "${small%%:*}" --root "$tp/small" \
    --bind 10.200.0.2 --port "${small##*:}" --log "$tp/small.log" > /dev/null 2>&1 &
  pids+=($!)
done
RUST_LOG=info in_ns "$proxy_bin" run --gemini-listen 127.0.0.1:1966 --gopher-listen 127.0.0.1:7070 \
  --metrics-listen 127.0.0.1:9770 --transparent-listen 127.0.0.1:8965 --upstream-mark 0x2a \
  --agent interopbot --allow-private-upstreams --state-dir "$tp/state" --default-delay 0s \
  --max-wait 30s > "$tp/proxy.log" 2>&1 &
pids+=($!)
ns_wait() { # ns_wait HOST PORT: a bounded poll until something listens there
  local deadline=$((SECONDS + 60))
  until in_ns bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null; do
    [ "$SECONDS" -lt "$deadline" ] || { echo "nothing listens on $1:$2 in $ns"; exit 1; }
    sleep 0.1
  done
}
ns_wait 10.200.0.2 1965
ns_wait 10.200.0.2 70
ns_wait 10.200.0.2 300
ns_wait 10.200.0.2 1900
ns_wait 127.0.0.1 8965
ns_wait 127.0.0.1 9770

ns_gem() { # ns_gem URL: openssl s_client, unmodified, to the URL's host with SNI
  local hostport=${1#gemini://}
  hostport=${hostport%%/*}
  printf '%s\r\n' "$1" | timeout 30 ip netns exec "$ns" openssl s_client \
    -connect "$hostport" -servername "${hostport%%:*}" -quiet 2>/dev/null || true
}
capsule=gemini://capsule.test:1965
hole=gopher://10.200.0.2:70

# Without the rules, the crawler goes around the proxy: the hole this mode closes.
in_ns curl -s "$hole/0/private/secret.txt" > "$tp/secret.before"
check "transparent: without the rules, a proxy-unaware client gets the secret (the hole)" \
  grep -q '^Not for robots' "$tp/secret.before"
in_ns curl -s "$hole/0/hello.txt" > "$tp/hello.direct"
ns_plain() { # ns_plain PORT LINE: LINE and CRLF to 10.200.0.2:PORT with socat, unmodified
  printf '%s\r\n' "$2" | timeout 30 ip netns exec "$ns" socat -t 5 - "TCP:10.200.0.2:$1" 2>/dev/null || true
}
ns_plain 300 "10.200.0.2 /private/secret.txt 0" > "$tp/spartan.before"
ns_plain 1900 "private/secret.txt" > "$tp/nex.before"
check "transparent: without the rules, Spartan and Nex clients get the secret (the side door)" \
  bash -c "grep -q 'Not for robots' '$tp/spartan.before' && grep -q 'Not for robots' '$tp/nex.before'"
: > "$tp/small.log"
ns_gem "$capsule/" > "$tp/index.direct"
# The readiness probes and the controls were connections too: start the stamps afresh.
: > "$tp/stamps.log"

in_ns "$proxy_bin" transparent-rules --transparent-listen 127.0.0.1:8965 --upstream-mark 0x2a > "$tp/rules.sh"
check "transparent: the printed iptables rules apply" in_ns sh "$tp/rules.sh"
in_ns "$proxy_bin" transparent-rules --transparent-listen 127.0.0.1:8965 --upstream-mark 0x2a \
  --syntax nft > "$tp/rules.nft"
check "transparent: the printed nftables rules pass nft's check" in_ns nft -c -f "$tp/rules.nft"
# Witnesses: SYNs to the servers that are not the proxy's (unmarked), after NAT.
in_ns iptables -A OUTPUT -d 10.200.0.2 -p tcp --syn -m mark ! --mark 0x2a -j ACCEPT
in_ns iptables -A OUTPUT -d 10.200.0.2 -p tcp --syn -m mark --mark 0x2a -j ACCEPT

in_ns curl -s "$hole/0/hello.txt" > "$tp/hello.proxied"
check "transparent: curl gopher:// gets an allowed text byte for byte" \
  bash -c "test -s '$tp/hello.direct' && cmp -s '$tp/hello.direct' '$tp/hello.proxied'"
in_ns curl -s "$hole/0/private/secret.txt" > "$tp/secret.after"
check "transparent: curl gopher:// is refused the secret with 3403" grep -q \
  '^3403 Forbidden: robots.txt of 10.200.0.2:70 disallows this for interopbot: Disallow: /private' "$tp/secret.after"
in_ns curl -s "$hole/0private/secret.txt" > "$tp/dodge.after"
check "transparent: the slash-less spelling is refused too" grep -q '^3403 Forbidden' "$tp/dodge.after"

ns_plain 300 "10.200.0.2 /public.txt 0" > "$tp/spartan.public"
check "transparent: socat gets a Spartan page through the rules" \
  bash -c "printf '2 text/plain\r\nSmall web text.\n' | cmp -s - '$tp/spartan.public'"
ns_plain 1900 "public.txt" > "$tp/nex.public"
check "transparent: socat gets a Nex document through the rules" \
  bash -c "printf 'Small web text.\n' | cmp -s - '$tp/nex.public'"
small_refused=0
for spelling in /private/secret.txt /%70rivate/secret.txt //private/secret.txt /a/../private/secret.txt; do
  ns_plain 300 "10.200.0.2 $spelling 0" | grep -q '^4 robots.txt of 10.200.0.2:300 disallows' &&
    small_refused=$((small_refused + 1))
  ns_plain 1900 "${spelling#/}" | grep -q '^robots-proxy: 53 robots.txt of 10.200.0.2:1900 disallows' &&
    small_refused=$((small_refused + 1))
done
check "transparent: Spartan and Nex are refused the secret, $small_refused of 8 spellings" \
  bash -c "[ $small_refused = 8 ] && ! grep -q 'private' '$tp/small.log'"
ns_plain 300 "10.200.0.2 /guestbook 5" > "$tp/spartan.upload"
check "transparent: a Spartan upload is refused for the bot" grep -q '^4 uploads are refused' "$tp/spartan.upload"

ns_gem "$capsule/" > "$tp/index.proxied"
check "transparent: openssl s_client (SNI capsule.test) gets agate's page byte for byte" \
  bash -c "grep -q '^20 ' '$tp/index.direct' && cmp -s '$tp/index.direct' '$tp/index.proxied'"
ns_gem "$capsule/private/secret.gmi" > "$tp/secret.gmi"
check "transparent: openssl s_client is refused with 53" grep -q \
  '^53 robots.txt of capsule.test:1965 disallows this for interopbot' "$tp/secret.gmi"
in_ns python3 tests/interop/gemini_client.py "$capsule/" > "$tp/index.python"
check "transparent: a Python Gemini client gets the page byte for byte" cmp -s "$tp/index.direct" "$tp/index.python"
in_ns python3 tests/interop/gemini_client.py "$capsule/private/secret.gmi" > "$tp/secret.python"
check "transparent: a Python Gemini client is refused with 53" grep -q '^53 robots.txt' "$tp/secret.python"
check "transparent: agate served the page and never the secret" bash -c \
  "grep -q '\"gemini://capsule.test/\" 20' '$tp/agate.log' && ! grep -q 'private/secret.gmi\" 20' '$tp/agate.log'"

# Crawl-delay 0.5 s, seen by the server: four concurrent crawler requests. (The
# stamps come from a process socat forks per connection: a few ms of jitter.)
: > "$tp/stamps.log"
for i in 1 2 3 4; do
  in_ns curl -s "$hole/0/hello.txt" > "$tp/polite.$i" &
done
wait_ok=true
for job in $(jobs -p); do
  case " ${pids[*]} " in *" $job "*) ;; *) wait "$job" || wait_ok=false ;; esac
done
min_gap=$(sort -n "$tp/stamps.log" | awk 'NR > 1 { g = $1 - p; if (min == "" || g < min) min = g } { p = $1 } END { printf "%.3f", min }')
stamps=$(wc -l < "$tp/stamps.log")
check "transparent: gophernicus saw $stamps connections at least 0.5 s apart (smallest gap $min_gap s)" \
  bash -c "$wait_ok && cat $tp/polite.* | grep -c 'Hello through' | grep -qx 4 && awk -v g=$min_gap -v n=$stamps 'BEGIN { exit !(n >= 4 && g >= 0.45) }'"

# Strays: web traffic to a redirected port, and a connection made straight to the listener.
in_ns curl -s -m 10 "http://10.200.0.2:70/" > "$tp/http.out" 2>&1 || true
printf '/\r\n' | timeout 10 ip netns exec "$ns" socat -t 5 - TCP:127.0.0.1:8965 > "$tp/straight.out" 2>&1 || true
in_ns curl -s http://127.0.0.1:9770/metrics > "$tp/metrics.txt"
check "transparent: an HTTP request to a redirected port is closed and counted" bash -c \
  "! test -s '$tp/http.out' && grep -qE '^robots_proxy_connections_rejected_total\\{listener=\"transparent\",reason=\"http\"\\} 1\$' '$tp/metrics.txt'"
check "transparent: a connection straight to the listener is closed (no loop)" bash -c \
  "! test -s '$tp/straight.out' && grep -qE '^robots_proxy_connections_rejected_total\\{listener=\"transparent\",reason=\"destination\"\\} 1\$' '$tp/metrics.txt'"

# No connection of the client reached a server: every SYN to 10.200.0.2 since
# the rules went in carried the proxy's mark.
in_ns iptables -L OUTPUT -v -x -n > "$tp/counters.txt"
direct_syns=$(awk '/10.200.0.2/ && /mark match ! 0x2a/ { print $1 }' "$tp/counters.txt")
proxy_syns=$(awk '/10.200.0.2/ && /mark match 0x2a/ && !/!/ { print $1 }' "$tp/counters.txt")
check "transparent: no client connection reached a server directly ($direct_syns unmarked, $proxy_syns by the proxy)" \
  bash -c "[ '$direct_syns' = 0 ] && [ '${proxy_syns:-0}' -ge 8 ]"
check "transparent: one robots.txt fetch per server" bash -c \
  "grep -qE '^robots_proxy_robots_fetches_total\\{outcome=\"found\",protocol=\"gopher\"\\} 1\$' '$tp/metrics.txt' &&
   grep -qE '^robots_proxy_robots_fetches_total\\{outcome=\"found\",protocol=\"gemini\"\\} 1\$' '$tp/metrics.txt'"
ns_cleanup
trap cleanup EXIT
