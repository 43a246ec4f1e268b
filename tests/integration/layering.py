#!/usr/bin/env python3
"""Dependencies point one way: every `#include "..."` of the library's sources goes down the
table below (docs/architecture.md, "Layers and dependencies"), never up or sideways.

  src/<module>/   may include its own module, the modules ALLOWED[<module>] names and the public
                  headers (include/infer/, "infer/..."); nothing else resolves
  include/infer/  only public headers
  capi/, examples/  only public headers (infer.h, "infer/...") and their own files: they know
                  the public API alone (tools/ are developer tools on the internals: not checked)

The checker first proves on a scratch tree that it accepts an allowed include and reports a
forbidden one, an unknown module and a cycle in its own table, then checks the real tree.

usage: layering.py SOURCE_ROOT
"""
import os
import re
import sys
import tempfile

# module -> the modules it may include (besides itself and the public headers). The order is the
# layering, bottom first; the table must stay acyclic (checked below).
ALLOWED = {
    "core": set(),
    "format": {"core"},
    "quant": {"core"},
    "kernels": {"core", "quant"},
    "kv": {"core"},
    "backend": {"core", "format", "quant", "kernels"},
    "ops": {"core", "quant", "kernels", "backend"},
    "tokenizer": {"core", "format"},
    "sample": {"core"},
    # model binds weights on the host at load (dequantize, quantize: kernels/cpu/dtype_traits.hpp);
    # its forward step reaches kernels only through ops.
    "model": {"core", "format", "quant", "kernels", "kv", "backend", "ops"},
    "sched": {"core"},
    "engine": {"core", "format", "quant", "kernels", "kv", "backend", "ops", "tokenizer", "sample", "model", "sched"},
}

# (including file, included header): edges that break the table today and are being removed on
# another branch. Each one listed here must still exist (a stale entry fails the check, so the
# list only ever shrinks).
TEMPORARY_EXCEPTIONS: set = set()

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
SOURCE_EXT = (".h", ".hpp", ".cpp", ".cu", ".cuh")


def acyclic(table):
    state = {}

    def visit(m):
        if state.get(m) == 1:
            return False
        if state.get(m) == 2:
            return True
        state[m] = 1
        ok = all(visit(d) for d in table.get(m, ()))
        state[m] = 2
        return ok

    return all(visit(m) for m in table)


def sources(root, sub):
    base = os.path.join(root, sub)
    for dirpath, _, files in os.walk(base):
        for f in sorted(files):
            if f.endswith(SOURCE_EXT):
                yield os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/")


def includes(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
        text = f.read()
    for m in INCLUDE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        yield line, m.group(1)


def check_tree(root, table, exceptions):
    """Returns (violations, exceptions used)."""
    violations, used = [], set()

    def public(inc):
        return inc.startswith("infer/") or inc == "infer.h"

    def local(rel, inc):
        return os.path.isfile(os.path.join(root, os.path.dirname(rel), inc))

    for rel in sources(root, "src"):
        parts = rel.split("/")
        module = parts[1] if len(parts) > 2 else None
        if module not in table:
            violations.append(f"{rel}: module '{module}' is not in the layering table")
            continue
        for line, inc in includes(root, rel):
            if public(inc) or ("/" not in inc and local(rel, inc)):
                continue
            target = inc.split("/")[0]
            if target == module or target in table[module]:
                continue
            if (rel, inc) in exceptions:
                used.add((rel, inc))
                continue
            why = "not a module" if target not in table else f"{module} may not include {target}"
            violations.append(f'{rel}:{line}: #include "{inc}": {why}')
    for sub in ("include/infer", "capi", "examples"):
        for rel in sources(root, sub):
            for line, inc in includes(root, rel):
                if public(inc) or ("/" not in inc and local(rel, inc)):
                    continue
                violations.append(f'{rel}:{line}: #include "{inc}": {sub}/ sees only the public headers')
    return violations, used


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def self_test():
    """The checker must be able to fail: a scratch tree with one allowed and one forbidden edge."""
    problems = []
    table = {"core": set(), "kv": {"core"}, "kernels": {"core"}}
    if not acyclic(table) or acyclic({"a": {"b"}, "b": {"a"}}):
        problems.append("acyclic() misjudges a table")
    with tempfile.TemporaryDirectory() as root:
        write(root, "src/core/a.hpp", "#pragma once\n")
        write(root, "src/kv/b.hpp", '#include "core/a.hpp"\n#include "infer/status.hpp"\n')
        write(root, "src/kernels/cpu/c.cpp", '#include "core/a.hpp"\n#include "kernels/cpu/c.hpp"\n')
        write(root, "src/kernels/cpu/c.hpp", "#pragma once\n")
        v, _ = check_tree(root, table, set())
        if v:
            problems.append(f"allowed includes reported: {v}")
        write(root, "src/kernels/cpu/d.hpp", '#pragma once\n#include "kv/b.hpp"\n')
        v, _ = check_tree(root, table, set())
        if len(v) != 1 or "src/kernels/cpu/d.hpp:2" not in v[0] or "kernels may not include kv" not in v[0]:
            problems.append(f"an upward include (kernels -> kv) was not reported as expected: {v}")
        v, used = check_tree(root, table, {("src/kernels/cpu/d.hpp", "kv/b.hpp")})
        if v or used != {("src/kernels/cpu/d.hpp", "kv/b.hpp")}:
            problems.append(f"an explicit exception was not honoured: {v} {used}")
        write(root, "src/sched/e.cpp", '#include "core/a.hpp"\n')
        v, _ = check_tree(root, table, {("src/kernels/cpu/d.hpp", "kv/b.hpp")})
        if not any("module 'sched' is not in the layering table" in x for x in v):
            problems.append(f"a module missing from the table was not reported: {v}")
        write(root, "capi/f.cpp", '#include "infer.h"\n#include "core/a.hpp"\n')
        v, _ = check_tree(root, {**table, "sched": {"core"}}, {("src/kernels/cpu/d.hpp", "kv/b.hpp")})
        if len(v) != 1 or "capi/f.cpp:2" not in v[0]:
            problems.append(f"capi including internals was not reported: {v}")
    return problems


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = sys.argv[1]
    problems = self_test()
    if problems:
        print("layering checker self-test failed:", *problems, sep="\n  ", file=sys.stderr)
        return 1
    if not acyclic(ALLOWED):
        print("the layering table has a cycle", file=sys.stderr)
        return 1
    violations, used = check_tree(root, ALLOWED, TEMPORARY_EXCEPTIONS)
    for stale in sorted(TEMPORARY_EXCEPTIONS - used):
        violations.append(f'{stale[0]}: no longer includes "{stale[1]}": delete its entry in TEMPORARY_EXCEPTIONS')
    if violations:
        print(f"{len(violations)} include(s) against the layering (tests/integration/layering.py):", file=sys.stderr)
        for v in violations:
            print("  " + v, file=sys.stderr)
        return 1
    n = sum(1 for sub in ("src", "include/infer", "capi", "examples") for _ in sources(root, sub))
    print(f"layering ok: {n} files; temporary exceptions in use: {len(used)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
