"""The tensors of a safetensors file, read one at a time with plain reads or mapped, and
written one at a time."""
from __future__ import annotations

import json
import math
import mmap
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import torch


class StoredTensors(Mapping):
    """The tensors of a safetensors file, each read when asked for, with plain reads, or mapped
    (`mapped`) where each is used once and let go (`release`).

    A model's layers are filled one at a time, so the file is never in memory beside them; and
    reads, unlike the mapping safetensors' own loader makes, leave no file pages in the process's
    resident memory (the 0.5B's int8 file is 470 MB: a third of its peak).
    """

    def __init__(self, path: Path):
        self.file = open(path, "rb")  # noqa: SIM115  (closed on leaving a `with`)
        self._map: mmap.mmap | None = None
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

    def mapped(self, name: str) -> torch.Tensor:
        """The tensor `name` on the file's own pages (copy-on-write): no copy, and no freshly
        zeroed memory, which reading 1.5 GB cost about 0.8 s of system time; `release` lets the
        pages go once they are used."""
        if self._map is None:
            self._map = mmap.mmap(self.file.fileno(), 0, access=mmap.ACCESS_COPY)
        entry = self.entries[name]
        begin, end = entry["data_offsets"]
        dtype = SAFETENSORS_DTYPES[entry["dtype"]]
        if begin == end:
            return torch.empty(entry["shape"], dtype=dtype)
        flat = torch.frombuffer(self._map, dtype=dtype, count=(end - begin) // dtype.itemsize,
                                offset=self.data_start + begin)
        return flat.view(entry["shape"])

    def release(self, name: str) -> None:
        """Drop the mapped pages that only `name` covers from this process's memory (the file's
        pages stay in the system's cache): mapped tensors used once do not add up in its RSS."""
        if self._map is None or not hasattr(mmap, "MADV_DONTNEED"):
            return
        begin, end = (self.data_start + offset for offset in self.entries[name]["data_offsets"])
        first = -(-begin // mmap.PAGESIZE) * mmap.PAGESIZE
        last = end // mmap.PAGESIZE * mmap.PAGESIZE
        if last > first:
            self._map.madvise(mmap.MADV_DONTNEED, first, last - first)

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __enter__(self) -> StoredTensors:
        return self

    def __exit__(self, *exc_info) -> None:
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:  # mapped tensors still held: the mapping goes with the last of them
                pass
        self.file.close()


SAFETENSORS_DTYPES = {"I8": torch.int8, "F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}


def write_tensors(path: Path, shapes: Mapping[str, tuple[tuple[int, ...], torch.dtype]],
                  tensors: Iterable[tuple[str, torch.Tensor]], metadata: dict[str, str]) -> None:
    """A safetensors file of `tensors`, each written as it comes, so that they are never all in
    memory at once (safetensors' own save_file copies every one to bytes first: the 1.5B's int8
    weights twice over, beside the model). `shapes` says what comes, in that order: the header
    goes first. ValueError where a tensor is not what `shapes` says."""
    names = {dtype: name for name, dtype in SAFETENSORS_DTYPES.items()}
    header: dict[str, object] = {"__metadata__": metadata}
    offset = 0
    for name, (shape, dtype) in shapes.items():
        size = math.prod(shape) * dtype.itemsize
        header[name] = {"dtype": names[dtype], "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the data starts 8-byte aligned, as safetensors writes it
    with open(path, "wb") as file:
        file.write(len(encoded).to_bytes(8, "little") + encoded)
        for (name, tensor), (expected, (shape, dtype)) in zip(tensors, shapes.items(), strict=True):
            if name != expected or tuple(tensor.shape) != shape or tensor.dtype != dtype:
                raise ValueError(f"{name} {tuple(tensor.shape)} {tensor.dtype} comes where {expected} {shape} "
                                 f"{dtype} was written")
            file.write(tensor.detach().contiguous().reshape(-1).view(torch.uint8).numpy().data)
