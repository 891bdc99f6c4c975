# Helpers shared by tests/interop/run, benches/relay.sh and benches/compare.sh (sourced).

# A port for a server to listen on, below the kernel's ephemeral range: a port the
# kernel hands out (port 0) may meanwhile become the local end of some outgoing
# connection (curl, the proxy's own fetches), and the server then fails to bind.
# Each port is handed out once per $work (the calling script's temp dir).
free_port() {
  python3 - "${work:?free_port needs \$work}/ports-given" <<'EOF'
import random, socket, sys
given = set()
try:
    given = set(open(sys.argv[1]).read().split())
except FileNotFoundError:
    pass
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(1000):
    port = random.randrange(10000, max(low, 10001))
    if str(port) in given:
        continue
    try:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
    except OSError:
        continue
    open(sys.argv[1], "a").write(f"{port}\n")
    print(port)
    sys.exit(0)
sys.exit("no free port below the ephemeral range")
EOF
}

wait_port() { # wait_port PORT [LOG]: a bounded poll until the server accepts; LOG is shown if it never does
  local deadline=$((SECONDS + 60))
  until (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; do
    [ "$SECONDS" -lt "$deadline" ] || {
      echo "nothing listens on port $1; sockets on it:"
      ss -tanp "( sport = :$1 or dport = :$1 )" 2>&1 | head -5
      [ -z "${2:-}" ] || { echo "the end of $2:"; tail -20 "$2"; }
      exit 1
    }
    sleep 0.1
  done
}

need() { # need COMMAND PACKAGE...: installs from Debian the packages whose command is missing
  local missing=()
  while [ $# -gt 1 ]; do
    command -v "$1" > /dev/null || missing+=("$2")
    shift 2
  done
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" > /dev/null
  fi
}

find_agate() { # the agate binary; installed from crates.io on first use
  local agate tools
  agate=$(command -v agate || true)
  if [ -z "$agate" ]; then
    tools=${ROBOTS_PROXY_TOOLS:-$HOME/.cache/robots-proxy-interop}
    if [ ! -x "$tools/bin/agate" ]; then
      echo "installing agate from crates.io into $tools" >&2
      cargo install agate --version 3.3.25 --locked --root "$tools" --quiet >&2
    fi
    agate=$tools/bin/agate
  fi
  echo "$agate"
}

start_work() { # sets $work (a temp dir) and pids=(); on exit, kills and reaps
  # the pids, runs `cleanup_more` if defined, and removes $work (kept with KEEP_WORK=1)
  work=$(mktemp -d)
  pids=()
  trap _end_work EXIT
}

_end_work() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if declare -F cleanup_more > /dev/null; then cleanup_more; fi
  if [ -n "${KEEP_WORK:-}" ]; then echo "work dir kept: $work"; else rm -rf "$work"; fi
}

build_errand_fetch() { # the errand-fetch client (tests/interop/errand_fetch), built from crates.io once
  local target=${ROBOTS_PROXY_TOOLS:-$HOME/.cache/robots-proxy-interop}/errand-fetch
  cargo build --release --locked --quiet --manifest-path tests/interop/errand_fetch/Cargo.toml \
    --target-dir "$target" >&2
  echo "$target/release/errand-fetch"
}

accepts() { # accepts LOG [SINCE]: when the socat logging to LOG (-d -d -lu -lf LOG) accepted each
  # connection after SINCE (seconds since the epoch), one per line: its own microsecond stamp,
  # taken before it forks, so a busy machine delays it less than a process forked to stamp
  python3 - "$1" "${2:-0}" <<'PY'
import datetime, sys
since = float(sys.argv[2])
try:
    lines = open(sys.argv[1], errors="replace").readlines()
except FileNotFoundError:
    lines = []
for line in lines:
    if " accepting connection from " not in line:
        continue
    day, time = line.split()[:2]
    at = datetime.datetime.strptime(f"{day} {time}", "%Y/%m/%d %H:%M:%S.%f").timestamp()
    if at > since:
        print(f"{at:.6f}")
PY
}

# The crawlers from PyPI the web's checks use (web.sh, crawls.sh), pinned, in one venv.
web_venv_packages="requests==2.34.2 scrapy==2.19.0 http-message-signatures==3.0.0"

start_redis_in() { # start_redis_in DIR: a redis-server of its own (no persistence) on DIR/redis.sock, answering
  mkdir -p "$1"
  redis-server --port 0 --unixsocket "$1/redis.sock" --unixsocketperm 700 --save '' \
    --appendonly no --dir "$1" > "$1/log" 2>&1 &
  pids+=($!)
  local deadline=$((SECONDS + 30))
  until redis-cli -s "$1/redis.sock" ping 2>/dev/null | grep -qx PONG; do
    [ "$SECONDS" -lt "$deadline" ] || { echo "redis-server did not start"; cat "$1/log"; exit 1; }
    sleep 0.05
  done
}

nginx_head() { # nginx_head DIR CONNECTIONS: an nginx.conf's opening for a server of the suite's own in DIR (foreground,
  # its pid, errors and temporary files there), up to the `http {` block's own lines
  cat <<EOF
worker_processes 1;
user root root;
daemon off;
pid $1/nginx.pid;
error_log $1/error.log;
events { worker_connections $2; }
http {
  client_body_temp_path $1/tmp/body;
  proxy_temp_path $1/tmp/proxy;
  fastcgi_temp_path $1/tmp/fastcgi;
  uwsgi_temp_path $1/tmp/uwsgi;
  scgi_temp_path $1/tmp/scgi;
EOF
}
