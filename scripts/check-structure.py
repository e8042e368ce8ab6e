#!/usr/bin/env python3
"""Structure rules of src/: no import circles between files (a file's
`use crate::...` / `use super::...` / `use x::...` lines, resolved to the
files they name, never lead back to it; paths written inline count as
`use` lines, `x::f()` of a module `x` the file declares with `mod x;`
among them), no two files that call each other's methods through `self`
(`self.f()` in an `impl T` of one file, `fn f` in an `impl T` of the
other, both ways), and no file over 450 lines before its `#[cfg(test)]`
tests. Prints what breaks a rule; exits 1 if anything does.
"""
import os
import re
import sys

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
LIMIT = 450


def module_of(path):
    rel = os.path.relpath(path, SRC)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return rel


def file_of(mod, files):
    """The file that defines module path `mod` (longest prefix that is a file)."""
    for n in range(len(mod), -1, -1):
        key = tuple(mod[:n])
        if key in files:
            return files[key], n
    return None, 0


def uses(text):
    """Paths of `use` declarations, braces expanded one level deep."""
    out = []
    for m in re.finditer(r"^\s*(?:pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", text, re.M):
        body = re.sub(r"\s+", "", m.group(1))
        if "{" in body:
            head, rest = body.split("{", 1)
            rest = rest.rsplit("}", 1)[0]
            depth, cur, parts = 0, "", []
            for ch in rest:
                if ch == "," and depth == 0:
                    parts.append(cur)
                    cur = ""
                    continue
                depth += ch == "{"
                depth -= ch == "}"
                cur += ch
            parts.append(cur)
            for p in parts:
                p = p.split("{", 1)[0]
                if p:
                    out.append((head + p).strip(":"))
        else:
            out.append(body)
    return out


def children(text):
    """Modules the file declares (`mod x;`, `pub(crate) mod x;`)."""
    return re.findall(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+([A-Za-z_][A-Za-z0-9_]*)\s*;", text, re.M)


def inline_paths(text, kids=()):
    """Paths written inline (`crate::a::b::f(..)`, `super::x::T`, and
    `x::f()` for a module `x` the file declares) outside `use` lines and
    comments: they tie files together as a `use` does. A child's path is
    returned as `self::x::...`."""
    out = []
    roots = "crate|super" + "".join("|" + re.escape(k) for k in kids)
    pat = re.compile(r"(?<![A-Za-z0-9_:])((?:" + roots + r")(?:::super)*(?:::[A-Za-z_][A-Za-z0-9_]*)+)")
    for line in text.split("\n"):
        code = line.split("//", 1)[0]
        if re.match(r"^\s*(?:pub(?:\([^)]*\))?\s+)?use\s", code):
            continue
        for m in pat.finditer(code):
            p = m.group(1)
            head = p.split("::", 1)[0]
            out.append(p if head in ("crate", "super") else "self::" + p)
    return out


def reexports(mod, text, kids):
    """Names a module re-exports from a module it declares (`pub use
    x::{A, b::C};`): `super::A` of a child is then `x::A`'s file, not this."""
    out = {}
    for m in re.finditer(r"^\s*pub(?:\([^)]*\))?\s+use\s+([^;]+);", text, re.M):
        for u in uses(m.group(0).strip()):
            parts = [x for x in u.split("::") if x and x != "self"]
            if len(parts) >= 2 and parts[0] in kids:
                out[parts[-1]] = list(mod) + parts[:-1]
    return out


def impl_blocks(code):
    """(type, body) of each inherent `impl T {` block."""
    out = []
    for m in re.finditer(r"^\s*impl(?:<[^>]*>)?\s+([A-Za-z_][A-Za-z0-9_]*)(?:<[^>]*>)?\s*\{", code, re.M):
        i, depth = m.end(), 1
        while depth and i < len(code):
            depth += code[i] == "{"
            depth -= code[i] == "}"
            i += 1
        out.append((m.group(1), code[m.end() : i]))
    return out


def self_call_pairs(files):
    """Pairs of files whose `impl T` blocks call each other's methods."""
    defs, calls = {}, []
    for path in files.values():
        code = open(path).read().split("#[cfg(test)]", 1)[0]
        code = "\n".join(line.split("//", 1)[0] for line in code.split("\n"))
        for t, body in impl_blocks(code):
            for f in re.findall(r"\bfn\s+([a-z_][a-z0-9_]*)", body):
                defs.setdefault(t, {}).setdefault(f, set()).add(path)
            for f in re.findall(r"\bself\.([a-z_][a-z0-9_]*)\s*(?:::<[^>]*>)?\(", body):
                calls.append((t, path, f))
    edges = {}
    for t, path, f in calls:
        for q in defs.get(t, {}).get(f, ()):
            if q != path:
                edges.setdefault(path, set()).add(q)
    return sorted({tuple(sorted((a, b))) for a in edges for b in edges[a] if a in edges.get(b, ())})


def main():
    files = {}
    for root, _, names in os.walk(SRC):
        for n in names:
            if n.endswith(".rs"):
                p = os.path.join(root, n)
                if n == "main.rs":
                    continue
                files[tuple(module_of(p))] = p
    edges = {p: set() for p in files.values()}
    bad = []
    # Names each module re-exports from its children.
    exported = {}
    for mod, path in files.items():
        code = open(path).read().split("#[cfg(test)]", 1)[0]
        exported[mod] = reexports(mod, code, children(code))
    for mod, path in files.items():
        text = open(path).read()
        code = text.split("#[cfg(test)]", 1)[0]
        n = code.count("\n")
        if n > LIMIT:
            bad.append(f"{os.path.relpath(path, SRC)}: {n} lines before its tests (limit {LIMIT})")
        kids = children(code)
        for u in uses(code) + inline_paths(code, kids):
            own = u.startswith("self::") or u.split("::", 1)[0] in kids
            parts = [x for x in u.split("::") if x and x != "self"]
            if not parts:
                continue
            if own:
                # A module this file declares: a file below it.
                target = list(mod) + parts
            elif parts[0] == "crate":
                target = parts[1:]
            elif parts[0] == "super":
                # `super` of `a/b.rs` and of `a/b/mod.rs` alike is module `a`.
                base = list(mod[:-1])
                parts = parts[1:]
                while parts and parts[0] == "super":
                    parts = parts[1:]
                    base = base[:-1]
                target = base + parts
            else:
                continue
            f, depth = file_of(target, files)
            # A name the module there re-exports is its child's.
            for n in range(len(target) - 1, 0, -1):
                again = exported.get(tuple(target[:n]), {}).get(target[n])
                if again is not None:
                    f, depth = file_of(again + target[n:], files)
                    break
            if f and f != path:
                edges[path].add(f)
    # Cycles: strongly connected components of more than one file.
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(comp)

    sys.setrecursionlimit(10000)
    for v in edges:
        if v not in index:
            visit(v)
    for a, b in self_call_pairs(files):
        bad.append(f"self-calls both ways: {os.path.relpath(a, SRC)} <-> {os.path.relpath(b, SRC)}")
    for c in comps:
        bad.append("import circle: " + " <-> ".join(sorted(os.path.relpath(p, SRC) for p in c)))
    for b in bad:
        print(b)
    sys.exit(1 if bad else 0)


main()
