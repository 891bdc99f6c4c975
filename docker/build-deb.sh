#!/usr/bin/env bash
# Builds the Debian package: target/debian/robots-proxy_VERSION-1_ARCH.deb.
#
#   docker/build-deb.sh              # needs cargo-deb: cargo install cargo-deb --locked
#
# The release binary, its manual pages and completions (made by the binary
# itself) and the files Cargo.toml's [package.metadata.deb] lists: the
# commented config as a conffile in /etc/robots-proxy, the systemd unit
# (enabled and started on install; DynamicUser, state in
# /var/lib/robots-proxy), the examples in /usr/share/doc/robots-proxy.
# tests/interop/deb.sh installs it in a Debian container running systemd.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo-deb > /dev/null || {
  echo "cargo-deb is missing: cargo install cargo-deb --locked"
  exit 1
}
cargo build --release --locked
assets=target/deb-assets
rm -rf "$assets"
mkdir -p "$assets/man" "$assets/completions"
target/release/robots-proxy man --out-dir "$assets/man"
target/release/robots-proxy completions bash > "$assets/completions/robots-proxy"
target/release/robots-proxy completions zsh > "$assets/completions/_robots-proxy"
target/release/robots-proxy completions fish > "$assets/completions/robots-proxy.fish"
cargo deb --no-build --locked
