#!/bin/sh
# Rules first (as root, in this network namespace), then the proxy, with the
# same flags: the rules are printed for exactly the config it runs with.
set -eu
robots-proxy transparent-rules "$@" | sh
exec setpriv --reuid=robots-proxy --regid=robots-proxy --init-groups \
    --inh-caps=+net_admin --ambient-caps=+net_admin \
    robots-proxy run "$@"
