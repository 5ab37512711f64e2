"""Any sample, any pipeline: Stoker against the PyTorch DataLoader, in one
run on the same files and cores.

  (a) features: HDF5 [200k, 128] float32 + int labels, batch 8192, shuffled.
      DataLoader: a Dataset whose __getitem__ reads one row with h5py.
      Also reported: GB/s against single-thread memcpy bandwidth.
  (a') a feature store as teams keep one: a folder of 4 files part*.H5, each
      [50k, 128] float32 (smooth spectra plus noise) gzip-compressed by h5py,
      with labels; rows addressed across files. DataLoader: h5py row reads
      across the files (timed on 2,048 random rows a pass: h5py's default
      chunks make a row cost a gzip chunk read); and, fairer, workers that
      read every file whole into RAM once and gather each batch with one
      fancy index (a BatchSampler). GB/s against memcpy x cores.
  (b) volumes: random 72x136x136 float32 patches from four ~0.5 GiB volumes
      (.npy and HDF5), batch 2. DataLoader: np.load(mmap_mode="r") / h5py
      slicing per patch. Also: patch GB/s against memcpy bandwidth x cores.
  (b') compressed volumes as h5py users write them: 4 x 0.47 GiB [176, 800,
      900] float32 (smooth structure plus noise), gzip in h5py's default
      chunks, named *.H5; random 72x136x136 patches, batch 2, 25 per volume
      an epoch (samples_per_volume). Epoch 1 (a fresh daemon: every volume
      decoded, chunks inflated in parallel) and the later epochs (patches
      copied from the volume cache) are reported apart. DataLoader: h5py
      slicing per patch (each inflates the chunks it touches).
  (b'') NIfTI as medical datasets keep it: 4 scans [240, 240, 160] float32
      (structure plus noise) and their uint8 label volumes, .nii.gz written
      by nibabel, paired by a manifest; random 72x136x136 patches of scan
      and labels jointly, batch 2, 25 per volume an epoch. Epoch 1 (fresh
      daemon) and epochs 2+ apart. DataLoader: nibabel's dataobj slicing
      of both volumes per patch (it inflates the stream up to the patch);
      and, against epochs 2+, workers that load each volume once and keep
      it (TorchIO's Queue), timed once every worker holds them. Also
      epoch 1 on a restarted daemon whose L2 (--l2-path) holds the volumes
      the first one decoded.
  (c) segmentation: 512x512 JPEG photos + PNG masks, joint random crop 384
      + horizontal flip, batch 32. DataLoader: PIL + torchvision functional.

The DataLoader runs at its best num_workers of 0..cores (persistent
workers); stokerd gets one decode thread per core. Every figure is the
median of RUNS (default 3) timed passes after one warm-up pass, so files sit
in the page cache for both. Samples per second; ratios against the
DataLoader measured in the same run. Run with `make bench` (or directly
with Debian's python3; data is generated under $STOKER_BENCH_ARRAYS).
"""

import os
import shutil
import statistics
import warnings
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import h5py
from PIL import Image

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
import stoker  # noqa: E402
from stokerd import Stokerd  # noqa: E402

BIN = os.path.join(ROOT, "bazel-bin")
DATA = os.environ.get("STOKER_BENCH_ARRAYS", "/tmp/stoker-bench-arrays")
CORES = os.cpu_count() or 1
RUNS = int(os.environ.get("RUNS", "3"))
# Which cases run: any of features, store, volumes, compressed, nifti, segmentation.
CASES = os.environ.get("CASES",
                       "features,store,volumes,compressed,nifti,segmentation").split(",")
STORE = os.path.join(DATA, "store")
SCANS = os.path.join(DATA, "vol_gz")
NIFTI = os.path.join(DATA, "nifti")
NIFTI_SHAPE = (240, 240, 160)
PER_VOLUME = 25
# A trainer's step (seconds a batch) in the compressed case's stepped epoch 1.
STEP = float(os.environ.get("STEP", "0.3"))
PATCH = (72, 136, 136)


# ------------------------------------------------------------------ data
def make_data():
    os.makedirs(DATA, exist_ok=True)
    done = os.path.join(DATA, ".complete")
    if os.path.exists(done):
        return
    rng = np.random.default_rng(0)
    print("bench: generating features, volumes and segmentation pairs in",
          DATA, flush=True)
    with h5py.File(os.path.join(DATA, "features.h5"), "w") as f:
        f["x"] = rng.standard_normal((200_000, 128), dtype=np.float32)
        f["y"] = rng.integers(0, 1000, 200_000)
    os.makedirs(os.path.join(DATA, "vol_npy"), exist_ok=True)
    os.makedirs(os.path.join(DATA, "vol_h5"), exist_ok=True)
    for k in range(4):  # 4 x 176 x 800 x 900 x 4 B = 4 x 0.47 GiB.
        v = rng.standard_normal((176, 800, 900), dtype=np.float32)
        np.save(os.path.join(DATA, "vol_npy", f"v{k}.npy"), v)
        with h5py.File(os.path.join(DATA, "vol_h5", f"v{k}.h5"), "w") as f:
            f["vol"] = v
        print(f"bench: volume {k + 1}/4", flush=True)
    seg = os.path.join(DATA, "seg")
    subprocess.run([os.path.join(BIN, "tests", "make_dataset"), "--out", seg,
                    "--classes", "1", "--per_class", "256", "--min_side", "512",
                    "--max_side", "512", "--seed", "21"], check=True,
                   capture_output=True)
    rows = []
    folder = os.path.join(seg, "class_00")
    for name in sorted(os.listdir(folder)):
        img = np.asarray(Image.open(os.path.join(folder, name)).convert("L"))
        mask = Image.fromarray((img // 12).astype(np.uint8))  # 22 classes.
        mname = name.rsplit(".", 1)[0] + "_mask.png"
        mask.save(os.path.join(folder, mname))
        rows.append(f"class_00/{name}\tclass_00/{mname}\t0")
    with open(os.path.join(seg, "pairs.tsv"), "w") as f:
        f.write("\n".join(rows) + "\n")
    open(done, "w").close()


def generated(folder, write):
    """Runs write() to fill `folder` unless a finished run left its marker."""
    done = os.path.join(folder, ".complete")
    if os.path.exists(done):
        return
    os.makedirs(folder, exist_ok=True)
    write()
    open(done, "w").close()


def make_store():
    """4 gzip-compressed feature files named *.H5, as h5py writes them."""
    generated(STORE, write_store)


def write_store():
    rng = np.random.default_rng(1)
    t = np.arange(128, dtype=np.float32)
    for k in range(4):
        x = (np.sin(t * 0.1 + rng.uniform(0, 6, (50_000, 1))) * 2
             + rng.standard_normal((50_000, 128)) * 0.1).astype(np.float32)
        with h5py.File(os.path.join(STORE, f"part{k}.H5"), "w") as f:
            f.create_dataset("x", data=x, compression="gzip")
            f["y"] = rng.integers(0, 1000, 50_000)


def make_scans():
    """4 gzip-compressed volumes named *.H5, as h5py writes them."""
    generated(SCANS, write_scans)


def write_scans():
    rng = np.random.default_rng(2)
    z, y, x = (np.arange(n, dtype=np.float32) for n in (176, 800, 900))
    for k in range(4):
        v = (np.sin(z * 0.05 + k)[:, None, None] * np.cos(y * 0.01)[None, :, None] * 400
             + np.sin(x * 0.02)[None, None, :] * 200 + 1000
             + rng.standard_normal((176, 800, 900), dtype=np.float32) * 20).astype(np.float32)
        with h5py.File(os.path.join(SCANS, f"scan{k}.H5"), "w") as f:
            f.create_dataset("vol", data=v, compression="gzip")
        print(f"bench: compressed volume {k + 1}/4", flush=True)


def make_nifti():
    """4 .nii.gz scans and label volumes, as nibabel writes them."""
    generated(NIFTI, write_nifti)


def write_nifti():
    import nibabel as nib
    rng = np.random.default_rng(3)
    x, y, z = (np.arange(n, dtype=np.float32) for n in NIFTI_SHAPE)
    rows = []
    for k in range(4):
        v = (np.sin(x * 0.03 + k)[:, None, None] * np.cos(y * 0.02)[None, :, None] * 400
             + np.sin(z * 0.05)[None, None, :] * 200 + 1000
             + rng.standard_normal(NIFTI_SHAPE, dtype=np.float32) * 20).astype(np.float32)
        nib.save(nib.Nifti1Image(v, np.eye(4)), os.path.join(NIFTI, f"case{k}.nii.gz"))
        nib.save(nib.Nifti1Image((v > 1300).astype(np.uint8), np.eye(4)),
                 os.path.join(NIFTI, f"case{k}_seg.nii.gz"))
        rows.append(f"case{k}.nii.gz\tcase{k}_seg.nii.gz")
    with open(os.path.join(NIFTI, "train.tsv"), "w") as f:
        f.write("\n".join(rows) + "\n")


def memcpy_gbps():
    a = np.ones(64 << 20, dtype=np.float32)  # 256 MiB.
    b = np.empty_like(a)
    times = []
    for _ in range(5):
        t = time.perf_counter()
        np.copyto(b, a)
        times.append(time.perf_counter() - t)
    return a.nbytes / statistics.median(times) / 1e9


def patch_copy_gbps():
    """One thread copying random 72x136x136 patches out of a volume held in
    RAM with numpy: the ceiling of this strided access pattern (rows of 544
    bytes), against which "of bw" should be read too."""
    v = np.load(os.path.join(DATA, "vol_npy", "v0.npy"))
    out = np.empty(PATCH, np.float32)
    r = np.random.default_rng(0)
    times = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(50):
            z, y, x = (int(r.integers(0, s - p + 1)) for s, p in zip(v.shape, PATCH))
            np.copyto(out, v[z:z + PATCH[0], y:y + PATCH[1], x:x + PATCH[2]])
        times.append(time.perf_counter() - t)
    return 50 * out.nbytes / statistics.median(times) / 1e9


# ------------------------------------------------------------- datasets
class Features(torch.utils.data.Dataset):
    def __init__(self, path):
        self.path, self.f = path, None
        with h5py.File(path, "r") as f:
            self.n = len(f["y"])

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.f is None:  # One handle per worker.
            self.f = h5py.File(self.path, "r")
        return torch.from_numpy(self.f["x"][i]), int(self.f["y"][i])


class Store(torch.utils.data.Dataset):
    """Rows across the files of a folder, read with h5py."""

    def __init__(self, folder):
        self.paths = sorted(os.path.join(folder, n) for n in os.listdir(folder)
                            if n.lower().endswith(".h5"))
        self.starts, self.files = [0], None
        for p in self.paths:
            with h5py.File(p, "r") as f:
                self.starts.append(self.starts[-1] + len(f["y"]))

    def __len__(self):
        return self.starts[-1]

    def __getitem__(self, i):
        if self.files is None:  # One handle per file and worker.
            self.files = [h5py.File(p, "r") for p in self.paths]
        k = int(np.searchsorted(self.starts, i, side="right")) - 1
        f, j = self.files[k], i - self.starts[k]
        return torch.from_numpy(f["x"][j]), int(f["y"][j])


class StoreInRam(Store):
    """The same rows, each worker holding every file's rows and labels in
    RAM (read whole once), a batch gathered by one fancy index: the best a
    DataLoader user can do with files that fit in RAM."""

    batched = True

    def __getitem__(self, rows):
        if self.files is None:
            self.files = []
            for p in self.paths:
                with h5py.File(p, "r") as f:
                    self.files.append((f["x"][:], f["y"][:]))
            self.x = np.concatenate([x for x, _ in self.files])
            self.y = np.concatenate([y for _, y in self.files])
        rows = np.sort(np.asarray(rows))
        return torch.from_numpy(self.x[rows]), torch.from_numpy(self.y[rows])


class Volumes(torch.utils.data.Dataset):
    """Random patches; length = patches per pass."""

    def __init__(self, kind, length):
        self.kind, self.length, self.vols = kind, length, None

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        if self.vols is None:
            if self.kind == "npy":
                self.vols = [np.load(os.path.join(DATA, "vol_npy", f"v{k}.npy"),
                                     mmap_mode="r") for k in range(4)]
            elif self.kind == "gzip":
                self.vols = [h5py.File(os.path.join(SCANS, f"scan{k}.H5"), "r")["vol"]
                             for k in range(4)]
            else:
                self.vols = [h5py.File(os.path.join(DATA, "vol_h5", f"v{k}.h5"),
                                       "r")["vol"] for k in range(4)]
        v = self.vols[i % 4]
        r = np.random.default_rng(i)
        z, y, x = (int(r.integers(0, s - p + 1)) for s, p in zip(v.shape, PATCH))
        return torch.from_numpy(np.ascontiguousarray(
            v[z:z + PATCH[0], y:y + PATCH[1], x:x + PATCH[2]]))


class NiftiPatches(torch.utils.data.Dataset):
    """A label-biased patch of scan and labels per item, PER_VOLUME items per
    volume, as MONAI's RandCropByPosNegLabeld draws them (pos 1, neg 1),
    each worker keeping every volume's foreground and background indices
    once computed (MONAI's FgBgToIndicesd): by nibabel's slicing of the
    files, or (`keep`) from volumes each worker loaded once and keeps, as
    TorchIO's Queue does."""

    def __init__(self, keep=False):
        self.keep, self.kept, self.indices = keep, {}, {}

    def __len__(self):
        return 4 * PER_VOLUME

    def __getitem__(self, i):
        import nibabel as nib
        k = i // PER_VOLUME
        files = [os.path.join(NIFTI, f"case{k}{s}.nii.gz") for s in ("", "_seg")]
        if k not in self.indices:
            seg = np.asarray(nib.load(files[1]).dataobj).reshape(-1)
            self.indices[k] = (np.flatnonzero(seg), np.flatnonzero(seg == 0))
        r = np.random.default_rng(i)
        fg, bg = self.indices[k]
        pick = fg if r.random() < 0.5 else bg
        centre = np.unravel_index(pick[r.integers(len(pick))], NIFTI_SHAPE)
        x, y, z = (int(min(max(c - p // 2, 0), s - p))
                   for c, s, p in zip(centre, NIFTI_SHAPE, PATCH))
        region = (slice(x, x + PATCH[0]), slice(y, y + PATCH[1]), slice(z, z + PATCH[2]))
        if not self.keep:
            return tuple(torch.from_numpy(np.asarray(nib.load(f).dataobj[region]))
                         for f in files)
        if k not in self.kept:
            self.kept[k] = [np.asarray(nib.load(f).dataobj) for f in files]
        return tuple(torch.from_numpy(np.ascontiguousarray(v[region])) for v in self.kept[k])


class Pairs(torch.utils.data.Dataset):
    def __init__(self):
        root = os.path.join(DATA, "seg")
        with open(os.path.join(root, "pairs.tsv")) as f:
            self.rows = [[os.path.join(root, p) for p in line.split("\t")[:2]]
                         for line in f if line.strip()]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        import torchvision.transforms.functional as F
        from torchvision.transforms import RandomCrop
        img = Image.open(self.rows[i][0]).convert("RGB")
        mask = Image.open(self.rows[i][1])
        top, left, h, w = RandomCrop.get_params(img, (384, 384))
        img, mask = F.crop(img, top, left, h, w), F.crop(mask, top, left, h, w)
        if torch.rand(1) < 0.5:
            img, mask = F.hflip(img), F.hflip(mask)
        return F.pil_to_tensor(img), F.pil_to_tensor(mask)


# --------------------------------------------------------------- timing
def timed(iterate, passes=RUNS):
    """Median seconds of `passes` calls after one warm-up."""
    iterate()
    times = []
    for _ in range(passes):
        t = time.perf_counter()
        iterate()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def dataloader_best(dataset, batch, samples):
    best = None
    for workers in range(0, CORES + 1):
        if getattr(dataset, "batched", False):  # Its items are whole batches.
            dl = torch.utils.data.DataLoader(
                dataset, batch_size=None, num_workers=workers, persistent_workers=workers > 0,
                sampler=torch.utils.data.BatchSampler(
                    torch.utils.data.RandomSampler(dataset), batch, drop_last=False))
        else:
            dl = torch.utils.data.DataLoader(
                dataset, batch_size=batch, shuffle=True, num_workers=workers,
                persistent_workers=workers > 0)

        def run():
            for _ in dl:
                pass
        rate = samples / timed(run)
        if best is None or rate > best[0]:
            best = (rate, workers)
        del dl
    return best


def stoker_rate(loader, samples, epochs=1):
    def run():
        for _ in range(epochs):
            for _ in loader:
                pass
    return samples * epochs / timed(run)


def cold_and_warm(source, fields, patch):
    """Patches/s of 4 volumes x PER_VOLUME (op `patch`): epoch 1 on a fresh
    daemon (every volume decoded; the median of RUNS fresh daemons), and
    the epochs after it (patches copied from the volume cache)."""
    firsts, later = [], None
    for run in range(RUNS):
        cold = Stokerd()  # Its volume cache starts empty.
        try:
            rate, ld = first_epoch(cold, source, fields, patch)
            firsts.append(rate)
            if run == 0:
                later = stoker_rate(ld, 4 * PER_VOLUME)
            ld.close()
        finally:
            cold.close()
    return statistics.median(firsts), later


def after_steps(source, fields, patch, step):
    """Patches/s of the epochs after an epoch 1 whose trainer takes `step`
    seconds a batch (a model busy on its GPU), on a fresh daemon: while it
    steps, the daemon fills the chunks no patch touched, so the epochs after
    copy only. Also the share of chunks filled that way."""
    d = Stokerd()
    try:
        ld = stoker.Loader(source, batch_size=2, socket=d.sock, ring_slots=8,
                           fields=fields, pipeline=[patch], shuffle=True)
        for _ in ld:
            time.sleep(step)  # The trainer's step.
        stats = d.stats()
        idle = stats.get("volume_cache_idle_chunks", 0) / max(1, stats.get("volume_cache_chunks", 0))
        rate = stoker_rate(ld, 4 * PER_VOLUME)
        ld.close()
        return rate, idle
    finally:
        d.close()


def first_epoch(daemon, source, fields, patch):
    """Patches/s of a new Loader's first epoch (4 x PER_VOLUME patches of
    op `patch`, batch 2) on `daemon`, and the Loader."""
    ld = stoker.Loader(source, batch_size=2, socket=daemon.sock, ring_slots=8,
                       fields=fields, pipeline=[patch], shuffle=True)
    t0 = time.perf_counter()
    for _ in ld:
        pass
    return 4 * PER_VOLUME / (time.perf_counter() - t0), ld


def after_restart(source, fields, patch):
    """Patches/s of epoch 1 on a restarted daemon whose L2 holds the volumes
    a first daemon decoded (the median of RUNS restarts): one copy from L2
    per volume instead of an inflate."""
    l2 = tempfile.mkdtemp(prefix="stoker-bench-l2-")
    flags = ("--l2-path", l2, "--l2-max-bytes", "4G")
    try:
        rates = []
        for run in range(RUNS + 1):
            d = Stokerd(*flags)
            try:
                rate, ld = first_epoch(d, source, fields, patch)
                if run > 0:  # Run 0 decodes and fills L2.
                    rates.append(rate)
                    assert d.stats().get("volume_cache_decodes", 0) == 0
                ld.close()
            finally:
                d.close()
        return statistics.median(rates)
    finally:
        shutil.rmtree(l2, ignore_errors=True)


def main():
    # Each pass is timed whole: the Loader's end-of-epoch starvation advice
    # (the benchmark does no training work, so it always waits) is noise here.
    warnings.simplefilter("ignore", stoker.StarvationWarning)
    if set(CASES) - {"store", "compressed", "nifti"}:
        make_data()
    bw = memcpy_gbps()
    patch_bw = patch_copy_gbps() if "volumes" in CASES else float("nan")
    print(f"cores {CORES}; single-thread memcpy {bw:.1f} GB/s, patch copy "
          f"(numpy, in RAM) {patch_bw:.1f} GB/s; medians of {RUNS} passes "
          "after a warm-up\n", flush=True)
    daemon = Stokerd()
    sock = daemon.sock
    try:
        rows = []
        # (a) HDF5 features.
        n, batch = 200_000, 8192
        if "features" in CASES:
            ld = stoker.Loader({"hdf5": {"path": os.path.join(DATA, "features.h5"),
                                         "dataset": "x", "labels": "y"}},
                               batch_size=batch, socket=sock,
                               fields=[stoker.array((128,), "x"), stoker.label()],
                               pipeline=[], shuffle=True)
            s = stoker_rate(ld, n)
            ld.close()
            t, w = dataloader_best(Features(os.path.join(DATA, "features.h5")), batch, n)
            rows.append(("(a) HDF5 features [200k,128] f32, batch 8192", s, t, w,
                         s * 512 / 1e9, bw))
        # (a') A folder of gzip-compressed feature files.
        if "store" in CASES:
            make_store()
            ld = stoker.Loader({"hdf5": {"path": STORE, "dataset": "x", "labels": "y"}},
                               batch_size=batch, socket=sock,
                               fields=[stoker.array((128,), "x"), stoker.label()],
                               pipeline=[], shuffle=True)
            s = stoker_rate(ld, n)
            ld.close()
            # h5py reads each row through its gzip chunks (about 300 rows/s
            # per worker here): the DataLoader's rate is measured on 2,048
            # random rows a pass, not the whole 200k.
            some = np.random.default_rng(0).choice(n, 2048, replace=False).tolist()
            t, w = dataloader_best(torch.utils.data.Subset(Store(STORE), some), 2048, 2048)
            rows.append(("(a') 4 x part*.H5 [50k,128] f32 gzip + labels, batch 8192", s, t, w,
                         s * 512 / 1e9, bw * CORES))
            t, w = dataloader_best(StoreInRam(STORE), batch, n)
            rows.append(("     against workers holding the files in RAM, batch gathers", s, t,
                         w, s * 512 / 1e9, bw * CORES))
        # (b) Volume patches.
        patch_bytes = 4 * PATCH[0] * PATCH[1] * PATCH[2]
        for kind, src in (("npy", {"npy": {"path": os.path.join(DATA, "vol_npy")}}),
                          ("hdf5", {"hdf5": {"path": os.path.join(DATA, "vol_h5"),
                                             "dataset": "vol"}})):
            if "volumes" not in CASES:
                break
            ld = stoker.Loader(src, batch_size=2, socket=sock, ring_slots=8,
                               fields=[stoker.array(PATCH, "patch")],
                               pipeline=[stoker.random_patch(PATCH)], shuffle=True)
            s = stoker_rate(ld, 4, epochs=100)
            ld.close()
            t, w = dataloader_best(Volumes(kind, 100), 2, 100)
            rows.append((f"(b) {kind} patches 72x136x136 f32 of 4 x 0.47 GiB, batch 2",
                         s, t, w, s * patch_bytes / 1e9, bw * CORES))
            rows.append(("    the same against the patch-copy ceiling x cores", s, t, w,
                         s * patch_bytes / 1e9, patch_bw * CORES))
        # (b') Compressed volumes, several patches each, from a cold cache.
        if "compressed" in CASES:
            make_scans()
            n = 4 * PER_VOLUME
            first, later = cold_and_warm({"hdf5": {"path": SCANS, "dataset": "vol"},
                                          "samples_per_volume": PER_VOLUME},
                                         [stoker.array(PATCH, "patch")],
                                         stoker.random_patch(PATCH))
            t, w = dataloader_best(Volumes("gzip", n), 2, n)
            rows.append(("(b') gzip *.H5 4 x 0.47 GiB, patches 72x136x136, epoch 1", first, t,
                         w, first * patch_bytes / 1e9, bw * CORES))
            rows.append(("     epochs 2-5 (chunks no patch touched yet still decoded)", later, t, w,
                         later * patch_bytes / 1e9, bw * CORES))
            stepped, idle = after_steps({"hdf5": {"path": SCANS, "dataset": "vol"},
                                         "samples_per_volume": PER_VOLUME},
                                        [stoker.array(PATCH, "patch")],
                                        stoker.random_patch(PATCH), STEP)
            rows.append((f"     epochs 2-5 after {STEP:g} s steps in epoch 1 ({idle:.0%} of "
                          "chunks filled meanwhile)", stepped, t, w,
                          stepped * patch_bytes / 1e9, bw * CORES))
        # (b'') NIfTI scans with label volumes, from a cold cache.
        if "nifti" in CASES:
            make_nifti()
            first, later = cold_and_warm({"nifti": {"path": os.path.join(NIFTI, "train.tsv")},
                                          "samples_per_volume": PER_VOLUME},
                                         [stoker.array(PATCH, "image"),
                                          stoker.array(PATCH, "seg", dtype="uint8", file=1)],
                                         stoker.random_patch(PATCH, label="seg", pos=1, neg=1))
            t, w = fresh = dataloader_best(NiftiPatches(), 2, 4 * PER_VOLUME)
            pair_bytes = 5 * PATCH[0] * PATCH[1] * PATCH[2]
            rows.append(("(b'') .nii.gz scan + labels, label-biased 1:1, epoch 1", first, t, w,
                         first * pair_bytes / 1e9, bw * CORES))
            rows.append(("      the same, epochs 2+ (from the volume cache)", later, t, w,
                         later * pair_bytes / 1e9, bw * CORES))
            t, w = dataloader_best(NiftiPatches(keep=True), 2, 4 * PER_VOLUME)
            rows.append(("      epochs 2+ against workers keeping volumes (TorchIO Queue)",
                         later, t, w, later * pair_bytes / 1e9, bw * CORES))
            restarted = after_restart({"nifti": {"path": os.path.join(NIFTI, "train.tsv")},
                                       "samples_per_volume": PER_VOLUME},
                                      [stoker.array(PATCH, "image"),
                                       stoker.array(PATCH, "seg", dtype="uint8", file=1)],
                                      stoker.random_patch(PATCH, label="seg", pos=1, neg=1))
            t, w = fresh
            rows.append(("      epoch 1 after a restart (volumes from L2)", restarted, t, w,
                         restarted * pair_bytes / 1e9, bw * CORES))
        # (c) Segmentation pairs.
        if "segmentation" in CASES:
            ld = stoker.Loader(os.path.join(DATA, "seg", "pairs.tsv"), batch_size=32,
                               socket=sock,
                               fields=[stoker.image(384, 384), stoker.mask(384, 384, file=1)],
                               pipeline=[stoker.random_crop(384), stoker.flip()], shuffle=True)
            s = stoker_rate(ld, 256)
            ld.close()
            t, w = dataloader_best(Pairs(), 32, 256)
            rows.append(("(c) 512x512 JPEG + PNG mask, random crop 384 + flip, batch 32",
                         s, t, w, None, None))
    finally:
        daemon.close()
    print(f"{'benchmark':62} {'stoker/s':>10} {'DataLoader/s':>13} {'workers':>7} "
          f"{'ratio':>6} {'GB/s':>6} {'of bw':>6}")
    for name, s, t, w, gbps, ref in rows:
        extra = f"{gbps:6.2f} {gbps / ref:6.0%}" if gbps is not None else ""
        print(f"{name:62} {s:10.1f} {t:13.1f} {w:7d} {s / t:6.2f} {extra}")


if __name__ == "__main__":
    main()
