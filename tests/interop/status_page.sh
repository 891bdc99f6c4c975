# The status page an operator opens, sourced by tests/interop/run after
# web.sh (whose nginx site it uses): a proxy in fleet mode on its own
# redis-server, two web bots picked by Proxy-Authorization (one enforced
# with every limit that counts, one in report mode with a daily budget it
# overruns), crawled with curl; headless Chromium renders the status page
# and a web host's page, which must show each bot's mode, its limits and
# what is left of each, the fleet store's health and shape, the latest
# refusal with its rule, the web host, and whose starts the host page draws.

need redis-server redis-server chromium chromium
sp=$work/status-page
mkdir -p "$sp/state"
start_redis_in "$sp/redis"
sp_http=$(free_port)
sp_admin=$(free_port)
cat > "$sp/proxy.toml" <<EOF2
[limits]
upstream_ports = ["10000-65535"]

[store]
url = "unix://$sp/redis/redis.sock"

[socks5]
users = [{ name = "alice", password = "a-pass" }, { name = "rita", password = "r-pass" }]

[bot]
name = "anon"
agent = "anonbot"

[[bots]]
name = "crawler"
agent = "interopbot"
socks5_users = ["alice"]
concurrency = 2
rate = "100/min"
daily_requests_per_server = 50

[[bots]]
name = "watcher"
agent = "watchbot"
mode = "report"
daily_requests_per_server = 1
socks5_users = ["rita"]
EOF2
RUST_LOG=info "$proxy_bin" run --config "$sp/proxy.toml" --http-listen "127.0.0.1:$sp_http" \
  --gemini-listen "127.0.0.1:$(free_port)" --gopher-listen "127.0.0.1:$(free_port)" \
  --metrics-listen "127.0.0.1:$sp_admin" --allow-private-upstreams \
  --state-dir "$sp/state" --default-delay 0s > "$sp/proxy.log" 2>&1 &
pids+=($!)
wait_port "$sp_http" "$sp/proxy.log"
wait_port "$sp_admin" "$sp/proxy.log"
sp_get() { # sp_get USER:PASS PATH: the HTTP status of PATH at the nginx site, through the proxy
  curl -s -o /dev/null -w '%{http_code}\n' -x "http://$1@127.0.0.1:$sp_http" "$http_site$2" || true
}
{
  sp_get alice:a-pass /a.html
  sp_get alice:a-pass /private/secret.html
  sp_get rita:r-pass /b.html
  sp_get rita:r-pass /private/other.html
  sp_get rita:r-pass /c.html
} > "$sp/codes"
check "status page: curl as the enforced bot and the report-mode bot ($(tr '\n' ' ' < "$sp/codes"))" \
  bash -c "[ \"\$(tr '\n' ' ' < '$sp/codes')\" = '200 403 200 200 200 ' ]"
sp_browse() { # sp_browse PATH: the DOM headless Chromium built for an admin page
  timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
    --user-data-dir="$sp/chromium" --dump-dom "http://127.0.0.1:$sp_admin$1" 2> /dev/null || true
}
sp_browse / > "$sp/status.dom"
check "status page (chromium): the report-mode bot is marked, its budget not shown as enforced" bash -c \
  "sp_row=\$(tr -d '\n' < '$sp/status.dom' | grep -o '<tr data-bot=\"watcher\">.*' | sed 's#</tr>.*##');
   echo \"\$sp_row\" | grep -q '<span class=\"report\">report</span>' && echo \"\$sp_row\" | grep -q 'not enforced)' &&
   grep -q 'Daily budget per server (report mode: not enforced)' '$sp/status.dom' &&
   grep -q 'would have been spent, had it been enforced' '$sp/status.dom'"
check "status page (chromium): the enforced bot's limits and what is left of each" bash -c \
  "sp_row=\$(tr -d '\n' < '$sp/status.dom' | grep -o '<tr data-bot=\"crawler\">.*' | sed 's#</tr>.*##');
   echo \"\$sp_row\" | grep -q '<td>enforce</td>' &&
   echo \"\$sp_row\" | grep -q 'concurrency 2 <small>(2 free at its busiest server)</small>' &&
   echo \"\$sp_row\" | grep -q 'rate 100/min <small>(99 left in the window)</small>' &&
   echo \"\$sp_row\" | grep -q 'daily_requests_per_server 50 <small>(at least 49 left at each server)</small>'"
check "status page (chromium): the fleet store, up, its kind and masters" bash -c \
  "tr -d '\n' < '$sp/status.dom' | grep -q '<h2>Fleet store</h2>.*<td><span class=\"up\">up</span></td>.*<th>kind</th><td>single</td>.*<th>masters</th><td>unix://'"
check "status page (chromium): the latest refusal names its rule, at the web host" bash -c \
  "tr -d '\n' < '$sp/status.dom' | grep -q 'http://127.0.0.1:$np</a></td><td>disallowed</td><td>[^<]*Disallow: /private/'"
check "status page (chromium): a row for the web host, robots.txt found" \
  grep -q "data-host=\"http://127.0.0.1:$np\"" "$sp/status.dom"
sp_browse "/host/127.0.0.1:$np" > "$sp/host.dom"
check "host page (chromium): the web host's explain box offers an http:// URL, and says whose starts it draws" bash -c \
  "grep -q 'placeholder=\"http://127.0.0.1:$np/some/page\"' '$sp/host.dom' &&
   grep -q 'Fleet mode: the starts and the queue shown are this proxy' '$sp/host.dom'"
check "host page (chromium): only enforced starts count for the spacing" bash -c \
  "grep -q 'starts of a bot in report mode were not held (dashed), and are not counted here' '$sp/host.dom'"
# (shot is operations.sh's.)
check "status page (chromium): a screenshot, bots with their modes and limits, the fleet store" \
  shot / "$sp/status.png" 1700 "$sp_admin"
[ -z "${UPDATE_SCREENSHOT:-}" ] || cp "$sp/status.png" docs/status-page.png
