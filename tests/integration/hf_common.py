"""What the Hugging Face directory tests share (hf_directory.py, hf_compressed.py): their command
line (BIN_DIR LIBINFER_SO REPO_ROOT), the Python binding on that library, the Python packages of
scripts/hf-python-deps (numpy, safetensors) on sys.path, running tools, the test models' arguments,
directories written by scripts/gguf-to-hf, and the report (one line per check, failures on stderr,
exit 1 on any)."""
import os
import shlex
import subprocess
import sys

bin_dir, lib_path, root = sys.argv[1:4]
os.environ["LIBINFER_LIBRARY"] = lib_path
sys.path.insert(0, os.path.join(root, "bindings/python/src"))
import libinfer  # noqa: E402,F401  (re-exported)

models = os.path.join(root, "tests/data/models")
text_path = os.path.join(root, "tests/data/text/corpus.txt")
failures = []
checked = []


def tool(name):
    return os.path.join(bin_dir, name)


def run(args, env=None, ok=True):
    """The finished process; with ok, a non-zero exit raises with the end of its stderr."""
    p = subprocess.run(args, capture_output=True, text=True, timeout=900, cwd=root, env=env)
    if ok and p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {p.returncode}: {p.stderr.strip()[-800:]}")
    return p


deps = run([os.path.join(root, "scripts/hf-python-deps")]).stdout.strip().splitlines()[-1]
sys.path.insert(0, deps)
convert_env = dict(os.environ, PYTHONPATH=deps)


def make_args(prefix):
    """infer-make-model's arguments of a reference model (tests/data/models/*make-model.args)."""
    name = "make-model.args" if prefix == "ref" else f"{prefix}-make-model.args"
    with open(os.path.join(models, name)) as f:
        return shlex.split(f.read())


def gguf_and_directory(tmp, label, make, extra=()):
    """A GGUF made by infer-make-model with `make`, and the directory scripts/gguf-to-hf writes from it."""
    gguf = os.path.join(tmp, label + ".gguf")
    run([tool("infer-make-model"), "-o", gguf] + list(make))
    directory = os.path.join(tmp, label)
    run([sys.executable, os.path.join(root, "scripts/gguf-to-hf"), gguf, directory] + list(extra), env=convert_env)
    return gguf, directory


def finish():
    for line in checked:
        print(line)
    if failures:
        print("\n".join(failures), file=sys.stderr)
        sys.exit(1)
    print(f"{len(checked)} passed, 0 failed")
