# Operating the proxy (sourced by tests/interop/run): packaging checks.

# --- packaging ----------------------------------------------------------------
if ! command -v systemd-analyze >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd >/dev/null
fi
check "packaging: systemd-analyze verify accepts the unit" tests/packaging/verify-systemd "$proxy_bin"
check "packaging: a man page per subcommand" bash -c \
  "'$proxy_bin' man --out-dir '$work/man' && for c in '' -run -check -transparent-rules -completions -man; do
     test -s '$work/man/robots-proxy'\$c.1 || exit 1; done"
need man man-db
check "packaging: man renders robots-proxy-run(1) with ENVIRONMENT, FILES, SIGNALS, EXIT STATUS" bash -c \
  "MANWIDTH=100 man -l '$work/man/robots-proxy-run.1' 2>/dev/null > '$work/man/run.txt' &&
   for s in ENVIRONMENT FILES SIGNALS 'EXIT STATUS'; do grep -qx \"\$s\" '$work/man/run.txt' || exit 1; done"
# Completion in each shell, driven as a user's TAB would be (tests/packaging/complete).
need zsh zsh fish fish
for sh in bash zsh fish; do
  got=$(for words in "robots-proxy tr" "robots-proxy run --gemini-l" "robots-proxy check --format " \
    "robots-proxy transparent-rules --syntax " "robots-proxy run --virtual-agent " "robots-proxy man "; do
    tests/packaging/complete "$sh" "$proxy_bin" "$words" | tr '\n' ' '; echo; done)
  check "packaging: $sh completes subcommands, their flags and values" test "$got" = \
"transparent-rules 
--gemini-listen 
json text 
iptables nft 
archiver indexer researcher webproxy 
$(if [ "$sh" = bash ]; then echo -n '--help --out-dir -h '; fi)check completions man run status transparent-rules "
done
# --check-config on what `run` would refuse, each naming the key or flag to change.
cc() { # cc EXPECTED TOML [ARGS...]: --check-config exits 2 and says EXPECTED
  local expected=$1 toml=$2; shift 2
  printf '%b' "$toml" > "$work/cc.toml"
  local err
  err=$("$proxy_bin" run --check-config --config "$work/cc.toml" "$@" 2>&1 >/dev/null) && return 1
  [[ $err == *"$expected"* ]] || { echo "got: $err" >&2; return 1; }
}
touch "$work/not-a-dir"
check "check-config: a tls.cert that does not exist" \
  cc 'tls.cert: /nonexistent/cert.pem: No such file' '[tls]\ncert = "/nonexistent/cert.pem"\nkey = "/nonexistent/key.pem"\n' --state-dir "$work/cc-state"
check "check-config: two listeners on one address" \
  cc 'listen.gopher: 127.0.0.1:1965 is where listen.gemini listens' '[listen]\ngemini = "127.0.0.1:1965"\ngopher = "127.0.0.1:1965"\n'
check "check-config: default_delay = 2 says write \"2s\"" cc 'write "2s"' '[politeness]\ndefault_delay = 2\n'
check "check-config: a --store URL that does not parse says why" cc 'not a URL: invalid IPv6 address' '' --store 'redis://[::1'
check "check-config: a state directory that cannot be made names --state-dir" \
  cc '--state-dir: the state directory' '' --state-dir "$work/not-a-dir/state"
check "check-config: no HOME names --state-dir" bash -c \
  "env -u HOME -u XDG_STATE_HOME '$proxy_bin' run --check-config 2>&1 >/dev/null | grep -q 'give one with --state-dir DIR'"
check "packaging: compose publishes each Gopher listener on the port its menus name, and Prometheus scrapes every proxy" \
  tests/packaging/check-compose
check "packaging: both license files" bash -c "grep -q 'Apache License' LICENSE-APACHE && grep -q 'MIT License' LICENSE-MIT"

# --- operating a running proxy: status page in a real browser, reload, actions -----
if ! command -v chromium >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
opg=$(free_port)
opo=$(free_port)
opm=$(free_port)
ops_config() { # ops_config AGENT: the ops proxy's config file
  printf '[listen]\ngemini = "127.0.0.1:%s"\ngopher = "127.0.0.1:%s"\nmetrics = "127.0.0.1:%s"\n[bot]\nagent = "%s"\n[limits]\nallow_private_upstreams = true\n' \
    "$opg" "$opo" "$opm" "$1" > "$work/ops.toml"
}
ops_config interopbot
RUST_LOG=info "$proxy_bin" run --config "$work/ops.toml" --state-dir "$work/ops-state" > "$work/ops.log" 2>&1 &
ops_pid=$!
pids+=($ops_pid)
wait_port "$opm"
check "healthcheck: the image's HEALTHCHECK script finds the admin listener on port $opm (STATE_DIR/listening)" \
  docker/healthcheck "$work/ops-state"
wait_log() { # wait_log TEXT: a bounded poll of the ops proxy's log
  local deadline=$((SECONDS + 30))
  until grep -q "$1" "$work/ops.log"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.1
  done
}
gem "127.0.0.1:$opg" "$base/public/page.gmi" > /dev/null
gem "127.0.0.1:$opg" "$base/private/secret.gmi" > /dev/null
curl -s "gopher://127.0.0.1:$opo/0gopher://127.0.0.1:$hport/0/hello.txt" > /dev/null
curl -s "gopher://127.0.0.1:$opo/0gopher://127.0.0.1:$hport/0/private/x" > /dev/null
# Four at once: the gate spaces them by default_delay (1 s), the host page draws it.
at_once=()
for i in 1 2 3 4; do gem "127.0.0.1:$opg" "$base/public/page.gmi?$i" > /dev/null & at_once+=($!); done
wait "${at_once[@]}"

browse() { # browse PATH: the DOM headless chromium built for an admin page
  timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
    --dump-dom "http://127.0.0.1:$opm$1" 2>/dev/null
}
browse / > "$work/status.dom"
check "status page (chromium): a row for agate with its robots.txt found" \
  grep -qE "<tr data-host=\"gemini://localhost:$gport\"><td><a href=\"/host/localhost:$gport\">gemini://localhost:$gport</a></td><td class=\"found\">found</td>" "$work/status.dom"
check "status page (chromium): a row for gophernicus" grep -q "data-host=\"gopher://127.0.0.1:$hport\"" "$work/status.dom"
check "status page (chromium): the last refusal names its rule" \
  grep -q "disallowed .* ago: robots.txt of localhost:$gport disallows this for interopbot: Disallow: /private (line 2)" "$work/status.dom"
check "status page (chromium): counts by verdict" grep -qE '<th>disallowed</th><td class="n">2</td>' "$work/status.dom"
browse "/?filter=gopher" > "$work/status.filtered.dom"
check "status page (chromium): the host filter" bash -c \
  "grep -q 'data-host=\"gopher://' '$work/status.filtered.dom' && ! grep -q 'data-host=\"gemini://' '$work/status.filtered.dom'"
browse "/host/localhost:$gport?explain=gemini%3A%2F%2Flocalhost%3A$gport%2Fprivate%2Fsecret.gmi" > "$work/host.dom"
check "host page (chromium): robots.txt lines that apply are marked" \
  grep -q '<tr class="applies"><td class="n">2</td><td>✓</td><td><pre>Disallow: /private</pre>' "$work/host.dom"
check "host page (chromium): explain gives the verdict and the rule" \
  grep -q '<td class="disallow">disallow</td><td>group interopbot (line 1); rule Disallow: /private (line 2)</td>' "$work/host.dom"
# The pictures: five starts at agate, each at least its spacing after the last.
browse "/host/localhost:$gport" > "$work/host.plain.dom"
starts=$(grep -o '<line class="start"' "$work/host.plain.dom" | wc -l)
check "host page (chromium): the starts timeline draws each start ($starts of 5)" test "$starts" -eq 5
check "host page (chromium): the spacing held, and says where it comes from" bash -c \
  "grep -q 'The spacing held.' '$work/host.plain.dom' && grep -q '1.0 s <small>(politeness.default_delay)</small>' '$work/host.plain.dom'"
check "host page (chromium): the queue that built up" grep -qE 'waiting now; at most [2-9] in the last' "$work/host.plain.dom"
browse / > "$work/status.dom"
check "status page (chromium): requests per minute by decision, drawn" bash -c \
  "grep -q '<svg id=\"minutes-0\"' '$work/status.dom' && grep -q '8 requests in the last hour' '$work/status.dom'"
check "status page (chromium): refreshes its parts in place, without a reload" bash -c \
  "timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --virtual-time-budget=12000 \
     --dump-dom 'http://127.0.0.1:$opm/' 2>/dev/null | grep -q '<html lang=\"en\" data-refreshed=\"2\">'"
# Scripts off as a user turns them off: the profile's JavaScript setting (chromium's
# --disable-javascript flag does not stop a page's scripts in headless mode, and
# blink's scriptEnabled=false stops --dump-dom too). The proof they are off: no
# refresh in 12 s of the browser's time.
mkdir -p "$work/noscript-profile/Default"
echo '{"profile":{"default_content_setting_values":{"javascript":2}}}' > "$work/noscript-profile/Default/Preferences"
check "status page (chromium, scripts off): the pictures are there, and it reloads itself" bash -c \
  "timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --user-data-dir='$work/noscript-profile' \
     --virtual-time-budget=12000 --dump-dom 'http://127.0.0.1:$opm/' 2>/dev/null > '$work/status.noscript.dom' &&
   grep -q '<svg id=\"minutes-0\"' '$work/status.noscript.dom' &&
   grep -q '<noscript><meta http-equiv=\"refresh\" content=\"30\"></noscript>' '$work/status.noscript.dom' &&
   ! grep -q 'data-refreshed' '$work/status.noscript.dom'"
shot() { # shot PATH FILE HEIGHT [PORT]: a screenshot of an admin page (at PORT, else this proxy's), 1200 wide
  timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars \
    --window-size=1200,"$3" --screenshot="$2" "http://127.0.0.1:${4:-$opm}$1" > /dev/null 2>&1 || true
  python3 -c "
import struct,sys; d=open('$2','rb').read(24)
sys.exit(0 if d[:8]==b'\\x89PNG\\r\\n\\x1a\\n' and struct.unpack('>II',d[16:24])==(1200,$3) else 1)"
}
check "status page (chromium): a screenshot" shot / "$work/status.png" 1300
check "host page (chromium): a screenshot" shot "/host/localhost:$gport" "$work/host.png" 1000
# (docs/status-page.png is taken by status_page.sh, with a fleet store and a bot in report mode.)
if [ -n "${UPDATE_SCREENSHOT:-}" ]; then
  cp "$work/host.png" docs/host-page.png
fi

curl -s "http://127.0.0.1:$opm/api/status" > "$work/status.json"
check "api: /api/status is JSON with the hosts" python3 -c "
import json,sys; s=json.load(open('$work/status.json'))
keys={h['key'] for h in s['hosts']}
sys.exit(0 if {'gemini://localhost:$gport','gopher://127.0.0.1:$hport'} <= keys else 1)"

# An action: forget agate's robots.txt; the next request fetches it again.
before=$(grep -c '/robots.txt" ' "$work/agate.log" || true)
curl -s -X POST "http://127.0.0.1:$opm/api/robots/forget" -d "host=localhost&port=$gport" > "$work/forget.json"
gem "127.0.0.1:$opg" "$base/public/page.gmi" > /dev/null
after=$(grep -c '/robots.txt" ' "$work/agate.log" || true)
check "action: a forgotten robots.txt is fetched again ($before → $after)" test "$after" -eq $((before + 1))

# SIGHUP: a new bot for new connections; a broken file keeps the running config.
ops_config otherbot
kill -HUP "$ops_pid"
check "reload: SIGHUP applies the new config" wait_log "config reloaded"
gem "127.0.0.1:$opg" "$base/public/page.gmi" > "$work/reloaded.gmi"
check "reload: the new bot is refused what the old one was served" grep -q "^53 .* for otherbot" "$work/reloaded.gmi"
printf '[listen\nnot toml' > "$work/ops.toml"
kill -HUP "$ops_pid"
check "reload: a broken file is refused and logged" wait_log "reload refused"
gem "127.0.0.1:$opg" "$base/public/page.gmi" > "$work/still.gmi"
check "reload: the proxy goes on with the last good config" grep -q "^53 .* for otherbot" "$work/still.gmi"
curl -s "http://127.0.0.1:$opm/metrics" > "$work/ops.metrics"
check "reload: counted by result" bash -c \
  "grep -qx 'robots_proxy_config_reloads_total{result=\"success\"} 1' '$work/ops.metrics' &&
   grep -qx 'robots_proxy_config_reloads_total{result=\"failure\"} 1' '$work/ops.metrics' &&
   grep -qx 'robots_proxy_config_last_reload_successful 0' '$work/ops.metrics'"
check "reload: the process is still the same one" kill -0 "$ops_pid"
