# Operating the proxy (sourced by tests/interop/run): packaging checks.

# --- packaging ----------------------------------------------------------------
if ! command -v systemd-analyze >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd >/dev/null
fi
check "packaging: systemd-analyze verify accepts the unit" tests/packaging/verify-systemd "$proxy_bin"
check "packaging: a man page per subcommand" bash -c \
  "'$proxy_bin' man --out-dir '$work/man' && for c in '' -run -check -transparent-rules -completions -man; do
     test -s '$work/man/robots-proxy'\$c.1 || exit 1; done"
check "packaging: bash completions know the subcommands" bash -c \
  "'$proxy_bin' completions bash | grep -q 'transparent-rules' && '$proxy_bin' completions zsh | grep -q '#compdef robots-proxy'"
check "packaging: both license files" bash -c "grep -q 'Apache License' LICENSE-APACHE && grep -q 'MIT License' LICENSE-MIT"
