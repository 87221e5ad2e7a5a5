"""Module structure: no import circles, layers that hold (front ends, edits and engines never load
the decoding core when imported; the engines never reach up into the service), one home for
reading the model's answer, the edit core's rooms (checks below the snippet merge, nothing of the
edit core importing a front end), and the remote engine and CLI work without torch."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("rewriter", "lsp", "drafters")


def project_modules() -> dict[str, Path]:
    """Dotted name -> file of every module in the project's packages. Only directories with an
    __init__.py count: lsp/editors/vscode/node_modules holds Python files (node-gyp) too."""
    modules = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            folders = path.parent.relative_to(ROOT).parts
            if not all((ROOT.joinpath(*folders[:depth]) / "__init__.py").exists() for depth in range(1, len(folders) + 1)):
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def import_graph() -> dict[str, set[str]]:
    """Project module -> project modules it imports, at the top or inside functions."""
    modules = project_modules()
    graph = {}
    for name, path in modules.items():
        # the package a relative import starts from: the module's own for an __init__
        home = name.split(".") if path.stem == "__init__" else name.split(".")[:-1]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(home[: len(home) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                for alias in node.names:
                    target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                    if target in modules:
                        found.add(target)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names if alias.name in modules)
        found.discard(name)
        graph[name] = found
    return graph


def test_the_graph_sees_imports_inside_functions():
    graph = import_graph()
    assert "rewriter.apply.batch" in graph["rewriter.cli"]  # cmd_apply imports it lazily
    assert "rewriter.results" in graph["rewriter.apply.runner"]  # `from ..results import`
    assert "rewriter.edits.session" in graph["rewriter.serve.backend"]
    assert "lsp.editor_rewrite" in graph["lsp.server"]


def test_no_module_imports_itself_through_others():
    graph = import_graph()
    circles = []

    def visit(name: str, path: list[str]) -> None:
        for target in sorted(graph[name]):
            if target == path[0]:
                circles.append(" -> ".join(path + [target]))
            elif target not in path and target > path[0]:  # each circle once, from its least module
                visit(target, path + [target])

    for start in sorted(graph):
        visit(start, [start])
    assert circles == []


NO_TORCH = "import sys\nsys.modules['torch'] = None  # `import torch` now raises ImportError\n"

SERVICE = """
import json, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Service(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        self._send(200, "application/json", json.dumps({"object": "rewriter.service"}))

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        new = body["text"].replace("total = 0", "total: int = 0")
        events = [("delta", {"text": "```python\\n"}),
                  ("stats", {"output_tokens": 7, "accepted_prediction_tokens": 5}),
                  ("result", {"text": new, "answer": "```python\\n" + new + "```\\n",
                              "stats": {"output_tokens": 9, "accepted_prediction_tokens": 6}})]
        self._send(200, "text/event-stream",
                   "".join(f"event: {name}\\ndata: {json.dumps(data)}\\n\\n" for name, data in events))

    def _send(self, status, kind, text):
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

httpd = ThreadingHTTPServer(("127.0.0.1", 0), Service)
threading.Thread(target=httpd.serve_forever, daemon=True).start()
URL = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
"""


def run_without_torch(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    script = tmp_path / "no_torch.py"
    script.write_text(NO_TORCH + SERVICE + textwrap.dedent(code))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_the_remote_engine_rewrites_without_torch(tmp_path):
    done = run_without_torch("""
        from rewriter.remote import RemoteRewriter
        from tests.helpers.engines import rewrite_with
        result = rewrite_with(RemoteRewriter(URL), "total = 0\\n", "Add type hints", "python")
        print(json.dumps({"text": result.text, "accepted": result.stats.accepted_prediction_tokens,
                          "torch": "torch" in sys.modules and sys.modules["torch"] is not None}))
    """, tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"text": "total: int = 0\n", "accepted": 6, "torch": False}


def test_apply_with_an_endpoint_and_the_language_server_need_no_torch(tmp_path):
    (tmp_path / "sums.py").write_text("total = 0\nfor x in range(3):\n    total += x\n")
    done = run_without_torch("""
        import lsp.server  # the language server with a remote engine
        from rewriter.cli import main
        code = main(["apply", "sums.py", "-i", "Add type hints", "--endpoint", URL, "--write", "-q"])
        print(json.dumps({"code": code, "torch": sys.modules.get("torch") is not None}))
    """, tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"code": 0, "torch": False}
    assert (tmp_path / "sums.py").read_text().startswith("total: int = 0\n")


def test_result_types_keep_their_old_homes():
    from rewriter import remote, results
    from rewriter.decoding import decode, rewrite
    from rewriter.weights import models

    assert decode.Stats is results.Stats and remote.Stats is results.Stats
    assert (rewrite.RewriteResult, rewrite.Progress, rewrite.RewriteError) == (
        results.RewriteResult, results.Progress, results.RewriteError)
    assert models.ModelError is results.ModelError


# ---- layers ---------------------------------------------------------------------------------

CORE = ("rewriter.decoding", "torch", "transformers")  # the decoding core and what it loads
# The engines' layer, below the front ends: the vocabulary every engine shares, the engine factory
# (local engines load the core when built) and the engine that asks a running service.
ENGINES = ("rewriter.engine", "rewriter.prompt", "rewriter.answer", "rewriter.results", "rewriter.engine_factory",
           "rewriter.remote")
FRONT_ENDS_AND_EDITS = ("lsp", "rewriter.serve", "rewriter.cli", "rewriter.cli_arguments", "rewriter.apply",
                        "rewriter.edits", "rewriter.bench.command", "rewriter.bench.cases",
                        "rewriter.bench.endpoint_bench")  # `bench --endpoint`
# The HTTP service serves a model it loads itself: its backend (and the app that makes one) are the
# front-end modules that hold the core. Nothing torch-free may import them at module level (the
# check below follows imports through them); its request parsing is torch-free.
MODEL_OWNERS = {"rewriter.serve.app", "rewriter.serve.backend"}


def _in(name: str, prefixes) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports_run(statements: list[ast.stmt], home: list[str], modules: set[str]) -> set[str]:
    """What these statements import when they run: inside ifs and trys too, not inside functions,
    not under `if TYPE_CHECKING:`; third-party names included."""
    found = set()
    for node in statements:
        if isinstance(node, ast.If) and not _type_checking_only(node):
            found |= _imports_run(node.body + node.orelse, home, modules)
        elif isinstance(node, ast.Try):
            handlers = [statement for handler in node.handlers for statement in handler.body]
            found |= _imports_run(node.body + node.orelse + node.finalbody + handlers, home, modules)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(home[: len(home) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules)
    return found


def module_level_imports() -> dict[str, set[str]]:
    """Module -> every module importing it imports (see _imports_run)."""
    files = project_modules()
    imports = {}
    for name, path in files.items():
        home = name.split(".") if path.stem == "__init__" else name.split(".")[:-1]
        found = _imports_run(ast.parse(path.read_text()).body, home, set(files))
        imports[name] = _with_parent_packages(found) - {name}
    return imports


def _with_parent_packages(modules: set[str]) -> set[str]:
    """`modules` and their packages: importing a.b.c runs a/__init__ and a/b/__init__ first."""
    found = set(modules)
    for module in modules:
        parts = module.split(".")
        found.update(".".join(parts[:i]) for i in range(1, len(parts)))
    return found


def _running_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """`node` and every node under it but those under `if TYPE_CHECKING:` (never run)."""
    yield node
    children = node.orelse if isinstance(node, ast.If) and _type_checking_only(node) else ast.iter_child_nodes(node)
    for child in children:
        yield from _running_nodes(child)


def runtime_imports() -> dict[str, set[str]]:
    """Module -> every module it imports when it runs: at the top or inside functions, not for
    types only (see _imports_run)."""
    files = project_modules()
    imports = {}
    for name, path in files.items():
        home = name.split(".") if path.stem == "__init__" else name.split(".")[:-1]
        statements = [node for node in _running_nodes(ast.parse(path.read_text()))
                      if isinstance(node, ast.Import | ast.ImportFrom)]
        imports[name] = _with_parent_packages(_imports_run(statements, home, set(files))) - {name}
    return imports


def core_reached(imports: dict[str, set[str]], start: str) -> list[str]:
    """The import chain from `start` to the decoding core at import time, or [] when there is none."""
    return import_chain(imports, start, CORE)


def import_chain(imports: dict[str, set[str]], start: str, into: tuple[str, ...]) -> list[str]:
    """The shortest import chain from `start` into any of the packages `into`, or [] when there is none."""
    seen, queue = {start}, [[start]]
    while queue:
        chain = queue.pop(0)
        for target in sorted(imports.get(chain[-1], ())):
            if _in(target, into):
                return chain + [target]
            if target in imports and target not in seen:
                seen.add(target)
                queue.append(chain + [target])
    return []


def test_the_layer_check_sees_a_chain_through_other_modules():
    imports = module_level_imports()
    assert core_reached(imports, "rewriter.serve.backend")[-1].startswith(("rewriter.decoding", "torch"))
    assert "rewriter.edits.scopes" in imports["rewriter.edits.checks.integrity"]
    assert "rewriter.weights.models" not in imports["rewriter.cli"]  # imported inside a function
    assert "rewriter.decoding.rewrite" not in imports["rewriter.engine_factory"]  # only under TYPE_CHECKING
    fake = {**imports, "lsp.fake": {"rewriter.edits.checks.integrity"}, "rewriter.edits.checks.integrity": {"rewriter.decoding.x"}}
    assert core_reached(fake, "lsp.fake") == ["lsp.fake", "rewriter.edits.checks.integrity", "rewriter.decoding.x"]


def test_front_ends_edits_and_engines_never_import_the_decoding_core_at_module_level():
    imports = module_level_imports()
    checked = [name for name in imports if _in(name, FRONT_ENDS_AND_EDITS + ENGINES) and name not in MODEL_OWNERS]
    assert "lsp.server" in checked and "rewriter.apply.batch" in checked and "rewriter.remote" in checked
    assert "rewriter.answer" in checked and "rewriter.engine_factory" in checked
    assert "rewriter.bench.endpoint_bench" in checked
    chains = {name: " -> ".join(chain) for name in checked if (chain := core_reached(imports, name))}
    assert chains == {}


def test_the_decoding_loop_never_imports_the_weights():
    # The weights side hands the loop what it knows (LoadedModel.pass_costs()); never the reverse.
    imports = runtime_imports()
    assert "drafters.draft_model" in imports["rewriter.decoding.sampling"]  # imported inside a function
    assert "rewriter.weights.models" not in imports["rewriter.decoding.rewrite"]  # only under TYPE_CHECKING
    decoding = [name for name in imports if _in(name, ("rewriter.decoding",))]
    assert "rewriter.decoding.decode" in decoding
    chains = {name: " -> ".join(chain) for name in decoding
              if (chain := import_chain(imports, name, ("rewriter.weights",)))}
    assert chains == {}


# Lower layers that never reach into higher ones, by any import (inside functions and for types
# too): the weights and the decoding loop are peers, the drafters sit below both; the engines
# (a local one, or the remote one asking a running service) sit below the service that serves
# them; the prompt is built before any answer is read. The edit core sits below every front end
# (`rewriter apply`'s files and diffs are its own, in rewriter/apply/); inside it, the checks an
# edit must pass sit below the pipeline and session that run them and below the snippet merge,
# which may import them.
FRONT_ENDS = ("rewriter.apply", "rewriter.serve", "rewriter.cli", "rewriter.cli_arguments", "rewriter.bench", "lsp")
LOWER_NEVER_IMPORTS_HIGHER = {"rewriter.weights": ("rewriter.decoding",),
                              "drafters": ("rewriter.decoding", "rewriter.weights"),
                              **{module: ("rewriter.serve",) for module in ENGINES},
                              "rewriter.prompt": ("rewriter.serve", "rewriter.answer"),  # ENGINES' entry, and more
                              "rewriter.edits": FRONT_ENDS,
                              "rewriter.edits.checks": ("rewriter.edits.snippets", "rewriter.edits.pipeline",
                                                        "rewriter.edits.session", *FRONT_ENDS)}


def layer_breaches(graph: dict[str, set[str]]) -> dict[str, str]:
    """Module -> its import chain into a layer above it (LOWER_NEVER_IMPORTS_HIGHER)."""
    breaches = {}
    for lower, higher in LOWER_NEVER_IMPORTS_HIGHER.items():
        for name in sorted(module for module in graph if _in(module, (lower,))):
            if chain := import_chain(graph, name, higher):
                breaches[name] = " -> ".join(chain)
    return breaches


def test_the_layer_breach_check_sees_imports_up_through_other_modules():
    graph = import_graph()
    assert "rewriter.passes" in graph["rewriter.weights.attention"]
    assert "rewriter.lookahead" in graph["drafters.vllm_proposer"]
    fake = {**graph, "rewriter.weights.quantize": graph["rewriter.weights.quantize"] | {"rewriter.fake"},
            "rewriter.fake": {"rewriter.decoding.passes"},
            "drafters.base": graph["drafters.base"] | {"rewriter.weights.models"}}
    breaches = layer_breaches(fake)
    assert breaches["rewriter.weights.quantize"] == "rewriter.weights.quantize -> rewriter.fake -> rewriter.decoding.passes"
    assert breaches["drafters.base"] == "drafters.base -> rewriter.weights.models"
    up = {**graph, "rewriter.engine_factory": graph["rewriter.engine_factory"] | {"rewriter.fake"},
          "rewriter.fake": {"rewriter.serve.app"}, "rewriter.prompt": graph["rewriter.prompt"] | {"rewriter.answer"}}
    breaches = layer_breaches(up)
    assert breaches["rewriter.engine_factory"] == "rewriter.engine_factory -> rewriter.fake -> rewriter.serve.app"
    assert breaches["rewriter.prompt"] == "rewriter.prompt -> rewriter.answer"
    # the edit core's rooms: the snippet merge may import the checks, never the reverse
    assert "rewriter.edits.checks.integrity" in graph["rewriter.edits.snippets.merge"]
    assert "rewriter.edits.snippets.merge" not in layer_breaches(graph)
    rooms = {**graph, "rewriter.edits.checks.lint": graph["rewriter.edits.checks.lint"] | {"rewriter.fake"},
             "rewriter.fake": {"rewriter.edits.snippets.lines"},
             "rewriter.edits.checks.syntax": graph["rewriter.edits.checks.syntax"] | {"rewriter.edits.pipeline"},
             "rewriter.edits.hunks": graph["rewriter.edits.hunks"] | {"rewriter.apply.diffs"}}
    breaches = layer_breaches(rooms)
    assert breaches["rewriter.edits.checks.lint"] == (
        "rewriter.edits.checks.lint -> rewriter.fake -> rewriter.edits.snippets.lines")
    assert breaches["rewriter.edits.checks.syntax"] == "rewriter.edits.checks.syntax -> rewriter.edits.pipeline"
    assert breaches["rewriter.edits.hunks"] == "rewriter.edits.hunks -> rewriter.apply.diffs"


def test_lower_layers_never_import_higher_ones():
    # What both need (pass widths, priors, the window policy) lives below them: rewriter/passes.py
    # and rewriter/lookahead.py. What the edit checks need (tree-sitter's scopes) lives below them
    # in rewriter/edits/.
    assert layer_breaches(import_graph()) == {}


# Reading the model's answer (its code, its closing fence, its echo of the file) has one home,
# rewriter/answer.py; rewriter/prompt.py builds what is asked, and the layer rule above keeps it
# from importing answer.py (so from handing these on, too).
ANSWER_READING = ("extract_code", "NoCodeBlock", "closing_fence_end", "echo_scan", "EchoScan")


def defined_at_top(text: str) -> set[str]:
    """The names a module's own top-level statements define (functions, classes, assignments)."""
    names = set()
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(target.id for target in targets if isinstance(target, ast.Name))
    return names


def test_the_answer_is_read_in_answer_py_alone():
    assert defined_at_top("class A:\n    x = 1\ndef f():\n    y = 2\nZ: int = 3\n") == {"A", "f", "Z"}
    modules = {name: defined_at_top(path.read_text()) for name, path in project_modules().items()}
    homes = {reader: sorted(name for name, defined in modules.items() if reader in defined) for reader in ANSWER_READING}
    assert homes == {reader: ["rewriter.answer"] for reader in ANSWER_READING}


def test_test_modules_share_code_through_helpers_not_through_each_other():
    borrowed = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [alias.name for alias in node.names] if isinstance(node, ast.Import) else [])
            for name in names:
                if name.split(".")[-1].startswith("test_") or name.split(".")[-1] == "conftest":
                    borrowed.append(f"{path.relative_to(ROOT)} imports {name}")
    assert borrowed == []


# ---- sizes ----------------------------------------------------------------------------------

MAX_MODULE_LINES = 500  # a module a reader takes in at one sitting
MAX_FUNCTION_LINES = 80  # a function that fits on a screen and a half


def oversized(sources: dict[str, str]) -> list[str]:
    """Modules over MAX_MODULE_LINES and functions over MAX_FUNCTION_LINES, named."""
    found = []
    for name, text in sorted(sources.items()):
        if (lines := text.count("\n")) > MAX_MODULE_LINES:
            found.append(f"{name}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{name}.{node.name}: {length} lines")
    return found


def test_the_size_check_sees_long_modules_and_functions():
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    assert oversized({"m": f"def f():\n{body}"}) == [f"m.f: {MAX_FUNCTION_LINES + 1} lines"]
    assert oversized({"m": "x = 1\n" * (MAX_MODULE_LINES + 1)}) == [f"m: {MAX_MODULE_LINES + 1} lines"]
    at_the_limit = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES - 1))
    module = "x = 1\n" * (MAX_MODULE_LINES - MAX_FUNCTION_LINES) + f"def f():\n{at_the_limit}"
    assert oversized({"m": module}) == []


def test_no_module_or_function_is_too_long_to_read():
    assert oversized({name: path.read_text() for name, path in project_modules().items()}) == []
