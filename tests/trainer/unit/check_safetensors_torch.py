#!/usr/bin/python3
"""A safetensors file written by ouro (write_safetensors_sample) loads into torch with the few
lines of Python docs/TRAINING.md shows, and ouro's forward and backward on those weights agree
with torch's. Exits 77 (skipped) when torch cannot be imported.
  check_safetensors_torch.py WRITE_SAFETENSORS_SAMPLE"""
import json
import struct
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("torch is not installed (Debian package python3-torch): skipped")
    sys.exit(77)


def load(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    dtypes = {"F32": torch.float32, "I64": torch.int64, "BF16": torch.bfloat16}
    return {k: torch.frombuffer(bytearray(raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]),
                                dtype=dtypes[v["dtype"]]).reshape(v["shape"])
            for k, v in header.items() if k != "__metadata__"}


def main():
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([sys.argv[1], out], check=True)
        raw = open(out + "/model.safetensors", "rb").read()
        n = struct.unpack("<Q", raw[:8])[0]
        header = json.loads(raw[8:8 + n])
        assert n % 8 == 0, f"header length {n} is not padded to a multiple of 8"
        assert header["__metadata__"] == {"format": "pt", "layers": "784,32,10"}, header["__metadata__"]
        assert list(header)[1:] == ["0.weight", "0.bias", "2.weight", "2.bias"], list(header)

        model = torch.nn.Sequential(torch.nn.Linear(784, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
        model.load_state_dict(load(out + "/model.safetensors"))  # strict: every name and shape
        bound = 1 / 784 ** 0.5
        assert model[0].weight.abs().max() <= bound and model[0].weight.abs().max() > 0.9 * bound

        check = load(out + "/check.safetensors")
        logits = model(check["input"])
        loss = torch.nn.functional.cross_entropy(logits, check["labels"])
        loss.backward()
        torch.testing.assert_close(check["logits"], logits.detach(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(check["loss"], loss.detach(), rtol=1e-6, atol=1e-7)
        for name, param in model.named_parameters():
            torch.testing.assert_close(check["grad." + name], param.grad, rtol=1e-4, atol=1e-7,
                                       msg=lambda m: f"gradient of {name}: {m}")
        same = torch.equal(check["logits"], logits.detach())
        print(f"torch loaded ouro's safetensors; logits, loss and gradients agree "
              f"(logits bit-identical: {same})")


if __name__ == "__main__":
    main()
