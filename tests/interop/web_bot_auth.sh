# Web Bot Auth against real parts, sourced by tests/interop/run after web.sh:
# a bot that signs, through the proxy, reaches nginx with its signature
# fields; the key directory is published by nginx's HTTPS server (the bots'
# origin, Host passed on) and fetched with curl; pyauth's
# http-message-signatures (PyPI, an RFC 9421 implementation of its own)
# verifies the signature nginx saw against those keys, and refuses it once
# the host is changed.

wba=$web/wba-proxy
mkdir -p "$wba/state"
wba_http=$(free_port)
cat > "$wba/proxy.toml" <<EOF2
[limits]
upstream_ports = ["10000-65535"]

[bot]
name = "signer"
agent = "interopbot"
web_bot_auth = "always"
signature_agent = "https://localhost:$nsp"
EOF2
RUST_LOG=info "$proxy_bin" run --config "$wba/proxy.toml" --http-listen "127.0.0.1:$wba_http" \
  --key-directory-listen "127.0.0.1:$kdp" \
  --gemini-listen "127.0.0.1:$(free_port)" --gopher-listen "127.0.0.1:$(free_port)" \
  --metrics-listen "127.0.0.1:$(free_port)" --allow-private-upstreams \
  --state-dir "$wba/state" --default-delay 0s > "$wba/proxy.log" 2>&1 &
pids+=($!)
wait_port "$wba_http" "$wba/proxy.log"
wait_port "$kdp" "$wba/proxy.log"

curl -s -D "$wba/dir.head" -o "$wba/dir.json" --cacert "$web/ca.pem" \
  "$https_site/.well-known/http-message-signatures-directory" || true
check "web bot auth: nginx publishes the key directory over HTTPS, signed over its Host" bash -c \
  "grep -qE '^HTTP/(1.1|2) 200' '$wba/dir.head' &&
   grep -qi '^content-type: application/http-message-signatures-directory+json' '$wba/dir.head' &&
   grep -qi '^signature-input: binding0=(\"@authority\";req);.*tag=\"http-message-signatures-directory\"' '$wba/dir.head' &&
   grep -q '\"kty\":\"OKP\"' '$wba/dir.json'"

curl -s -o "$wba/echo" -x "http://127.0.0.1:$wba_http" "$http_site/wba/echo" || true
IFS='|' read -r wba_agent wba_input wba_sig wba_host < "$wba/echo" || true
check "web bot auth: nginx saw the bot's Signature-Agent, tagged web-bot-auth (${wba_agent:-none})" bash -c \
  "[ '${wba_agent}' = 'agent1=\"https://localhost:$nsp\"' ] && [[ '${wba_input}' == *'tag=\"web-bot-auth\"'* ]]"
"$pyenv/bin/python" tests/interop/verify_wba.py "$wba/dir.json" "http://$wba_host/wba/echo" \
  "$wba_agent" "$wba_input" "$wba_sig" > "$wba/verified" 2>&1 || true
check "web bot auth: pyauth's http-message-signatures verifies it with the published keys ($(cat "$wba/verified"))" \
  grep -q '^verifies' "$wba/verified"
"$pyenv/bin/python" tests/interop/verify_wba.py "$wba/dir.json" "http://elsewhere.example/wba/echo" \
  "$wba_agent" "$wba_input" "$wba_sig" > "$wba/tampered" 2>&1 || true
check "web bot auth: and refuses it for another host" grep -q '^does not verify' "$wba/tampered"
