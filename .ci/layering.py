#!/usr/bin/env python3
"""The workspace's structural rules, checked from the source (stdlib only; run by .ci/run).

1. Crate layering: every crate is in one layer of ARCHITECTURE.md's "Layers" table, and no crate
   depends on a crate of a higher layer. Crates in a layer marked "pure" depend on no I/O crate
   (tokio, hyper, ...).
2. Test helpers stay out of production: no crate names `testkit` among its [dependencies]
   (only [dev-dependencies]).
3. No cycle between files inside a crate: module A importing from module B and B from A (through
   `use crate::...`, `super::...` or inline paths), parents and their own submodules excepted
   (a parent declares and re-exports its children by design).

Exit status 0 when all hold; otherwise 1, with one line per violation.
"""

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IO_CRATES = {"tokio", "hyper", "hyper-util", "http-body-util", "mimalloc"}
TEST_HELPERS = {"testkit"}


def layers_from_architecture():
    """{crate: (layer number, pure?)} from the table under "## Layers" in ARCHITECTURE.md."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    section = text.split("## Layers", 1)
    if len(section) < 2:
        sys.exit("layering: ARCHITECTURE.md has no '## Layers' section")
    layers = {}
    for line in section[1].splitlines():
        if line.startswith("## "):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].isdigit():
            continue
        layer, pure = int(cells[0]), "pure" in cells[1].lower()
        for name in re.findall(r"`([a-z0-9_-]+)`", cells[2]):
            layers[name] = (layer, pure)
    return layers


def workspace_crates():
    """{name: (dir, manifest)} of every member crate."""
    crates = {}
    for manifest in sorted((ROOT / "crates").glob("*/Cargo.toml")):
        data = tomllib.loads(manifest.read_text())
        crates[data["package"]["name"]] = (manifest.parent, data)
    return crates


def check_crates(crates, layers, problems):
    for name, (_, data) in crates.items():
        if name not in layers:
            problems.append(f"{name}: not in ARCHITECTURE.md's Layers table")
            continue
        layer, pure = layers[name]
        deps = set(data.get("dependencies", {})) | set(data.get("build-dependencies", {}))
        for dep in sorted(deps):
            if dep in TEST_HELPERS and name not in TEST_HELPERS:
                problems.append(f"{name}: depends on the test helper crate {dep} (dev-dependencies only)")
            if dep in crates and dep in layers and layers[dep][0] > layer:
                problems.append(
                    f"{name} (layer {layer}) depends on {dep} (layer {layers[dep][0]}), a higher layer"
                )
            if pure and dep in IO_CRATES:
                problems.append(f"{name} is in a pure layer but depends on {dep}")


def strip_comments_and_test_blocks(text):
    """The code without `//` comment lines and without inline `mod name { ... }` blocks (tests),
    whose `super` means the file's own module, not its parent."""
    lines = [l for l in text.splitlines() if not l.lstrip().startswith("//")]
    code = "\n".join(l.split(" // ")[0] for l in lines)
    out, i = [], 0
    for m in re.finditer(r"\bmod\s+\w+\s*\{", code):
        if m.start() < i:
            continue
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        out.append(code[i : m.start()])
        i = j
    out.append(code[i:])
    return "".join(out)


def expand_use_tree(tree):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e']."""
    tree = re.sub(r"\s+", "", tree)
    brace = tree.find("{")
    if brace < 0:
        return [re.sub(r"as\w+$", "", tree)]
    prefix, depth, parts, start = tree[:brace], 0, [], brace + 1
    for k in range(brace, len(tree)):
        c = tree[k]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                parts.append(tree[start:k])
                break
        elif c == "," and depth == 1:
            parts.append(tree[start:k])
            start = k + 1
    paths = []
    for part in filter(None, parts):
        for sub in expand_use_tree(part):
            paths.append(prefix + sub if sub != "self" else prefix.rstrip(":"))
    return paths


class Crate:
    def __init__(self, src):
        self.modules = {}  # module path tuple -> file
        root = src / "lib.rs" if (src / "lib.rs").exists() else src / "main.rs"
        self.load((), root)

    def load(self, path, file):
        self.modules[path] = file
        code = strip_comments_and_test_blocks(file.read_text())
        here = file.parent if file.name in ("lib.rs", "main.rs", "mod.rs") else file.parent / file.stem
        for name in re.findall(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", code, re.M):
            for candidate in (here / f"{name}.rs", here / name / "mod.rs"):
                if candidate.exists():
                    self.load(path + (name,), candidate)
                    break

    def reexports(self, module):
        """{name: full path} of the `pub use` items of a module."""
        code = strip_comments_and_test_blocks(self.modules[module].read_text())
        found = {}
        for tree in re.findall(r"pub(?:\([^)]*\))?\s+use\s+([^;]+);", code):
            for p in expand_use_tree(tree):
                name = p.split("::")[-1]
                found[name] = p
        return found

    @staticmethod
    def anchor(module, segs):
        """Consumes the leading `crate`/`super`/`self` of `segs`; returns the module they name."""
        base = list(module)
        while segs and segs[0] in ("crate", "super", "self"):
            head = segs.pop(0)
            if head == "crate":
                base = []
            elif head == "super":
                base = base[:-1]
        return base

    def resolve(self, module, path):
        """The module a `crate::`/`super::`/`self::` path lands in, following re-exports (a
        `pub use` of another module's item counts as that module)."""
        segs = path.split("::")
        base = self.anchor(module, segs)
        for _ in range(4):
            at = tuple(base)
            while segs and at + (segs[0],) in self.modules:
                at = at + (segs.pop(0),)
            exports = self.reexports(at) if segs else {}
            if segs and segs[0] in exports:
                target = exports[segs[0]].split("::")
                rest = segs[1:]
                if target[0] in ("crate", "super", "self"):
                    base = self.anchor(at, target)
                    segs = target + rest
                    continue
                if at + (target[0],) in self.modules:
                    base, segs = list(at), target + rest
                    continue
            return at
        return tuple(base)

    def edges(self):
        graph = {m: set() for m in self.modules}
        for module, file in self.modules.items():
            code = strip_comments_and_test_blocks(file.read_text())
            paths = []
            for tree in re.findall(r"\buse\s+([^;]+);", code):
                paths += [p for p in expand_use_tree(tree) if p.split("::")[0] in ("crate", "super", "self")]
            paths += re.findall(r"(?<![\w:])((?:crate|super)(?:::\w+)+)", code)
            for p in paths:
                target = self.resolve(module, p)
                related = target[: len(module)] == module or module[: len(target)] == target
                if target in self.modules and not related:
                    graph[module].add(target)
        return graph


def cycles(graph):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
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
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def check(root):
    """Every violation in the workspace at `root`, one line each."""
    global ROOT
    ROOT = root
    problems = []
    crates = workspace_crates()
    check_crates(crates, layers_from_architecture(), problems)
    for name, (path, _) in crates.items():
        crate = Crate(path / "src")
        for comp in cycles(crate.edges()):
            files = [str(crate.modules[m].relative_to(ROOT)) for m in comp]
            problems.append(f"{name}: files import each other in a cycle: {' <-> '.join(files)}")
    return problems, len(crates)


def selftest():
    """The checker on a made-up workspace with one violation of each rule, and a parent and
    child that import each other (allowed): it must find exactly the four violations."""
    import tempfile

    files = {
        "ARCHITECTURE.md": "## Layers\n| layer | kind | crates |\n| --- | --- | --- |\n"
        "| 0 | foundation, pure | `low`, `testkit` |\n| 1 | servers | `high` |\n",
        "crates/low/Cargo.toml": '[package]\nname = "low"\n[dependencies]\n'
        'high = { path = "../high" }\ntokio = "1"\ntestkit = { path = "../testkit" }\n',
        "crates/low/src/lib.rs": "mod a;\nmod b;\nmod p;\npub use a::A;\n",
        "crates/low/src/a.rs": "use crate::b::B;\npub struct A;\n",
        "crates/low/src/b.rs": "use crate::A;\npub struct B;\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
        "crates/low/src/p/mod.rs": "mod c;\npub struct P;\nuse self::c::C;\n",
        "crates/low/src/p/c.rs": "use super::P;\npub struct C;\n",
        "crates/high/Cargo.toml": '[package]\nname = "high"\n[dependencies]\nlow = { path = "../low" }\n',
        "crates/high/src/lib.rs": "",
        "crates/testkit/Cargo.toml": '[package]\nname = "testkit"\n',
        "crates/testkit/src/lib.rs": "",
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, text in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        problems, _ = check(root)
    expected = [
        "low (layer 0) depends on high (layer 1), a higher layer",
        "low is in a pure layer but depends on tokio",
        "low: depends on the test helper crate testkit (dev-dependencies only)",
        "low: files import each other in a cycle: crates/low/src/a.rs <-> crates/low/src/b.rs",
    ]
    if sorted(problems) != sorted(expected):
        sys.exit("layering self-test failed; found:\n  " + "\n  ".join(problems))


def main():
    selftest()
    problems, count = check(Path(__file__).resolve().parent.parent)
    for p in problems:
        print(f"layering: {p}")
    if problems:
        sys.exit(1)
    print(f"layering: {count} crates, layers respected, no file cycles, no test helper in production")


if __name__ == "__main__":
    main()
