"""A torchvision transform given as a Loader's transform=, answered with
the stoker fields and ops that do the same (the daemon runs the ops, so a
Python callable cannot be sent): the text of the Loader arguments to
write instead, each op's parameters as the transform holds them, and a
note for what has no stoker op."""


def _size(size):
    """torchvision's size (int or (h, w) sequence) as (width, height)."""
    if isinstance(size, int):
        return size, size
    size = list(size)
    return (size[0], size[0]) if len(size) == 1 else (size[1], size[0])


def _pair(value):
    return None if value is None else f"({value[0]!r}, {value[1]!r})"


def _interpolation(t):
    """A resampling other than torchvision's default (bilinear)."""
    mode = getattr(getattr(t, "interpolation", None), "value", "bilinear")
    return None if mode == "bilinear" else repr(mode)


def _call(name, *args, **kwargs):
    parts = [repr(a) for a in args] + [f"{k}={v}" for k, v in kwargs.items() if v is not None]
    return f"stoker.{name}({', '.join(parts)})"


def _op(t, shape, notes):
    """The stoker op for one transform (None: it sets the field's dtype or
    layout), updating shape {"size": (w, h), "dtype", "chw"} and notes."""
    kind = type(t).__name__
    if kind == "RandomResizedCrop":
        shape["size"] = w, h = _size(t.size)
        return _call("random_resized_crop", w, h, scale=_pair(t.scale), ratio=_pair(t.ratio),
                     interpolation=_interpolation(t))
    if kind == "Resize":
        if isinstance(t.size, int) or len(t.size) == 1:
            side = t.size if isinstance(t.size, int) else t.size[0]
            return _call("resize", side, interpolation=_interpolation(t))
        shape["size"] = w, h = _size(t.size)
        return _call("resize", width=w, height=h, interpolation=_interpolation(t))
    if kind in ("CenterCrop", "RandomCrop"):
        shape["size"] = w, h = _size(t.size)
        if getattr(t, "padding", None):
            notes.append(f"RandomCrop's padding={t.padding!r} has no stoker op (pad the "
                         "pictures before, or use stoker.letterbox)")
        return _call("center_crop" if kind == "CenterCrop" else "random_crop", w, h)
    if kind in ("RandomHorizontalFlip", "RandomVerticalFlip"):
        return _call("flip", p=repr(t.p), vertical="True" if "Vertical" in kind else None)
    if kind == "ColorJitter":
        return _call("color_jitter", **{k: _pair(getattr(t, k))
                                        for k in ("brightness", "contrast", "saturation", "hue")})
    if kind == "RandomGrayscale":
        return _call("random_grayscale", p=repr(t.p))
    if kind == "RandomErasing":  # stoker's value is in levels 0..255, before normalize.
        values = t.value if isinstance(t.value, (list, tuple)) else [t.value]
        if any(isinstance(v, str) for v in values):
            notes.append("RandomErasing's value='random' has no stoker op")
            return None
        levels = [round(v * 255) if isinstance(v, float) and 0 <= v <= 1 else v for v in values]
        notes.append("stoker.random_erasing fills levels before normalize; torchvision's "
                     "after Normalize fills normalized values")
        return _call("random_erasing", p=repr(t.p), scale=_pair(t.scale), ratio=_pair(t.ratio),
                     value=None if levels == [0] else repr(levels))
    if kind == "Normalize":
        shape["dtype"] = "float32"
        return _call("normalize", [float(m) for m in t.mean], [float(s) for s in t.std])
    if kind == "ToTensor":
        shape.update(dtype="float32", chw=True)
        return None
    if kind in ("PILToTensor", "ToImage"):
        shape["chw"] = True
        return None
    if kind in ("ConvertImageDtype", "ToDtype"):
        dtype = t.dtype if not isinstance(t.dtype, dict) else next(iter(t.dtype.values()))
        shape["dtype"] = str(dtype).replace("torch.", "")
        return None
    notes.append(f"{kind} has no stoker op (stoker.op_defaults() lists those there are)")
    return None


def answer(transform):
    """The ValueError's text for a torchvision transform (a Compose or one
    transform)."""
    steps = list(getattr(transform, "transforms", [transform]))
    shape, notes = {"size": None, "dtype": "uint8", "chw": False}, []
    ops = [op for op in (_op(t, shape, notes) for t in steps) if op is not None]
    if shape["size"] is None:
        notes.append("no crop or size: give the picture's height and width")
        image = "stoker.image(HEIGHT, WIDTH"
    else:
        image = f"stoker.image({shape['size'][1]!r}, {shape['size'][0]!r}"
    image += "".join([f", dtype={shape['dtype']!r}" if shape["dtype"] != "uint8" else "",
                      ", chw=True" if shape["chw"] else "", ")"])
    text = (f"transform= takes a preset, \"train\" or \"val\", or give fields= and pipeline=: "
            f"the daemon runs the ops, so a torchvision {type(transform).__name__} cannot be "
            f"sent. It reads as:\n    fields=[{image}, stoker.label()],\n    pipeline=["
            + ",\n              ".join(ops) + "]")
    return text + "".join(f"\n  ({n})" for n in notes)
