#!/usr/bin/env python3
"""A Spartan or Nex server for the interop suite, written from the specs (no
packaged server exists): serves a directory, reading paths as common servers
do (percent-decoded, dot segments and empty segments folded, a leading "/"
optional for Nex). Each request is logged as "<unix time> <path> <bytes of
data>" to --log, as the server saw it.

  small_web_server.py --protocol spartan|nex --root DIR --bind ADDR --port N --log FILE

Spartan (spartan://, spec: gemini://spartan.mozz.us/specification.gmi):
request "host SP path SP content-length CRLF" then the data; answer
"2 mime", "3 /path" (a directory without its slash), "4 not found",
"5 error". Nex (nex://, spec: nex://nightfall.city/nex/info/specification.txt):
request "path CRLF"; the answer is the document, then close; a directory is
a listing of "=> name" lines.
"""

import argparse
import os
import socketserver
import time
import urllib.parse

TYPES = {".gmi": "text/gemini", ".txt": "text/plain", ".html": "text/html", ".png": "image/png"}


def resolve(root, raw):
    """The file a path names under root, and whether the path ended in a slash."""
    text = urllib.parse.unquote(raw)
    parts = []
    for seg in text.split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            if parts:
                parts.pop()
            continue
        parts.append(seg)
    return os.path.join(root, *parts), "/" + "/".join(parts), text.endswith("/") or not parts


def listing(directory):
    lines = []
    for name in sorted(os.listdir(directory)):
        slash = "/" if os.path.isdir(os.path.join(directory, name)) else ""
        lines.append(f"=> {name}{slash}")
    return ("\n".join(lines) + "\n").encode()


class Handler(socketserver.StreamRequestHandler):
    timeout = 10

    def log(self, path, data):
        with open(self.server.log, "a") as f:
            f.write(f"{time.time():.6f} {path} {data}\n")

    def handle(self):
        line = self.rfile.readline(4096).rstrip(b"\r\n").decode("utf-8", "replace")
        if self.server.protocol == "nex":
            self.nex(line)
        else:
            self.spartan(line)

    def nex(self, line):
        path, shown, is_dir = resolve(self.server.root, line)
        self.log(shown, 0)
        if os.path.isdir(path):
            self.wfile.write(listing(path))
        elif os.path.isfile(path):
            with open(path, "rb") as f:
                self.wfile.write(f.read())
        else:
            self.wfile.write(b"Not found.\n")

    def spartan(self, line):
        parts = line.split(" ")
        if len(parts) != 3 or not parts[2].isdigit() or not parts[1].startswith("/"):
            self.wfile.write(b"4 bad request\r\n")
            return
        size = int(parts[2])
        data = self.rfile.read(size) if size else b""
        if len(data) != size:
            return
        path, shown, is_dir = resolve(self.server.root, parts[1])
        self.log(shown, len(data))
        if os.path.isdir(path):
            if not parts[1].endswith("/"):
                self.wfile.write(f"3 {shown}/\r\n".encode())
                return
            index = os.path.join(path, "index.gmi")
            body = open(index, "rb").read() if os.path.isfile(index) else listing(path)
            self.wfile.write(b"2 text/gemini\r\n" + body)
        elif os.path.isfile(path):
            mime = TYPES.get(os.path.splitext(path)[1], "application/octet-stream")
            with open(path, "rb") as f:
                self.wfile.write(f"2 {mime}\r\n".encode() + f.read())
        else:
            self.wfile.write(b"4 not found\r\n")


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--protocol", choices=["spartan", "nex"], required=True)
    p.add_argument("--root", required=True)
    p.add_argument("--bind", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--log", required=True)
    args = p.parse_args()
    server = Server((args.bind, args.port), Handler)
    server.protocol, server.root, server.log = args.protocol, args.root, args.log
    server.serve_forever()


if __name__ == "__main__":
    main()
