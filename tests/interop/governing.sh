# Governing a bot beyond robots.txt (sourced by tests/interop/run), against a
# second agate capsule and the gophernicus hole, with real clients: a floor, a
# daily budget, a Content-Usage refusal (openssl s_client), report mode (curl
# from another loopback address, picked as another bot).

# --- a capsule whose robots.txt states AI-use preferences ---------------------
mkdir -p "$work/governed/open"
printf 'User-agent: *\nAllow: /\nContent-Usage: train-ai=n\nContent-Usage: /open/ train-ai=y\n' \
  > "$work/governed/robots.txt"
for p in a b c d; do printf 'Page %s.\n' "$p" > "$work/governed/open/$p.gmi"; done
printf 'Notes.\n' > "$work/governed/notes.gmi"
g2port=$(free_port)
RUST_LOG=info "$agate" --content "$work/governed" --certs "$work/certs2" --addr "127.0.0.1:$g2port" \
  --hostname localhost > "$work/agate2.log" 2>&1 &
pids+=($!)
wait_port "$g2port"

gvg=$(free_port)
gvo=$(free_port)
gvm=$(free_port)
printf '[listen]\ngemini = "127.0.0.1:%s"\ngopher = "127.0.0.1:%s"\nmetrics = "127.0.0.1:%s"\n
[bot]\nagent = "interopbot"\nmin_delay = "1s"\ndaily_requests_per_server = 3\ncontent_usage = ["train-ai"]\n
[[bots]]\nname = "watched"\nagent = "interopbot"\nmode = "report"\nclients = ["127.0.0.2/32"]\n
[politeness]\nmax_wait = "5s"\n
[limits]\nallow_private_upstreams = true\n' "$gvg" "$gvo" "$gvm" > "$work/governed.toml"
RUST_LOG=info "$proxy_bin" run --config "$work/governed.toml" --state-dir "$work/governed-state" \
  > "$work/governed.log" 2>&1 &
pids+=($!)
wait_port "$gvg"
wait_port "$gvm"
g2=gemini://localhost:$g2port

gem "127.0.0.1:$gvg" "$g2/notes.gmi" > "$work/notes.governed"
check "governing: Content-Usage: train-ai=n refuses a train-ai bot with 53 naming the line" grep -q \
  "^53 robots.txt of localhost:$g2port disallows this for interopbot: Content-Usage: train-ai=n (line 3)" \
  "$work/notes.governed"
check "governing: agate never saw the refused page" bash -c "! grep -q '/notes.gmi' '$work/agate2.log'"

started=$(date +%s.%N)
gem "127.0.0.1:$gvg" "$g2/open/a.gmi" > "$work/a.governed"
gem "127.0.0.1:$gvg" "$g2/open/b.gmi" > "$work/b.governed"
elapsed=$(python3 -c "import time; print(time.time() - $started)")
check "governing: a longer path's preference allows it" grep -q '^20 ' "$work/b.governed"
# robots.txt fetch, a, b: each start at least min_delay = 1 s after the one before.
check "governing: min_delay spaces the bot's starts ($elapsed s for two after robots.txt)" \
  python3 -c "import sys; sys.exit(0 if $elapsed >= 1.9 else 1)"

gem "127.0.0.1:$gvg" "$g2/open/c.gmi" > "$work/c.governed"
gem "127.0.0.1:$gvg" "$g2/open/d.gmi" > "$work/d.governed"
check "governing: the third start of the day is served" grep -q '^20 ' "$work/c.governed"
check "governing: past daily_requests_per_server = 3, 44 with hours to wait" python3 -c "
import re,sys; m=re.match(r'44 (\d+)\r?\n', open('$work/d.governed').read())
sys.exit(0 if m and int(m.group(1)) > 3600 else 1)"
check "governing: agate never saw the fourth page" bash -c "! grep -q '/open/d.gmi' '$work/agate2.log'"

# Report mode: the same agent picked as `watched` from 127.0.0.2; gophernicus's
# robots.txt disallows /private to interopbot. ($hole may name transparent.sh's
# namespace by now: this names the first gophernicus itself.)
ghole=gopher://127.0.0.1:$hport
curl -s --interface 127.0.0.2 "gopher://127.0.0.1:$gvo/0$ghole/0/private/secret.txt" > "$work/secret.watched"
check "governing: report mode relays the disallowed file from gophernicus" \
  grep -q '^Not for robots.' "$work/secret.watched"
curl -s "gopher://127.0.0.1:$gvo/0$ghole/0/private/secret.txt" > "$work/secret.enforced"
check "governing: the enforcing bot is still refused (3403)" grep -q '^3403 Forbidden' "$work/secret.enforced"
check "governing: report mode's log line says what would have happened" \
  grep -q 'would="disallowed: robots.txt of 127.0.0.1:'"$hport"' disallows this for interopbot: Disallow: /private (line 2)' \
  "$work/governed.log"
curl -s "http://127.0.0.1:$gvm/metrics" > "$work/governed.metrics"
check "governing: report mode counted in robots_proxy_report_only_total" grep -qx \
  'robots_proxy_report_only_total{bot="watched",reason="disallowed"} 1' "$work/governed.metrics"
check "governing: the start log names the bots in report mode" grep -q 'report_mode=watched' "$work/governed.log"

# --- a daily budget over a fleet: two proxy processes on fleet.sh's redis-server
# (its own key prefix), a crawler alternating between them at gophernicus ------
fleet_budget=()
for i in 1 2; do
  fbg=$(free_port); fbo=$(free_port); fbm=$(free_port)
  printf '[listen]\ngemini = "127.0.0.1:%s"\ngopher = "127.0.0.1:%s"\nmetrics = "127.0.0.1:%s"\n
[bot]\nagent = "interopbot"\ndaily_requests_per_server = 2\n
[store]\nurl = "%s"\nprefix = "governing:"\n
[limits]\nallow_private_upstreams = true\n' "$fbg" "$fbo" "$fbm" "$store" > "$work/fleet-budget-$i.toml"
  RUST_LOG=info "$proxy_bin" run --config "$work/fleet-budget-$i.toml" --state-dir "$work/fleet-budget-state-$i" \
    --default-delay 0s > "$work/fleet-budget-$i.log" 2>&1 &
  pids+=($!)
  wait_port "$fbo" "$work/fleet-budget-$i.log"
  fleet_budget+=("$fbo")
done
served_before=$(grep -c '"GET [^"]*hello.txt' "$work/gophernicus.log" || true)
for n in 1 2 3 4; do
  curl -s "gopher://127.0.0.1:${fleet_budget[$((n % 2))]}/0$ghole/0/hello.txt" > "$work/fleet-budget.$n"
done
# gophernicus may write its log line just after the answer: waited for, 5 s at most.
deadline=$((SECONDS + 5))
while :; do
  served_after=$(grep -c '"GET [^"]*hello.txt' "$work/gophernicus.log" || true)
  [ "$((served_after - served_before))" -ge 2 ] || [ "$SECONDS" -ge "$deadline" ] && break
  sleep 0.05
done
check "governing: over two proxies, the first two starts of the day are served" \
  bash -c "grep -q '^Hello from gophernicus.' '$work/fleet-budget.1' && grep -q '^Hello from gophernicus.' '$work/fleet-budget.2'"
check "governing: over two proxies, the third and fourth get a type-3 slow-down naming the budget" \
  bash -c "grep -q '^3.*daily_requests_per_server = 2' '$work/fleet-budget.3' && grep -q '^3.*daily_requests_per_server = 2' '$work/fleet-budget.4'"
check "governing: gophernicus saw two of the four ($served_before before, $served_after after)" \
  test "$((served_after - served_before))" -eq 2
