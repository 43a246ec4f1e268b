#!/usr/bin/env python3
"""The per-ISA kernel files share no code with the rest of the library through the linker.

A kernel file named *_avx2.cpp, *_avxvnni.cpp or *_avx512.cpp is compiled with that ISA's flags.
Every inline function or template it instantiates with external linkage (a header's inline helper,
std::vector<float>'s growth) becomes a weak symbol in its object, and the linker keeps one copy of
each for the whole program: if that copy is the AVX-512 file's, an AVX2 or scalar caller runs
AVX-512 code and dies with SIGILL on a CPU without it (seen: std::vector<float>'s growth, compiled
in an AVX-512 file, ended the AVX2 path of an AVX2-only CPU in the ASan build). Running the tests
with INFER_CPU_ISA=avx2 on an AVX-512 machine cannot see this; the objects can.

So: no object of an ISA file may define a weak or unique symbol (nm types W, V, u) that is not
its own. A symbol is its own when its name holds the file's ISA namespace (isa_avx512::,
avx512_tiles::, ...) and no object compiled with other flags defines it too. The one exception is
DW.ref.__gxx_personality_v0, a pointer to the C++ runtime's personality routine (data, the same
bytes in every object). Helpers belong in an anonymous namespace (internal linkage: each file keeps
its own copy) and scratch buffers are plain operator new, never a std:: container.

The checker first proves on objects it compiles itself that it reports a shared inline function
and a std::vector instantiated in an ISA file and accepts internal ones, then checks the library.

usage: isa_symbols.py NM CXX OBJECT...
"""
import os
import re
import subprocess
import sys
import tempfile

ISAS = ("avx512", "avxvnni", "avx2")
# The ISA-specific namespaces of each ISA's files (kernels/cpu/*_impl.hpp, qgemm_avx512_util.hpp).
OWN = {isa: re.compile(rf"\b(isa_{isa}|{isa}_tiles)::") for isa in ISAS}
ALLOWED = {"DW.ref.__gxx_personality_v0"}


def isa_of(path):
    """The ISA an object was compiled for ('' for the baseline files)."""
    name = os.path.basename(path)
    for isa in ISAS:
        if re.search(rf"_{isa}\.(cpp|cc)\.o(bj)?$", name):
            return isa
    return ""


def symbols(nm, path):
    """(type, demangled name) of every symbol the object defines."""
    out = subprocess.run([nm, "--defined-only", "-C", path], capture_output=True, text=True, check=True).stdout
    result = []
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3:
            result.append((parts[1], parts[2]))
    return result


def violations(nm, objects):
    """One line per weak or unique symbol an ISA object shares, or may share, with other flags."""
    defined = {}  # name -> set of ISA classes ('' baseline) whose objects define it
    weak = []  # (object, isa, name) of weak / unique definitions in ISA objects
    for path in objects:
        isa = isa_of(path)
        for kind, name in symbols(nm, path):
            defined.setdefault(name, set()).add(isa)
            if isa and kind in ("W", "V", "u", "w", "v") and name not in ALLOWED:
                weak.append((path, isa, name))
    found = []
    for path, isa, name in weak:
        others = sorted(c or "baseline" for c in defined[name] if c != isa)
        if not OWN[isa].search(name):
            found.append(f"{os.path.basename(path)}: {name} (weak, not in the file's ISA namespace)")
        elif others:
            found.append(f"{os.path.basename(path)}: {name} (also defined with the flags of {', '.join(others)})")
    return sorted(set(found))


def self_test(nm, cxx):
    """The checker reports what it must and accepts what it must, on objects compiled here."""
    header = """
#include <vector>
namespace demo { inline int shared_helper(int x) { return x * 3 + (x >> 2); } }
namespace demo { namespace { inline int local_helper(int x) { return x * 5; } } }
"""
    isa_file = header + """
namespace demo::isa_avx512 {
int (*keep_shared)(int) = &demo::shared_helper;
int (*keep_local)(int) = &local_helper;
float* grow(std::vector<float>& v, unsigned long n) { v.resize(n); return v.data(); }
}
"""
    plain_isa_file = header + """
namespace demo::isa_avx512 {
namespace { int twice(int x) { return 2 * x; } }
int (*keep_local)(int) = &local_helper;
int (*keep_twice)(int) = &twice;
}
"""
    with tempfile.TemporaryDirectory() as tmp:
        objs = {}
        for name, text in (("bad_avx512.cpp", isa_file), ("good_avx512.cpp", plain_isa_file)):
            src = os.path.join(tmp, name)
            with open(src, "w") as f:
                f.write(text)
            objs[name] = os.path.join(tmp, name + ".o")
            subprocess.run([cxx, "-std=c++20", "-O2", "-c", src, "-o", objs[name]], check=True)
        bad = violations(nm, [objs["bad_avx512.cpp"]])
        ok = True
        if not any("demo::shared_helper(int)" in v for v in bad):
            print("self-test: a shared inline helper in an ISA file was not reported:", bad)
            ok = False
        if not any("std::vector<float" in v for v in bad):
            print("self-test: std::vector<float> instantiated in an ISA file was not reported:", bad)
            ok = False
        if any("local_helper" in v for v in bad):
            print("self-test: an anonymous-namespace helper was reported:", bad)
            ok = False
        good = violations(nm, [objs["good_avx512.cpp"]])
        if good:
            print("self-test: internal helpers were reported:", good)
            ok = False
        return ok


def main():
    if len(sys.argv) < 4:
        print(__doc__)
        return 2
    nm, cxx, objects = sys.argv[1], sys.argv[2], sys.argv[3:]
    if not self_test(nm, cxx):
        return 1
    isa_objects = [o for o in objects if isa_of(o)]
    if not isa_objects:
        print(f"no ISA kernel objects among the {len(objects)} given")
        return 1
    found = violations(nm, objects)
    for v in found:
        print("FAIL:", v)
    print(f"{len(isa_objects)} ISA objects of {len(objects)}: {len(found)} weak symbols shared across ISA flags")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
