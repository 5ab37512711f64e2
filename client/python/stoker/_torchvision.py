"""A torchvision transform given as a Loader's transform=, answered with
the stoker fields and ops that do the same (the daemon runs the ops, so a
Python callable cannot be sent): the text of the Loader arguments to
write instead, each op's parameters as the transform holds them."""


def _size(size):
    """torchvision's size (int or (h, w) sequence) as (width, height)."""
    if isinstance(size, int):
        return size, size
    size = list(size)
    return (size[0], size[0]) if len(size) == 1 else (size[1], size[0])


def _pair(value):
    return None if value is None else f"({value[0]!r}, {value[1]!r})"


def _call(name, *args, **kwargs):
    parts = [repr(a) for a in args] + [f"{k}={v}" for k, v in kwargs.items() if v is not None]
    return f"stoker.{name}({', '.join(parts)})"


def _op(t, shape):
    """The stoker op for one transform (None: it makes the field's dtype or
    layout), updating shape: {"size": (w, h), "dtype": ..., "chw": ...}."""
    kind = type(t).__name__
    if kind == "RandomResizedCrop":
        shape["size"] = w, h = _size(t.size)
        return _call("random_resized_crop", w, h, scale=_pair(t.scale), ratio=_pair(t.ratio))
    if kind == "Resize":
        if isinstance(t.size, int) or len(t.size) == 1:
            side = t.size if isinstance(t.size, int) else t.size[0]
            return _call("resize", side)
        shape["size"] = w, h = _size(t.size)
        return _call("resize", width=w, height=h)
    if kind in ("CenterCrop", "RandomCrop"):
        shape["size"] = w, h = _size(t.size)
        return _call("center_crop" if kind == "CenterCrop" else "random_crop", w, h)
    if kind in ("RandomHorizontalFlip", "RandomVerticalFlip"):
        return _call("flip", p=repr(t.p), vertical="True" if "Vertical" in kind else None)
    if kind == "ColorJitter":
        return _call("color_jitter", **{k: _pair(getattr(t, k))
                                        for k in ("brightness", "contrast", "saturation", "hue")})
    if kind == "RandomGrayscale":
        return _call("random_grayscale", p=repr(t.p))
    if kind == "RandomErasing":  # stoker's value is in levels 0..255.
        values = t.value if isinstance(t.value, (list, tuple)) else [t.value]
        levels = [round(v * 255) if isinstance(v, float) and 0 <= v <= 1 else v for v in values]
        return _call("random_erasing", p=repr(t.p), scale=_pair(t.scale), ratio=_pair(t.ratio),
                     value=None if levels == [0] else repr(levels))
    if kind == "Normalize":
        shape["dtype"] = "float32"
        return _call("normalize", [float(m) for m in t.mean], [float(s) for s in t.std])
    if kind == "ToTensor":
        shape.update(dtype="float32", chw=True)
        return None
    if kind == "PILToTensor":
        shape["chw"] = True
        return None
    if kind == "ConvertImageDtype":
        shape["dtype"] = str(t.dtype).replace("torch.", "")
        return None
    return f"<{kind}: no stoker op; see stoker.op_defaults() for those there are>"


def answer(transform):
    """The ValueError's text for a torchvision transform (a Compose or one
    transform)."""
    steps = list(getattr(transform, "transforms", [transform]))
    shape = {"size": None, "dtype": "uint8", "chw": False}
    ops = [op for op in (_op(t, shape) for t in steps) if op is not None]
    w, h = shape["size"] or ("W", "H")
    image = _call("image", h, w, dtype=repr(shape["dtype"]),
                  chw="True" if shape["chw"] else None)
    return (f"transform= takes a preset, \"train\" or \"val\", or give fields= and pipeline=: "
            f"the daemon runs the ops, so a torchvision {type(transform).__name__} cannot be "
            f"sent. It reads as:\n    fields=[{image}, stoker.label()],\n    pipeline=["
            + ",\n              ".join(ops) + "]")
