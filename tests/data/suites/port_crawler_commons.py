#!/usr/bin/env python3
"""Extracts the robots.txt verdicts of crawler-commons'
SimpleRobotRulesParserTest.java as JSON lines (id, robots, agent, url, allowed,
source_line), the format of google-robotstxt-cases.jsonl.

Usage: port_crawler_commons.py SimpleRobotRulesParserTest.java > crawler-commons-cases.jsonl

It lexes the Java source and never runs it. Within each test method: a string
variable built from literals and LF/CR/CRLF is remembered;
`createRobotRules(AGENT, VAR)` sets the bot and the robots.txt; each
`assertTrue/assertFalse(R.isAllowed(URL))`, and each `@CsvSource` row of an
`assertEquals(isAllowed, R.isAllowed(urlStr))`, is one case. Calls with exact
user-agent matching turned off (crawler-commons' own mode that matches words of
a whole User-Agent string), and robots.txt read from files or given as bytes in
another charset, are left out.
"""
import json
import re
import sys

TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|[A-Za-z_][A-Za-z_0-9]*|\d+|//[^\n]*|/\*.*?\*/|\S', re.S)
CONSTS = {"LF": "\n", "CR": "\r", "CRLF": "\r\n"}


def unquote(lit):
    body = lit[1:-1]
    return json.loads('"' + body + '"') if '\\u' in body or '\\' in body else body


def tokens(text):
    line = 1
    pos = 0
    for m in TOKEN.finditer(text):
        line += text.count("\n", pos, m.start())
        pos = m.start()
        t = m.group(0)
        if t.startswith("//") or t.startswith("/*"):
            continue
        yield t, line


def string_expr(toks, names):
    """Evaluates LIT|NAME (+ LIT|NAME)*; None if anything else is in it."""
    out = ""
    expect_term = True
    for t in toks:
        if expect_term:
            if t.startswith('"'):
                out += unquote(t)
            elif t in names:
                out += names[t]
            elif t in CONSTS:
                out += CONSTS[t]
            else:
                return None
        elif t != "+":
            return None
        expect_term = not expect_term
    return out if not expect_term else None


def methods(text):
    starts = [m.start() for m in re.finditer(r'\n    @(?:Test|ParameterizedTest)\b', text)]
    starts.append(len(text))
    for a, b in zip(starts, starts[1:]):
        yield a, text[a:b]


def cases(text):
    for offset, body in methods(text):
        base_line = text.count("\n", 0, offset) + 1
        name = re.search(r'void\s+(\w+)\s*\(', body).group(1)
        rows = []
        csv = re.search(r'@CsvSource\(\{(.*?)\}\)', body, re.S)
        if csv:
            for lit in re.findall(r'"((?:\\.|[^"\\])*)"', csv.group(1)):
                row = re.match(r'\s*(true|false)\s*,\s*(\S+)\s*$', lit, re.I)
                if row:
                    rows.append((row.group(1).lower() == "true", row.group(2)))
        names, rules, n = {}, {}, 0
        toks = list(tokens(body))
        # statements: split at ';' outside of parentheses
        stmt, depth = [], 0
        stmts = []
        for t, line in toks:
            if t == "(":
                depth += 1
            elif t == ")":
                depth -= 1
            if depth == 0 and t in ";{}":
                if stmt:
                    stmts.append(stmt)
                stmt = []
                continue
            stmt.append((t, line))
        for stmt in stmts:
            words = [t for t, _ in stmt]
            line = base_line + stmt[0][1] - 1
            if "=" in words and "createRobotRules" not in words:
                eq = words.index("=")
                v = string_expr(words[eq + 1:], names)
                if v is not None:
                    names[words[eq - 1]] = v
                continue
            if "createRobotRules" in words:
                at = words.index("createRobotRules")
                var = words[at - 2] if at >= 2 and words[at - 1] == "=" else None
                args = words[at + 2:-1] if words[-1] == ")" else words[at + 2:]
                rules.pop(var, None)
                if not args or not args[0].startswith('"') or args[1] != ",":
                    continue
                rest = args[2:]
                exact = True
                if len(rest) >= 2 and rest[-2] == "," and rest[-1] in ("true", "false"):
                    exact = rest[-1] == "true"
                    rest = rest[:-2]
                if not exact:
                    continue
                v = string_expr(rest, names)
                if v is not None and var:
                    rules[var] = (v, unquote(args[0]))
                continue
            calls = [i for i in range(2, len(words)) if words[i] == "isAllowed" and words[i - 1] == "."]
            if not calls or words[calls[0] - 2] not in rules:
                continue
            at = calls[0]
            robots, agent = rules[words[at - 2]]
            head = words[0]
            arg = words[at + 2] if at + 2 < len(words) else None
            if head in ("assertTrue", "assertFalse") and arg and arg.startswith('"'):
                n += 1
                yield {"id": f"{name}#{n}", "robots": robots, "agent": agent,
                       "url": unquote(arg), "allowed": head == "assertTrue",
                       "source_line": line}
            elif head == "assertEquals" and rows and arg == "urlStr":
                for allowed, url in rows:
                    n += 1
                    yield {"id": f"{name}#{n}", "robots": robots, "agent": agent,
                           "url": url, "allowed": allowed, "source_line": line}


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as f:
        text = f.read()
    for case in cases(text):
        print(json.dumps(case, ensure_ascii=False))
