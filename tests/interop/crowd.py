#!/usr/bin/env python3
"""One client opens N silent connections to a proxy listener; another client
(a different loopback address) then makes one Gemini request. Prints how long
that request took and what came back, and how many of the N connections the
proxy closed at once.

    crowd.py PROXY_PORT URL [N]
"""
import resource
import socket
import ssl
import sys
import time

port, url = int(sys.argv[1]), sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 1100
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

held = []
for _ in range(n):
    try:
        s = socket.socket()
    except OSError:  # out of file descriptors: hold what we have
        break
    s.bind(("127.0.0.1", 0))
    try:
        s.connect(("127.0.0.1", port))
        held.append(s)
    except OSError:
        s.close()
time.sleep(0.5)  # let the proxy accept (or refuse) them all
closed = 0
for s in held:
    s.setblocking(False)
    try:
        if s.recv(1) == b"":
            closed += 1
    except BlockingIOError:
        pass
    except OSError:
        closed += 1

context = ssl.create_default_context()
context.check_hostname = False
context.verify_mode = ssl.CERT_NONE
started = time.monotonic()
other = socket.socket()
other.bind(("127.0.0.2", 0))
other.settimeout(20)
other.connect(("127.0.0.1", port))
tls = context.wrap_socket(other, server_hostname="localhost")
tls.sendall(url.encode() + b"\r\n")
answer = b""
while True:
    try:
        chunk = tls.recv(4096)
    except (ssl.SSLError, OSError):
        break
    if not chunk:
        break
    answer += chunk
elapsed = time.monotonic() - started
print(f"seconds {elapsed:.3f}")
print(f"closed {closed} of {len(held)}")
print("header " + answer.split(b"\r\n", 1)[0].decode(errors="replace"))
