#!/usr/bin/env python3
"""A flask-gopher server (PyPI) serving one directory, for the spelling probe:
flask_gopher_server.py ROOT PORT. Every selector is a path under ROOT (routed by
werkzeug, as flask-gopher apps are); directories are not listed."""
import sys

from flask import Flask, abort, send_from_directory
from flask_gopher import GopherExtension, GopherRequestHandler

root, port = sys.argv[1], int(sys.argv[2])
app = Flask(__name__)
gopher = GopherExtension(app)


@app.route("/<path:filename>")
def serve(filename):
    try:
        return send_from_directory(root, filename, mimetype="text/plain")
    except Exception:
        abort(404)


if __name__ == "__main__":
    app.run("127.0.0.1", port, request_handler=GopherRequestHandler, threaded=True)
