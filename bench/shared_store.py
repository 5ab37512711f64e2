"""One user's hostile object store against another user's rate, in one run
on the same daemon build and cores.

A fresh daemon for each measurement lists one loopback store
(tests/python/s3_stores.py, a Python ThreadingHTTPServer in this process)
in --object-store-endpoints, with its caches of samples off (CACHES_OFF:
every epoch reads) and its other flags at their defaults (64 reader
threads, a user's cap all but an eighth of them: 56; a request's deadline
2 min; the low-speed limit 1 KiB/s for 10 s). The store serves two
buckets:

  victim    an ImageFolder of real photographs (bench/pixels.py's tiles of
            Debian's mate-backgrounds, 480 JPEGs of 500x375 and 375x500;
            its photo-like JPEGs where that package is missing).
  attacker  256 objects in 4 classes, whose GETs answer as the mode says:
              none    no attacker runs (the baseline);
              none-8  no attacker, the daemon with --reader-threads 8 (the
                      threads an attacker at its cap leaves the victim);
              drip    200, then a byte a second;
              big     60 MiB objects, sent at 8 MB/s in all (a store whose
                      link is full);
              storm   503 SlowDown at once.
            Its listings answer at once in every mode.

The victim is uid 65534: one stoker.Loader (batch 32, val at 64 px, in
order) reading EPOCHS epochs of those photos from a local folder (target
"local") or from s3://victim/train/ with its own key (target "s3"); its
rate is samples/s over the epochs after the first (the first lists). The
attacker is uid 65533: ATTACKERS processes, each a Loader (batch 32,
on_error "zeros", every epoch again) on s3://attacker/train/ with a key of
its own. It starts first; the victim starts once the store has the
attacker's GETs in flight (drip, big) or has refused 64 of them (storm),
and the daemon has more of the attacker's reads than its cap lets run
(reads queued). After the victim, the attacker is killed, and the time
until its last GET at the store ends (its sessions closed) is measured.

Each run measures, for each target, every mode between two baselines
(none, none-8, none, drip, none, big, none, storm, none), and a mode's
ratio is its rate over the mean of those two: the machine's pace drifts.
Printed: for each target and mode, the victim's samples/s and ratio (the
medians over RUNS), each run's ratio, the time the attacker's GETs took
to end once its sessions closed, and for the s3 target the store's own
ceiling under the same attack: GETs a second of the victim's objects
from a threaded Python loop on kept-alive connections, without the
daemon (right after the victim, the attacker still running, at the best
count of connections measured before the runs). Then what each party
used while the victim's measured epochs ran: cores of the victim, the
daemon, the attacker's Loaders, the store and the rest of the machine
(other work on it: a measurement whose rest exceeds --quiet cores is
made again, up to --tries times, the quietest kept), the daemon's busy
reader threads, and the attacker's GETs at the store.

Needs root (the users are uids without passwd entries) and this tree's
build: bazel build --jobs=2 //server:stokerd //client/c:libstoker.so
//client/cpp:stokerctl.

usage: /usr/bin/python3 bench/shared_store.py [--runs 3] [--epochs 20]
       [--modes none,none-8,drip,big,storm] [--targets local,s3]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "client", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))

from pixels import jpeg_data, photo_data  # noqa: E402
from s3_stores import Drip, Folder, LoopbackStore, Paced, Storm, image_folder_keys  # noqa: E402
from stokerd import BIN, ROOT, Stokerd  # noqa: E402

VICTIM, ATTACKER = 65534, 65533
ATTACKERS = 4
MODES = ("none", "none-8", "drip", "big", "storm")
ATTACK_KEYS = image_folder_keys("train", ("a", "b", "c", "d"), 64)
ATTACKS = {
    "drip": lambda: Drip(ATTACK_KEYS, 100000),
    "big": lambda: Paced(ATTACK_KEYS, 60 << 20, 8e6),
    "storm": lambda: Storm(ATTACK_KEYS, 100000),
}
CONNECTIONS = (1, 4, 16, 64)  # The ceiling's loop.
CLOSED_WAIT = 300  # Seconds the attacker's GETs may outlive its sessions.
# Every epoch reads its samples: no L1, and no cache of what they become
# (val samples are kept whole by the decoded cache, and pictures by the
# pixel cache, by default: later epochs would make no request).
CACHES_OFF = ("--l1-bytes", "0", "--decoded-cache-bytes", "0", "--pixel-cache-bytes", "0")

# Run by each reader: the attacker reads until killed; the victim prints
# "warm" and its CPU seconds after its first epoch, then as JSON its epochs
# ([samples, seconds] each), its CPU seconds and its remote counts.
READ = r"""
import json, sys, time
sys.modules["torch"] = None  # Native batches only: no second of importing torch.
import stoker
role, sock, dataset, epochs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if role == "attacker":
    while True:
        try:
            ld = stoker.Loader(dataset, batch_size=32, transform="val", image_size=64,
                               shuffle=True, socket=sock, on_error="zeros", resume_timeout=0)
            while True:
                for b in ld.batches():
                    pass
        except Exception as e:  # A session that failed is opened again.
            print(f"attacker: {e}", file=sys.stderr, flush=True)
            time.sleep(0.5)
ld = stoker.Loader(dataset, batch_size=32, transform="val", image_size=64, shuffle=False,
                   socket=sock, resume_timeout=0)
done = []
for k in range(epochs):
    t = time.perf_counter()
    n = sum(b.samples for b in ld.batches())
    done.append([n, time.perf_counter() - t])
    if k == 0:
        print("warm", time.process_time(), flush=True)
print(json.dumps({"epochs": done, "cpu": time.process_time(),
                  "remote": ld.stats().get("remote")}), flush=True)
"""

# The store's ceiling: GETs/s of `keys` (in turn) from `url` over
# `connections` threads for `seconds`, each on one kept-alive connection.
CEILING = r"""
import http.client, json, sys, threading, time
from urllib.parse import urlsplit
url, connections, seconds, keys = (sys.argv[1], int(sys.argv[2]), float(sys.argv[3]),
                                   json.loads(sys.stdin.read()))
host = urlsplit(url)
done = [0] * connections
stop = time.monotonic() + seconds
def loop(i):
    c = http.client.HTTPConnection(host.hostname, host.port)
    k = i
    while time.monotonic() < stop:
        c.request("GET", "/victim/" + keys[k % len(keys)])
        r = c.getresponse()
        r.read()
        if r.status != 200:
            raise SystemExit(f"GET: HTTP {r.status}")
        done[i] += 1
        k += connections
threads = [threading.Thread(target=loop, args=(i,)) for i in range(connections)]
t = time.monotonic()
for th in threads:
    th.start()
for th in threads:
    th.join()
print(sum(done) / (time.monotonic() - t))
"""


class Users:
    """What the two users need: a HOME each, and this tree's libstoker.so
    where they may load it (bazel-bin is root's)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="stoker-bench-shared-")
        os.chmod(self.dir, 0o755)
        self.lib = shutil.copy(os.path.join(BIN, "client", "c", "libstoker.so"), self.dir)
        os.chmod(self.lib, 0o755)
        # Their errors.
        self.log = open(os.path.join(self.dir, "attacker.log"), "w+")
        self.victim_log = open(os.path.join(self.dir, "victim.log"), "w+")
        self.homes = {}
        for uid in (VICTIM, ATTACKER):
            home = os.path.join(self.dir, f"home{uid}")
            os.mkdir(home, 0o700)
            os.chown(home, uid, uid)
            self.homes[uid] = home

    def reader(self, uid, role, sock, dataset, epochs, store_url, **popen):
        """READ as `uid` (its own key for the store at `store_url`)."""
        env = {"PATH": "/usr/bin:/bin", "HOME": self.homes[uid], "LANG": "C.UTF-8",
               "PYTHONPATH": os.path.join(ROOT, "client", "python"), "STOKER_LIB": self.lib,
               "AWS_ENDPOINT_URL": store_url, "AWS_DEFAULT_REGION": "us-east-1",
               "AWS_ACCESS_KEY_ID": f"AKIA{role.upper()}",
               "AWS_SECRET_ACCESS_KEY": f"{role}-secret"}

        def become():
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        return subprocess.Popen(["/usr/bin/python3", "-c", READ, role, sock, dataset, str(epochs)],
                                env=env, preexec_fn=become, cwd="/", text=True, **popen)

    def log_tail(self, victim=False):
        log = self.victim_log if victim else self.log
        log.seek(0)
        return log.read()[-2000:]

    def close(self):
        self.log.close()
        self.victim_log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def readable(folder):
    """`folder` with every file and folder readable by anyone."""
    for dirpath, _, names in os.walk(folder):
        os.chmod(dirpath, os.stat(dirpath).st_mode | 0o555)
        for name in names:
            path = os.path.join(dirpath, name)
            os.chmod(path, os.stat(path).st_mode | 0o444)
    return folder


def ceiling(store, keys, connections, seconds=2.0):
    out = subprocess.run([sys.executable, "-c", CEILING, store.url, str(connections),
                          str(seconds)], input=json.dumps(keys), capture_output=True,
                         text=True, check=True)
    return float(out.stdout)


def attacking(store, daemon, mode):
    """Waits until the attacker is at it: the store has its GETs in flight
    (drip, big) or has refused 64 (storm), and the daemon holds more of its
    reads than the attacker may run (reads queued: it is at its cap)."""
    def at_it(s):
        c = s.count("attacker")
        return c.gets >= 64 if mode == "storm" else c.active >= 16
    if not store.wait(at_it, 120):
        raise RuntimeError(f"the attacker never reached the store ({mode})")
    deadline = time.monotonic() + 60
    while not next(p["queued"] for p in daemon.stats()["pools"] if p["pool"] == "reader"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the attacker never filled its reader threads ({mode})")
        time.sleep(0.1)


def closed(store, attackers):
    """Stops the attacker; the seconds until its last GET at the store
    ended (its sessions closed: the daemon cancels their reads)."""
    for a in attackers:
        a.kill()
    t = time.monotonic()
    for a in attackers:
        a.wait()
    if not store.wait(lambda s: s.count("attacker").active == 0, CLOSED_WAIT):
        raise RuntimeError(f"the attacker's GETs outlived its sessions by {CLOSED_WAIT} s")
    return time.monotonic() - t


def cpu_seconds(pid):
    """CPU seconds process `pid` (all its threads) has used; 0 once gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_seconds():
    """CPU seconds all cores have been busy (not idle, not waiting)."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


class Window:
    """What each party used while the victim's measured epochs ran: cores
    (CPU seconds a second) of the victim (as it reports them), of `pids`
    (name -> pids), of the rest of the machine; the daemon's busy reader
    threads and the attacker's GETs."""

    def __init__(self, store, daemon, pids, victim_cpu):
        self.store, self.daemon, self.pids = store, daemon, pids
        self.t = time.monotonic()
        self.cpu = self.used()
        self.cpu["victim"] = victim_cpu
        self.reader = self.reader_seconds()
        with store.cond:
            c = store.count("attacker")
            c.most, self.gets = c.active, c.gets

    def used(self):
        got = {name: sum(cpu_seconds(p) for p in pids) for name, pids in self.pids.items()}
        got["machine"] = machine_seconds()
        return got

    def reader_seconds(self):
        return next(p["busy_seconds"] for p in self.daemon.stats()["pools"]
                    if p["pool"] == "reader")

    def end(self, victim_cpu):
        cpu, reader = self.used(), self.reader_seconds()
        cpu["victim"] = victim_cpu
        secs = time.monotonic() - self.t
        with self.store.cond:
            c = self.store.count("attacker")
            got = {"most": c.most, "gets_s": (c.gets - self.gets) / secs}
        cores = {name: (cpu[name] - self.cpu[name]) / secs for name in cpu}
        cores["rest"] = cores.pop("machine") - sum(cores.values())
        got.update(cores)
        got["readers"] = (reader - self.reader) / secs
        return got


def measure(store, users, target, mode, epochs, data, connections):
    """One victim run on a fresh daemon under `mode`: its samples/s and
    what each party used meanwhile (Window); the store's ceiling at
    `connections` (when given) with the attacker still running."""
    keys = sorted(store.buckets["victim"].sizes)
    attack = mode in ATTACKS
    if attack:
        store.buckets["attacker"] = ATTACKS[mode]()
    dataset = data if target == "local" else "s3://victim/train/"
    flags = ("--reader-threads", "8") if mode == "none-8" else ()
    attackers = []
    with Stokerd("--object-store-endpoints", store.url, *CACHES_OFF, *flags,
                 "--socket-mode", "0666") as d:
        os.chmod(d.dir, 0o755)
        try:
            for _ in range(ATTACKERS if attack else 0):
                attackers.append(users.reader(ATTACKER, "attacker", d.sock, "s3://attacker/train/",
                                              0, store.url, stdout=subprocess.DEVNULL,
                                              stderr=users.log))
            if attackers:
                attacking(store, d, mode)
            victim = users.reader(VICTIM, "victim", d.sock, dataset, epochs, store.url,
                                  stdout=subprocess.PIPE, stderr=users.victim_log)
            out, warm = "", victim.stdout.readline().split()  # Its first epoch is done.
            if warm[:1] == ["warm"]:
                window = Window(store, d, {"daemon": [d.proc.pid],
                                           "attacker": [a.pid for a in attackers],
                                           "store": [os.getpid()]}, float(warm[1]))
                out = victim.stdout.readline()
                if out:
                    got = window.end(json.loads(out)["cpu"])
            if victim.wait(timeout=600) != 0 or not out:
                raise RuntimeError(f"victim failed ({target}, {mode}): {users.log_tail(True)}")
            if connections:
                got["ceiling"] = ceiling(store, keys, connections)
            if any(a.poll() is not None for a in attackers):
                raise RuntimeError(f"an attacker exited: {users.log_tail()}")
            got["closed"] = closed(store, attackers)
        finally:
            for a in attackers:
                a.kill()
                a.wait()
    done = json.loads(out)
    if target == "s3":  # Every epoch read every sample (the last 16 are kept).
        per_epoch = done["remote"]["epochs"]
        if any(per_epoch[str(e)]["requests"] < n for e, (n, _) in enumerate(done["epochs"])
               if str(e) in per_epoch):
            raise RuntimeError(f"an epoch read less than its samples: {per_epoch}")
    later = done["epochs"][1:]
    got["rate"] = sum(n for n, _ in later) / sum(s for _, s in later)
    return got


def quietest(args, measure_once):
    """measure_once() again while the rest of the machine was busier than
    args.quiet cores, at most args.tries times; the quietest try."""
    tries = [measure_once()]
    while len(tries) < args.tries and tries[-1]["rest"] > args.quiet:
        tries.append(measure_once())
    return min(tries, key=lambda g: g["rest"]), len(tries)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--targets", default="local,s3")
    ap.add_argument("--quiet", type=float, default=0.25,
                    help="a measurement during which the rest of the machine used more "
                    "cores is made again (at most --tries times; the quietest kept)")
    ap.add_argument("--tries", type=int, default=3)
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m != "none"]
    targets = args.targets.split(",")
    if os.geteuid() != 0:
        print("shared_store: needs root to read as other users; skipped")
        return
    data = readable(photo_data() or jpeg_data())
    victim = Folder(data)
    store = LoopbackStore({"victim": victim})
    users = Users()
    try:
        best = {n: ceiling(store, sorted(victim.sizes), n) for n in CONNECTIONS}
        conns = max(best, key=best.get)
        print(f"store ceiling alone (GETs/s of the victim's {len(victim.sizes)} objects, "
              f"{sum(victim.sizes.values()) / 1e6:.1f} MB): " +
              ", ".join(f"{n} connections {r:,.0f}" for n, r in best.items()), flush=True)
        got = {}
        for run in range(args.runs):
            for target in targets:
                # Each mode between two baselines, and measured against
                # their mean: the machine's pace drifts.
                seq = ["none"] + [x for m in modes for x in (m, "none")]
                done = []
                for mode in seq:
                    g, tries = quietest(args, lambda: measure(
                        store, users, target, mode, args.epochs, data,
                        conns if target == "s3" else 0))
                    done.append(g)
                    print(f"run {run + 1} {target} {mode} ({tries} tries): " +
                          ", ".join(f"{k} {v:.2f}" for k, v in g.items()), flush=True)
                for i, (mode, g) in enumerate(zip(seq, done)):
                    if mode != "none":
                        g["ratio"] = g["rate"] / statistics.mean(
                            (done[i - 1]["rate"], done[i + 1]["rate"]))
                    got.setdefault((target, mode), []).append(g)
        report(got, targets, ["none"] + modes, args, conns)
    finally:
        users.close()
        store.close()


def report(got, targets, modes, args, conns):
    def median(target, mode, key):
        return statistics.median(g[key] for g in got[(target, mode)])

    names = {"local": "local folder", "s3": "s3://victim/ (same store)"}
    print(f"\nvictim (uid 65534, val 64 px, batch 32) beside an attacker (uid 65533, "
          f"{ATTACKERS} Loaders, batch 32); {os.cpu_count()} cores, {args.runs} runs, "
          f"epochs 2-{args.epochs}\n")
    print("| victim reads | attacker's store | victim samples/s | x baseline | each run "
          "| store ceiling GETs/s | x ceiling | attacker's GETs end (s after close) |")
    print("|---|---|---:|---:|---|---:|---:|---:|")
    for target in targets:
        base = median(target, "none", "rate")
        for mode in modes:
            gs = got[(target, mode)]
            rate = median(target, mode, "rate")
            if mode == "none":  # The baselines' spread.
                spread = [g["rate"] / base for g in gs]
                cells = [f"{rate:,.0f}", "1.00",
                         f"{min(spread):.2f}-{max(spread):.2f} ({len(gs)} baselines)"]
            else:
                cells = [f"{rate:,.0f}", f"{median(target, mode, 'ratio'):.2f}",
                         ", ".join(f"{g['ratio']:.2f}" for g in gs)]
            if target == "s3":
                ceil = median(target, mode, "ceiling")
                cells += [f"{ceil:,.0f}", f"{rate / ceil:.2f}"]
            else:
                cells += ["", ""]
            cells.append(f"{max(g['closed'] for g in gs):.2f}" if mode in ATTACKS else "")
            print(f"| {names[target]} | {mode} | " + " | ".join(cells) + " |")
    print(f"\nsamples/s: medians; x baseline: the median over runs of each run's rate over "
          f"the mean of the baselines measured just before and after it (baseline row: "
          f"the least and most of them over their median); ceiling: a threaded Python GET "
          f"loop, {conns} "
          f"kept-alive connection(s), run after the victim with the attacker still at it; "
          f"GETs end: the most of any run")
    print("\nwhile the victim's measured epochs ran (medians): cores each used, the "
          "daemon's busy reader threads, the attacker's GETs at the store\n")
    print("| victim reads | attacker's store | victim | daemon | attacker | store | rest "
          "| reader threads | attacker in flight (most) | attacker GETs/s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for target in targets:
        for mode in modes:
            cores = " | ".join(f"{median(target, mode, k):.2f}"
                               for k in ("victim", "daemon", "attacker", "store", "rest"))
            attack = (f"{max(g['most'] for g in got[(target, mode)])} | "
                      f"{median(target, mode, 'gets_s'):,.1f}" if mode in ATTACKS else " | ")
            print(f"| {names[target]} | {mode} | {cores} | {median(target, mode, 'readers'):.1f} "
                  f"| {attack} |")


if __name__ == "__main__":
    main()
