# Preferences stated on web answers, and the web's back-off, sourced by tests/interop/run after
# web.sh (its nginx site answers /pref/* with Content-Usage, X-Robots-Tag
# and tdm-reservation fields, as add_header writes them): a bot declaring
# train-ai, through the proxy, gets 403 naming the field, and never the
# body, where a field refuses it; the answer whole where none does; a bot in
# report mode gets every answer, counted.

wp=$web/pref-proxy
mkdir -p "$wp/state"

# A proxy of its own for the conditional refresh of robots.txt (checked at
# the end of this file, once its copy is a minute old: the least a web
# robots.txt is kept, with robots.ttl = "1s").
rf=$web/refresh-proxy
mkdir -p "$rf/state"
rf_http=$(free_port)
rf_admin=$(free_port)
printf '[robots]\nttl = "1s"\n[http]\nrobots_user_agent = "refreshcheck"\n[limits]\nupstream_ports = ["10000-65535"]\n' > "$rf/proxy.toml"
RUST_LOG=info "$proxy_bin" run --config "$rf/proxy.toml" --http-listen "127.0.0.1:$rf_http" \
  --gemini-listen "127.0.0.1:$(free_port)" --gopher-listen "127.0.0.1:$(free_port)" \
  --metrics-listen "127.0.0.1:$rf_admin" --allow-private-upstreams --agent interopbot \
  --state-dir "$rf/state" --default-delay 0s > "$rf/proxy.log" 2>&1 &
pids+=($!)
wait_port "$rf_http" "$rf/proxy.log"
rf_m=$(mark)
rf_first=$(curl -s -o /dev/null -w '%{http_code}' -x "http://127.0.0.1:$rf_http" "$http_site/a.html")
rf_at=$(date +%s)
wp_http=$(free_port)
wp_admin=$(free_port)
cat > "$wp/proxy.toml" <<EOF2
[limits]
upstream_ports = ["10000-65535"]

# A held site's requests wait at most this long, then get 429: well under the
# back-off's first hold (60 s, jittered by 10 %), so the checks below see the
# 429 and never wait the hold out.
[politeness]
max_wait = "5s"
web_max_wait = "5s"

[http]
extra_roots = ["$web/ca.pem"]

[socks5]
users = [{ name = "p", password = "p-pass" }, { name = "r", password = "r-pass" }]

[bot]
name = "anon"
agent = "anonbot"

[[bots]]
name = "pref"
agent = "prefbot"
content_usage = ["train-ai"]
socks5_users = ["p"]

[[bots]]
name = "watch"
agent = "prefbot"
content_usage = ["train-ai"]
mode = "report"
socks5_users = ["r"]
EOF2
RUST_LOG=info "$proxy_bin" run --config "$wp/proxy.toml" --http-listen "127.0.0.1:$wp_http" \
  --gemini-listen "127.0.0.1:$(free_port)" --gopher-listen "127.0.0.1:$(free_port)" \
  --metrics-listen "127.0.0.1:$wp_admin" --allow-private-upstreams \
  --state-dir "$wp/state" --default-delay 0s > "$wp/proxy.log" 2>&1 &
pids+=($!)
wait_port "$wp_http" "$wp/proxy.log"
wp_get() { # wp_get USER:PASS PATH: "CODE BODY-MARKER" through the proxy
  local body
  body=$(curl -s -o "$wp/body" -w '%{http_code}' -x "http://$1@127.0.0.1:$wp_http" "$http_site$2"; echo " $(grep -ao 'PREF-BODY' "$wp/body" | head -1)")
  echo "$body"
}
for f in content-usage.html noai.html mine.html tdm.html image.png; do
  got=$(wp_get p:p-pass "/pref/$f")
  check "web preferences: /pref/$f is refused (403), its body never relayed ($got)" test "$got" = "403 "
done
for f in theirs.html page-noimageai.html allowed.html; do
  got=$(wp_get p:p-pass "/pref/$f")
  check "web preferences: /pref/$f is relayed whole ($got)" test "$got" = "200 PREF-BODY"
done
curl -s -D "$wp/head" -o "$wp/noai.body" -x "http://p:p-pass@127.0.0.1:$wp_http" "$http_site/pref/noai.html" > /dev/null
check "web preferences: the refusal names the field, in Proxy-Status too" bash -c \
  "grep -q 'refuses train-ai for prefbot: X-Robots-Tag: noindex, noai' '$wp/noai.body' &&
   grep -qi '^proxy-status: .*error=http_request_denied.*X-Robots-Tag: noindex, noai' '$wp/head'"
got=$(wp_get r:r-pass /pref/noai.html)
check "web preferences: a bot in report mode gets the answer whole ($got)" test "$got" = "200 PREF-BODY"
curl -s "http://127.0.0.1:$wp_admin/metrics" > "$wp/metrics"
check "web preferences: refusals and reports counted" bash -c \
  "grep -qE '^robots_proxy_request_outcomes_total\\{bot=\"pref\",outcome=\"response-preference\",protocol=\"http\"\\} 6\$' '$wp/metrics' &&
   grep -qE '^robots_proxy_report_only_total\\{bot=\"watch\",reason=\"response_preference\"\\} 1\$' '$wp/metrics'"

# --- the web's back-off: nginx's 429 without Retry-After, 503 with one ---------
m=$(mark)
b429=$(curl -s -o /dev/null -w '%{http_code}' -x "http://p:p-pass@127.0.0.1:$wp_http" "$http_site/status/429")
curl -s -D "$wp/held.head" -o /dev/null -x "http://p:p-pass@127.0.0.1:$wp_http" "$http_site/pref/allowed.html"
curl -s -D "$wp/held2.head" -o /dev/null -x "http://r:r-pass@127.0.0.1:$wp_http" "$http_site/pref/allowed.html"
held_retry=$(grep -i '^retry-after:' "$wp/held.head" | tr -dc 0-9 || true)
check "web back-off: nginx's 429 reaches the crawler, then the site is held 60 s ±10 % for every bot (429, Retry-After ${held_retry:-none})" bash -c \
  "[ '$b429' = 429 ] && grep -q '^HTTP/1.1 429' '$wp/held.head' && grep -q '^HTTP/1.1 429' '$wp/held2.head' &&
   [ '${held_retry:-0}' -ge 50 ] && [ '${held_retry:-0}' -le 66 ] && grep -qi '^proxy-status:' '$wp/held.head'"
since "$m" > "$wp/since.backoff"
check "web back-off: nginx heard nothing after its 429" bash -c "! grep -q ' /pref/allowed.html ' '$wp/since.backoff'"
b503=$(curl -s -o /dev/null -w '%{http_code}' -x "http://p:p-pass@127.0.0.1:$wp_http" --cacert "$wp/state/ca-cert.pem" "$https_site/status/503")
curl -s -D "$wp/held3.head" -o /dev/null -x "http://p:p-pass@127.0.0.1:$wp_http" --cacert "$wp/state/ca-cert.pem" "$https_site/a.html"
held_retry=$(grep -i '^retry-after:' "$wp/held3.head" | tr -dc 0-9 || true)
check "web back-off: nginx's 503 with Retry-After: 120 over CONNECT holds that site until then (Retry-After ${held_retry:-none})" bash -c \
  "[ '$b503' = 503 ] && grep -q '^HTTP/1.1 429' '$wp/held3.head' && [ '${held_retry:-0}' -ge 110 ] && [ '${held_retry:-0}' -le 120 ]"

# --- robots.txt asked for again conditionally: nginx's ETag, then its 304 ----
sleep $((rf_at + 62 - $(date +%s))) 2>/dev/null || true
rf_second=$(curl -s -o /dev/null -w '%{http_code}' -x "http://127.0.0.1:$rf_http" "$http_site/a.html")
rf_third=$(curl -s -o /dev/null -w '%{http_code}' -x "http://127.0.0.1:$rf_http" "$http_site/private/x.html")
since "$rf_m" | awk '$3 == "/robots.txt" && $5 == "\"refreshcheck\""' > "$rf/robots.lines"
curl -s "http://127.0.0.1:$rf_admin/metrics" > "$rf/metrics"
check "conditional refresh: a minute on, nginx answers the proxy's If-None-Match with 304 ($(awk '{print $4}' "$rf/robots.lines" | tr '\n' ' '))" bash -c \
  "[ '$rf_first' = 200 ] && [ '$rf_second' = 200 ] && [ \"\$(awk '{print \$4}' '$rf/robots.lines' | tr '\n' ' ')\" = '200 304 ' ]"
check "conditional refresh: the kept rules still refuse (403), the fetch counted not-modified" bash -c \
  "[ '$rf_third' = 403 ] && grep -qE '^robots_proxy_robots_fetches_total\\{outcome=\"not-modified\",protocol=\"http\"\\} 1\$' '$rf/metrics'"
