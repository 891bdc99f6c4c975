# Real Gemini clients through the Gemini listener's proxy setting, sourced by
# tests/interop/run (needs its check, $work, $pport, $hport: the main proxy and
# the gophernicus hole, whose robots.txt disallows /private for interopbot).
# AV-98 (PyPI, in a venv) with `set gopher_proxy`, and amfora (Debian) with its
# `[proxies]` setting, driven in tmux: a Gopher menu, a file, and a
# disallowed file, each fetched as the client's user would.

need tmux tmux amfora amfora
cl=$work/clients
mkdir -p "$cl/av98-home" "$cl/amfora-home/.config/amfora"
if [ ! -x "$cl/venv/bin/av98" ]; then
  python3 -m venv "$cl/venv" && "$cl/venv/bin/pip" install -q AV-98==1.1.0
fi
hole_url=gopher://127.0.0.1:$hport

# AV-98 reads its commands from stdin. First the menu; then the menu again,
# its hello.txt link followed by number (asked of the proxy again), and a
# disallowed file.
av98() { HOME=$cl/av98-home NO_COLOR=1 timeout 60 "$cl/venv/bin/av98" > "$cl/av98.$1" 2>&1 || true; }
printf 'set gopher_proxy 127.0.0.1:%s\ngo %s/1/\nsave %s\nquit\n' \
  "$pport" "$hole_url" "$cl/av98-menu.gmi" | av98 menu
hello_n=$(grep '^=>' "$cl/av98-menu.gmi" | grep -n '/0/hello.txt ' | cut -d: -f1)
printf 'set gopher_proxy 127.0.0.1:%s\ngo %s/1/\n%s\nsave %s\ngo %s/0/private/secret.txt\nquit\n' \
  "$pport" "$hole_url" "${hello_n:-0}" "$cl/av98-hello.txt" "$hole_url" | av98 out
check "clients: AV-98 (gopher_proxy) gets a Gopher menu as gemtext whose links keep gopher://" \
  grep -q "^=> $hole_url/0/hello.txt " "$cl/av98-menu.gmi"
check "clients: AV-98 follows a rendered link back through the proxy" \
  grep -q '^Hello from gophernicus.' "$cl/av98-hello.txt"
check "clients: AV-98 is refused a disallowed file (53, with the rule)" \
  grep -q 'robots.txt of 127.0.0.1:[0-9]* disallows this for interopbot: Disallow: /private' "$cl/av98.out"

# amfora: its proxy setting, the menu shown, a disallowed link's refusal in
# its dialog, then an allowed file.
printf '[proxies]\ngopher = "127.0.0.1:%s"\n' "$pport" > "$cl/amfora-home/.config/amfora/config.toml"
am_screen() { tmux capture-pane -p -t robots-proxy-amfora > "$cl/amfora.$1"; }
am_wait() { # am_wait TEXT NAME: a bounded poll until the screen shows TEXT
  local deadline=$((SECONDS + 30))
  until am_screen "$2" && grep -q "$1" "$cl/amfora.$2"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.2
  done
}
tmux new-session -d -s robots-proxy-amfora -x 160 -y 40 \
  "HOME=$cl/amfora-home TERM=xterm-256color amfora $hole_url/1/"
check "clients: amfora ([proxies] gopher) shows the Gopher menu" am_wait 'hello.txt' menu
private_link=$(grep -o '\[[0-9]*\] *private' "$cl/amfora.menu" | grep -o '[0-9]*' | head -1)
hello_link=$(grep -o '\[[0-9]*\] *hello.txt' "$cl/amfora.menu" | grep -o '[0-9]*' | head -1)
tmux send-keys -t robots-proxy-amfora Space && sleep 0.3
tmux send-keys -t robots-proxy-amfora "$private_link" Enter
check "clients: amfora shows the proxy's refusal of a disallowed menu" \
  am_wait 'disallows this for' refused
tmux send-keys -t robots-proxy-amfora Enter && sleep 0.3
tmux send-keys -t robots-proxy-amfora Space && sleep 0.3
tmux send-keys -t robots-proxy-amfora "$hello_link" Enter
check "clients: amfora follows a link to a file through the proxy" am_wait 'Hello from gophernicus' hello
tmux kill-session -t robots-proxy-amfora 2>/dev/null || true
