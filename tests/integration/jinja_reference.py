#!/usr/bin/env python3
"""Our Jinja interpreter against Python's jinja2, byte for byte, on real chat templates.

Every template of tests/data/chat_templates/templates.json is rendered for every conversation of
conversations.json (with add_generation_prompt on and off) twice: by jinja2, configured exactly
as transformers' apply_chat_template configures it, and by infer-render-template. The two
renderings must be identical; where jinja2 raises, ours must fail too, and where the template
called raise_exception('...'), with the same message. The snippets run the tool once each (its
exit status and stderr line); the real templates' thousands of renderings go through one
`infer-render-template --batch` process (a process each cost most of the time, 7 times more
under AddressSanitizer).

usage: jinja_reference.py INFER_RENDER_TEMPLATE DATA_DIR [TEMPLATE_FILTER]

The reference is jinja2 (Debian python3-jinja2, installed by scripts/setup-deps); the script
never compares our output with our own earlier output.
"""
import datetime
import json
import os
import subprocess
import sys
import tempfile

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

NOW = datetime.datetime(2025, 7, 26, 14, 3, 9)  # strftime_now's time, on both sides


class GenerationBlocks(jinja2.ext.Extension):
    """transformers' AssistantTracker when it tracks nothing: {% generation %} renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


class RaisedByTemplate(jinja2.exceptions.TemplateError):
    pass


def reference_environment():
    # transformers.utils.chat_template_utils._compile_jinja_template
    def raise_exception(message):
        raise RaisedByTemplate(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return NOW.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationBlocks, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def variables(template, case, add_generation_prompt):
    """What transformers passes to render(): messages, tools, documents, add_generation_prompt,
    the tokenizer's special tokens, and the caller's extra keywords."""
    v = {"messages": case["messages"], "tools": case.get("tools"), "documents": None,
         "add_generation_prompt": add_generation_prompt,
         "bos_token": template["bos_token"], "eos_token": template["eos_token"]}
    for key, value in case.items():
        if key not in ("name", "messages", "tools", "add_generation_prompt"):
            v[key] = value
    return v


class Comparison:
    """Renders with jinja2 and with our tool, and keeps the count of agreements."""

    def __init__(self, tool, tmp):
        self.tool, self.tmp = tool, tmp
        self.batch = None  # the --batch process, once started
        self.env = reference_environment()
        self.counts = {"same": 0, "both_raise": 0, "differ": 0}
        self.failures = []
        self.compiled = {}  # source -> jinja2 Template: compiling costs far more than rendering

    def reference(self, source, v):
        try:
            if source not in self.compiled:
                self.compiled[source] = self.env.from_string(source)
            return self.compiled[source].render(**v), None
        except RaisedByTemplate as e:
            return None, ("raise_exception", str(e))
        except Exception as e:  # TemplateSyntaxError, TypeError, UndefinedError, SecurityError, ...
            return None, (type(e).__name__, str(e))

    def one_shot(self, template_path, v):
        """(exit status, stdout, stderr) of one process."""
        vars_path = os.path.join(self.tmp, "vars.json")
        with open(vars_path, "w", encoding="utf-8") as f:
            json.dump(v, f, ensure_ascii=False)
        p = subprocess.run([self.tool, template_path, vars_path, "--now", NOW.strftime("%Y-%m-%d %H:%M:%S")],
                           capture_output=True, timeout=60)
        return p.returncode, p.stdout, p.stderr

    def batched(self, template_path, v):
        """The same through the --batch process: a line in, a header and the bytes out."""
        if self.batch is None:
            self.batch = subprocess.Popen([self.tool, "--batch", "--now", NOW.strftime("%Y-%m-%d %H:%M:%S")],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        line = template_path + "\t" + json.dumps(v, ensure_ascii=False) + "\n"
        self.batch.stdin.write(line.encode("utf-8"))
        self.batch.stdin.flush()
        header = self.batch.stdout.readline().split()
        if len(header) != 3:
            raise RuntimeError(f"infer-render-template --batch: header {header!r} (exit {self.batch.poll()})")
        status, n_out, n_err = (int(x) for x in header)
        out, err = self.batch.stdout.read(n_out), self.batch.stdout.read(n_err)
        return status, out, err

    def close(self):
        if self.batch is not None:
            self.batch.stdin.close()
            rc = self.batch.wait(timeout=60)
            if rc != 0:
                raise RuntimeError(f"infer-render-template --batch exited {rc}")

    def compare(self, label, template_path, source, v, batch=False):
        expected, raised = self.reference(source, v)
        rc, out, err = (self.batched if batch else self.one_shot)(template_path, v)
        got = out.decode("utf-8", "surrogateescape")
        err = err.decode("utf-8", "replace").strip()
        if raised is None and rc == 0 and got == expected:
            self.counts["same"] += 1
            return True
        if raised is not None and rc == 1:
            if raised[0] != "raise_exception" or ("raise_exception: " + raised[1].replace("\n", "\\n")) in err:
                self.counts["both_raise"] += 1
                return True
        self.counts["differ"] += 1
        self.failures.append((label, expected, raised, rc, got, err))
        return False


def main():
    tool, data_dir = sys.argv[1], sys.argv[2]
    only = sys.argv[3] if len(sys.argv) > 3 else None
    base = os.path.join(data_dir, "chat_templates")
    with open(os.path.join(base, "templates.json"), encoding="utf-8") as f:
        templates = json.load(f)
    with open(os.path.join(base, "conversations.json"), encoding="utf-8") as f:
        cases = json.load(f)
    with open(os.path.join(base, "snippets.json"), encoding="utf-8") as f:
        snippets = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        c = Comparison(tool, tmp)
        # Small templates, one construct each, on fixed variables.
        if not only:
            for i, source in enumerate(snippets["templates"]):
                path = os.path.join(tmp, "snippet.jinja")
                with open(path, "w", encoding="utf-8", newline="") as f:
                    f.write(source)
                c.compare(f"snippet {i}: {source[:60]!r}", path, source, snippets["variables"])
            print(f"snippets: {c.counts['same']} identical, {c.counts['both_raise']} raise in both", flush=True)
        # The real templates on the conversations.
        for t in templates:
            if only and only not in t["file"]:
                continue
            path = os.path.join(base, t["file"])
            with open(path, encoding="utf-8", newline="") as f:
                source = f.read()
            same = 0
            for case in cases:
                for agp in case.get("add_generation_prompt", [True, False]):
                    label = f"{t['file']} / {case['name']} / add_generation_prompt={agp}"
                    same += c.compare(label, path, source, variables(t, case, agp), batch=True)
            print(f"{t['file']}: {same} of the renderings agree", flush=True)
        c.close()
    shown = set()
    for label, expected, raised, rc, got, err in c.failures:
        if label.split(" / ")[0] in shown:
            continue
        shown.add(label.split(" / ")[0])
        print(f"\nDIFFERENT: {label}")
        if raised:
            print(f"  jinja2 raised {raised[0]}: {raised[1]}")
        else:
            print(f"  jinja2: {expected!r}")
        print(f"  ours (exit {rc}): {got!r} {err}")
    n = c.counts
    print(f"\n{n['same']} renderings identical, {n['both_raise']} raise in both, {n['differ']} differ")
    return 1 if n["differ"] else 0


if __name__ == "__main__":
    sys.exit(main())
