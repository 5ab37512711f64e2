"""Training with the Loader and pixel agreement with torchvision on PIL."""

import math
import os

import pytest

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")
Image = pytest.importorskip("PIL.Image")
transforms = torchvision.transforms

import stoker


def test_resnet18_trains_from_uint8_batches(daemon, dataset):
    torch.manual_seed(0)
    ld = stoker.Loader(dataset, batch_size=6, transform="train",
                       image_size=64, seed=1, socket=daemon.socket, shuffle=True)
    model = torchvision.models.resnet18(num_classes=3)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1) * 255
    before = model.fc.weight.detach().clone()
    losses = []
    for images, labels in ld:  # Normalize in the loop, as on a GPU.
        x = (images.permute(0, 3, 1, 2).float() - mean) / std
        loss = torch.nn.functional.cross_entropy(model(x), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert len(losses) == 4
    assert all(math.isfinite(l) for l in losses)
    assert not torch.equal(before, model.fc.weight)


@pytest.mark.parametrize("decode, max_mad, min_psnr", [
    ("full", 0.5, 40.0),        # PIL-identical resampling: exact in practice.
    ("auto", 4.0, 30.0),        # DCT-scaled decode: a different low-pass.
])
def test_val_pixels_agree_with_torchvision(daemon, dataset, decode, max_mad,
                                           min_psnr):
    tv = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224)])
    ld = stoker.Loader(dataset, batch_size=8, transform="val", image_size=224,
                       shuffle=False, socket=daemon.socket, decode=decode)
    paths = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(dataset)
                   for f in fs if f.endswith(".jpg"))
    diffs, sq = [], []
    for b in ld.batches():
        for img, idx in zip(b.images, b.indices):
            ref = np.asarray(tv(Image.open(paths[int(idx)]).convert("RGB")))
            d = img.astype(np.int16) - ref.astype(np.int16)
            diffs.append(np.abs(d).mean())
            sq.append((d.astype(np.float64) ** 2).mean())
    mad = float(np.mean(diffs))
    mse = float(np.mean(sq))
    psnr = 10 * math.log10(255 ** 2 / mse) if mse else float("inf")
    print(f"\nval (decode={decode}) vs torchvision Resize(256)+CenterCrop(224) "
          f"on PIL: mean |diff| = {mad:.4f}, PSNR = {psnr:.1f} dB over "
          f"{len(diffs)} images")
    assert len(diffs) == 24
    assert mad < max_mad
    assert psnr > min_psnr
