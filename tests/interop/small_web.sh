# Spartan and Nex, sourced by tests/interop/run (needs its check, $work,
# $proxy_bin): servers written from the specs (tests/interop/small_web_server.py,
# no packaged one exists) on loopback, and a proxy whose [ports] names their
# ports. Real clients: ncat through SOCKS5 (by port), openssl s_client through
# the Gemini listener (spartan:// and nex:// URLs). A disallowed path and its
# spellings refused each way, one politeness gate for the machine, an upload
# refused. (Transparent mode: tests/interop/transparent.sh.)

need ncat ncat
sw=$work/small_web
mkdir -p "$sw/root/private"
printf 'User-agent: interopbot\nDisallow: /private\nCrawl-delay: 0.5\n' > "$sw/root/robots.txt"
printf 'Public text.\n' > "$sw/root/public.txt"
printf 'Not for robots.\n' > "$sw/root/private/secret.txt"
: > "$sw/served.log"
spport=$(free_port)
nxport=$(free_port)
swg=$(free_port)
sws=$(free_port)
swm=$(free_port)
python3 tests/interop/small_web_server.py --protocol spartan --root "$sw/root" --port "$spport" \
  --log "$sw/served.log" > "$sw/spartan.log" 2>&1 &
pids+=($!)
python3 tests/interop/small_web_server.py --protocol nex --root "$sw/root" --port "$nxport" \
  --log "$sw/served.log" > "$sw/nex.log" 2>&1 &
pids+=($!)
printf '[ports]\nspartan = [%s]\nnex = [%s]\n' "$spport" "$nxport" > "$sw/proxy.toml"
RUST_LOG=info "$proxy_bin" run --config "$sw/proxy.toml" --gemini-listen "127.0.0.1:$swg" \
  --gopher-listen "127.0.0.1:$(free_port)" --socks5-listen "127.0.0.1:$sws" \
  --metrics-listen "127.0.0.1:$swm" --agent interopbot --allow-private-upstreams \
  --state-dir "$sw/state" --max-wait 60s > "$sw/proxy.log" 2>&1 &
pids+=($!)
wait_port "$spport"
wait_port "$nxport"
wait_port "$swg"
wait_port "$sws"
wait_port "$swm"

sw_socks() { # sw_socks PORT LINE [DATA]: LINE, CRLF, DATA through SOCKS5 to 127.0.0.1:PORT (ncat)
  printf '%s\r\n%s' "$2" "${3:-}" | timeout 30 ncat --proxy "127.0.0.1:$sws" --proxy-type socks5 \
    127.0.0.1 "$1" 2>/dev/null || true
}
sw_gem() { # sw_gem URL: the URL to the Gemini listener (openssl s_client)
  printf '%s\r\n' "$1" | timeout 30 openssl s_client -quiet -connect "127.0.0.1:$swg" 2>/dev/null || true
}

sw_socks "$spport" "127.0.0.1 /public.txt 0" > "$sw/public.spartan"
check "small web: ncat through SOCKS5 gets a Spartan page" \
  bash -c "printf '2 text/plain\r\nPublic text.\n' | cmp -s - '$sw/public.spartan'"
sw_socks "$nxport" "public.txt" > "$sw/public.nex"
check "small web: ncat through SOCKS5 gets a Nex document" \
  bash -c "printf 'Public text.\n' | cmp -s - '$sw/public.nex'"
sw_gem "spartan://127.0.0.1:$spport/public.txt" > "$sw/public.gemini-spartan"
check "small web: openssl s_client gets a spartan:// URL as Gemini (20 text/plain)" \
  bash -c "printf '20 text/plain\r\nPublic text.\n' | cmp -s - '$sw/public.gemini-spartan'"
sw_gem "nex://127.0.0.1:$nxport/" > "$sw/listing.gemini-nex"
check "small web: openssl s_client gets a Nex listing as text/gemini" \
  bash -c "printf '20 text/gemini\r\n=> private/\n=> public.txt\n=> robots.txt\n' | cmp -s - '$sw/listing.gemini-nex'"

refused=0
tried=0
for spelling in /private/secret.txt /%70rivate/secret.txt //private/secret.txt \
  /./private/secret.txt /public/../private/secret.txt; do
  tried=$((tried + 3))
  sw_socks "$spport" "127.0.0.1 $spelling 0" | grep -q "^4 robots.txt of 127.0.0.1:$spport disallows" &&
    refused=$((refused + 1))
  sw_socks "$nxport" "$spelling" | grep -q "^robots-proxy: 53 robots.txt of 127.0.0.1:$nxport disallows" &&
    refused=$((refused + 1))
  sw_gem "nex://127.0.0.1:$nxport$spelling" | grep -q "^53 robots.txt of 127.0.0.1:$nxport" &&
    refused=$((refused + 1))
done
for spelling in private/secret.txt /%2570rivate/secret.txt; do
  tried=$((tried + 1))
  sw_socks "$nxport" "$spelling" | grep -q "^robots-proxy: 53 " && refused=$((refused + 1))
done
tried=$((tried + 1))
sw_gem "spartan://127.0.0.1:$spport/%70rivate/secret.txt" | grep -q "^53 robots.txt" && refused=$((refused + 1))
check "small web: $refused of $tried spellings of a disallowed path refused (SOCKS5 and the Gemini listener)" \
  test "$refused" = "$tried"
check "small web: the servers never served the secret" bash -c "! grep -q private '$sw/served.log'"

sw_socks "$spport" "127.0.0.1 /guestbook 5" hello > "$sw/upload.socks"
sw_gem "spartan://127.0.0.1:$spport/guestbook?hello" > "$sw/upload.gemini"
check "small web: an upload is refused for a bot (SOCKS5: 4, the Gemini listener: 53)" bash -c \
  "grep -q '^4 uploads are refused' '$sw/upload.socks' && grep -q '^53 uploads are refused' '$sw/upload.gemini' && ! grep -q guestbook '$sw/served.log'"

# One gate: six requests at once over Spartan and Nex, three ways in; the
# servers (one machine) see them at least Crawl-delay 0.5 s apart.
: > "$sw/served.log"
sw_socks "$spport" "127.0.0.1 /public.txt 0" > "$sw/gate.1" &
sw_socks "$nxport" "public.txt" > "$sw/gate.2" &
sw_gem "spartan://127.0.0.1:$spport/public.txt" > "$sw/gate.3" &
sw_gem "nex://127.0.0.1:$nxport/public.txt" > "$sw/gate.4" &
sw_socks "$spport" "127.0.0.1 /./public.txt 0" > "$sw/gate.5" &
sw_socks "$nxport" "/public.txt" > "$sw/gate.6" &
wait_ok=true
for job in $(jobs -p); do
  case " ${pids[*]} " in *" $job "*) ;; *) wait "$job" || wait_ok=false ;; esac
done
sw_gap=$(sort -n "$sw/served.log" | awk 'NR > 1 { g = $1 - p; if (min == "" || g < min) min = g } { p = $1 } END { printf "%.3f", min }')
sw_seen=$(grep -c /public.txt "$sw/served.log" || true)
check "small web: one gate for Spartan and Nex on one machine ($sw_seen requests, smallest gap $sw_gap s)" \
  bash -c "$wait_ok && cat $sw/gate.* | grep -c 'Public text' | grep -qx 6 && awk -v g=$sw_gap -v n=$sw_seen 'BEGIN { exit !(n >= 6 && g >= 0.45) }'"
curl -s "http://127.0.0.1:$swm/metrics" > "$sw/metrics.txt"
check "small web: robots.txt fetched once over each protocol" bash -c \
  "grep -qE '^robots_proxy_robots_fetches_total\\{outcome=\"found\",protocol=\"spartan\"\\} 1\$' '$sw/metrics.txt' &&
   grep -qE '^robots_proxy_robots_fetches_total\\{outcome=\"found\",protocol=\"nex\"\\} 1\$' '$sw/metrics.txt'"

# A third-party client library through SOCKS5: the `errand` crate (crates.io,
# unmodified, tests/interop/errand_fetch), its connections sent to the SOCKS5
# listener by proxychains4. The proxy tells Spartan from Nex by port ([ports]).
need proxychains4 proxychains4
errand_fetch=$(build_errand_fetch)
printf 'strict_chain\nproxy_dns\nquiet_mode\n[ProxyList]\nsocks5 127.0.0.1 %s\n' "$sws" > "$sw/proxychains.conf"
sw_errand() { # sw_errand ARG...: errand-fetch through SOCKS5, a line per ARG
  timeout 60 proxychains4 -f "$sw/proxychains.conf" "$errand_fetch" "$@" 2>/dev/null || true
}
: > "$sw/served.log"
sw_errand "spartan://127.0.0.1:$spport/public.txt" "nex://127.0.0.1:$nxport/public.txt" \
  "nex://127.0.0.1:$nxport/" > "$sw/errand.allowed"
check "small web: errand through SOCKS5 gets a Spartan page, a Nex document and a Nex listing" bash -c \
  "printf '%s\t2\ttext/plain\tPublic text.\\\\n\n%s\t-\t\tPublic text.\\\\n\n%s\t-\t\t=> private/\\\\n=> public.txt\\\\n=> robots.txt\\\\n\n' \
     'spartan://127.0.0.1:$spport/public.txt' 'nex://127.0.0.1:$nxport/public.txt' 'nex://127.0.0.1:$nxport/' |
   cmp -s - '$sw/errand.allowed'"
errand_urls=()
for spelling in /private/secret.txt /%70rivate/secret.txt //private/secret.txt /%2Fprivate/secret.txt \
  /private//secret.txt /PRIVATE/../private/secret.txt; do
  errand_urls+=("spartan://127.0.0.1:$spport$spelling" "nex://127.0.0.1:$nxport$spelling")
done
sw_errand "${errand_urls[@]}" "submit:spartan://127.0.0.1:$spport/guestbook hello" > "$sw/errand.refused"
errand_spartan=$(grep -cP "^spartan://[^\t]*\t4\trobots\.txt of 127\.0\.0\.1:$spport disallows this for interopbot" "$sw/errand.refused" || true)
errand_nex=$(grep -cP "^nex://[^\t]*\t-\t\trobots-proxy: 53 robots\.txt of 127\.0\.0\.1:$nxport disallows" "$sw/errand.refused" || true)
check "small web: errand through SOCKS5 is refused $errand_spartan of 6 Spartan and $errand_nex of 6 Nex spellings of a disallowed path" \
  test "$errand_spartan $errand_nex" = "6 6"
check "small web: errand's Spartan upload (spartan_submit) is refused with 4" grep -qP \
  "^submit:[^\t]*\t4\tuploads are refused for this bot" "$sw/errand.refused"
check "small web: the servers saw errand's allowed requests and nothing else" bash -c \
  "! grep -qiE 'private|guestbook' '$sw/served.log' && grep -c public.txt '$sw/served.log' | grep -qx 2"
