#!/usr/bin/env bash
# Builds the robots-proxy image and checks that it answers.
#
#   docker/build-image.sh            # base image if missing, binary, image, smoke test
#
# Needs: a running Docker daemon (Debian's docker.io), debootstrap, cargo. Docker Hub
# is not used: the base image is a minimal Debian made here with debootstrap and
# imported as robots-proxy-base:bookworm.
set -euo pipefail
cd "$(dirname "$0")/.."

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
cp docker/Dockerfile target/release/robots-proxy "$context"/
docker build --quiet --build-arg BASE="$base" -t "$image" "$context" >/dev/null

# Smoke test: the image decides like the binary does, as a non-root user.
got=$(printf 'User-agent: *\nDisallow: /private\n' |
  docker run --rm -i "$image" check --robots - --agent examplebot /private/x /public)
want=$(printf 'disallow\t/private/x\nallow\t/public')
[ "$got" = "$want" ] || { echo "smoke test failed: got [$got]"; exit 1; }
[ "$(docker run --rm --entrypoint id "$image" -u)" != 0 ] || { echo "image runs as root"; exit 1; }
echo "built $image ($(docker image inspect -f '{{.Size}}' "$image" | numfmt --to=iec) ); smoke test passed"
