#!/usr/bin/env bash
# Builds the Debian package: target/debian/robots-proxy_VERSION-1_ARCH.deb
# (under $CARGO_TARGET_DIR when that is set).
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
# The binary where cargo put it (cargo-deb reads Cargo.toml's `target/release/`
# assets from there too); the generated assets stay in the source tree's
# target/, where Cargo.toml names them.
bin=${CARGO_TARGET_DIR:-target}/release/robots-proxy
assets=target/deb-assets
rm -rf "$assets"
mkdir -p "$assets/man" "$assets/completions"
"$bin" man --out-dir "$assets/man"
"$bin" completions bash > "$assets/completions/robots-proxy"
"$bin" completions zsh > "$assets/completions/_robots-proxy"
"$bin" completions fish > "$assets/completions/robots-proxy.fish"
cargo deb --no-build --locked
