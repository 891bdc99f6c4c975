# The Debian package, sourced by tests/interop/run after container.sh (it
# needs dockerd and the debootstrap base image): docker/build-deb.sh builds
# it with cargo-deb; a Debian container booted with systemd installs it with
# apt as an operator would, and it must be running, answering, reloadable,
# with its man pages, completions, examples and state directory, and leave
# its config behind when removed.

if ! docker image inspect robots-proxy-base:bookworm > /dev/null 2>&1; then
  echo "skip  deb: no base image (container.sh did not build it)"
  return 0 2>/dev/null || exit 0
fi
command -v cargo-deb > /dev/null || cargo install cargo-deb --locked --version 3.8.0 > "$work/cargo-deb.log" 2>&1
docker/build-deb.sh > "$work/build-deb.log" 2>&1 || { tail -20 "$work/build-deb.log"; }
deb=$(ls target/debian/robots-proxy_*.deb 2>/dev/null | head -1)
check "deb: docker/build-deb.sh builds the package ($(basename "${deb:-none}"))" test -s "${deb:-/nonexistent}"
# A Debian with systemd as PID 1 (Debian's own packages, from its mirror).
mkdir -p "$work/debimg"
cat > "$work/debimg/Dockerfile" <<'EOF2'
ARG BASE=robots-proxy-base:bookworm
FROM ${BASE}
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd systemd-sysv curl man-db > /dev/null
STOPSIGNAL SIGRTMIN+3
CMD ["/lib/systemd/systemd"]
EOF2
docker build --network host -q -t robots-proxy-systemd:bookworm "$work/debimg" > "$work/debimg.log" 2>&1 || cat "$work/debimg.log"
deb_box=robots-proxy-deb-$$
docker run -d --name "$deb_box" --cap-add SYS_ADMIN --security-opt seccomp=unconfined \
  --security-opt apparmor=unconfined --tmpfs /run --tmpfs /run/lock \
  -v /sys/fs/cgroup:/sys/fs/cgroup:ro robots-proxy-systemd:bookworm > /dev/null
trap 'docker rm -f "$deb_box" > /dev/null 2>&1; cleanup' EXIT
in_box() { docker exec "$deb_box" "$@"; }
for _ in $(seq 100); do
  case "$(in_box systemctl is-system-running 2> /dev/null)" in running | degraded) break ;; esac
  sleep 0.2
done
docker cp "$deb" "$deb_box:/tmp/robots-proxy.deb"
in_box sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y /tmp/robots-proxy.deb' > "$work/deb-install.log" 2>&1 || true
check "deb: apt installs it in Debian (bookworm) with systemd" \
  bash -c "grep -q 'Setting up robots-proxy' '$work/deb-install.log' || { tail -20 '$work/deb-install.log'; false; }"
for _ in $(seq 100); do [ "$(in_box curl -s 127.0.0.1:9770/healthz 2> /dev/null)" = ok ] && break; sleep 0.2; done
check "deb: the unit is enabled and running, and the admin listener answers /healthz" bash -c \
  "[ \"\$(docker exec $deb_box systemctl is-enabled robots-proxy)\" = enabled ] &&
   [ \"\$(docker exec $deb_box systemctl is-active robots-proxy)\" = active ] &&
   [ \"\$(docker exec $deb_box curl -s 127.0.0.1:9770/healthz)\" = ok ]"
check "deb: its state directory holds the generated certificate and the listening file" \
  in_box sh -c 'test -s /var/lib/robots-proxy/gemini-cert.pem && test -s /var/lib/robots-proxy/listening'
check "deb: robots-proxy status finds it through the state directory" bash -c \
  "docker exec $deb_box robots-proxy status --state-dir /var/lib/robots-proxy | grep -q '^robots-proxy [0-9]'"
check "deb: man finds its pages, shells their completions, the docs their examples" \
  in_box sh -c 'man -w robots-proxy > /dev/null && man -w robots-proxy-status > /dev/null &&
    test -s /usr/share/bash-completion/completions/robots-proxy &&
    test -s /usr/share/zsh/vendor-completions/_robots-proxy &&
    test -s /usr/share/fish/vendor_completions.d/robots-proxy.fish &&
    test -s /usr/share/doc/robots-proxy/examples/research-crawler.toml &&
    test -s /usr/share/doc/robots-proxy/examples/web-only.toml &&
    test -s /usr/share/doc/robots-proxy/examples/prometheus-alerts.yml'
# An operator's edit, then a reload: the config generation moves on.
in_box sh -c 'sed -i "s/^agent = \"\"/agent = \"packagedbot\"/" /etc/robots-proxy/robots-proxy.toml && systemctl reload robots-proxy' \
  > "$work/deb-reload.log" 2>&1 || true
for _ in $(seq 50); do
  in_box robots-proxy status --state-dir /var/lib/robots-proxy 2> /dev/null | grep -q 'config generation 1' && break
  sleep 0.2
done
check "deb: systemctl reload applies an edited config" bash -c \
  "docker exec $deb_box robots-proxy status --state-dir /var/lib/robots-proxy | grep -q 'agent \"packagedbot\"' || { cat '$work/deb-reload.log'; false; }"
in_box sh -c 'DEBIAN_FRONTEND=noninteractive apt-get remove -y robots-proxy' > "$work/deb-remove.log" 2>&1 || true
check "deb: removing it stops the service and keeps the edited config" bash -c \
  "[ \"\$(docker exec $deb_box systemctl is-active robots-proxy)\" != active ] &&
   docker exec $deb_box grep -q packagedbot /etc/robots-proxy/robots-proxy.toml"
docker rm -f "$deb_box" > /dev/null 2>&1 || true
