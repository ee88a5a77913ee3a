#!/usr/bin/env python3
"""The workspace's structural rules, checked from the manifests and the source (stdlib only;
run by .ci/run).

1. Crate layering: every crate is in one layer of ARCHITECTURE.md's "Layers" table, and no crate
   depends on a crate of a higher layer (renamed and target-specific dependencies included).
2. Purity: crates of a layer marked "pure", and the pure modules ARCHITECTURE.md names in other
   crates, depend on no I/O crate (tokio, hyper, ...) and name no I/O in their code (`std::fs`,
   `std::net`, `std::process`, `tokio::`, `hyper::`); their test modules are not checked.
3. Test helpers stay out of production: no crate names `testkit` among its dependencies (only
   its [dev-dependencies]).
4. No cycle between files inside a crate: module A importing from module B and B from A,
   through `use crate::...`, `super::...`, `self::...` or inline paths, re-exports and the
   parent's own imports followed. A module and its own submodules are exempt (a parent declares
   and re-exports its children by design), and so is the crate root.
5. Every file is read: each `.rs` file under a crate's `src/` (`src/bin/` aside) is reached by
   the walk from the crate root through its `mod name;` declarations. Rule 4 sees only the files
   the walk reads; a file it misses (declared with `#[path]`, behind a declaration the walk did
   not recognise, or not declared at all) is reported rather than silently passed. A scan that
   stopped early once left all but one of a crate's modules unread, and a real cycle with them.
6. A crate's API is what ARCHITECTURE.md says it is: the `pub mod`s of each crate's `lib.rs` are
   exactly those its "Public modules" table lists (a module nothing outside uses is `mod` or
   `pub(crate) mod`; making one public changes the table in the same commit).

What it cannot see: method calls on a type whose `impl` blocks are spread over sibling files
(they name no path), macros that expand to paths, and the imports of inline `mod name { ... }`
blocks (tests mostly, but not only).

The script checks itself first on a made-up workspace with one violation of each kind.
Exit status 0 when all hold; otherwise 1, with one line per violation.
"""

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IO_CRATES = {"tokio", "hyper", "hyper-util", "http-body-util", "mio", "socket2", "rustix", "mimalloc"}
IO_IN_CODE = re.compile(r"\b(std::fs|std::net|std::process|tokio::|hyper::)")
TEST_HELPERS = {"testkit"}
KEYWORDS = ("crate", "super", "self")


def architecture():
    """({crate: (layer, pure?)}, {crate: [pure module paths]}) from ARCHITECTURE.md's Layers
    section: its table, and its line "Pure modules of other crates: `crate::module`, ..."."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    section = text.split("## Layers", 1)
    if len(section) < 2:
        sys.exit("layering: ARCHITECTURE.md has no '## Layers' section")
    layers, pure_modules = {}, {}
    in_pure_list = False
    for line in section[1].splitlines():
        if line.startswith("## "):
            break
        # The list is a paragraph: it goes on, wrapped, until a blank line.
        in_pure_list = line.lower().startswith("pure modules") or (in_pure_list and line.strip() != "")
        if in_pure_list:
            for krate, module in re.findall(r"`([a-z0-9_-]+)::([a-z0-9_:]+)`", line):
                pure_modules.setdefault(krate, []).append(tuple(module.split("::")))
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].isdigit():
            continue
        layer, pure = int(cells[0]), re.search(r"(?<![a-z])pure\b", cells[1].lower()) is not None
        for name in re.findall(r"`([a-z0-9_-]+)`", cells[2]):
            layers[name] = (layer, pure)
    return layers, pure_modules


def workspace_crates():
    """{name: (dir, manifest)} of every member crate."""
    crates = {}
    for manifest in sorted((ROOT / "crates").glob("*/Cargo.toml")):
        data = tomllib.loads(manifest.read_text())
        crates[data["package"]["name"]] = (manifest.parent, data)
    return crates


def dependencies(data):
    """The crate names a manifest depends on outside its dev-dependencies: normal and build
    dependencies, target-specific ones too, by their package name when renamed."""
    tables = [data.get("dependencies", {}), data.get("build-dependencies", {})]
    for target in data.get("target", {}).values():
        tables += [target.get("dependencies", {}), target.get("build-dependencies", {})]
    names = set()
    for table in tables:
        for key, spec in table.items():
            names.add(spec.get("package", key) if isinstance(spec, dict) else key)
    return names


def check_crates(crates, layers, problems):
    for name, (_, data) in crates.items():
        if name not in layers:
            problems.append(f"{name}: not in ARCHITECTURE.md's Layers table")
            continue
        layer, pure = layers[name]
        for dep in sorted(dependencies(data)):
            if dep in TEST_HELPERS and name not in TEST_HELPERS:
                problems.append(f"{name}: depends on the test helper crate {dep} (dev-dependencies only)")
            if dep in crates and dep in layers and layers[dep][0] > layer:
                problems.append(
                    f"{name} (layer {layer}) depends on {dep} (layer {layers[dep][0]}), a higher layer"
                )
            if pure and dep in IO_CRATES:
                problems.append(f"{name} is in a pure layer but depends on {dep}")


WORD = re.compile(r"\w+")
RAW_OPENING = re.compile(r'(#*)"')


def end_of_string(text, i):
    """Where the string whose body starts at `i` ends (just past its closing quote); escapes
    (`\\"`, `\\\\`) skipped."""
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == '"':
            return i + 1
        else:
            i += 1
    return len(text)


def end_of_char(text, i):
    """Where the char literal opened by the quote at `i` ends (`'x'`, `'"'`, `'\\''`,
    `'\\u{1F600}'`), or None when that quote starts a lifetime or a label (`'a`, `'static`,
    `'outer:`): a char literal closes after one character or one escape, a lifetime never does."""
    if text.startswith("\\", i + 1):
        close = text.find("'", i + 3, i + 13)
        return close + 1 if close > 0 and "\n" not in text[i:close] else None
    if i + 2 < len(text) and text[i + 1] != "\n" and text[i + 2] == "'":
        return i + 3
    return None


def strip_comments_and_literals(text):
    """`text` with comments (line, doc, block, nested block) blanked and string, raw string,
    byte string and char literals emptied (`""`, `' '`), so that braces, paths and `mod`
    declarations inside them count for nothing. One left-to-right pass, because which of them
    starts first decides what the rest is: a quote inside a comment opens nothing, `//` inside
    a string is no comment, and `r"` only opens a raw string as a token of its own (not at the
    end of a word such as `nbr"`). Stripping comments and literals one regex after the other
    got this wrong and once swallowed a crate's whole module list (sim's doc comment quoting
    `{"id":..,"nbr":8}`). Lifetimes are left alone; newlines of block comments are kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
            out.append(" ")
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(" " + "\n" * text.count("\n", i, j))
            i = j
        elif c == '"':
            i = end_of_string(text, i + 1)
            out.append('""')
        elif c == "'":
            end = end_of_char(text, i)
            out.append("' '" if end else "'")
            i = end or i + 1
        elif WORD.match(text, i):
            # A whole word at once, so that a literal's prefix (`r`, `b`, `br`, `c`, `cr`) is
            # only one when it is the entire word.
            word = WORD.match(text, i).group()
            j = i + len(word)
            raw = RAW_OPENING.match(text, j) if word in ("r", "br", "cr") else None
            if raw:  # not `r#name`, a raw identifier
                close = text.find('"' + raw.group(1), raw.end())
                i = n if close < 0 else close + len(raw.group())
                out.append('""')
            elif word in ("b", "c") and text.startswith('"', j):
                i = end_of_string(text, j + 1)
                out.append('""')
            elif word == "b" and text.startswith("'", j) and end_of_char(text, j):
                i = end_of_char(text, j)
                out.append("' '")
            else:
                out.append(word)
                i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def without_inline_modules(code):
    """`code` (comments and literals already stripped) without its inline `mod name { ... }`
    blocks (tests), whose `super` means the file's own module, not its parent."""
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


def file_modules(code):
    """[(inline module path, name)] of each `mod name;` in `code` (comments and literals
    already stripped), wherever it stands: after an attribute on the same line, with any
    visibility, or inside an inline `mod outer { ... }` (then its file is under `outer/`)."""
    found, inline, depth = [], [], 0
    for m in re.finditer(r"\bmod\s+(?:r#)?(\w+)\s*([;{])|[{}]", code):
        if m.group(2) == ";":
            found.append((tuple(name for name, _ in inline), m.group(1)))
        elif m.group(2) == "{":
            inline.append((m.group(1), depth))
            depth += 1
        elif m.group() == "{":
            depth += 1
        else:
            depth -= 1
            if inline and inline[-1][1] == depth:
                inline.pop()
    return found


def expand_use_tree(tree):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e']."""
    tree = re.sub(r"\s+", " ", tree).strip()
    tree = re.sub(r"\s*::\s*", "::", tree)
    brace = tree.find("{")
    if brace < 0:
        return [re.sub(r"\s+as\s+\w+$", "", tree).replace(" ", "")]
    prefix, depth, parts, start = tree[:brace].replace(" ", ""), 0, [], brace + 1
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
    for part in filter(None, (p.strip() for p in parts)):
        for sub in expand_use_tree(part):
            paths.append(prefix + sub if sub != "self" else prefix.rstrip(":"))
    return paths


class Crate:
    def __init__(self, src):
        self.modules = {}  # module path tuple -> file
        self.code = {}  # module path tuple -> code without comments, literals, inline modules
        self.imports = {}  # module path tuple -> ({name: path}, [glob paths])
        self.src = src
        root = src / "lib.rs" if (src / "lib.rs").exists() else src / "main.rs"
        self.load((), root)

    def load(self, path, file):
        self.modules[path] = file
        lexed = strip_comments_and_literals(file.read_text())
        code = self.code[path] = without_inline_modules(lexed)
        here = file.parent if file.name in ("lib.rs", "main.rs", "mod.rs") else file.parent / file.stem
        named, globs = {}, []
        for tree in re.findall(r"\buse\s+([^;]+);", code):
            for p in expand_use_tree(tree):
                if p.endswith("::*"):
                    globs.append(p[:-3])
                else:
                    named[p.split("::")[-1]] = p
        self.imports[path] = (named, globs)
        for inline, name in file_modules(lexed):
            folder = here.joinpath(*inline)
            for candidate in (folder / f"{name}.rs", folder / name / "mod.rs"):
                if candidate.exists():
                    self.load(path + inline + (name,), candidate)
                    break

    def unreached(self):
        """The `.rs` files under `src/` (`src/bin/` aside) that the walk
        from the crate root through `mod name;` declarations did not read: a file declared
        with `#[path]`, behind a declaration the walk missed, or not declared at all. Each one
        is code rule 4 cannot see, so it is reported instead of passed over in silence."""
        reached = set(self.modules.values())
        return [
            f
            for f in sorted(self.src.rglob("*.rs"))
            if f.relative_to(self.src).parts[0] != "bin" and f not in reached
        ]

    @staticmethod
    def anchor(module, segs):
        """Consumes the leading `crate`/`super`/`self` of `segs`; returns the module they name."""
        base = list(module)
        while segs and segs[0] in KEYWORDS:
            head = segs.pop(0)
            if head == "crate":
                base = []
            elif head == "super":
                base = base[:-1]
        return base

    def defines(self, module, name):
        """Whether `module`'s own code declares an item called `name`."""
        item = r"\b(?:struct|enum|union|fn|trait|type|const|static|macro_rules!)\s+" + re.escape(name) + r"\b"
        return re.search(item, self.code.get(module, "")) is not None

    def resolve(self, module, path, hops=6):
        """The module a `crate::`/`super::`/`self::` path lands in. An item a module only
        imports (`use`, `pub use`, or a glob) counts as the module it comes from."""
        segs = path.split("::")
        at = tuple(self.anchor(module, segs))
        while segs and at + (segs[0],) in self.modules:
            at = at + (segs.pop(0),)
        if not segs or hops == 0 or at not in self.modules or self.defines(at, segs[0]):
            return at
        named, globs = self.imports[at]
        candidates = []
        if segs[0] in named:
            candidates.append(named[segs[0]])
        candidates += [g + "::" + segs[0] for g in globs]
        for target in candidates:
            first = target.split("::")[0]
            if first not in KEYWORDS and at + (first,) not in self.modules:
                continue  # another crate's item (`use std::...`, `use pacing::...`)
            prefix = "self::" if first not in KEYWORDS else ""
            landed = self.resolve(at, prefix + target + "".join("::" + s for s in segs[1:]), hops - 1)
            if landed != at:
                return landed
        return at

    def edges(self):
        graph = {m: set() for m in self.modules}
        for module, code in self.code.items():
            paths = []
            for tree in re.findall(r"\buse\s+([^;]+);", code):
                paths += [p for p in expand_use_tree(tree) if p.split("::")[0] in KEYWORDS]
            paths += re.findall(r"(?<![\w:])((?:crate|super|self)(?:::\w+)+)", code)
            for p in paths:
                target = self.resolve(module, p.removesuffix("::*"))
                related = target[: len(module)] == module or module[: len(target)] == target
                if target in self.modules and not related:
                    graph[module].add(target)
        return graph

    def io_in(self, prefix):
        """(file, what) for each module under `prefix` (tests aside) whose code names I/O."""
        found = []
        for module, code in self.code.items():
            if module[: len(prefix)] != prefix or "tests" in module:
                continue
            m = IO_IN_CODE.search(code)
            if m:
                found.append((self.modules[module], m.group(1)))
        return found


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
    """Every violation in the workspace at `root`, one line each; and how many crates."""
    global ROOT
    ROOT = root
    problems = []
    crates = workspace_crates()
    layers, pure_modules = architecture()
    check_crates(crates, layers, problems)
    for name, (path, _) in crates.items():
        crate = Crate(path / "src")
        for comp in cycles(crate.edges()):
            files = [str(crate.modules[m].relative_to(ROOT)) for m in comp]
            problems.append(f"{name}: files import each other in a cycle: {' <-> '.join(files)}")
        for file in crate.unreached():
            problems.append(f"{file.relative_to(ROOT)}: not reached by the module walk")
        prefixes = [()] if layers.get(name, (0, False))[1] else pure_modules.get(name, [])
        for prefix in prefixes:
            if prefix and prefix not in crate.modules:
                problems.append(f"{name}: ARCHITECTURE.md names a pure module {'::'.join(prefix)} that does not exist")
            for file, what in crate.io_in(prefix):
                problems.append(f"{file.relative_to(ROOT)}: pure code names {what}")
    return problems, len(crates)


SELFTEST = {
    "ARCHITECTURE.md": "## Layers\n| layer | kind | crates |\n| --- | --- | --- |\n"
    "| 0 | foundation, pure | `low`, `testkit` |\n| 1 | servers, impure | `high` |\n"
    "Pure modules of other crates: `high::calc`,\n`high::wrapped`.\n",
    "crates/low/Cargo.toml": '[package]\nname = "low"\n[dependencies]\n'
    'hi = { path = "../high", package = "high" }\ntestkit = { path = "../testkit" }\n'
    "[target.'cfg(unix)'.dependencies]\ntokio = \"1\"\n",
    "crates/low/src/lib.rs": "mod a;\nmod b;\nmod p;\nmod s;\nmod t;\npub use a::A;\n",
    "crates/low/src/a.rs": "use crate::b::B;\npub struct A;\n",
    "crates/low/src/b.rs": 'use crate::A;\npub struct B;\n#[cfg(test)]\nmod tests {\n    const C: char = \'}\';\n    use crate::s::S;\n}\nconst S: &str = "use crate::s::S; }";\n',
    "crates/low/src/p/mod.rs": "mod c;\nmod d;\npub struct P;\nuse self::c::C;\nuse d::D;\n",
    "crates/low/src/p/c.rs": "use super::P;\nuse super::D;\npub struct C;\n",
    "crates/low/src/p/d.rs": "use super::C;\npub struct D;\n",
    "crates/low/src/s.rs": "pub struct S;\nuse crate::b::B;\nuse crate::t::T;\n",
    "crates/low/src/t.rs": "pub struct T;\nfn f() -> std::io::Result<()> { Ok(()) }\n",
    "crates/high/Cargo.toml": '[package]\nname = "high"\n[dependencies]\nlow = { path = "../low" }\n',
    "crates/high/src/lib.rs": "//! the bidder's \"answer\": `200 {\"id\":..,\"nbr\":8}`, a lone \" too\n"
    "/// it's\n/* a block's \"quote\" /* nested */ mod ghost; still a comment */\nmod calc;\nmod net;\n"
    "fn f<'a>(x: &'a str) -> &'a str {\n    let _ = ('\"', '\\'', b'\"', r#\"raw \"mod ghost;\" \"#, br\"//\", \"/*\");\n    x\n}\n"
    "#[cfg(test)] pub(crate) mod q;\nmod r;\nmod wrapped;\nmod outer {\n    mod inner;\n}\n// mod orphan;\n",
    "crates/high/src/q.rs": "use crate::r::R;\npub struct Q;\n",
    "crates/high/src/r.rs": "/// it's Q's \"other half\"\nuse crate::q::Q;\npub struct R;\n",
    "crates/high/src/outer/inner.rs": "pub struct I;\n",
    "crates/high/src/orphan.rs": "pub struct O;\n",
    "crates/high/src/bin/tool.rs": "fn main() {}\n",
    "crates/high/src/calc.rs": "pub fn f() { let _ = std::fs::read(\"x\"); }\n",
    # Named on the pure list's second line.
    "crates/high/src/wrapped.rs": "pub fn h() { let _ = std::fs::read(\"y\"); }\n",
    "crates/high/src/net.rs": "pub fn g() { let _ = std::net::TcpListener::bind(\"x\"); }\n",
    "crates/testkit/Cargo.toml": '[package]\nname = "testkit"\n',
    "crates/testkit/src/lib.rs": "",
}
SELFTEST_EXPECTED = [
    "low (layer 0) depends on high (layer 1), a higher layer",
    "low is in a pure layer but depends on tokio",
    "low: depends on the test helper crate testkit (dev-dependencies only)",
    "low: files import each other in a cycle: crates/low/src/a.rs <-> crates/low/src/b.rs",
    "low: files import each other in a cycle: crates/low/src/p/c.rs <-> crates/low/src/p/d.rs",
    "crates/high/src/calc.rs: pure code names std::fs",
    "crates/high/src/wrapped.rs: pure code names std::fs",
    "high: files import each other in a cycle: crates/high/src/q.rs <-> crates/high/src/r.rs",
    "crates/high/src/orphan.rs: not reached by the module walk",
]


def listed_public_modules(text):
    """{crate: {module}} from ARCHITECTURE.md's "### Public modules" table (`none` for none)."""
    section = text.split("### Public modules", 1)
    listed = {}
    if len(section) < 2:
        return listed
    for line in section[1].splitlines()[1:]:
        if line.startswith("#"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`"):
            listed[cells[0].strip("`")] = set(re.findall(r"`([a-z0-9_]+)`", cells[1]))
    return listed


def check_public_modules(root, architecture_text):
    """Rule 6: each crate's `pub mod`s against the table."""
    listed = listed_public_modules(architecture_text)
    problems = []
    for lib in sorted(root.glob("crates/*/src/lib.rs")):
        krate = lib.parent.parent.name
        code = strip_comments_and_literals(lib.read_text())
        declared = set(re.findall(r"^pub mod ([a-z0-9_]+)", code, re.M))
        if krate not in listed:
            problems.append(f"{krate}: not in ARCHITECTURE.md's public modules table")
            continue
        for module in sorted(declared - listed[krate]):
            problems.append(f"{krate}: pub mod {module} is not among ARCHITECTURE.md's public modules (list it, or make it pub(crate))")
        for module in sorted(listed[krate] - declared):
            problems.append(f"{krate}: ARCHITECTURE.md lists public module {module}, which src/lib.rs does not declare pub")
    return problems


def selftest_public_modules():
    """Rule 6 on a made-up crate: one module public but not listed, one listed but private."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "crates/a/src").mkdir(parents=True)
        (root / "crates/a/src/lib.rs").write_text("pub mod open;\npub mod extra;\nmod shut;\n// pub mod ghost;\n")
        table = "### Public modules\n\n| crate | public modules |\n| --- | --- |\n| `a` | `open`, `shut` |\n"
        found = check_public_modules(root, table)
    expected = [
        "a: pub mod extra is not among ARCHITECTURE.md's public modules (list it, or make it pub(crate))",
        "a: ARCHITECTURE.md lists public module shut, which src/lib.rs does not declare pub",
    ]
    if found != expected:
        sys.exit("layering self-test (public modules) failed; found:\n  " + "\n  ".join(found))


def selftest():
    """The checker on a made-up workspace: one violation of each rule (a renamed and a
    target-specific dependency, a cycle through a re-export, one through the parent's own
    import, I/O in a named pure module and in one named on the list's wrapped line, a cycle between modules declared after doc comments
    with quotes in them, a file no `mod` declares), and cases that must pass (a parent and its
    child, a test module, braces, paths and `mod` in literals and comments, lifetimes next to
    char literals, a file declared from an inline module, a binary under `src/bin/`, I/O in an
    impure module): exactly those nine."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, text in SELFTEST.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        problems, _ = check(root)
    if sorted(problems) != sorted(SELFTEST_EXPECTED):
        sys.exit("layering self-test failed; found:\n  " + "\n  ".join(problems))


def main():
    selftest()
    selftest_public_modules()
    root = Path(__file__).resolve().parent.parent
    problems, count = check(root)
    problems += check_public_modules(root, (root / "ARCHITECTURE.md").read_text())
    for p in problems:
        print(f"layering: {p}")
    if problems:
        sys.exit(1)
    print(f"layering: {count} crates, layers respected, pure code pure, no file cycles, every file read, no test helper in production, public modules as listed")


if __name__ == "__main__":
    main()
