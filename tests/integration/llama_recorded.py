"""What quantize_cli.py and imatrix_cli.py share: their command line (BIN_DIR REPO_ROOT [--record
LLAMA_CPP_BIN_DIR]) and the tables of llama.cpp's outputs they compare with (name, size, SHA-256
per line, '#' comments), written by their --record runs (tests/reference/make-quantize-reference.sh)."""
import hashlib
import os
import sys


def command_line(script):
    """(bin_dir, repo_root, llama_bin): llama_bin is the llama.cpp bin/ of --record, else None."""
    args = sys.argv[1:]
    if len(args) not in (2, 4) or (len(args) == 4 and args[2] != "--record"):
        sys.exit(f"usage: {script} BIN_DIR REPO_ROOT [--record LLAMA_CPP_BIN_DIR]")
    return os.path.abspath(args[0]), os.path.abspath(args[1]), os.path.abspath(args[3]) if len(args) == 4 else None


def digest(data):
    """(size, SHA-256) of bytes."""
    return len(data), hashlib.sha256(data).hexdigest()


def read_table(path):
    """{name: (size, sha256)}."""
    table = {}
    for line in open(path):
        if not line.startswith("#"):
            name, size, sha = line.split()
            table[name] = (int(size), sha)
    return table


def write_table(path, table, what, llama_bin):
    with open(path, "w") as f:
        f.write(f"# {what}, written by\n"
                f"# tests/reference/make-quantize-reference.sh with llama.cpp's {os.path.basename(os.path.dirname(llama_bin))}\n")
        for name in sorted(table):
            f.write(f"{name}\t{table[name][0]}\t{table[name][1]}\n")
