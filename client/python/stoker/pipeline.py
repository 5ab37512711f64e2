"""The fields of a batch and the ops of a pipeline, for stoker.Loader.

Each helper returns the dict the daemon's spec takes (stoker.v1.FieldSpec and
stoker.v1.Op in protobuf's JSON mapping, proto/spec.proto and ops.proto), so a dict
written by hand works the same. The daemon checks them when the session
opens and names the op and field of any mistake.

    fields = [stoker.image(384, 384), stoker.mask(384, 384, file=1),
              stoker.label()]
    pipeline = [stoker.random_crop(384, 384), stoker.flip()]

Geometry ops draw their randomness once per sample (from seed, epoch and
sample index) and apply it to every image and mask they name (`fields`,
default all), so a mask stays aligned with its image. Consecutive ops are
composed and each field is resampled once from its source pixels.
"""


def _field(kind, name, dtype, shape, **extra):
    spec = {"name": name, "kind": kind, "dtype": dtype,
            "shape": [int(d) for d in shape]}
    spec.update({k: v for k, v in extra.items() if v})
    return spec


def image(height, width, channels=3, name="image", dtype="uint8", chw=False,
          file=0):
    """A picture decoded from the sample's file `file` (JPEG or PNG, by
    content): [height, width, channels] (channels 1, 3 or 4), or
    [channels, height, width] with chw. uint8 0..255, or a float dtype
    (float32, float16, bfloat16) as x/255 (or normalized by a normalize op)."""
    shape = (channels, height, width) if chw else (height, width, channels)
    return _field("image", name, dtype, shape, chw=chw, file=file)


def mask(height, width, name="mask", dtype="uint8", file=1, pad_value=0):
    """Class ids decoded from file `file` (a palette PNG keeps its indices;
    uint16 for 16-bit PNGs): [height, width], resampled nearest, padded with
    pad_value."""
    return _field("mask", name, dtype, (height, width), file=file,
                  pad_value=pad_value)


def label(name="label", dtype="int64"):
    """The sample's integer label (a scalar per sample)."""
    return _field("label", name, dtype, ())


def array(shape, name="array", dtype="float32", file=0):
    """A typed array from an array source (npy, hdf5, nifti, raw): the sample's
    array `file` (1: a nifti manifest's label volume), or the region a
    random_patch picks, converted by value to dtype."""
    return _field("array", name, dtype, shape, file=file)


def encoded(max_bytes, name="encoded", file=0):
    """The sample's file `file` as stored: uint8 [4 + max_bytes] per sample,
    a little-endian uint32 byte count then the bytes (e.g. to decode
    yourself). A larger file is a per-sample error."""
    return _field("encoded", name, "uint8", (4 + int(max_bytes),), file=file)


def text(member=None, name=None, max_bytes=4096, file=None):
    """A shard's member as stored, per sample: a WebDataset sample's
    `member` ("txt", "json", ...), up to max_bytes bytes (a larger one is a
    per-sample error); 0 bytes for a sample without one. Or, with `file`,
    a manifest line's file `file` (a caption file beside its image) as
    UTF-8 text. The Loader gives each batch's values as a list: str for
    text (a file, members "txt", "json" and names ending so; bytes that are
    not UTF-8 become U+FFFD), bytes otherwise. member (default "txt") and
    file exclude each other."""
    if file is not None:
        if member is not None:
            raise ValueError("stoker.text: member (a shard's) and file (a manifest's) "
                             "exclude each other")
        return _field("encoded", name or "text", "uint8", (4 + int(max_bytes),),
                      file=int(file), text=True)
    member = "txt" if member is None else member
    return _field("encoded", name or member.replace(".", "_"), "uint8", (4 + int(max_bytes),),
                  member=member)


def _op(kind, fields, **params):
    """An op as the spec holds it: only the parameters the caller gave. The
    daemon applies the schema's defaults to the rest (stoker.op_defaults()
    lists them); no default is written here."""
    op = {kind: {k: v for k, v in params.items() if v is not None}}
    if fields:
        op["fields"] = list(fields)
    return op


def _num(value, kind=float):
    return None if value is None else kind(value)


def _pair(value, lo="min", hi="max"):
    """A (min, max) pair as a Range; None stays unset."""
    return None if value is None else {lo: float(value[0]), hi: float(value[1])}


def resize(size=None, width=None, height=None, mode=None, interpolation=None,
           fill=None, fields=None):
    """mode "shorter" (default with size: the shorter side becomes size),
    "longer", "letterbox" (longer side to size, centered on size x size,
    padded with fill) or "exact" (default with width and height)."""
    if mode is None:
        mode = "exact" if size is None else "shorter"
    return _op("resize", fields, mode=mode, size=size, width=width,
               height=height, interpolation=interpolation, fill=fill)


def letterbox(size, fill=None, interpolation=None, fields=None):
    return resize(size, mode="letterbox", fill=fill,
                  interpolation=interpolation, fields=fields)


def center_crop(width, height=None, fields=None):
    return _op("center_crop", fields, width=width,
               height=width if height is None else height)


def random_resized_crop(width, height=None, scale=None, ratio=None, interpolation=None,
                        fields=None):
    """torchvision's RandomResizedCrop: `scale` and `ratio` (min, max) pairs
    (unset: the schema's, torchvision's)."""
    scale, ratio = scale or (None, None), ratio or (None, None)
    return _op("random_resized_crop", fields, width=width,
               height=width if height is None else height,
               scale_min=_num(scale[0]), scale_max=_num(scale[1]), ratio_min=_num(ratio[0]),
               ratio_max=_num(ratio[1]), interpolation=interpolation)


def random_crop(width, height=None, fields=None):
    """A random window; smaller pictures are padded (masks with pad_value)."""
    return _op("random_crop", fields, width=width,
               height=width if height is None else height)


def flip(p=None, vertical=False, fields=None):
    """Mirrors horizontally (or vertically) with probability p."""
    return _op("flip", fields, probability=_num(p), vertical=vertical or None)


def random_patch(shape, fields=None, label=None, pos=None, neg=None):
    """A random window of `shape` of every array field it names (a patch of
    a volume), drawn once per sample. With `label` (the name of an array
    field it patches, e.g. a label volume's), the window is centred on a
    voxel of that field's array drawn from its foreground (!= 0) with
    probability pos / (pos + neg), else from its background, then shifted
    inside the volume: MONAI's RandCropByPosNegLabel."""
    bias = None
    if label is not None:
        bias = {"field": label}
        bias.update({k: float(v) for k, v in (("pos", pos), ("neg", neg)) if v is not None})
    return _op("random_patch", fields, shape=[int(d) for d in shape], label_bias=bias)


def axis_flip(axes=None, p=None, fields=None):
    """Each of `axes` (default all) of array fields reversed with
    probability p, drawn per axis and sample, the same for every field it
    names (a scan and its label volume): MONAI's RandFlip per axis."""
    return _op("axis_flip", fields, axes=None if axes is None else [int(a) for a in axes],
               probability=_num(p))


def rot90(axes=None, p=None, max_k=None, fields=None):
    """With probability p, array fields rotated k x 90 degrees in the plane
    of `axes` (of one size), k in 1..max_k: numpy.rot90(x, k, axes),
    MONAI's RandRotate90."""
    return _op("rot90", fields, axes=None if axes is None else [int(a) for a in axes],
               probability=_num(p), max_k=_num(max_k, int))


def intensity(scale=None, shift=None, p=None, fields=None):
    """With probability p, float array values x * a + b, a drawn in `scale`
    (a (min, max) pair) and b in `shift`: MONAI's RandScaleIntensity
    (a = 1 + factor) and RandShiftIntensity."""
    return _op("intensity", fields, scale=_pair(scale), shift=_pair(shift), probability=_num(p))


def window(low, high, out=None, fields=None):
    """Float array values in [low, high] mapped onto [out[0], out[1]] and
    clipped: MONAI's ScaleIntensityRange with clip (a CT window)."""
    out = out or (None, None)
    return _op("window", fields, min=float(low), max=float(high), out_min=_num(out[0]),
               out_max=_num(out[1]))


def normalize(mean, std, fields=None):
    """(x / 255 - mean) / std for float image fields (1 or C values each,
    on the 0..1 scale as torchvision's); (x - mean) / std for float array
    fields (1 value each, on the array's own scale)."""
    return _op("normalize", fields, mean=[float(m) for m in mean],
               std=[float(s) for s in std])


def _range(value, center, lowest=None):
    """torchvision's ColorJitter argument: a number b is [center - b,
    center + b] (floored at `lowest`), a pair is (min, max)."""
    if value is None:
        return None
    if isinstance(value, (int, float)):
        lo = center - float(value)
        lo = lo if lowest is None else max(lowest, lo)
        return {"min": lo, "max": center + float(value)}
    return _pair(value)


def color_jitter(brightness=None, contrast=None, saturation=None, hue=None,
                 fields=None):
    """torchvision's ColorJitter on image fields, drawn per sample:
    brightness/contrast/saturation b give factors in [max(0, 1-b), 1+b],
    hue h shifts in [-h, h] (h <= 0.5); a (min, max) pair sets the range."""
    return _op("color_jitter", fields, brightness=_range(brightness, 1.0, 0.0),
               contrast=_range(contrast, 1.0, 0.0),
               saturation=_range(saturation, 1.0, 0.0), hue=_range(hue, 0.0))


def random_grayscale(p=None, fields=None):
    """torchvision's RandomGrayscale: with probability p, the picture's luma
    in every colour channel."""
    return _op("random_grayscale", fields, probability=_num(p))


def random_erasing(p=None, scale=None, ratio=None, value=None, fields=None):
    """torchvision's RandomErasing: with probability p, a rectangle of
    `scale` of the area and aspect `ratio` filled with `value` (levels
    0..255: one, or one per channel)."""
    values = None if value is None else [
        int(v) for v in (value if isinstance(value, (list, tuple)) else [value])]
    return _op("random_erasing", fields, probability=_num(p), scale=_pair(scale),
               ratio=_pair(ratio), value=values)


def spec_augment(time_masks=None, time_width=None, freq_masks=None, freq_width=None,
                 value=None, freq_first=False, fields=None):
    """SpecAugment's masking on 2-D float array fields [time, freq] ([freq,
    time] with freq_first): `time_masks` bands of width drawn in [0,
    time_width) frames and `freq_masks` in [0, freq_width) bins, set to
    `value` (after a normalize)."""
    return _op("spec_augment", fields, time_masks=_num(time_masks, int),
               time_width=_num(time_width, int), freq_masks=_num(freq_masks, int),
               freq_width=_num(freq_width, int), value=_num(value),
               freq_first=freq_first or None)


# Every helper above (fields and ops), exported by the stoker package.
__all__ = [name for name, value in list(globals().items())
           if callable(value) and not name.startswith("_")]
