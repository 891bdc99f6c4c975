#!/usr/bin/env bash
# Builds the robots-proxy image and checks that it answers.
#
#   docker/build-image.sh            # base image if missing, binary, image, smoke test
#
# Needs: Docker (Debian's docker.io; dockerd is started when none runs), debootstrap, cargo. Docker Hub
# is not used: the base image is a minimal Debian made here with debootstrap and
# imported as robots-proxy-base:bookworm.
set -euo pipefail
cd "$(dirname "$0")/.."

# No daemon running (a fresh machine, a CI runner): start Debian's dockerd and wait for it.
if ! docker info >/dev/null 2>&1; then
  command -v dockerd >/dev/null || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
  }
  echo "starting dockerd (log: /var/log/dockerd.log)"
  nohup dockerd > /var/log/dockerd.log 2>&1 &
  for _ in $(seq 300); do docker info >/dev/null 2>&1 && break; sleep 0.1; done
  docker info >/dev/null 2>&1 || { echo "dockerd did not start: see /var/log/dockerd.log"; exit 1; }
fi

base=robots-proxy-base:bookworm
image=${IMAGE:-robots-proxy:dev}
suite=${SUITE:-bookworm}

if ! docker image inspect "$base" >/dev/null 2>&1; then
  rootfs=$(mktemp -d)
  trap 'rm -rf "$rootfs"' EXIT
  echo "building $base with debootstrap ($suite, minbase)"
  debootstrap --variant=minbase "$suite" "$rootfs" >/dev/null
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | docker import - "$base" >/dev/null
fi

cargo build --release --locked
context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
cp docker/Dockerfile docker/robots-proxy.toml docker/healthcheck target/release/robots-proxy "$context"/
docker build --quiet --build-arg BASE="$base" -t "$image" "$context" >/dev/null

# Smoke test: the image decides like the binary does, as a non-root user.
got=$(printf 'User-agent: *\nDisallow: /private\n' |
  docker run --rm -i "$image" check --robots - --agent examplebot /private/x /public)
want=$(printf 'disallow\t/private/x\nallow\t/public')
[ "$got" = "$want" ] || { echo "smoke test failed: got [$got]"; exit 1; }
[ "$(docker run --rm --entrypoint id "$image" -u)" != 0 ] || { echo "image runs as root"; exit 1; }
# The proxy in the container answers a proxied request: a one-file Gopher server
# on the host's loopback, reached with the host's network.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
up=$(free_port)
printf 'User-agent: *\nDisallow: /private\n' > "$context/robots.txt"
socat "TCP-LISTEN:$up,bind=127.0.0.1,fork,reuseaddr" SYSTEM:"cat $context/robots.txt" >/dev/null 2>&1 &
server=$!
gp=$(free_port)
mp=$(free_port)
name=robots-proxy-smoke-$$
docker run -d --rm --name "$name" --network host --health-interval 1s --health-start-period 1s "$image" run \
  --config /etc/robots-proxy/robots-proxy.toml --gemini-listen "127.0.0.1:$(free_port)" \
  --gopher-listen "127.0.0.1:$gp" --metrics-listen "127.0.0.1:$mp" --allow-private-upstreams >/dev/null
trap 'docker rm -f "$name" >/dev/null 2>&1; kill $server 2>/dev/null; rm -rf "$context"' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$mp/healthz" >/dev/null && break; sleep 0.1; done
[ "$(curl -sf "http://127.0.0.1:$mp/healthz")" = ok ] || { echo "healthz did not answer"; exit 1; }
# The HEALTHCHECK follows the admin listener the flags put on a port of their own.
for _ in $(seq 150); do
  [ "$(docker inspect -f '{{.State.Health.Status}}' "$name")" = healthy ] && break; sleep 0.2
done
health=$(docker inspect -f '{{.State.Health.Status}}' "$name")
[ "$health" = healthy ] || { echo "HEALTHCHECK says $health with --metrics-listen 127.0.0.1:$mp"; exit 1; }
allowed=$(curl -s "gopher://127.0.0.1:$gp/0gopher://127.0.0.1:$up/0/page")
refused=$(curl -s "gopher://127.0.0.1:$gp/0gopher://127.0.0.1:$up/0/private/x" | head -1)
case "$allowed" in "User-agent: *"*) ;; *) echo "proxied request failed: [$allowed]"; exit 1 ;; esac
case "$refused" in 3403\ Forbidden:*) ;; *) echo "refusal missing: [$refused]"; exit 1 ;; esac
# Counted as the proxy ends the connection, which curl may see first: looked
# for a few times.
counted=no
for _ in $(seq 50); do
  if curl -s "http://127.0.0.1:$mp/metrics" | grep -q 'robots_proxy_requests_total{bot="default",decision="disallowed",protocol="gopher"} 1'; then
    counted=yes
    break
  fi
  sleep 0.1
done
[ "$counted" = yes ] || { echo "metrics did not count the refusal"; exit 1; }

echo "built $image ($(docker image inspect -f '{{.Size}}' "$image" | numfmt --to=iec) ); smoke test passed"
