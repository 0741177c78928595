#!/usr/bin/python3
"""PyTorch's side of the ouro-train equivalence test: the same MLP, data order and optimizer in
plain torch, so ouro-train's final weights can be compared number for number.

    torch_reference.py --write-init init.safetensors --layers 784,64,10 --seed 0
    torch_reference.py --init init.safetensors --layers 784,64,10 --world 2 --batch-size 32 \
        --steps 20 --optimizer sgd --lr 0.05 --momentum 0.9 --out torch.safetensors

One process stands in for W ranks: step i's global batch is the concatenation over r = 0..W-1 of
the i-th batch of BatchSampler(DistributedSampler(60000 samples, num_replicas=W, rank=r,
shuffle=True, seed=S, drop_last=False), B, drop_last=True) after set_epoch(epoch), going on into
the next epoch when the batches run out (docs: /tmp/specs/cli.md, "Data order"). The loss is the
mean cross-entropy over the W*B samples, which equals the average of the W per-rank means that
DDP's averaged gradient descends, since every rank's batch has B samples. ouro-train
--mode single --batch-size W*B matches --world 1 --batch-size W*B here.

torch.set_num_threads(1): one thread sums in one order, so repeated runs give the same bits.
Must run under /usr/bin/python3 (Debian's python3-torch); no safetensors package is needed.
"""

import argparse
import gzip
import json
import os
import struct
import sys

import torch

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"
TRAIN_SIZE = 60000
DTYPES = {"F32": torch.float32, "F64": torch.float64, "BF16": torch.bfloat16, "I64": torch.int64}
DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}


def read_safetensors(path):
    """{name: tensor} from a safetensors file: 8-byte little-endian header length, JSON header, data."""
    blob = open(path, "rb").read()
    (size,) = struct.unpack("<Q", blob[:8])
    header = {k: v for k, v in json.loads(blob[8:8 + size]).items() if k != "__metadata__"}
    data = bytearray(blob[8 + size:])
    return {name: torch.frombuffer(data[t["data_offsets"][0]:t["data_offsets"][1]], dtype=DTYPES[t["dtype"]])
            .reshape(t["shape"]) for name, t in header.items()}


def write_safetensors(path, tensors, metadata=None):
    """Writes {name: tensor} in the given order; the header is padded with spaces to 8 bytes."""
    header, chunks, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, tensor in tensors.items():
        raw = tensor.detach().contiguous().cpu().numpy().tobytes()  # little-endian on x86/arm
        header[name] = {"dtype": DTYPE_NAMES[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    temporary = path + ".tmp"
    with open(temporary, "wb") as out:
        out.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))
    os.replace(temporary, path)


def read_idx(path):
    """A gzip'd IDX file (big-endian dims after a magic whose low byte counts them) as uint8."""
    blob = gzip.open(path, "rb").read()
    dims = blob[3]
    shape = struct.unpack(">" + "I" * dims, blob[4:4 + 4 * dims])
    return torch.frombuffer(bytearray(blob[4 + 4 * dims:]), dtype=torch.uint8).reshape(shape)


def load_fashion_mnist(data_dir, split="train"):
    """(images [N, 784] float32 = pixel / 255, labels [N] int64); split is 'train' or 't10k'."""
    images = read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz"))
    return images.reshape(images.shape[0], -1).to(torch.float32) / 255, labels.to(torch.int64)


def parse_layers(text):
    widths = [int(w) for w in text.split(",")]
    if len(widths) < 2 or widths[0] != 784 or widths[-1] != 10 or min(widths) < 1:
        raise ValueError(f"--layers {text}: need at least two widths, starting at 784 and ending at 10")
    return widths


def build_model(widths):
    """Linear, ReLU, ..., Linear: Linear k is module 2k, so its tensors are '2k.weight', '2k.bias'."""
    modules = []
    for k in range(len(widths) - 1):
        modules.append(torch.nn.Linear(widths[k], widths[k + 1]))
        if k + 2 < len(widths):
            modules.append(torch.nn.ReLU())
    return torch.nn.Sequential(*modules)


def global_batches(world, batch_size, seed, size=TRAIN_SIZE):
    """Yields each step's global batch of sample indices (rank 0's batch first), epoch after epoch."""
    samplers = [torch.utils.data.DistributedSampler(range(size), num_replicas=world, rank=r,
                                                    shuffle=True, seed=seed, drop_last=False)
                for r in range(world)]
    epoch = 0
    while True:
        for sampler in samplers:
            sampler.set_epoch(epoch)
        per_rank = [list(torch.utils.data.BatchSampler(s, batch_size, drop_last=True)) for s in samplers]
        if not per_rank[0]:
            raise ValueError(f"--batch-size {batch_size} exceeds one rank's {len(samplers[0])} samples")
        for i in range(len(per_rank[0])):
            yield torch.tensor([index for r in range(world) for index in per_rank[r][i]])
        epoch += 1


def steps_per_epoch(world, batch_size, size=TRAIN_SIZE):
    per_rank = -(-size // world)  # DistributedSampler pads to a multiple of the world
    return per_rank // batch_size


def make_optimizer(args, parameters):
    if args.optimizer == "sgd":
        return torch.optim.SGD(parameters, lr=args.lr, momentum=args.momentum,
                               weight_decay=args.weight_decay)
    beta1, beta2 = (float(b) for b in args.betas.split(","))
    return torch.optim.AdamW(parameters, lr=args.lr, betas=(beta1, beta2), eps=args.eps,
                             weight_decay=args.weight_decay)


def train(args, dataset=None):
    """Returns the trained model and the last step's loss; dataset: (images, labels) already loaded."""
    model = build_model(parse_layers(args.layers))
    initial = read_safetensors(args.init)
    missing = set(model.state_dict()) ^ set(initial)
    if missing:
        raise ValueError(f"--init {args.init}: tensor names differ from the model's: {sorted(missing)}")
    model.load_state_dict(initial)
    images, labels = dataset or load_fashion_mnist(args.data, "train")
    optimizer = make_optimizer(args, model.parameters())
    steps = args.steps if args.steps is not None else args.epochs * steps_per_epoch(args.world, args.batch_size)
    loss = torch.tensor(float("nan"))
    batches = global_batches(args.world, args.batch_size, args.seed)
    for _ in range(steps):
        indices = next(batches)
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(images[indices]), labels[indices])
        loss.backward()
        optimizer.step()
    return model, float(loss)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", default="784,512,256,10")
    parser.add_argument("--write-init", metavar="FILE", help="write torch's default Linear init and exit")
    parser.add_argument("--init", metavar="FILE")
    parser.add_argument("--out", metavar="FILE", help="final state_dict as safetensors")
    parser.add_argument("--world", type=int, default=1, help="ranks the global batch stands for")
    parser.add_argument("--batch-size", type=int, default=64, help="per rank")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--steps", type=int)
    group.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--optimizer", choices=["sgd", "adamw"], default="sgd")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--momentum", type=float, default=0.0)
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument("--betas", default="0.9,0.999")
    parser.add_argument("--eps", type=float, default=1e-8)
    parser.add_argument("--data", default=DEFAULT_DATA)
    args = parser.parse_args(argv)
    if args.write_init is None and (args.init is None or args.out is None):
        parser.error("give --write-init FILE, or --init FILE and --out FILE")
    if args.world < 1 or args.batch_size < 1 or (args.steps is not None and args.steps < 0):
        parser.error("--world and --batch-size must be >= 1, --steps >= 0")
    return args


def main(argv):
    args = parse_args(argv)
    torch.set_num_threads(1)
    if args.write_init:
        torch.manual_seed(args.seed)
        model = build_model(parse_layers(args.layers))
        write_safetensors(args.write_init, model.state_dict(),
                          {"layers": args.layers, "seed": args.seed, "source": "torch.nn.Linear default init"})
        return 0
    model, loss = train(args)
    write_safetensors(args.out, model.state_dict(), {"layers": args.layers, "final_loss": loss})
    print(f"torch_reference: final loss {loss:.6f}, wrote {args.out}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (ValueError, OSError) as error:
        print(f"torch_reference.py: {error}", file=sys.stderr)
        sys.exit(2)
