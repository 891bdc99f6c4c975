# The example alerting rules (config/prometheus-alerts.yml), sourced by
# tests/interop/run after status_page.sh (whose fleet-mode proxy, with a
# daily budget, it scrapes): Debian's promtool checks them and runs their
# unit tests (tests/interop/alerts_test.yml: each alert fires on the series
# that should fire it), and every metric they name is in a running proxy's
# /metrics.

need promtool prometheus
# The package starts a Prometheus server of its own; the suite needs only promtool.
{ systemctl stop prometheus || pkill -x prometheus; } > /dev/null 2>&1 || true
check "alerts: promtool check rules config/prometheus-alerts.yml" \
  bash -c "promtool check rules config/prometheus-alerts.yml > '$work/promtool.check' 2>&1 || { cat '$work/promtool.check'; false; }"
check "alerts: promtool test rules: each alert fires on its series, and only there" \
  bash -c "promtool test rules tests/interop/alerts_test.yml > '$work/promtool.test' 2>&1 || { cat '$work/promtool.test'; false; }"
curl -s "http://127.0.0.1:$sp_admin/metrics" > "$work/alerts.metrics"
grep -o 'robots_proxy_[a-z_]*' config/prometheus-alerts.yml | sort -u > "$work/alerts.names"
check "alerts: every metric the rules name is in a running proxy's /metrics ($(tr '\n' ' ' < "$work/alerts.names"))" \
  bash -c "while read -r m; do grep -q \"^\$m[{ ]\" '$work/alerts.metrics' || { echo \"missing: \$m\"; exit 1; }; done < '$work/alerts.names'"
