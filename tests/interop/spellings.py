#!/usr/bin/env python3
"""Sends every dodging spelling of a disallowed Gopher file, as a raw selector
line, to a server and reports which ones reach it.

  spellings.py probe HOST:PORT            # a table: spelling, what the server gave
  spellings.py direct HOST:PORT           # the spellings that reach a secret, one per line
  spellings.py socks SOCKS HOST:PORT      # each spelling through a SOCKS5 proxy
  spellings.py url PROXY HOST:PORT        # each spelling as a Gopher URL to a Gopher proxy

The served tree must hold private/secret.txt, sub/file.txt and exact.txt, each
starting with SECRET, and a robots.txt that disallows /private, /sub/ and
/exact.txt$. In the socks and url modes every spelling is printed with the first
line of the proxy's answer, so the caller can check it is a 3403 or 3400 and
never a secret. Each connection has a 10 s deadline; loopback only.
"""
import socket
import sys
import urllib.parse

CRLF = b"\r\n"

SPELLINGS = [
    ("as written", b"/private/secret.txt"),
    ("no leading slash", b"private/secret.txt"),
    ("no leading slash", b"sub/file.txt"),
    ("doubled slash", b"//private/secret.txt"),
    ("doubled slash", b"/sub//file.txt"),
    ("dot segment", b"/./private/secret.txt"),
    ("dot-dot segment", b"/x/../private/secret.txt"),
    ("escaped letter", b"/%70rivate/secret.txt"),
    ("escaped slash", b"/sub%2Ffile.txt"),
    ("escape of an escape", b"/sub%252Ffile.txt"),
    ("escape of an escape", b"/%2570rivate/secret.txt"),
    ("escaped NUL", b"/private/secret.txt%00junk"),
    ("escape of an escaped NUL", b"/sub/file.txt%2500"),
    ("query", b"/exact.txt?x"),
    ("query", b"/private/secret.txt?x"),
    ("escaped query", b"/exact.txt%3Fx"),
    ("escaped tab", b"/exact.txt%09x"),
]


def read_all(s):
    """Everything the server sends until it closes (or the deadline passes)."""
    chunks = []
    while True:
        try:
            chunk = s.recv(65536)
        except (socket.timeout, ConnectionResetError):
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def ask(addr, data):
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(data)
        return read_all(s)


def socks_ask(proxy, target, line):
    host, port = proxy.rsplit(":", 1)
    thost, tport = target.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"\x05\x01\x00")
        s.recv(2)
        name = thost.encode()
        s.sendall(b"\x05\x01\x00\x03" + bytes([len(name)]) + name + int(tport).to_bytes(2, "big"))
        reply = s.recv(10)
        if len(reply) < 2 or reply[1] != 0:
            return b"socks reply %d" % (reply[1] if len(reply) > 1 else -1)
        s.sendall(line)
        return read_all(s)


def first_line(answer):
    return answer.split(b"\n", 1)[0].rstrip(b"\r").decode("utf-8", "replace")


def main():
    mode = sys.argv[1]
    if mode in ("probe", "direct"):
        server = sys.argv[2]
        for name, sel in SPELLINGS:
            answer = ask(server, sel + b"\r\n")
            reached = answer.startswith(b"SECRET")
            if mode == "probe":
                what = first_line(answer)[:40] if answer else "(nothing)"
                print(f"{name}\t{sel.decode()}\t{'SERVED' if reached else 'no'}\t{what}")
            elif reached:
                print(sel.decode())
    elif mode == "socks":
        proxy, server = sys.argv[2], sys.argv[3]
        for name, sel in SPELLINGS:
            answer = socks_ask(proxy, server, sel + CRLF)
            print(f"{sel.decode()}\t{first_line(answer)}")
    elif mode == "url":
        proxy, server = sys.argv[2], sys.argv[3]
        for name, sel in SPELLINGS:
            url = f"gopher://{server}/0" + urllib.parse.quote(sel, safe="/")
            answer = ask(proxy, url.encode() + CRLF)
            print(f"{sel.decode()}\t{first_line(answer)}")
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
