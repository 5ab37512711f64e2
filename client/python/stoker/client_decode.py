"""Client decode: the image fields stokerd hands over as JPEG bytes.

With SessionSpec.client_decode the daemon still reads, caches, shards and
draws every sample's geometry, but for the samples it hands over it writes
the file's bytes (field F_jpeg) and a render record (F_render, float32 x 16:
where, source size, content rectangle, source box, flips, fill, filter) in
place of F's pixels. This module turns such a batch back into F:

  * decode: torchvision.io.decode_jpeg, baseline JPEGs batched on the GPU
    where the installed torchvision takes a list (nvJPEG), progressive ones
    and older torchvisions one image at a time; a picture the GPU refuses
    is decoded on the CPU instead;
  * render: every sample's crop, antialiased resize (PIL's filters: the
    taps and weights of each output pixel over its source pixels, as PIL
    computes them), flips and padding, batched: one gather-and-weigh per tap
    and pass (whole rows by index_select) over a padded uint8 stack of
    pictures, with no Python loop over
    samples but the decode call and one slice copy each;
  * write F's dtype and layout (uint8 HWC/CHW, or x * scale + offset floats).

Samples the daemon decoded itself (where = 0) keep its pixels. Pixels differ
from the daemon's by rounding (float weights against PIL's fixed-point ones)
and by the JPEG decoder's IDCT and chroma upsampling on the GPU.

HybridSplit chooses the share of each batch the daemon decodes from the two
measured rates, so that neither side idles.
"""

import concurrent.futures
import time

import torch

from stoker._native import DTYPES

try:
    from torchvision.io import ImageReadMode, decode_jpeg
except ImportError:  # Checked with a clear message by check_device.
    decode_jpeg = None

# The render record slots this module reads, by the names the daemon sends
# with each field (ClientDecodeField.record); FieldRenderer gathers them
# into this order, so the constants below index the gathered record.
_SLOTS = ("where", "src_w", "src_h", "x0", "y0", "x1", "y1", "box_x", "box_y",
          "box_w", "box_h", "hflip", "vflip", "fill", "filter", "progressive")
(WHERE, SRC_W, SRC_H, X0, Y0, X1, Y1, BOX_X, BOX_Y, BOX_W, BOX_H, HFLIP, VFLIP,
 FILL, FILTER, PROGRESSIVE) = range(len(_SLOTS))
_BILINEAR, _BICUBIC, _NEAREST = 0, 1, 2
_SUPPORT = {_BILINEAR: 1.0, _BICUBIC: 2.0, _NEAREST: 0.5}


def check_device(decode_device):
    """The torch.device client decode runs on; ValueError saying what is
    missing."""
    if decode_jpeg is None:
        raise ValueError("client_decode= needs torchvision (torchvision.io."
                         "decode_jpeg), which is not installed")
    try:
        dev = torch.device(decode_device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"ClientDecode.device {decode_device!r} is not a torch "
                         "device") from e
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"ClientDecode(device={decode_device!r}) needs a CUDA GPU, "
                         "but torch.cuda.is_available() is False here; use "
                         "ClientDecode(device='cpu') (slow, for testing) or no "
                         "client_decode= (the daemon decodes)")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"ClientDecode.device must be 'cpu' or 'cuda[:N]', got "
                         f"{decode_device!r}")
    return dev


def _kernel(x, kind):
    """PIL's filters at distances x (in source pixels / filter scale)."""
    ax = x.abs()
    if kind == _BICUBIC:  # a = -0.5
        a = -0.5
        near = ((a + 2) * ax - (a + 3)) * ax * ax + 1
        far = ((ax - 5) * ax + 8) * ax * a - 4 * a
        return torch.where(ax < 1, near, torch.where(ax < 2, far, torch.zeros_like(ax)))
    return (1 - ax).clamp(min=0)


def _taps(r, limit, out_size, axis):
    """Each output row (axis 1) or column (axis 0) as taps over source
    pixels, PIL's way: ([N, out_size] index of the first tap, [N, out_size,
    T] weights, normalized over the pixels inside the source; zero outside
    the content rectangle)."""
    dev = r.device  # The CPU (the Loader plans there).
    if axis == 0:
        c0, c1, b0, bw, flip = r[:, X0], r[:, X1], r[:, BOX_X], r[:, BOX_W], r[:, HFLIP]
    else:
        c0, c1, b0, bw, flip = r[:, Y0], r[:, Y1], r[:, BOX_Y], r[:, BOX_H], r[:, VFLIP]
    kind = int(r[0, FILTER].item())
    j = torch.arange(out_size, device=dev, dtype=torch.float64)[None, :]
    n = (c1 - c0)[:, None]
    local = j - c0[:, None]
    inside = (local >= 0) & (local < n)
    local = torch.where(flip[:, None] > 0, n - 1 - local, local)
    scale = bw[:, None] / n.clamp(min=1)
    center = b0[:, None] + (local + 0.5) * scale                       # [N, O]
    if kind == _NEAREST:  # PIL: the pixel under the center.
        first = torch.floor(center).clamp(min=0)
        first = torch.minimum(first, limit[:, None] - 1)
        return first.long(), inside[:, :, None].to(torch.float32)
    fscale = scale.clamp(min=1)
    support = _SUPPORT[kind] * fscale
    first = torch.floor(center - support + 0.5).clamp(min=0)
    end = torch.minimum(torch.floor(center + support + 0.5), limit[:, None])
    taps = max(1, int((end - first).max().item()))
    k = first[:, :, None] + torch.arange(taps, device=dev, dtype=torch.float64)
    w = _kernel((k - center[:, :, None] + 0.5) / fscale[:, :, None], kind)
    w = torch.where((k < end[:, :, None]) & inside[:, :, None], w, torch.zeros_like(w))
    total = w.sum(dim=2, keepdim=True)
    w = w / torch.where(total == 0, torch.ones_like(total), total)
    return first.long(), w.to(torch.float32)


def _upload(t, dev):
    """`t` (on the CPU) on `dev`. On a GPU it goes through pinned memory
    with a non-blocking copy: a pageable copy would make the host wait for
    all the work queued on the stream first, and on a GPU busy training
    each such wait costs the decode thread milliseconds."""
    if dev.type != "cuda":
        return t
    return t.pin_memory().to(dev, non_blocking=True)


def _own(t, dev):
    """A copy of ring view `t` on `dev` that no longer needs the slot once
    the stream's work is done (on a GPU the ring is pinned, so the copy is
    queued, not waited for)."""
    return t.to(dev, non_blocking=True) if dev.type == "cuda" else t.clone()


def _apply_taps(src, first, w):
    """Resamples `src` [N, C, L, M] (any dtype) along L with taps starting
    at row `first` [N, O] of each picture: [N, C, O, M] float32. Each tap
    is one index_select of whole rows."""
    n, c, length, m = src.shape
    out_size, taps = w.shape[1], w.shape[2]
    flat = src.reshape(n * c * length, m)
    base = (torch.arange(n * c, device=src.device) * length).view(n, c, 1)
    rel = first[:, None, :]                                           # [N, 1, O]
    out = None
    for t in range(taps):
        rows = base + (rel + t).clamp(0, length - 1)                 # [N, C, O]
        picked = flat.index_select(0, rows.flatten()).view(n, c, out_size, m)
        term = picked.to(torch.float32).mul_(w[:, None, :, t, None])
        out = term if out is None else out.add_(term)
    return out


class FieldRenderer:
    """Renders one image field (a stoker.v1.ClientDecodeField as JSON)."""

    def __init__(self, info, device):
        self.field = info["field"]
        self.encoded = info["encoded"]
        self.render = info["render"]
        record = list(info.get("record", []))
        missing = [name for name in _SLOTS if name not in record]
        if missing:
            raise RuntimeError(f"stokerd's render record for {self.field!r} lacks "
                               f"{missing}: the daemon and this package differ in "
                               "version")
        self._gather = torch.tensor([record.index(name) for name in _SLOTS])
        self.channels = int(info.get("channels", 3))
        self.dtype = str(info.get("dtype", "DTYPE_UINT8")).replace("DTYPE_", "").lower()
        self.chw = bool(info.get("chw", False))
        self.device = device
        self._mode = ImageReadMode.GRAY if self.channels == 1 else ImageReadMode.RGB
        c = self.channels
        self._scale = torch.tensor(info.get("scale", [1.0] * c), device=device).view(1, c, 1, 1)
        self._offset = torch.tensor(info.get("offset", [0.0] * c), device=device).view(1, c, 1, 1)
        self._batched = None  # Whether decode_jpeg takes a list here.
        # Bytes of one padded stack of pictures rendered at once, counted as
        # float32 (what the first pass makes of it is at most that).
        self.budget = (512 << 20) if device.type == "cuda" else (64 << 20)

    def _decode(self, blobs, progressive):
        """[C, H, W] uint8 tensors on the device, one per blob (None for one
        nothing can decode). Baseline JPEGs go to one batched call where
        torchvision takes a list; progressive ones, and a batch the GPU
        refuses, one at a time; a picture the GPU refuses is decoded on the
        CPU."""
        out = [None] * len(blobs)
        batch = [i for i, p in enumerate(progressive) if not p]
        if self.device.type == "cuda":
            # nvJPEG writes its outputs from a stream of its own, unordered
            # with this one: no block freed by work still queued here may be
            # handed to it, so that work finishes first.
            torch.cuda.current_stream(self.device).synchronize()
        if self.device.type == "cuda" and self._batched is not False and batch:
            try:
                for i, t in zip(batch, decode_jpeg([blobs[i] for i in batch], mode=self._mode,
                                                   device=self.device)):
                    out[i] = t
                self._batched = True
            except (TypeError, AttributeError, ValueError):  # It decodes one at a time.
                self._batched = False
            except RuntimeError:
                pass
        for i, b in enumerate(blobs):
            if out[i] is not None:
                continue
            try:
                out[i] = decode_jpeg(b, mode=self._mode, device=self.device.type)
            except RuntimeError:  # e.g. a layout nvJPEG refuses: the CPU's.
                try:
                    out[i] = decode_jpeg(b, mode=self._mode).to(self.device)
                except RuntimeError:  # Corrupt past its header.
                    out[i] = None
        return out

    def __call__(self, views, count, phases):
        """(F on the device, samples rendered, positions of samples that
        could not be decoded: zeros) from the batch's ring views (torch
        tensors) of F, F_jpeg and F_render. Adds the host seconds spent
        decoding and rendering to phases["decode"] and phases["render"]."""
        dev = self.device
        out = views[self.field][:count]
        rec = views[self.render][:count].index_select(1, self._gather)
        todo = torch.nonzero(rec[:, WHERE] == 1).flatten()
        if todo.numel() == 0:
            return _own(out, dev), 0, []
        rec = rec[todo].to(torch.float64)
        enc = views[self.encoded][:count]
        sizes = enc[todo, :4].contiguous().view(torch.int32).flatten().tolist()
        blobs = [enc[i, 4:4 + n] for i, n in zip(todo.tolist(), sizes)]
        t0 = time.perf_counter()
        pictures = self._decode(blobs, (rec[:, PROGRESSIVE] == 1).tolist())
        t1 = time.perf_counter()
        phases["decode"] += t1 - t0
        out = _own(out, dev)
        positions = todo.tolist()
        failed = [positions[k] for k, p in enumerate(pictures) if p is None]
        if failed:
            out[_upload(torch.tensor(failed), dev)] = 0
            keep = [k for k, p in enumerate(pictures) if p is not None]
            if not keep:
                return out, 0, failed
            pictures = [pictures[k] for k in keep]
            rec, todo = rec[keep], todo[keep]
        shape = views[self.field].shape[1:]
        oh, ow = (shape[1], shape[2]) if self.chw else (shape[0], shape[1])
        rendered = self._render(pictures, rec, oh, ow)
        where = _upload(todo, dev)
        out[where] = rendered if self.chw else rendered.permute(0, 2, 3, 1)
        phases["render"] += time.perf_counter() - t1
        return out, len(pictures), failed

    def _render(self, pictures, rec, oh, ow):
        """[N, C, oh, ow] of F's dtype on the device from decoded pictures
        and their records (float64, on the CPU: the geometry is planned
        there and only taps, weights and pixels go to the device)."""
        n = len(pictures)
        # Each picture's source rows/columns the filter reaches.
        reach = _SUPPORT[int(rec[0, FILTER])]
        cpu = rec
        sx = (cpu[:, BOX_W] / (cpu[:, X1] - cpu[:, X0]).clamp(min=1)).clamp(min=1) * reach
        sy = (cpu[:, BOX_H] / (cpu[:, Y1] - cpu[:, Y0]).clamp(min=1)).clamp(min=1) * reach
        x0 = (cpu[:, BOX_X] - sx - 1).floor().clamp(min=0).long()
        y0 = (cpu[:, BOX_Y] - sy - 1).floor().clamp(min=0).long()
        x1 = torch.minimum((cpu[:, BOX_X] + cpu[:, BOX_W] + sx + 1).ceil(), cpu[:, SRC_W]).long()
        y1 = torch.minimum((cpu[:, BOX_Y] + cpu[:, BOX_H] + sy + 1).ceil(), cpu[:, SRC_H]).long()
        # Pictures of similar size together, in chunks whose padded stack
        # stays within the budget.
        hs, ws = (y1 - y0).tolist(), (x1 - x0).tolist()
        order = sorted(range(n), key=lambda i: (hs[i], ws[i]))
        img = torch.empty((n, self.channels, oh, ow), dtype=torch.float32, device=self.device)
        chunk, w = [], 0
        for k, i in enumerate(order):
            chunk.append(i)
            w = max(w, ws[i])
            if k + 1 < n:  # Sorted by height: the next one's is the chunk's.
                nxt = order[k + 1]
                if (len(chunk) + 1) * self.channels * hs[nxt] * max(w, ws[nxt]) * 4 <= self.budget:
                    continue
            img[_upload(torch.tensor(chunk), self.device)] = self._resample(
                [pictures[i] for i in chunk], rec[chunk], x0[chunk], y0[chunk], x1[chunk],
                y1[chunk], oh, ow)
            chunk, w = [], 0
        img = img.round_().clamp_(0, 255)
        # Padding outside the content rectangle (none for the presets).
        if bool(((rec[:, X0] > 0) | (rec[:, Y0] > 0) | (rec[:, X1] < ow) |
                 (rec[:, Y1] < oh)).any()):
            r = _upload(rec.to(torch.float32), self.device)
            yy = torch.arange(oh, device=self.device)[None, :, None]
            xx = torch.arange(ow, device=self.device)[None, None, :]
            pad = ~((yy >= r[:, Y0, None, None]) & (yy < r[:, Y1, None, None]) &
                    (xx >= r[:, X0, None, None]) & (xx < r[:, X1, None, None]))
            img = torch.where(pad[:, None], r[:, FILL, None, None, None], img)
        if self.dtype == "uint8":
            return img.to(torch.uint8)
        return (img * self._scale + self._offset).to(getattr(torch, DTYPES[self.dtype]["torch"]))

    def _resample(self, pictures, rec, x0, y0, x1, y1, oh, ow):
        """The pictures' boxes resampled: [n, C, oh, ow] float32, unrounded.
        Each picture's reach [y0, y1) x [x0, x1) is copied into one padded
        stack; taps past a picture's own extent weigh nothing."""
        hp, wp = int((y1 - y0).max()), int((x1 - x0).max())
        src = torch.zeros((len(pictures), self.channels, hp, wp), dtype=torch.uint8,
                          device=self.device)
        for i, p in enumerate(pictures):
            a, b, c, d = int(y0[i]), int(y1[i]), int(x0[i]), int(x1[i])
            src[i, :, :b - a, :d - c] = p[:, a:b, c:d]
        dev = self.device
        fy, wy = _taps(rec, rec[:, SRC_H], oh, 1)  # On the CPU: small.
        fx, wx = _taps(rec, rec[:, SRC_W], ow, 0)
        rows = _apply_taps(src, _upload(fy - y0[:, None], dev), _upload(wy, dev))  # [n, C, oh, wp]
        cols = _apply_taps(rows.transpose(2, 3), _upload(fx - x0[:, None], dev),
                           _upload(wx, dev))                                 # [n, C, ow, oh]
        return cols.transpose(2, 3)


class HybridSplit:
    """The share of each batch the daemon decodes, set every `every` batches
    so that neither side keeps the training loop waiting:

        share = daemon rate / (daemon rate + weight x client rate)

    Both rates are samples per second (each an average weighing the newest
    measurement 0.3). The weight is WEIGHT_STEP ** k, k from 0 to FLOOR,
    and follows where the loop waited since the last setting: for the
    client's decode (it slows the training step too: on a GPU it shares the
    device with the step and the GIL with the loop), k grows by one, for
    the daemon's batch it shrinks by one; waits under WAIT_SLACK of the
    interval count as none. At k = FLOOR the daemon takes every sample, and
    k leaves the floor only after LEAVE_FLOOR settings in a row that waited
    for the daemon (one wait would hand the client samples whose fixed
    cost the loop then waits for). So where the daemon keeps up alone the
    share settles at 1, and where it cannot, the client takes what it can.
    """

    WEIGHT_STEP = 0.6
    FLOOR = 10
    LEAVE_FLOOR = 3
    WAIT_SLACK = 0.02

    def __init__(self, session, share=None, every=2):
        self.session = session
        self.fixed = share is not None
        self.share = float(share) if share is not None else 0.5
        self.every = every
        self.client_samples = 0
        self.client_seconds = 0.0
        self.daemon_rate = 0.0
        self.client_rate = 0.0
        self._k = 0  # client_weight = WEIGHT_STEP ** _k.
        self._daemon_waits = 0  # Settings in a row that waited for the daemon.
        # (daemon rate, weighed client rate) the share was set from.
        self.balanced = None
        # Host seconds of the client's decode and render calls, and how long
        # the training loop waited for the daemon's batch and for the
        # client's decode of it: where a hybrid pipeline loses its time.
        self.phases = {"decode": 0.0, "render": 0.0}
        self.waits = {"daemon": 0.0, "client": 0.0}
        self._batches = 0
        self._last = session.daemon_decode()
        self._last_waits = (0.0, 0.0, time.perf_counter())
        session.set_cpu_share(self.share)

    @property
    def client_weight(self):
        return self.WEIGHT_STEP ** self._k

    def _reweigh(self):
        """Moves the client's weight by where the loop waited since the
        last call."""
        now = (self.waits["daemon"], self.waits["client"], time.perf_counter())
        daemon, client = now[0] - self._last_waits[0], now[1] - self._last_waits[1]
        span = now[2] - self._last_waits[2]
        self._last_waits = now
        if max(daemon, client) <= self.WAIT_SLACK * span:
            return
        if client > daemon:
            self._k = min(self.FLOOR, self._k + 1)
            self._daemon_waits = 0
        else:
            self._daemon_waits += 1
            if self._k < self.FLOOR or self._daemon_waits >= self.LEAVE_FLOOR:
                self._k = max(0, self._k - 1)
                self._daemon_waits = 0

    def observe(self, samples, seconds):
        """A batch's client-side decode: `samples` rendered in `seconds`."""
        self.client_samples += samples
        self.client_seconds += seconds
        if samples and seconds > 0:
            rate = samples / seconds
            self.client_rate = rate if not self.client_rate else 0.7 * self.client_rate + 0.3 * rate
        self._batches += 1
        if self.fixed or self._batches % self.every:
            return
        now = self.session.daemon_decode()
        d_samples, d_ns = now[0] - self._last[0], now[1] - self._last[1]
        self._last = now
        if d_samples and d_ns:
            # Per thread, times the threads this session can count on.
            rate = now[2] * d_samples / (d_ns / 1e9)
            self.daemon_rate = rate if not self.daemon_rate else 0.7 * self.daemon_rate + 0.3 * rate
        self._reweigh()
        if self.daemon_rate and self.client_rate:
            client = self.client_weight * self.client_rate
            self.share = min(1.0, max(0.0, self.daemon_rate / (self.daemon_rate + client)))
            if self._k == self.FLOOR:
                self.share = 1.0
            self.balanced = (self.daemon_rate, client)
            self.session.set_cpu_share(self.share)
        elif self.daemon_rate == 0 and self.share == 0:
            # Nothing measured on the daemon's side: give it some to measure.
            self.share = 0.1
            self.session.set_cpu_share(self.share)

    def adopt(self, other):
        """Goes on from another session's measurements and share (the
        Loader opens a session per pass)."""
        self.client_samples, self.client_seconds = other.client_samples, other.client_seconds
        self.client_rate, self.daemon_rate = other.client_rate, other.daemon_rate
        self.balanced = other.balanced
        self._k, self._daemon_waits = other._k, other._daemon_waits
        self.phases, self.waits = dict(other.phases), dict(other.waits)
        self._last_waits = (self.waits["daemon"], self.waits["client"], time.perf_counter())
        if not self.fixed:
            self.share = other.share
            self.session.set_cpu_share(self.share)

    def stats(self):
        return {"cpu_share": self.share, "fixed": self.fixed,
                "samples_client_decoded": self.client_samples,
                "client_seconds": self.client_seconds,
                "client_rate": self.client_rate, "daemon_rate": self.daemon_rate,
                "client_weight": self.client_weight,
                "balanced_rates": self.balanced,
                "decode_seconds": self.phases["decode"],
                "render_seconds": self.phases["render"],
                "wait_daemon_seconds": self.waits["daemon"],
                "wait_client_seconds": self.waits["client"]}


class ClientDecoder:
    """Renders a session's handed-over fields, batch by batch."""

    def __init__(self, session, device, share=None):
        self.device = device
        self.renderers = [FieldRenderer(info, device) for info in session.client_decode]
        self.hidden = ({r.encoded for r in self.renderers} |
                       {r.render for r in self.renderers})
        self.split = HybridSplit(session, share)

    def __call__(self, tensors):
        """({field: tensor on the device}, positions of samples that could
        not be decoded) from a batch's {field: ring view}; nothing returned
        refers to the slot, and GPU work has finished."""
        count = next(iter(tensors.values())).shape[0]
        t0 = time.perf_counter()
        out, rendered, failed = {}, 0, set()
        for r in self.renderers:
            out[r.field], n, bad = r(tensors, count, self.split.phases)
            rendered += n
            failed.update(bad)
        for name, t in tensors.items():
            if name not in out and name not in self.hidden:  # Lists: members' values.
                out[name] = t if isinstance(t, list) else _own(t, self.device)
        if self.device.type == "cuda":  # Every copy out of the slot done.
            torch.cuda.current_stream(self.device).synchronize()
        self.split.observe(rendered, time.perf_counter() - t0)
        return out, sorted(failed)


def prefetched(batches, to_tensors, decoder):
    """For each (native batch, tag) of `batches`, yields (fields, tag,
    dataset indices of samples that could not be decoded), the fields
    decoder()(to_tensors(batch)) made, decoding the next batch on a worker
    thread (on a GPU, its own CUDA stream) while the caller works on this
    one. `batches` is read from the calling thread only; each slot goes back
    to the daemon as soon as its batch is decoded. `decoder` is called for
    the decoder once the first batch has opened the session."""
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="stoker-decode")
    streams = {}

    def work(dec, batch, tensors):
        try:
            if dec.device.type != "cuda":
                out, failed = dec(tensors)
            else:
                # High priority: the decode's small kernels go ahead of
                # the training step's queued ones instead of waiting behind
                # them (the step is throughput; this is its next batch).
                side = streams.setdefault(dec.device,
                                          torch.cuda.Stream(dec.device, priority=-1))
                with torch.cuda.stream(side):
                    out, failed = dec(tensors)
            return out, [int(batch.indices[p]) for p in failed]
        finally:
            del tensors
            batch.release()

    def submit(item):
        if item is None:
            return None
        batch, tag = item
        dec = decoder()
        return pool.submit(work, dec, batch, to_tensors(batch)), tag, dec

    try:
        it = iter(batches)
        pending = submit(next(it, None))
        while pending is not None:
            t0 = time.perf_counter()
            item = next(it, None)
            t1 = time.perf_counter()
            following = submit(item)
            future, tag, dec = pending
            t2 = time.perf_counter()
            out, failed = future.result()
            dec.split.waits["daemon"] += t1 - t0
            dec.split.waits["client"] += time.perf_counter() - t2
            if dec.device.type == "cuda":  # Made on the side stream.
                for t in out.values():
                    t.record_stream(torch.cuda.current_stream(dec.device))
            yield out, tag, failed
            pending = following
    finally:
        pool.shutdown(wait=True)
