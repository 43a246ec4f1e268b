"""The ctypes mirrors of infer.h's structs have the C compiler's sizes and field offsets."""

import ctypes
import os
import shutil
import subprocess

import pytest

from libinfer import _lib

STRUCTS = {
    "infer_engine_params": _lib.EngineParams,
    "infer_token_event": _lib.TokenEventStruct,
    "infer_chat_message": _lib.ChatMessage,
    "infer_request_params": _lib.RequestParams,
    "infer_request_metrics": _lib.RequestMetrics,
    "infer_token_logprob": _lib.TokenLogprobStruct,
    "infer_latency": _lib.Latency,
    "infer_engine_stats": _lib.EngineStats,
    "infer_model_info": _lib.ModelInfo,
}


def test_struct_layouts_match_the_c_compiler(tmp_path):
    include = os.environ.get("INFER_INCLUDE_DIRS")
    cc = shutil.which("cc") or shutil.which("gcc")
    if not include or not cc:
        pytest.skip("needs INFER_INCLUDE_DIRS (set by CTest) and a C compiler")
    lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "infer.h"', "int main(void) {"]
    for cname, cls in STRUCTS.items():
        lines.append(f'  printf("{cname} %zu\\n", sizeof({cname}));')
        for field, _t in cls._fields_:
            lines.append(f'  printf("{cname}.{field} %zu\\n", offsetof({cname}, {field}));')
    lines += ["  return 0;", "}"]
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "layout"
    flags = [f"-I{d}" for d in include.split(os.pathsep) if d]
    subprocess.run([cc, *flags, str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    c_layout = dict(line.rsplit(" ", 1) for line in out.splitlines())
    py_layout = {}
    for cname, cls in STRUCTS.items():
        py_layout[cname] = str(ctypes.sizeof(cls))
        for field, _t in cls._fields_:
            py_layout[f"{cname}.{field}"] = str(getattr(cls, field).offset)
    assert py_layout == c_layout

