"""Steps of a pipeline that cuts JPEGs for the trainer's GPU decoder
(``transform=imagenet-train-gpu``, docs/transform.md §13), finished on the
trainer's device.

The gateway sends each JPEG cut losslessly to the part of the image the
sample's crop needs (``<key>.cut``) and what is left to do
(``<key>.cut.json``: ``{"box":[x,y,w,h],"flip":false,"size":[H,W]}``, the
box in the cut image's pixels), or, for an image it does not cut (a PNG,
a CMYK JPEG), ``imagenet-train``'s tensor (``<key>.npy``). In a DataLoader
worker :func:`cut_batch` gathers a step's cuts into one
:class:`CutBatch` (the JPEGs end to end in one tensor, so the step
crosses to the trainer as one buffer); in the trainer's process
:func:`finish` decodes them in one call on the device
(``torchvision.io.decode_jpeg(..., device="cuda")``, nvJPEG, where torch
≥ 2 and CUDA are present; torchvision's CPU decoder, image by image,
elsewhere), crops each residual box, resizes it to the output size
(bilinear, antialiased) and flips it, and stacks the step into the
:class:`TensorBatch` :class:`brand.Tensors` gives.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Union

import torch
from torch.utils.data import get_worker_info

from ._batches import TensorBatch, _label
from ._shm import worker_blocks

__all__ = ["CutBatch", "cut_batch", "finish"]


class CutBatch(NamedTuple):
    """A step of cut JPEGs, as a worker hands it to the trainer: what
    :func:`finish` makes a :class:`TensorBatch` of.

    Attributes:
        data: ``torch.uint8`` ``(N,)``: the step's cut JPEGs end to end.
        offsets: ``torch.int64`` ``(B + 1,)``: sample ``i``'s JPEG is
            ``data[offsets[i]:offsets[i + 1]]``, empty where the gateway
            sent the tensor.
        boxes: ``torch.int32`` ``(B, 4)``: each crop's x, y, width and
            height in its cut image (zeros for a tensor).
        flips: ``torch.bool`` ``(B,)``: mirror the resized crop.
        size: the output's height and width.
        tensors: the images the gateway sent as tensors (``(3, H, W)``
            uint8, imagenet-train's), by position in the step.
        labels, keys, fields: as :class:`TensorBatch`'s.
    """

    data: torch.Tensor
    offsets: torch.Tensor
    boxes: torch.Tensor
    flips: torch.Tensor
    size: Tuple[int, int]
    tensors: Dict[int, torch.Tensor]
    labels: torch.Tensor
    keys: List[str]
    fields: Dict[str, List[Any]]


def _box(v: Any) -> Dict[str, Any]:
    if isinstance(v, dict):
        return v
    return json.loads(bytes(v))


def cut_batch(samples: List[Dict[str, Any]]) -> CutBatch:
    """The :class:`CutBatch` of a step's samples (dicts of members, a
    ``cut`` and ``cut.json`` or an ``npy`` each): the collate of
    :class:`brand.GPUTensors`, run in the DataLoader worker. In a worker
    the JPEGs are gathered into one of its shared blocks.

    Raises:
        ValueError: a sample with neither a cut nor a tensor (a pipeline
            that does not cut, or a dataset without images), or outputs
            of different sizes in one step.
    """
    if not samples:
        raise ValueError("brand.GPUTensors: an empty step")
    n = len(samples)
    offsets = [0] * (n + 1)
    boxes = [[0, 0, 0, 0] for _ in range(n)]
    flips = [False] * n
    tensors: Dict[int, torch.Tensor] = {}
    size: Optional[Tuple[int, int]] = None
    cuts: List[Any] = []
    for i, s in enumerate(samples):
        cut = s.get("cut")
        if cut is not None:
            b = _box(s["cut.json"])
            boxes[i] = [int(v) for v in b["box"]]
            flips[i] = bool(b["flip"])
            got = (int(b["size"][0]), int(b["size"][1]))
            cuts.append(cut)
            offsets[i + 1] = offsets[i] + len(cut)
        elif isinstance(s.get("npy"), torch.Tensor):
            t = s["npy"]
            tensors[i] = t
            got = (int(t.shape[-2]), int(t.shape[-1]))
            offsets[i + 1] = offsets[i]
        else:
            raise ValueError(f"brand.GPUTensors: sample {s.get('__key__', '?')!r} has neither a cut JPEG nor a tensor "
                             f"(members {sorted(s)}): the job's pipeline does not cut for the GPU "
                             "(transform=imagenet-train-gpu does), or the sample has no image")
        if size is None:
            size = got
        elif got != size:
            raise ValueError(f"brand.GPUTensors: outputs of {size} and {got} in one step")
    total = offsets[-1]
    blocks = worker_blocks() if total and get_worker_info() is not None else None
    data = blocks.take(total, (total,)) if blocks is not None else None
    if data is None:
        data = torch.empty((total,), dtype=torch.uint8)
    if total:
        flat = data.numpy()
        at = 0
        for c in cuts:
            flat[at:at + len(c)] = memoryview(c).cast("B")
            at += len(c)
    labels = torch.tensor([_label(s.get("cls")) for s in samples], dtype=torch.int64)
    own = ("cut", "cut.json", "npy", "__key__", "cls")
    fields = {k: [s.get(k) for s in samples] for k in samples[0] if k not in own}
    assert size is not None
    return CutBatch(data, torch.tensor(offsets, dtype=torch.int64), torch.tensor(boxes, dtype=torch.int32),
                    torch.tensor(flips, dtype=torch.bool), size, tensors, labels,
                    [s.get("__key__", "") for s in samples], fields)


def _batched_cuda() -> bool:
    """Whether torchvision's decode_jpeg takes a list on CUDA in one call
    (torch ≥ 2, a CUDA device)."""
    return int(torch.__version__.split(".")[0]) >= 2 and torch.cuda.is_available()


def decode(jpegs: List[torch.Tensor], device: torch.device) -> List[torch.Tensor]:
    """``jpegs`` (uint8 tensors of JPEG bytes, on the CPU) decoded to RGB
    ``(3, h, w)`` uint8 tensors on ``device``: in one call by nvJPEG on a
    CUDA device where torchvision takes a list, else one by one."""
    from torchvision.io import ImageReadMode, decode_jpeg

    if not jpegs:
        return []
    if device.type == "cuda" and _batched_cuda():
        try:
            return list(decode_jpeg(jpegs, mode=ImageReadMode.RGB, device=device))
        except (TypeError, RuntimeError):  # a torchvision that takes one tensor at a time (a bad JPEG fails below)
            return [decode_jpeg(j, mode=ImageReadMode.RGB, device=device) for j in jpegs]
    out = [decode_jpeg(j, mode=ImageReadMode.RGB) for j in jpegs]
    return out if device.type == "cpu" else [t.to(device, non_blocking=True) for t in out]


def finish(step: Union[CutBatch, TensorBatch], device: Any = None) -> TensorBatch:
    """The :class:`TensorBatch` of a step of cut JPEGs, made on ``device``
    (``None``: CUDA where there is one, else the CPU): every JPEG decoded
    in one call (:func:`decode`), each crop cut from its image, resized to
    the step's size by torchvision's bilinear resize with
    ``antialias=True`` and mirrored where told; an image the gateway sent
    as a tensor is taken as it is. A :class:`TensorBatch` is returned
    unchanged. The pixels are imagenet-train's within the bound
    docs/transform.md §13 states; the boxes and flips are imagenet-train's
    exactly."""
    if isinstance(step, TensorBatch):
        return step
    from torchvision.transforms.functional import InterpolationMode, resize

    dev = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
    n = len(step.keys) if step.keys else int(step.offsets.numel()) - 1
    offs = step.offsets.tolist()
    which = [i for i in range(n) if i not in step.tensors]
    images = decode([step.data[offs[i]:offs[i + 1]] for i in which], dev)
    h, w = step.size
    out = torch.empty((n, 3, h, w), dtype=torch.uint8, device=dev)
    boxes = step.boxes.tolist()
    for i, img in zip(which, images):
        x, y, bw, bh = boxes[i]
        crop = img[:, y:y + bh, x:x + bw]
        if (bh, bw) != (h, w):
            crop = resize(crop, [h, w], interpolation=InterpolationMode.BILINEAR, antialias=True)
        out[i] = crop
    # Mirrored in one call (a tensor's flip is False: the gateway's own).
    flipped = step.flips.nonzero().flatten()
    if flipped.numel():
        flipped = flipped.to(dev)
        out[flipped] = out[flipped].flip(-1)
    for i, t in step.tensors.items():
        out[i] = t.to(dev)
    return TensorBatch(out, step.labels, step.keys, step.fields)
