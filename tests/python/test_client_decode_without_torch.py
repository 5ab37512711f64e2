"""Client decode needs torch and torchvision in the trainer: without them
the Loader says so before any RPC (run by the interpreter without
packages, tests/python/run_other_python.sh)."""

import importlib.util

import pytest

import stoker


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None,
                    reason="torch is installed in this interpreter")
def test_decode_device_without_torch_is_a_clear_error(dataset):
    with pytest.raises(ValueError, match="client_decode= needs torch and torchvision"):
        stoker.Loader(dataset, 4, client_decode=stoker.ClientDecode("cpu"),
                      socket="/nonexistent/s.sock", transform="train", shuffle=True)
