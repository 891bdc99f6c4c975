# The container image (sourced last by tests/interop/run: dockerd changes the
# host's iptables, so it runs after the namespace and transparent checks).
# docker/build-image.sh makes the base image with debootstrap (no Docker Hub),
# builds the image and checks it as a user would: it decides like the binary,
# runs as non-root, relays and refuses through --network host, and its
# HEALTHCHECK turns healthy with the admin listener on a port of its own
# (--metrics-listen on a free port, not 9770).
need debootstrap debootstrap dockerd docker.io
if ! docker info > /dev/null 2>&1; then
  nohup dockerd > /var/log/dockerd.log 2>&1 &
  for _ in $(seq 300); do docker info > /dev/null 2>&1 && break; sleep 0.1; done
fi
if docker info > /dev/null 2>&1; then
  check "container: the image builds, decides, relays, and its HEALTHCHECK follows --metrics-listen" \
    bash -c "docker/build-image.sh > '$work/build-image.log' 2>&1 || { tail -20 '$work/build-image.log'; exit 1; }"
else
  echo "skip  container: dockerd does not run on this machine ($(tail -1 /var/log/dockerd.log))"
fi
