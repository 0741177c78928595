"""The GPT that ouro-train --model gpt trains, in PyTorch, for bench/trainer/side_by_side.py.

nanoGPT's GPT (model.py) with bias=True, no dropout, GELU(approximate="tanh"), a byte vocabulary
(V = 256) and the LM head tied to wte; the same modules and state_dict names as
tests/trainer/gpt/gpt_torch_check.py (and as ouro's safetensors files, less lm_head.weight).
torch 1.13 has no scaled_dot_product_attention, so attention is nanoGPT's explicit path (the full
T x T scores, masked). Also here: nanoGPT's initialisation, its AdamW parameter groups (decay on
tensors of two or more dimensions), its learning-rate schedule (train.py's get_lr, as ouro's
trainer/model/lr_schedule.hpp computes it), the fortunes corpus read as ouro-train reads it
(trainer/data/text_corpus.hpp) and the model's FLOPs per token.
"""

import math
import os

VOCAB = 256
FORTUNES_DIR = "/usr/share/games/fortunes"


# ---- the corpus: bytes, the 9/10 split, windows of T + 1 bytes ---------------------------------

def load_corpus(path=None):
    """(bytes, source): --text FILE, or the fortunes package's regular files but *.dat (no
    symlinks, so not the *.u8 names) in byte-wise name order, concatenated."""
    if path:
        return open(path, "rb").read(), path
    names = sorted((n for n in os.listdir(FORTUNES_DIR)
                    if not n.endswith(".dat") and not os.path.islink(os.path.join(FORTUNES_DIR, n))
                    and os.path.isfile(os.path.join(FORTUNES_DIR, n))), key=os.fsencode)
    if not names:
        raise OSError(f"no fortune files in {FORTUNES_DIR} (install the Debian package fortunes, or pass --text)")
    data = b"".join(open(os.path.join(FORTUNES_DIR, n), "rb").read() for n in names)
    return data, f"fortunes ({len(names)} files in {FORTUNES_DIR})"


def train_part(data):
    """The training bytes: the first floor(size * 9 / 10)."""
    return data[:len(data) * 9 // 10]


def window_count(size, block_size):
    """Windows of block_size + 1 bytes in `size` bytes, window k starting at k * block_size."""
    return (size - 1) // block_size if size >= block_size + 1 else 0


# ---- the model ------------------------------------------------------------------------------------

def make_gpt_classes():
    import torch
    from torch import nn
    from torch.nn import functional as F

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
                wte=nn.Embedding(c.get("vocab_size", VOCAB), c["n_embd"]),
                wpe=nn.Embedding(c["block_size"], c["n_embd"]),
                h=nn.ModuleList([Block(c) for _ in range(c["n_layer"])]),
                ln_f=LayerNorm(c["n_embd"])))
            self.lm_head = nn.Linear(c["n_embd"], c.get("vocab_size", VOCAB), bias=False)
            self.transformer.wte.weight = self.lm_head.weight  # tied, as nanoGPT
            # nanoGPT's init: N(0, 0.02) for linear and embedding weights, zero biases, and the
            # residual projections N(0, 0.02 / sqrt(2 L)).
            for module in self.modules():
                if isinstance(module, nn.Linear):
                    nn.init.normal_(module.weight, 0.0, 0.02)
                    if module.bias is not None:
                        nn.init.zeros_(module.bias)
                elif isinstance(module, nn.Embedding):
                    nn.init.normal_(module.weight, 0.0, 0.02)
            for name, p in self.named_parameters():
                if name.endswith("c_proj.weight"):
                    nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * c["n_layer"]))

        def forward(self, idx, targets):
            pos = torch.arange(0, idx.size(1), dtype=torch.long)
            x = self.transformer.wte(idx) + self.transformer.wpe(pos)
            for block in self.transformer.h:
                x = block(x)
            logits = self.lm_head(self.transformer.ln_f(x))
            return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    return GPT


def build_gpt(config):
    """config: n_layer, n_head, n_embd, block_size."""
    return make_gpt_classes()(config)


def ouro_state(model):
    """The state_dict as ouro-train --init reads it: lm_head.weight (tied to wte) left out."""
    return {k: v for k, v in model.state_dict().items() if k != "lm_head.weight"}


def load_ouro_state(model, state):
    model.load_state_dict(dict(state, **{"lm_head.weight": state["transformer.wte.weight"]}), strict=True)


def adamw_groups(model, weight_decay):
    """nanoGPT's configure_optimizers: decay on tensors of 2+ dimensions (matrices, embeddings)."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def learning_rate(i, lr, min_lr, warmup, total):
    """nanoGPT's get_lr(i) as trainer/model/lr_schedule.hpp computes it (i from 0)."""
    if i < warmup:
        return lr * (i + 1) / (warmup + 1)
    if i > total or total <= warmup:
        return min_lr
    ratio = (i - warmup) / (total - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


# ---- FLOPs ----------------------------------------------------------------------------------------

def param_counts(n_layer, n_embd, block_size):
    """(all parameters, the tied head counted once; the same less wpe, nanoGPT's
    get_num_params(non_embedding=True))."""
    c = n_embd
    block = 2 * 2 * c + (3 * c * c + 3 * c) + (c * c + c) + (4 * c * c + 4 * c) + (4 * c * c + c)
    total = VOCAB * c + block_size * c + n_layer * block + 2 * c
    return total, total - block_size * c


def flops_per_token(n_layer, n_embd, block_size):
    """nanoGPT's estimate_mfu (the PaLM paper's appendix B): 6 N + 12 L T C per trained token, N
    the parameters less wpe (wte stays in: it is also the head's [C, V] matrix), 12 L T C the
    attention scores and their weighted sum (2 matmuls of T x T x C per layer, forward 2 FLOPs per
    multiply-add, backward twice that), counted over the full T x T although the mask makes half
    of them dead."""
    return 6 * param_counts(n_layer, n_embd, block_size)[1] + 12 * n_layer * block_size * n_embd
