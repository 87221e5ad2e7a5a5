"""The tensors of a safetensors file, read one at a time with plain reads (no mapping)."""
from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path

import torch


class StoredTensors(Mapping):
    """The tensors of a safetensors file, each read when asked for, with plain reads.

    A model's layers are filled one at a time, so the file is never in memory beside them; and
    reads, unlike the mapping safetensors' own loader makes, leave no file pages in the process's
    resident memory (the 0.5B's int8 file is 470 MB: a third of its peak).
    """

    def __init__(self, path: Path):
        self.file = open(path, "rb")  # noqa: SIM115  (closed on leaving a `with`)
        try:
            self._read_header(path)
        except BaseException:
            self.file.close()
            raise

    def _read_header(self, path: Path) -> None:
        size = int.from_bytes(self.file.read(8), "little")
        header = json.loads(self.file.read(size))
        self.metadata: dict[str, str] = header.pop("__metadata__", None) or {}
        self.entries: dict[str, dict] = header
        self.data_start = 8 + size
        # Checked before a layer is filled: a file cut short fails here, not halfway through a model.
        length = path.stat().st_size - self.data_start
        for name, entry in self.entries.items():
            begin, end = entry["data_offsets"]
            count = math.prod(entry["shape"]) * SAFETENSORS_DTYPES[entry["dtype"]].itemsize
            if not 0 <= begin <= end <= length or end - begin != count:
                raise ValueError(f"{name} does not fit its place in the file")

    def shapes(self) -> dict[str, tuple[tuple[int, ...], torch.dtype | None]]:
        return {name: (tuple(entry["shape"]), SAFETENSORS_DTYPES.get(entry["dtype"]))
                for name, entry in self.entries.items()}

    def __getitem__(self, name: str) -> torch.Tensor:
        entry = self.entries[name]
        begin, end = entry["data_offsets"]
        tensor = torch.empty(entry["shape"], dtype=SAFETENSORS_DTYPES[entry["dtype"]])
        self.file.seek(self.data_start + begin)
        if self.file.readinto(tensor.view(-1).view(torch.uint8).numpy().data) != end - begin:
            raise OSError(f"the file ends inside {name}")
        return tensor

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __enter__(self) -> StoredTensors:
        return self

    def __exit__(self, *exc_info) -> None:
        self.file.close()


SAFETENSORS_DTYPES = {"I8": torch.int8, "F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
