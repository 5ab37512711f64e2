"""What each per-pixel op costs: one stokerd (a decode thread per core,
decoded cache off), `stokerctl read --spec` of a 224x224 float32 train
pipeline (random_resized_crop, flip, normalize) on the demo dataset, plain
and with each op added; images/s as the median of RUNS (default 3) passes
of 3 epochs, and the ratio to the plain pipeline measured in the same run.

    python3 bench/op_cost.py [--data /tmp/stoker-demo-data]
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile

from stokerd import BIN, Stokerd

RUNS = int(os.environ.get("RUNS", "3"))
JITTER = {"brightness": {"min": 0.6, "max": 1.4}, "contrast": {"min": 0.6, "max": 1.4},
          "saturation": {"min": 0.6, "max": 1.4}}
VARIANTS = {
    "plain": [],
    "color_jitter (b, c, s)": [{"color_jitter": JITTER}],
    "color_jitter (b, c, s, hue 0.1)": [
        {"color_jitter": dict(JITTER, hue={"min": -0.1, "max": 0.1})}],
    "random_grayscale (p 0.1)": [{"random_grayscale": {}}],
    "random_erasing (p 0.5)": [{"random_erasing": {}}],
}


def spec(data, extra):
    return {"dataset": {"folder": {"path": data}}, "batch_size": 32, "shuffle": True,
            "seed": 1,
            "fields": [{"name": "image", "kind": "KIND_IMAGE", "dtype": "DTYPE_FLOAT32",
                        "chw": True, "shape": [3, 224, 224]},
                       {"name": "label", "kind": "KIND_LABEL", "dtype": "DTYPE_INT64"}],
            "pipeline": [{"random_resized_crop": {"width": 224, "height": 224}}, {"flip": {}},
                         *extra,
                         {"normalize": {"mean": [0.485, 0.456, 0.406],
                                        "std": [0.229, 0.224, 0.225]}}]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/tmp/stoker-demo-data")
    args = ap.parse_args()
    rates = {name: [] for name in VARIANTS}
    with Stokerd("--decoded_cache_bytes=0") as d, tempfile.TemporaryDirectory() as tmp:
        for _ in range(RUNS):
            for name, extra in VARIANTS.items():  # Interleaved: drift hits all.
                path = os.path.join(tmp, "spec.json")
                with open(path, "w") as f:
                    json.dump(spec(args.data, extra), f)
                out = subprocess.run(
                    [os.path.join(BIN, "client", "cpp", "stokerctl"), "--socket", d.sock,
                     "read", "--spec", path, "--epochs", "3"],
                    check=True, capture_output=True, text=True).stdout
                rates[name].append(json.loads(out)["images_per_second"])
    plain = statistics.median(rates["plain"])
    print(f"| pipeline (224x224 float32, {os.cpu_count()} cores) | images/s | vs plain |")
    print("|---|---|---|")
    for name, r in rates.items():
        m = statistics.median(r)
        print(f"| {name} | {m:.0f} | {m / plain:.2f} |")


if __name__ == "__main__":
    main()
