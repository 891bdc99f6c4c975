# Slow sites crawled by real crawlers at their defaults, told only the proxy,
# sourced by tests/interop/run (needs its check, $work and $proxy_bin). Sourced
# early: the crawls start in the background and take minutes (a site 10 s
# apart has 14 pages: 140 s; one 30 s apart: 420 s), and crawls_checks, called
# near the end of the run, waits for them and judges.
#
# Debian's nginx serves one site on several loopback addresses, a site each
# (the web's unit of politeness is the host): 14 allowed pages (/, and
# /p1.html to /p12.html, each linking to the next, back, and home as
# /index.html: a crawler's start URL is never linked, as Scrapy fetches its
# start URL again when a page links it) and a disallowed /private/ page
# linked from every page; robots.txt asks Crawl-delay: 10 (127.0.0.2 to
# 127.0.0.5) or 30 (127.0.0.6). One proxy at its
# defaults (the web waits 150 s, places kept across retries) serves:
#   127.0.0.2  Scrapy 2.19 at its defaults (8 at once per domain, 180 s timeout,
#              2 retries on 429)
#   127.0.0.3  Crawlee 3.18's CheerioCrawler at its defaults (npm, pinned)
#   127.0.0.4  wget -r -e robots=off
#   127.0.0.5  a Python requests loop (no timeout)
#   127.0.0.6  Scrapy at its defaults, Crawl-delay 30: 8 pages at once outwait
#              its 180 s timeout, so only a kept place gets every page
#   127.0.0.7  Scrapy at its defaults, Crawl-delay 10, each request sent through
#              one of two proxies in turn (a rotating proxy, `meta["proxy"]`) that
#              share a redis-server: one line, one spacing for the fleet
# Each must fetch every allowed page exactly once, nothing disallowed, with
# every start at the site a Crawl-delay (less 0.5 s) after the one before.

need nginx nginx python3 python3 npm npm wget wget redis-server redis-server redis-cli redis-server
cr=$work/crawls
mkdir -p "$cr/tmp" "$cr/state"
crawl_site() { # crawl_site DIR DELAY: the site's files
  local dir=$1 i next prev
  mkdir -p "$dir/private"
  printf 'User-agent: *\nDisallow: /private/\nCrawl-delay: %s\n' "$2" > "$dir/robots.txt"
  {
    printf '<html><body><h1>home</h1>\n<a href="/private/home.html">private</a>\n'
    for i in $(seq 1 12); do printf '<a href="/p%s.html">p%s</a>\n' "$i" "$i"; done
    printf '</body></html>\n'
  } > "$dir/index.html"
  for i in $(seq 1 12); do
    next=$((i % 12 + 1))
    prev=$(((i + 10) % 12 + 1))
    printf '<html><body><h1>p%s</h1>\n<a href="/index.html">home</a>\n<a href="/p%s.html">next</a>\n<a href="/p%s.html">prev</a>\n<a href="/private/p%s.html">private</a>\n</body></html>\n' \
      "$i" "$next" "$prev" "$i" > "$dir/p$i.html"
    printf 'not for robots\n' > "$dir/private/p$i.html"
  done
  printf 'not for robots\n' > "$dir/private/home.html"
}
crawl_site "$cr/site10" 10
crawl_site "$cr/site30" 30
crawl_pages="/ /index.html $(for i in $(seq 1 12); do printf '/p%s.html ' "$i"; done)"

cp=$(free_port)
{ nginx_head "$cr" 256; cat <<EOF; } > "$cr/nginx.conf"
  log_format timed '\$msec \$server_addr \$request_method \$request_uri \$status "\$http_user_agent"';
  access_log $cr/access.log timed;
  types { text/html html; text/plain txt; }
  server {
    listen 127.0.0.2:$cp;
    listen 127.0.0.3:$cp;
    listen 127.0.0.4:$cp;
    listen 127.0.0.5:$cp;
    listen 127.0.0.7:$cp;
    root $cr/site10;
  }
  server {
    listen 127.0.0.6:$cp;
    root $cr/site30;
  }
}
EOF
nginx -c "$cr/nginx.conf" -p "$cr" > "$cr/nginx.out" 2>&1 &
pids+=($!)

crp=$(free_port)
cra=$(free_port)
printf '[limits]\nupstream_ports = ["%s"]\n' "$cp" > "$cr/proxy.toml"
RUST_LOG=info "$proxy_bin" run --config "$cr/proxy.toml" --http-listen "127.0.0.1:$crp" \
  --gemini-listen "127.0.0.1:$(free_port)" --gopher-listen "127.0.0.1:$(free_port)" \
  --metrics-listen "127.0.0.1:$cra" --agent crawlbot --allow-private-upstreams \
  --state-dir "$cr/state" > "$cr/proxy.log" 2>&1 &
pids+=($!)
wait_port "$crp" "$cr/proxy.log"

# Two proxies sharing a store (no persistence), for the rotating crawler.
start_redis_in "$cr/redis"
fleet_proxies=()
for i in 1 2; do
  port=$(free_port)
  RUST_LOG=info "$proxy_bin" run --config "$cr/proxy.toml" --http-listen "127.0.0.1:$port" \
    --gemini-listen "127.0.0.1:$(free_port)" --gopher-listen "127.0.0.1:$(free_port)" \
    --metrics-listen "127.0.0.1:$(free_port)" --agent crawlbot --allow-private-upstreams \
    --state-dir "$cr/state-fleet$i" --store "unix://$cr/redis/redis.sock" > "$cr/proxy-fleet$i.log" 2>&1 &
  pids+=($!)
  wait_port "$port" "$cr/proxy-fleet$i.log"
  fleet_proxies+=("http://127.0.0.1:$port")
done
until (exec 3<>"/dev/tcp/127.0.0.2/$cp") 2>/dev/null; do sleep 0.1; done
crawl_proxy=http://127.0.0.1:$crp

# The crawlers' installs: Scrapy and requests from PyPI, Crawlee from npm.
# The venv web.sh uses too (it finds it made).
crenv=$work/web/venv
if [ ! -x "$crenv/bin/scrapy" ]; then
  mkdir -p "$work/web"
  # shellcheck disable=SC2086 # the list of packages, split
  python3 -m venv "$crenv" && "$crenv/bin/pip" install -q $web_venv_packages > "$cr/pip.log" 2>&1
fi
mkdir -p "$cr/crawlee"
(cd "$cr/crawlee" && npm install --no-audit --no-fund --silent @crawlee/cheerio@3.18.1 > "$cr/npm.log" 2>&1) || true

cat > "$cr/crawlee/crawl.mjs" <<'EOF'
// CheerioCrawler at its defaults, told only the proxy.
import { CheerioCrawler, ProxyConfiguration } from '@crawlee/cheerio';
const [site, proxy] = process.argv.slice(2);
const crawler = new CheerioCrawler({
  proxyConfiguration: new ProxyConfiguration({ proxyUrls: [proxy] }),
  async requestHandler({ enqueueLinks, request }) {
    console.log(`fetched ${request.url}`);
    await enqueueLinks({ strategy: 'same-origin' });
  },
});
await crawler.run([site + '/']);
EOF
cat > "$cr/loop.py" <<'EOF'
# A crawler's loop with requests: follows every link on the site, one page at
# a time, no timeout, no retry; the proxy from HTTP_PROXY.
import re, sys, requests
site = sys.argv[1]
seen, todo = set(), ["/"]
while todo:
    path = todo.pop(0)
    if path in seen:
        continue
    seen.add(path)
    answer = requests.get(site + path)
    print(answer.status_code, path, flush=True)
    if answer.status_code == 200:
        todo += [p for p in re.findall(r'href="(/[^"]*)"', answer.text) if p not in seen]
EOF

crawl_jobs=()
spider=$PWD/tests/interop/spider.py
scrapy_at() { # scrapy_at HOST LOG
  (cd "$cr" && http_proxy=$crawl_proxy https_proxy=$crawl_proxy timeout 900 \
    "$crenv/bin/scrapy" runspider "$spider" -a "site=http://$1:$cp" > "$2" 2>&1) || true
}
scrapy_at 127.0.0.2 "$cr/scrapy10.log" &
crawl_jobs+=($!)
(cd "$cr/crawlee" && CRAWLEE_STORAGE_DIR=$cr/crawlee/storage timeout 900 \
  node crawl.mjs "http://127.0.0.3:$cp" "$crawl_proxy" > "$cr/crawlee.log" 2>&1) &
crawl_jobs+=($!)
(cd "$cr" && timeout 900 wget -q -r -l 5 -e robots=off -e use_proxy=yes \
  -e "http_proxy=$crawl_proxy" -e "https_proxy=$crawl_proxy" -P "$cr/wget" \
  "http://127.0.0.4:$cp/" 2> "$cr/wget.err") &
crawl_jobs+=($!)
(HTTP_PROXY=$crawl_proxy HTTPS_PROXY=$crawl_proxy timeout 900 \
  "$crenv/bin/python" "$cr/loop.py" "http://127.0.0.5:$cp" > "$cr/requests.log" 2>&1) &
crawl_jobs+=($!)
scrapy_at 127.0.0.6 "$cr/scrapy30.log" &
crawl_jobs+=($!)
(cd "$cr" && timeout 900 "$crenv/bin/scrapy" runspider "$spider" -a "site=http://127.0.0.7:$cp" \
  -a "proxies=$(IFS=,; echo "${fleet_proxies[*]}")" > "$cr/rotating.log" 2>&1) &
crawl_jobs+=($!)
# Among the run's own processes: the suite's `wait` on its other background
# jobs (`jobs -p`) passes over these, and they are stopped at its exit.
pids+=("${crawl_jobs[@]}")

# crawled_at HOST DELAY: every allowed page of HOST's site fetched once,
# nothing disallowed, starts at least DELAY - 0.5 s apart.
crawled_at() {
  local lines=$cr/at.$1
  awk -v h="$1" '$2 == h' "$cr/access.log" > "$lines"
  for p in $crawl_pages; do
    [ "$(awk -v p="$p" '$4 == p' "$lines" | wc -l)" = 1 ] || {
      echo "$1 $p: fetched $(awk -v p="$p" '$4 == p' "$lines" | wc -l) times"
      return 1
    }
  done
  ! grep -q ' /private/' "$lines" || { echo "$1: a disallowed path reached nginx"; return 1; }
  awk -v d="$2" 'NR > 1 && $1 - last < d - 0.5 { print "starts " last " and " $1 " are " $1 - last " s apart"; bad = 1 } { last = $1 } END { exit bad }' "$lines"
}

crawls_checks() {
  for job in "${crawl_jobs[@]}"; do wait "$job" || true; done
  local told
  told=$(grep -c 'status=429' "$cr/proxy.log" || true)
  check "crawls: Scrapy at its defaults, Crawl-delay 10: every allowed page once, nothing disallowed, 10 s apart" \
    crawled_at 127.0.0.2 10
  check "crawls: Crawlee's CheerioCrawler at its defaults, Crawl-delay 10: the same" crawled_at 127.0.0.3 10
  check "crawls: wget -r, Crawl-delay 10: the same" crawled_at 127.0.0.4 10
  check "crawls: a Python requests loop, Crawl-delay 10: the same" crawled_at 127.0.0.5 10
  check "crawls: Scrapy at its defaults, Crawl-delay 30 (past its 180 s timeout; $told answers told to come back): the same, 30 s apart" \
    crawled_at 127.0.0.6 30
  check "crawls: Scrapy through two proxies sharing a store in turn, Crawl-delay 10: the same ($(grep -hc 'host=127.0.0.7:' "$cr"/proxy-fleet*.log | tr '\n' ' ')requests logged)" \
    crawled_at 127.0.0.7 10
  check "crawls: Scrapy gave up on nothing" bash -c "! grep -q 'Gave up retrying' '$cr/scrapy10.log' '$cr/scrapy30.log' '$cr/rotating.log'"
  # What the operator sees: the answers told to come back, per site, and no
  # page given up (a place left in line and never come back for).
  curl -s "http://127.0.0.1:$cra/api/status" > "$cr/status.json"
  python3 - "$cr/status.json" > "$cr/lost.txt" <<'EOF'
import json, sys
for h in json.load(open(sys.argv[1]))["hosts"]:
    print(h["key"], " ".join(f"{k}={v}" for k, v in sorted(h.get("lost", {}).items())) or "-")
EOF
  check "crawls: the status page shows what each site's crawler lost, and no page given up ($(tr '\n' ';' < "$cr/lost.txt"))" \
    bash -c "grep -q '127.0.0.6.* wait=[1-9]' '$cr/lost.txt' && ! grep -q 'given-up' '$cr/lost.txt'"
}
