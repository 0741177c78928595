#!/usr/bin/python3
"""ouro's GPT (trainer/model/gpt.hpp) against the same model in PyTorch: nanoGPT's GPT with
bias=True, no dropout, GELU(approximate='tanh') and the LM head tied to wte, rebuilt here (torch
1.13 has no fused attention, so attention is nanoGPT's explicit path). write_gpt_sample writes the
weights under nanoGPT's state_dict names and ouro's loss, logits and gradients for a batch; torch
loads the weights by name (strict) and must agree:
  loss    |ouro - torch| <= 1e-4 (the issue's bound)
  logits  max |ouro - torch| <= 1e-4
  grads   per tensor, max |ouro - torch| <= 1e-6 + 1e-4 * max |torch|: fp32 against fp32 with
          different summation orders (the gradients here are at most 0.5, so at most 5e-5).
Observed: loss 4.8e-7, logits 1.2e-7 (init) and 1.8e-6 (spread), gradients 3.3e-7 at most
(about 1e-6 of the largest gradient).
It also checks that ouro's tensor list is torch's state_dict() in order without lm_head.weight,
and that ouro's param_count is torch's (the tied head counted once). Exits 77 (skipped) when
/usr/bin/python3 cannot import torch.
  gpt_torch_check.py WRITE_GPT_SAMPLE"""
import json
import math
import struct
import subprocess
import sys
import tempfile

try:
    import torch
    from torch import nn
    from torch.nn import functional as F
except ImportError:
    print("torch cannot be imported (Debian package python3-torch): skipped")
    sys.exit(77)


def load(path):
    """A safetensors file as ({name: tensor}, metadata), tensors in file order."""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    dtypes = {"F32": torch.float32, "I64": torch.int64}
    tensors = {k: torch.frombuffer(bytearray(raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]),
                                   dtype=dtypes[v["dtype"]]).reshape(v["shape"])
               for k, v in header.items() if k != "__metadata__"}
    return tensors, header.get("__metadata__", {})


class LayerNorm(nn.Module):
    def __init__(self, ndim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim))

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_attn = nn.Linear(c["n_embd"], 3 * c["n_embd"])
        self.c_proj = nn.Linear(c["n_embd"], c["n_embd"])
        self.n_head, self.n_embd = c["n_head"], c["n_embd"]
        t = c["block_size"]
        # nanoGPT's mask buffer "bias", kept out of the state_dict: it is not a parameter.
        self.register_buffer("bias", torch.tril(torch.ones(t, t)).view(1, 1, t, t), persistent=False)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c["n_embd"], 4 * c["n_embd"])
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * c["n_embd"], c["n_embd"])

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = LayerNorm(c["n_embd"])
        self.attn = CausalSelfAttention(c)
        self.ln_2 = LayerNorm(c["n_embd"])
        self.mlp = MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c["vocab_size"], c["n_embd"]),
            wpe=nn.Embedding(c["block_size"], c["n_embd"]),
            h=nn.ModuleList([Block(c) for _ in range(c["n_layer"])]),
            ln_f=LayerNorm(c["n_embd"])))
        self.lm_head = nn.Linear(c["n_embd"], c["vocab_size"], bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied, as nanoGPT

    def forward(self, idx, targets):
        pos = torch.arange(0, idx.size(1), dtype=torch.long)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def check_case(out, name):
    weights, meta = load(f"{out}/{name}.model.safetensors")
    check, _ = load(f"{out}/{name}.check.safetensors")
    config = {k: int(meta[k]) for k in ("n_layer", "n_head", "n_embd", "block_size", "vocab_size")}
    model = GPT(config)
    expected_names = [k for k in model.state_dict() if k != "lm_head.weight"]
    assert list(weights) == expected_names, f"{name}: ouro's tensors {list(weights)} != torch's {expected_names}"
    count = sum(p.numel() for p in model.parameters())  # the tied head once
    assert count == int(meta["param_count"]), f"{name}: param_count {meta['param_count']} != torch's {count}"
    state = dict(weights, **{"lm_head.weight": weights["transformer.wte.weight"]})
    model.load_state_dict(state, strict=True)

    logits, loss = model(check["tokens"], check["targets"])
    loss.backward()
    loss_diff = abs(float(check["loss"]) - float(loss))
    logit_diff = float((check["logits"].double() - logits.detach().double()).abs().max())
    print(f"{name}: config {config}, {count} parameters, batch {list(check['tokens'].shape)}")
    print(f"  loss ouro {float(check['loss']):.7f} torch {float(loss):.7f}  |diff| {loss_diff:.2e}")
    print(f"  logits max |diff| {logit_diff:.2e}")
    assert loss_diff <= 1e-4, f"{name}: loss differs by {loss_diff}"
    assert logit_diff <= 1e-4, f"{name}: logits differ by up to {logit_diff}"

    params = dict(model.named_parameters())
    worst_ratio, failures = 0.0, []
    for tensor in weights:
        ours, theirs = check["grad." + tensor].double(), params[tensor].grad.double()
        diff = float((ours - theirs).abs().max())
        scale = float(theirs.abs().max())
        bound = 1e-6 + 1e-4 * scale
        worst_ratio = max(worst_ratio, diff / bound)
        print(f"  grad {tensor:36s} max|torch| {scale:.3e}  max|diff| {diff:.2e}")
        if diff > bound or scale == 0.0:
            failures.append(f"{tensor}: max |diff| {diff:.3e} > {bound:.3e} (max |grad| {scale:.3e})")
    assert not failures, f"{name}: gradients differ:\n  " + "\n  ".join(failures)
    print(f"  every gradient within its bound (worst at {worst_ratio:.3f} of it)")


def main():
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([sys.argv[1], out], check=True)
        for name in ("init", "spread"):
            check_case(out, name)
    print("ouro's GPT agrees with PyTorch's: names, parameter count, loss, logits and every gradient")


if __name__ == "__main__":
    main()
