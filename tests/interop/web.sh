# The web through the HTTP listener, sourced by tests/interop/run (needs its
# check, $work and $proxy_bin). Debian's nginx serves one site over HTTP and
# HTTPS (its certificate from a local CA the proxy trusts by
# [http] extra_roots), logging every request with $msec; real clients crawl
# it through the proxy: curl, wget (-r -e robots=off), Python requests,
# Scrapy at its defaults (16 requests at once, 8 per domain,
# ROBOTSTXT_OBEY = False) and headless Chromium. The site's robots.txt
# disallows /private/ and asks Crawl-delay: 1: every allowed page is fetched
# exactly once per crawl, no disallowed path is in nginx's log, and every
# start at the site is at least a second after the one before.

need nginx nginx curl curl wget wget openssl openssl
web=$work/web
mkdir -p "$web/site/private" "$web/tmp" "$web/state"
printf 'User-agent: *\nDisallow: /private/\nCrawl-delay: 1\n' > "$web/site/robots.txt"
page() { # page NAME LINK...: a page linking to LINKs
  local name=$1
  shift
  {
    printf '<html><body><h1>page %s</h1>\n' "$name"
    for link in "$@"; do printf '<a href="%s">%s</a>\n' "$link" "$link"; done
    printf '</body></html>\n'
  } > "$web/site/$name"
}
page index.html /a.html /b.html /c.html /private/secret.html
page a.html /b.html /d.html
page b.html /c.html /private/other.html
page c.html /e.html
page d.html /index.html
page e.html /a.html
page private/secret.html /a.html
page private/other.html /a.html
allowed_pages="/ /index.html /a.html /b.html /c.html /d.html /e.html"
mkdir -p "$web/site/pref"
for f in content-usage noai mine theirs tdm page-noimageai allowed; do printf 'PREF-BODY %s\n' "$f" > "$web/site/pref/$f.html"; done
printf '\x89PNG\r\n\x1a\nPREF-BODY image\n' > "$web/site/pref/image.png"

# A local CA and nginx's certificate for localhost and 127.0.0.1.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
  -subj "/CN=interop site CA" -keyout "$web/ca.key" -out "$web/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=localhost" \
  -keyout "$web/site.key" -out "$web/site.csr" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > "$web/site.ext"
openssl x509 -req -in "$web/site.csr" -CA "$web/ca.pem" -CAkey "$web/ca.key" -CAcreateserial \
  -days 30 -extfile "$web/site.ext" -out "$web/site.pem" 2>/dev/null

np=$(free_port)
nsp=$(free_port)
# The Web Bot Auth key directory's listener (web_bot_auth.sh), published by
# nginx's HTTPS server as the bots' origin.
kdp=$(free_port)
{ nginx_head "$web" 64; cat <<EOF; } > "$web/nginx.conf"
  log_format timed '\$msec \$request_method \$request_uri \$status "\$http_user_agent" "\$http_via" "\$http_proxy_authorization" \$server_protocol';
  access_log $web/access.log timed;
  types { text/html html; text/plain txt; image/png png; }
  server {
    listen 127.0.0.1:$np;
    root $web/site;
    # Answers stating preferences (web_preferences.sh); linked from no page.
    location = /pref/content-usage.html { add_header Content-Usage "train-ai=n"; }
    location = /pref/noai.html { add_header X-Robots-Tag "noindex, noai"; }
    location = /pref/mine.html { add_header X-Robots-Tag "prefbot: noai"; }
    location = /pref/theirs.html { add_header X-Robots-Tag "otherbot: noai"; }
    location = /pref/tdm.html { add_header tdm-reservation "1"; }
    location = /pref/image.png { add_header X-Robots-Tag "noimageai"; }
    location = /pref/page-noimageai.html { add_header X-Robots-Tag "noimageai"; }
    location = /pref/allowed.html { add_header Content-Usage "train-ai=y"; }
    # Too many requests, saying nothing of when to come back (web_preferences.sh).
    location = /status/429 { return 429; }
    # The signature fields a request came with, and its Host (web_bot_auth.sh).
    location = /wba/echo {
      default_type text/plain;
      return 200 "\$http_signature_agent|\$http_signature_input|\$http_signature|\$http_host";
    }
  }
  server {
    # HTTP/2 offered by ALPN: the proxy relays to it in HTTP/2.
    listen 127.0.0.1:$nsp ssl http2;
    ssl_certificate $web/site.pem;
    ssl_certificate_key $web/site.key;
    root $web/site;
    location = /status/503 { add_header Retry-After 120 always; return 503; }
    # The bots' origin: the proxy's key directory, published (web_bot_auth.sh).
    location = /.well-known/http-message-signatures-directory {
      proxy_pass http://127.0.0.1:$kdp;
      # \$host, not \$http_host: an HTTP/2 request has no Host field, only :authority.
      proxy_set_header Host \$host:\$server_port;
    }
  }
}
EOF
nginx -c "$web/nginx.conf" -p "$web" > "$web/nginx.out" 2>&1 &
pids+=($!)

hp=$(free_port)
# Upstream ports are the site's alone (free_port hands out 10000 and up):
# what else a client asks for (Chromium's own background requests) is
# refused by port, before any name is looked up.
printf '[http]\nextra_roots = ["%s"]\n[limits]\nupstream_ports = ["10000-65535"]\n' "$web/ca.pem" > "$web/proxy.toml"
RUST_LOG=info "$proxy_bin" run --config "$web/proxy.toml" --http-listen "127.0.0.1:$hp" \
  --gemini-listen "127.0.0.1:$(free_port)" --gopher-listen "127.0.0.1:$(free_port)" \
  --metrics-listen "127.0.0.1:$(free_port)" --agent interopbot --allow-private-upstreams \
  --state-dir "$web/state" --default-delay 0s --max-wait 120s > "$web/proxy.log" 2>&1 &
pids+=($!)
wait_port "$np" "$web/error.log"
wait_port "$nsp" "$web/error.log"
wait_port "$hp" "$web/proxy.log"
proxy_ca=$web/state/ca-cert.pem
http_site=http://127.0.0.1:$np
https_site=https://localhost:$nsp

mark() { wc -l < "$web/access.log" 2>/dev/null || echo 0; }
since() { tail -n +$(($1 + 1)) "$web/access.log"; } # since MARK: the log lines after it

# crawled MARK: each allowed page fetched exactly once since MARK, no
# disallowed path, and every start at least 0.99 s after the one before.
crawled() {
  local lines=$web/since.$1
  since "$1" > "$lines"
  for p in $allowed_pages; do
    [ "$(awk -v p="$p" '$3 == p' "$lines" | wc -l)" = 1 ] || { echo "$p: not fetched once"; cat "$lines"; return 1; }
  done
  ! grep -q ' /private/' "$lines" || { echo "a disallowed path reached nginx"; return 1; }
  awk 'NR > 1 && $1 - last < 0.99 { print "starts " last " and " $1 " are " $1 - last " s apart"; bad = 1 } { last = $1 } END { exit bad }' "$lines"
}

# --- curl ----------------------------------------------------------------------
m=$(mark)
curl -s -o "$web/curl.a" -w '%{http_code}' -x "http://127.0.0.1:$hp" "$http_site/a.html" > "$web/curl.a.code"
curl -s -D "$web/curl.private.head" -o "$web/curl.private" -x "http://127.0.0.1:$hp" "$http_site/private/secret.html" > /dev/null
check "web: curl through the HTTP listener gets an allowed page" \
  bash -c "[ \"\$(cat '$web/curl.a.code')\" = 200 ] && grep -q 'page a.html' '$web/curl.a'"
check "web: curl is refused a disallowed page: 403 naming the rule, Proxy-Status" bash -c \
  "grep -q '^HTTP/1.1 403' '$web/curl.private.head' && grep -qi '^proxy-status: .*error=http_request_denied' '$web/curl.private.head' &&
   grep -q 'Disallow: /private/ (line 2)' '$web/curl.private'"
curl -s -o "$web/curl.tls" -w '%{http_code}' -x "http://127.0.0.1:$hp" --cacert "$proxy_ca" \
  "$https_site/b.html" > "$web/curl.tls.code" 2> "$web/curl.tls.err" || true
check "web: curl over CONNECT, trusting the proxy's CA, gets an HTTPS page ($(head -c 100 "$web/curl.tls.err"))" \
  bash -c "[ \"\$(cat '$web/curl.tls.code')\" = 200 ] && grep -q 'page b.html' '$web/curl.tls'"
check "web: nginx's HTTPS server, offering HTTP/2, was asked in it; robots.txt in HTTP/1.1" bash -c \
  "grep -q ' /b.html 200 .* HTTP/2.0\$' '$web/access.log' && ! grep ' /robots.txt ' '$web/access.log' | grep -q 'HTTP/2.0\$'"
curl -s -o /dev/null -w '%{http_code}' -x "http://127.0.0.1:$hp" --cacert "$proxy_ca" \
  "$https_site/private/other.html" > "$web/curl.tls.private.code" 2>/dev/null || true
check "web: curl over CONNECT is refused a disallowed HTTPS page (403)" \
  grep -qx 403 "$web/curl.tls.private.code"
curl -s -o /dev/null -w '%{http_code}' -x "http://127.0.0.1:$hp" "$http_site/private/x/../../a.html" \
  --path-as-is > /dev/null 2>&1 || true
since "$m" > "$web/since.curl"
check "web: no disallowed path reached nginx from curl" bash -c "! grep -q ' /private/' '$web/since.curl'"
check "web: nginx saw the bot's User-Agent and the proxy's Via, never Proxy-Authorization" bash -c \
  "grep ' /a.html ' '$web/since.curl' | grep -q '\"interopbot\" \"1.1 robots-proxy-' && ! grep -q '\"Basic' '$web/since.curl'"

# --- wget, recursive, robots.txt ignored by the client ---------------------------
m=$(mark)
(cd "$web" && timeout 120 wget -q -r -l 5 -e robots=off -e use_proxy=yes \
  -e "https_proxy=http://127.0.0.1:$hp" -e "http_proxy=http://127.0.0.1:$hp" \
  --ca-certificate="$proxy_ca" -P "$web/wget" "$https_site/" 2> "$web/wget.err") || true
check "web: wget -r -e robots=off over HTTPS: every allowed page once, nothing disallowed, 1 s apart" crawled "$m"

# --- Python requests ---------------------------------------------------------------
pyenv=$web/venv
if [ ! -x "$pyenv/bin/scrapy" ]; then
  # shellcheck disable=SC2086 # the list of packages, split
  python3 -m venv "$pyenv" && "$pyenv/bin/pip" install -q $web_venv_packages > "$web/pip.log" 2>&1
fi
HTTPS_PROXY=http://127.0.0.1:$hp REQUESTS_CA_BUNDLE=$proxy_ca "$pyenv/bin/python" - "$https_site" > "$web/requests.out" 2>&1 <<'EOF' || true
import sys, requests
site = sys.argv[1]
print(requests.get(site + "/c.html", timeout=60).status_code)
print(requests.get(site + "/private/secret.html", timeout=60).status_code)
EOF
check "web: Python requests (HTTPS_PROXY, REQUESTS_CA_BUNDLE): 200 for an allowed page, 403 for a disallowed one" \
  bash -c "[ \"\$(tr '\n' ' ' < '$web/requests.out')\" = '200 403 ' ]"

# --- Scrapy at its defaults --------------------------------------------------------
m=$(mark)
spider=$PWD/tests/interop/spider.py
(cd "$web" && https_proxy=http://127.0.0.1:$hp http_proxy=http://127.0.0.1:$hp timeout 180 \
  "$pyenv/bin/scrapy" runspider "$spider" -a "site=$https_site" > "$web/scrapy.log" 2>&1) || true
check "web: Scrapy at its defaults over HTTPS: every allowed page once, nothing disallowed, 1 s apart" crawled "$m"

# --- headless Chromium -------------------------------------------------------------
if command -v chromium > /dev/null || { need chromium chromium && command -v chromium > /dev/null; }; then
  chrome() { # chrome URL: the page as Chromium rendered it, through the proxy
    timeout 60 chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
      --disable-component-update --disable-sync --no-first-run --no-default-browser-check \
      --disable-client-side-phishing-detection --disable-domain-reliability \
      --disable-features=OptimizationHints,MediaRouter,Translate,AutofillServerCommunication \
      --proxy-server="http://127.0.0.1:$hp" --proxy-bypass-list='<-loopback>' \
      --user-data-dir="$web/chromium" --dump-dom "$1" 2> /dev/null || true
  }
  chrome "$http_site/d.html" > "$web/chromium.d"
  chrome "$http_site/private/other.html" > "$web/chromium.private"
  check "web: headless Chromium through the listener gets an allowed page" grep -q 'page d.html' "$web/chromium.d"
  check "web: headless Chromium is shown the proxy's refusal of a disallowed page" \
    grep -q 'disallows this for interopbot' "$web/chromium.private"
fi
check "web: still no disallowed path in nginx's log" bash -c "! grep -q ' /private/' '$web/access.log'"
grep 'request ' "$web/proxy.log" | grep -v -e 'host=127.0.0.1:' -e 'host=localhost:' > "$web/elsewhere.log" || true
check "web: whatever else a client asked for was refused by port, nothing looked up ($(wc -l < "$web/elsewhere.log") requests)" \
  bash -c "! grep -qv 'outcome=\"proxy-rule\"' '$web/elsewhere.log'"
