#!/usr/bin/env python3
"""A small Gemini client that knows nothing of proxies: TLS to HOST:PORT with
SNI HOST (certificates are not checked, as many crawlers trust on first use),
one request line, the whole answer to stdout.

    gemini_client.py gemini://host[:port]/path
"""
import socket
import ssl
import sys
from urllib.parse import urlsplit

url = sys.argv[1]
parts = urlsplit(url)
context = ssl.create_default_context()
context.check_hostname = False
context.verify_mode = ssl.CERT_NONE
with socket.create_connection((parts.hostname, parts.port or 1965), timeout=30) as raw:
    with context.wrap_socket(raw, server_hostname=parts.hostname) as tls:
        tls.sendall(url.encode() + b"\r\n")
        while chunk := tls.recv(65536):
            sys.stdout.buffer.write(chunk)
