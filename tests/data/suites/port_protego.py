#!/usr/bin/env python3
"""Extracts the robots.txt verdicts of scrapy/protego's tests/test_protego.py as
JSON lines (id, robots, agent, url, allowed, source_line), the format of
google-robotstxt-cases.jsonl.

Usage: port_protego.py test_protego.py > protego-cases.jsonl

It reads the test file's syntax tree and never runs it: within each test, a
string assigned to a name is remembered, `rp = Protego.parse(content=X)` sets
the robots.txt, and each `assert [not] rp.can_fetch(URL, AGENT)` is one case.
"""
import ast
import json
import sys


def value(node, names):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = value(node.left, names), value(node.right, names)
        return a + b if a is not None and b is not None else None
    return None


def parse_call(node):
    """The robots.txt argument of Protego.parse(...), if node is that call."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "parse"):
        if node.args:
            return node.args[0]
        for kw in node.keywords:
            if kw.arg == "content":
                return kw.value
    return None


def cases(tree):
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef):
            continue
        for fn in cls.body:
            if not isinstance(fn, ast.FunctionDef) or not fn.name.startswith("test"):
                continue
            names, robots, n = {}, None, 0
            for stmt in fn.body:
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                        and isinstance(stmt.targets[0], ast.Name):
                    target = stmt.targets[0].id
                    arg = parse_call(stmt.value)
                    if arg is not None:
                        robots = value(arg, names)
                    else:
                        v = value(stmt.value, names)
                        if v is not None:
                            names[target] = v
                    continue
                if not isinstance(stmt, ast.Assert) or robots is None:
                    continue
                test, allowed = stmt.test, True
                if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                    test, allowed = test.operand, False
                if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute)
                        and test.func.attr == "can_fetch" and len(test.args) == 2):
                    continue
                url, agent = value(test.args[0], names), value(test.args[1], names)
                # The proxy decides http(s), gemini and gopher URLs only.
                if url is None or agent is None or not url.startswith(("http://", "https://")):
                    continue
                n += 1
                yield {
                    "id": f"{fn.name}#{n}",
                    "robots": robots,
                    "agent": agent,
                    "url": url,
                    "allowed": allowed,
                    "source_line": stmt.lineno,
                }


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        tree = ast.parse(f.read())
    for case in cases(tree):
        print(json.dumps(case, ensure_ascii=False))
