#!/usr/bin/env bash
# robots-proxy against Debian's squid-openssl as a forward proxy, side by side
# in one run on this machine: nginx serves a small page on loopback; each
# proxy relays it, over http:// (absolute URLs, keep-alive) and over CONNECT
# (squid with ssl_bump, robots-proxy ending the tunnel's TLS with its CA).
# Each proxy runs twice: without an access log (squid's access_log none,
# robots-proxy's request line left out), and writing one (squid's daemon: log
# as Debian's config has it; robots-proxy's JSON line to a file, its default).
# Prints requests per second, CPU per request (utime+stime from /proc, every
# process of the proxy: squid's kids and certificate helper included) and the
# p50 latency each adds to a direct request, with both configs.
#
#   benches/squid.sh [REQUESTS]      # default 20000 per CONNECT row; http:// rows run 10 s
#
# Needs root for apt (installs squid-openssl, nginx, wrk if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-20000}
need=()
command -v squid >/dev/null || need+=(squid-openssl)
command -v nginx >/dev/null || need+=(nginx)
command -v wrk >/dev/null || need+=(wrk)
command -v openssl >/dev/null || need+=(openssl)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
systemctl stop squid 2>/dev/null || true
cargo build --release --locked --quiet
bin=$PWD/target/release/robots-proxy

w=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; for q in squid squidlog; do squid -f "$w/$q.conf" -n "$q" -k shutdown 2>/dev/null || true; done; sleep 1; rm -rf "$w"; }
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 never opened" >&2; return 1; }

# --- the site: nginx, a 1 KiB page, robots.txt allowing all ------------------
mkdir -p "$w/site" "$w/tmp"
head -c 1024 /dev/zero | tr '\0' 'x' > "$w/site/small.html"
printf 'User-agent: *\nAllow: /\n' > "$w/site/robots.txt"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj "/CN=bench site CA" -keyout "$w/ca.key" -out "$w/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=localhost" \
  -keyout "$w/site.key" -out "$w/site.csr" 2>/dev/null
printf 'subjectAltName=DNS:localhost\n' > "$w/site.ext"
openssl x509 -req -in "$w/site.csr" -CA "$w/ca.pem" -CAkey "$w/ca.key" -CAcreateserial -days 2 \
  -extfile "$w/site.ext" -out "$w/site.pem" 2>/dev/null
np=$(port); nsp=$(port)
cat > "$w/nginx.conf" <<EOF
worker_processes 1; daemon off; pid $w/nginx.pid; error_log $w/nginx.err;
events { worker_connections 1024; }
http { access_log off; keepalive_requests 1000000; client_body_temp_path $w/tmp;
  server { listen 127.0.0.1:$np; root $w/site; }
  server { listen 127.0.0.1:$nsp ssl; ssl_certificate $w/site.pem; ssl_certificate_key $w/site.key; root $w/site; } }
EOF
nginx -c "$w/nginx.conf" -p "$w" &
pids+=($!)

# --- robots-proxy: no spacing, room for the load ---------------------------
# Two of it: one without its access log (the request line is logged at info:
# level "warn" leaves it out), as squid runs here (access_log none), and one
# writing its JSON access log to a file, as it does by default. One worker
# thread each (limits.worker_threads), as squid runs one worker (workers 1).
cat > "$w/robots-proxy.toml" <<EOF
[log]
level = "warn"
format = "json"
[limits]
upstream_ports = ["10000-65535"]
max_connections_per_client = 4096
worker_threads = 1
[politeness]
default_delay = "0s"
per_host_concurrency = 64
[http]
extra_roots = ["$w/ca.pem"]
EOF
start_rp() { # start_rp NAME LEVEL PORT: robots-proxy NAME at log level LEVEL, its HTTP listener on PORT
  sed "s/^level = .*/level = \"$2\"/" "$w/robots-proxy.toml" > "$w/$1.toml"
  "$bin" run --config "$w/$1.toml" --http-listen "127.0.0.1:$3" \
    --gemini-listen "127.0.0.1:$(port)" --gopher-listen "127.0.0.1:$(port)" \
    --metrics-listen "127.0.0.1:$(port)" --allow-private-upstreams --state-dir "$w/$1-state" \
    > "$w/$1.log" 2>&1 &
}
rp=$(port); start_rp rp warn "$rp"; rp_pid=$!; pids+=($rp_pid)
rpl=$(port); start_rp rp-logged info "$rpl"; rpl_pid=$!; pids+=($rpl_pid)

# --- squid-openssl: no cache, ssl_bump for CONNECT ---------------------------
# Two of it as well: without an access log (access_log none), and with the
# one Debian's config writes (daemon:, through its log helper, whose CPU is
# counted with squid's).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj "/CN=bench squid CA" -keyout "$w/squid-ca.pem" -out "$w/squid-ca.crt" 2>/dev/null
cat "$w/squid-ca.crt" >> "$w/squid-ca.pem"
start_squid() { # start_squid NAME PORT ACCESS_LOG: squid NAME (its service name too) on PORT
  /usr/lib/squid/security_file_certgen -c -s "$w/$1-ssl_db" -M 16MB > /dev/null
  cat > "$w/$1.conf" <<EOF
http_port 127.0.0.1:$2 ssl-bump cert=$w/squid-ca.pem generate-host-certificates=on dynamic_cert_mem_cache_size=16MB
sslcrtd_program /usr/lib/squid/security_file_certgen -s $w/$1-ssl_db -M 16MB
sslcrtd_children 2 startup=1
ssl_bump bump all
tls_outgoing_options cafile=$w/ca.pem
http_access allow localhost
http_access deny all
cache deny all
cache_mem 0 MB
access_log $3
cache_log $w/$1-cache.log
pid_filename $w/$1.pid
coredump_dir $w
workers 1
client_persistent_connections on
server_persistent_connections on
EOF
  chown -R proxy:proxy "$w" 2>/dev/null || true
  chmod 755 "$w"
  squid -f "$w/$1.conf" -n "$1" -N &
}
sq=$(port); start_squid squid "$sq" none; sq_pid=$!; pids+=($sq_pid)
sql=$(port); start_squid squidlog "$sql" "daemon:$w/squid-access.log squid"; sql_pid=$!; pids+=($sql_pid)
wait_port "$np"; wait_port "$nsp"; wait_port "$rp"; wait_port "$rpl"; wait_port "$sq"; wait_port "$sql"

# CPU seconds (utime + stime) of a process and its descendants.
tree() { local p=$1; echo "$p"; for c in $(pgrep -P "$p" || true); do tree "$c"; done; }
cpu() {
  local total=0 t
  for p in $(tree "$1"); do
    t=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)
    total=$((total + t))
  done
  echo "$total"
}
hz=$(getconf CLK_TCK)

# http://: wrk through the proxy, absolute URLs, keep-alive, 8 connections.
cat > "$w/proxy.lua" <<EOF
request = function() return wrk.format("GET", "http://127.0.0.1:$np/small.html") end
EOF
http_row() { # NAME PID PORT
  local before after out rps reqs
  wrk -t1 -c8 -d2s -s "$w/proxy.lua" "http://127.0.0.1:$3" > /dev/null  # warm up
  before=$(cpu "$2")
  out=$(wrk -t1 -c8 -d10s -s "$w/proxy.lua" "http://127.0.0.1:$3")
  after=$(cpu "$2")
  reqs=$(echo "$out" | awk '/requests in/ {print $1}')
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  non2xx=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
  python3 -c "print(f'| {\"$1\":17} | http:// | {float(\"$rps\"):9.0f} | {($after-$before)/$hz/$reqs*1e6:7.1f} µs | ${non2xx:-0} |')"
  python3 -c "print('$1', 'http', ($after-$before)/$hz/$reqs*1e6)" >> "$w/cpu"
}

# CONNECT: curl, keep-alive tunnels (one per parallel slot), N/4 requests.
connect_row() { # NAME PID PORT CA
  local k=$n before after start end
  for i in $(seq "$k"); do echo "url = \"https://localhost:$nsp/small.html\""; echo "output = \"/dev/null\""; done > "$w/urls"
  before=$(cpu "$2"); start=$(date +%s.%N)
  curl -s --no-progress-meter -Z --parallel-max 8 -x "http://127.0.0.1:$3" --cacert "$4" -K "$w/urls" -w '%{http_code}\n' > "$w/codes.$1" 2>/dev/null
  end=$(date +%s.%N); after=$(cpu "$2")
  local bad; bad=$(grep -vc '^200$' "$w/codes.$1" || true)
  python3 -c "print(f'| {\"$1\":17} | CONNECT | {$k/($end-$start):9.0f} | {($after-$before)/$hz/$k*1e6:7.1f} µs | $bad |')"
  python3 -c "print('$1', 'CONNECT', ($after-$before)/$hz/$k*1e6)" >> "$w/cpu"
}

# p50 added: 300 rounds, each a request on a new connection direct, then
# through each proxy (interleaved, so the machine's moods fall on all three).
p50s() { # prints: direct robots-proxy squid (seconds, each a median)
  local t=(-s -o /dev/null -w '%{time_total}\n' "http://127.0.0.1:$np/small.html")
  for _ in $(seq 300); do
    curl "${t[@]}" >> "$w/t.direct"
    curl -x "http://127.0.0.1:$rp" "${t[@]}" >> "$w/t.rp"
    curl -x "http://127.0.0.1:$sq" "${t[@]}" >> "$w/t.sq"
  done
  for f in direct rp sq; do sort -n "$w/t.$f" | awk '{a[NR]=$1} END {printf "%s ", a[int(NR/2)]}'; done
  echo
}

echo "robots-proxy $("$bin" --version | awk '{print $2}') vs $(squid -v | head -1 | awk '{print $1, $4}'), $(nproc) cores, $(date -u +%Y-%m-%d)"
echo
echo '| proxy | via | requests/s | CPU per request | not 2xx |'
echo '| --- | --- | ---: | ---: | ---: |'
http_row robots-proxy "$rp_pid" "$rp"
http_row "robots-proxy, log" "$rpl_pid" "$rpl"
http_row squid "$sq_pid" "$sq"
http_row "squid, log" "$sql_pid" "$sql"
connect_row robots-proxy "$rp_pid" "$rp" "$w/rp-state/ca-cert.pem"
connect_row "robots-proxy, log" "$rpl_pid" "$rpl" "$w/rp-logged-state/ca-cert.pem"
connect_row squid "$sq_pid" "$sq" "$w/squid-ca.crt"
connect_row "squid, log" "$sql_pid" "$sql" "$w/squid-ca.crt"
python3 - "$w/cpu" <<'EOF'
import sys
cpu = {}
for line in open(sys.argv[1]):
    *name, via, us = line.split()
    cpu[(" ".join(name), via)] = float(us)
print()
for via in ("http", "CONNECT"):
    print(f"CPU per request over {via}, robots-proxy's as a share of squid's: without access logs "
          f"{cpu[('robots-proxy', via)] / cpu[('squid', via)]:.2f}, both writing theirs "
          f"{cpu[('robots-proxy, log', via)] / cpu[('squid, log', via)]:.2f}")
EOF
read -r direct via_rp via_sq < <(p50s)
python3 -c "print(); print(f'p50 of a new connection\'s request: direct {$direct*1e3:.2f} ms; added by robots-proxy {($via_rp-$direct)*1e3:.2f} ms, by squid {($via_sq-$direct)*1e3:.2f} ms')"
echo
echo "robots-proxy's bench config (\"robots-proxy, log\": the same at level = \"info\", its JSON request"
echo "lines written to a file, $(grep -c '"message":"request"' "$w/rp-logged.log") of them):"; sed 's/^/    /' "$w/robots-proxy.toml"
echo "squid's (\"squid, log\": the same with access_log daemon:…, $(wc -l < "$w/squid-access.log") lines by the end):"
grep -v '^$' "$w/squid.conf" | sed 's/^/    /'
