#include "options.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <set>
#include <stdexcept>

namespace ouro::train {
namespace {

using trainer::Mode;
using trainer::OptimizerKind;
using trainer::Precision;

[[noreturn]] void bad(const std::string& flag, const std::string& wanted, const std::string& value) {
  throw std::invalid_argument(flag + " needs " + wanted + ", got '" + value + "'");
}

template <typename Int>
Int parseWhole(const std::string& flag, const std::string& value, Int min) {
  Int v = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size() || v < min)
    bad(flag, "a whole number >= " + std::to_string(min), value);
  return v;
}

double parseReal(const std::string& flag, const std::string& value) {
  char* end = nullptr;
  double v = value.empty() ? 0 : std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !std::isfinite(v)) bad(flag, "a finite number", value);
  return v;
}

double parseRealIn(const std::string& flag, const std::string& value, double lo, double hi, bool hi_open,
                   const std::string& range) {
  double v = parseReal(flag, value);
  if (v < lo || v > hi || (hi_open && v == hi)) bad(flag, "a number in " + range, value);
  return v;
}

// A rate in the fewest digits that read back as it (0.001, 1e-07, 0.0010000001), not
// std::to_string's fixed six decimals that print 1e-7 as 0.000000.
std::string numberText(double v) {
  char text[64];
  const auto [end, ec] = std::to_chars(text, text + sizeof text, v);
  return ec == std::errc() ? std::string(text, end) : std::to_string(v);
}

std::vector<std::string> splitCommas(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (;;) {
    size_t comma = text.find(',', pos);
    out.push_back(text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    if (comma == std::string::npos) return out;
    pos = comma + 1;
  }
}

std::vector<int> parseLayers(const std::string& value) {
  std::vector<int> widths;
  for (const std::string& item : splitCommas(value)) {
    int w = 0;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), w);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || w < 1)
      throw std::invalid_argument("--layers needs comma-separated widths >= 1 such as 784,512,256,10, got '" + value +
                                  "' ('" + item + "' is not a width)");
    widths.push_back(w);
  }
  if (widths.size() < 2) bad("--layers", "at least two widths (input and output), e.g. 784,10", value);
  if (widths.front() != 784)
    throw std::invalid_argument("--layers must start at 784 (a 28x28 Fashion-MNIST image), got '" + value + "'");
  if (widths.back() != 10)
    throw std::invalid_argument("--layers must end at 10 (one logit per Fashion-MNIST class), got '" + value + "'");
  return widths;
}

// A name the trainer library parses (parseMode, parseOptimizerKind, parsePrecision), its refusal
// turned into this flag's message.
template <class Parse>
auto parseNamed(const std::string& flag, const std::string& value, const char* expected, Parse&& parse) {
  try {
    return parse(value);
  } catch (const std::invalid_argument&) {
    bad(flag, expected, value);
  }
}

}  // namespace

std::string usage() {
  return "usage: ouro-train [options]\n"
         "Trains an MLP on Fashion-MNIST, or a GPT on a text corpus, with ouro: one process (--mode single)\n"
         "or every rank of a job started by ouro-run -n W, mpirun, srun or torchrun (rank and world size\n"
         "from their variables).\n"
         "\n"
         "  --mode single|ddp|zero1|zero2|zero3|hsdp   how ranks share the work (default single)\n"
         "  --shard-size N              hsdp: ranks per shard group, consecutive, dividing the world size\n"
         "                              (default: the ranks of one host)\n"
         "  --model mlp|gpt             what to train (default mlp)\n"
         "  --layers 784,512,256,10     MLP layer widths: must start at 784 and end at 10 (default 784,512,256,10)\n"
         "  --n-layer L --n-head H      GPT blocks and attention heads (default 4, 4)\n"
         "  --n-embd C --block-size T   GPT channels (a multiple of H) and context length (default 128, 128)\n"
         "  --text FILE                 GPT corpus (default: the fortunes package's files in name order)\n"
         "  --batch-size B              samples (GPT: sequences) per rank per micro-batch (default 64; GPT 16)\n"
         "  --steps K                   stop after K optimizer steps in all (across epochs), or\n"
         "  --epochs E                  train E full epochs (default 1); not both\n"
         "  --seed S                    initialisation and DistributedSampler seed (default 0)\n"
         "  --init FILE.safetensors     start from these weights (0.weight, 0.bias, 2.weight, ... F32)\n"
         "  --optimizer sgd|adamw       (default sgd; GPT adamw)\n"
         "  --lr X                      (peak) learning rate (default 0.01; GPT 0.003)\n"
         "  --warmup-steps N            linear warm-up steps, then cosine decay (default 0; GPT 20)\n"
         "  --min-lr X                  where the cosine decay ends at the last step (GPT default lr/10)\n"
         "  --grad-clip X               clip the gradient's 2-norm to X, 0 = off (default 0; GPT 1.0)\n"
         "  --momentum X                sgd momentum in [0, 1] (default 0)\n"
         "  --weight-decay X            >= 0 (default 0; GPT 0.1, on matrices and embeddings only)\n"
         "  --betas B1,B2               adamw betas, each in [0, 1) (default 0.9,0.999; GPT 0.9,0.95)\n"
         "  --eps X                     adamw epsilon > 0 (default 1e-8)\n"
         "  --precision fp32|bf16       compute precision; bf16 keeps fp32 master weights (default fp32)\n"
         "  --bucket-mb X               gradient bucket size in MiB, first bucket 1 MiB (default 25)\n"
         "  --accumulate N              micro-batches per optimizer step (default 1)\n"
         "  --threads N                 OpenBLAS threads per rank (default 1)\n"
         "  --data DIR                  Fashion-MNIST folder (default /usr/share/datasets/fashion-mnist)\n"
         "  --save FILE.safetensors     write the final model there (torch's names and shapes)\n"
         "  --checkpoint DIR            write sharded checkpoints there (at the end, and every N steps\n"
         "  --checkpoint-every N        with this)\n"
         "  --resume DIR|auto           continue from DIR's latest checkpoint (auto: --checkpoint's, or\n"
         "                              start afresh when it has none)\n"
         "  --virtual-ranks V           global batch of V micro-batches; the same bits on any 1..V ranks\n"
         "  --on-failure stop|shrink    shrink: go on with the ranks left when one is lost (needs\n"
         "                              --virtual-ranks and ouro-run --rank-failure continue; default stop)\n"
         "  --verify-every K            check every K steps and at each checkpoint that the replicated state\n"
         "                              has the same bits on every rank (ddp: weights and optimizer state;\n"
         "                              hsdp: each shard's replicas; zero: the gathered weights); a difference\n"
         "                              stops the run naming the step and the ranks\n"
         "  --verify-replay             on a difference, redo the steps since the last good check (ddp) and say\n"
         "                              whether the fault was transient (the redo agrees) or persistent\n"
         "  --log-every N               progress line every N steps, rank 0 (default 50; 0 = none)\n"
         "  --metrics FILE.csv          one row per progress line\n"
         "  --plot FILE.png             loss and accuracy curves (needs gnuplot)\n"
         "  --json FILE                 summary at the end (accuracy, loss, speed, memory per rank)\n"
         "  --eval-every N              also evaluate (test set / validation split) every N steps\n"
         "  --sample N                  GPT: bytes of text to generate at the end (default 256; 0 = none)\n"
         "  --prompt TEXT               GPT: what the sample continues (default: a new line)\n"
         "  --temperature X --top-k K   GPT sampling (default 0.8 and 200; temperature 0 = argmax)\n"
         "  -h, --help                  this text\n"
         "\n"
         "Exit status: 0 done, 1 the run failed (data, files, communication), 2 bad command line.\n"
         "docs/TRAINING.md describes the modes, the data order and the checkpoint format.\n";
}

Options parseOptions(const std::vector<std::string>& args) {
  Options o;
  bool saw_steps = false, saw_epochs = false;
  std::set<std::string> seen;      // flags given, for the GPT's defaults
  std::vector<std::string> gpt_only;  // GPT flags given, refused for the MLP
  for (size_t i = 0; i < args.size(); i++) {
    const std::string& a = args[i];
    std::string flag = a, inline_value;
    bool has_inline = false;
    if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
      flag = a.substr(0, a.find('='));
      inline_value = a.substr(a.find('=') + 1);
      has_inline = true;
    }
    auto val = [&]() -> std::string {
      if (has_inline) return inline_value;
      if (i + 1 >= args.size()) throw std::invalid_argument(flag + " needs a value (see --help)");
      return args[++i];
    };
    seen.insert(flag);
    if (flag == "-h" || flag == "--help") {
      o.show_help = true;
      return o;
    } else if (flag == "--model") {
      const std::string v = val();
      if (v == "mlp") o.model = ModelKind::kMlp;
      else if (v == "gpt") o.model = ModelKind::kGpt;
      else bad(flag, "mlp or gpt", v);
    } else if (flag == "--n-layer") {
      o.gpt.n_layer = parseWhole<int>(flag, val(), 1);
      gpt_only.push_back(flag);
    } else if (flag == "--n-head") {
      o.gpt.n_head = parseWhole<int>(flag, val(), 1);
      gpt_only.push_back(flag);
    } else if (flag == "--n-embd") {
      o.gpt.n_embd = parseWhole<int>(flag, val(), 1);
      gpt_only.push_back(flag);
    } else if (flag == "--block-size") {
      o.gpt.block_size = parseWhole<int>(flag, val(), 1);
      gpt_only.push_back(flag);
    } else if (flag == "--text") {
      o.text_path = val();
      if (o.text_path.empty()) bad(flag, "a file name", o.text_path);
      gpt_only.push_back(flag);
    } else if (flag == "--warmup-steps") {
      o.warmup_steps = parseWhole<int64_t>(flag, val(), 0);
    } else if (flag == "--min-lr") {
      o.min_lr = parseRealIn(flag, val(), 0, HUGE_VAL, false, "[0, inf)");
    } else if (flag == "--grad-clip") {
      o.grad_clip = parseRealIn(flag, val(), 0, HUGE_VAL, false, "[0, inf) (0 turns clipping off)");
    } else if (flag == "--eval-every") {
      o.eval_every = parseWhole<int64_t>(flag, val(), 1);
    } else if (flag == "--sample") {
      o.sample = parseWhole<int>(flag, val(), 0);
      gpt_only.push_back(flag);
    } else if (flag == "--prompt") {
      o.prompt = val();
      gpt_only.push_back(flag);
    } else if (flag == "--temperature") {
      o.temperature = parseRealIn(flag, val(), 0, HUGE_VAL, false, "[0, inf) (0 picks the likeliest byte)");
      gpt_only.push_back(flag);
    } else if (flag == "--top-k") {
      o.top_k = parseWhole<int>(flag, val(), 1);
      gpt_only.push_back(flag);
    } else if (flag == "--mode") {
      o.mode = parseNamed(flag, val(), "one of single, ddp, zero1, zero2, zero3, hsdp", trainer::parseMode);
    } else if (flag == "--layers") {
      o.layers = parseLayers(val());
    } else if (flag == "--batch-size") {
      o.batch_size = parseWhole<int>(flag, val(), 1);
    } else if (flag == "--steps") {
      o.steps = parseWhole<int64_t>(flag, val(), 0);
      saw_steps = true;
    } else if (flag == "--epochs") {
      o.epochs = parseWhole<int64_t>(flag, val(), 1);
      saw_epochs = true;
    } else if (flag == "--seed") {
      o.seed = parseWhole<uint64_t>(flag, val(), 0);
    } else if (flag == "--init") {
      o.init_path = val();
      if (o.init_path.empty()) bad(flag, "a file name", o.init_path);
    } else if (flag == "--optimizer") {
      o.optimizer.kind = parseNamed(flag, val(), "sgd or adamw", trainer::parseOptimizerKind);
    } else if (flag == "--lr") {
      o.optimizer.lr = parseRealIn(flag, val(), 0, HUGE_VAL, false, "[0, inf)");
    } else if (flag == "--momentum") {
      o.optimizer.momentum = parseRealIn(flag, val(), 0, 1, false, "[0, 1]");
    } else if (flag == "--weight-decay") {
      o.optimizer.weight_decay = parseRealIn(flag, val(), 0, HUGE_VAL, false, "[0, inf)");
    } else if (flag == "--betas") {
      std::string v = val();
      std::vector<std::string> parts = splitCommas(v);
      if (parts.size() != 2) bad(flag, "two numbers B1,B2 such as 0.9,0.999", v);
      o.optimizer.beta1 = parseRealIn(flag, parts[0], 0, 1, true, "[0, 1) for each beta");
      o.optimizer.beta2 = parseRealIn(flag, parts[1], 0, 1, true, "[0, 1) for each beta");
    } else if (flag == "--eps") {
      std::string v = val();
      o.optimizer.eps = parseReal(flag, v);
      if (o.optimizer.eps <= 0) bad(flag, "a number > 0", v);
    } else if (flag == "--precision") {
      o.precision = parseNamed(flag, val(), "fp32 or bf16", trainer::parsePrecision);
    } else if (flag == "--bucket-mb") {
      std::string v = val();
      o.bucket_mb = parseReal(flag, v);
      if (o.bucket_mb <= 0) bad(flag, "a size in MiB > 0", v);
    } else if (flag == "--accumulate") {
      o.accumulate = parseWhole<int>(flag, val(), 1);
    } else if (flag == "--threads") {
      o.threads = parseWhole<int>(flag, val(), 1);
    } else if (flag == "--data") {
      o.data_dir = val();
      if (o.data_dir.empty()) bad(flag, "a folder", o.data_dir);
    } else if (flag == "--save") {
      o.save_path = val();
      if (o.save_path.empty()) bad(flag, "a file name", o.save_path);
    } else if (flag == "--checkpoint") {
      o.checkpoint_dir = val();
      if (o.checkpoint_dir.empty()) bad(flag, "a folder", o.checkpoint_dir);
    } else if (flag == "--checkpoint-every") {
      o.checkpoint_every = parseWhole<int64_t>(flag, val(), 1);
    } else if (flag == "--resume") {
      o.resume_dir = val();
      if (o.resume_dir.empty()) bad(flag, "a folder, or auto", o.resume_dir);
    } else if (flag == "--on-failure") {
      const std::string v = val();
      if (v == "shrink") o.on_failure_shrink = true;
      else if (v == "stop") o.on_failure_shrink = false;
      else bad(flag, "stop or shrink", v);
    } else if (flag == "--shard-size") {
      o.shard_size = parseWhole<int>(flag, val(), 1);
    } else if (flag == "--virtual-ranks") {
      o.virtual_ranks = parseWhole<int>(flag, val(), 1);
    } else if (flag == "--verify-every") {
      o.verify_every = parseWhole<int64_t>(flag, val(), 1);
    } else if (flag == "--verify-replay") {
      o.verify_replay = true;
    } else if (flag == "--log-every") {
      o.log_every = parseWhole<int64_t>(flag, val(), 0);
    } else if (flag == "--metrics") {
      o.metrics_path = val();
      if (o.metrics_path.empty()) bad(flag, "a file name", o.metrics_path);
    } else if (flag == "--plot") {
      o.plot_path = val();
      if (o.plot_path.empty()) bad(flag, "a file name", o.plot_path);
    } else if (flag == "--json") {
      o.json_path = val();
      if (o.json_path.empty()) bad(flag, "a file name", o.json_path);
    } else if (flag == "--eval-every-epoch" && !has_inline) {
      // Accepted for scripts written against the first description of the command line: test
      // accuracy is always evaluated at the end of every epoch.
    } else {
      throw std::invalid_argument("unknown option '" + a + "' (see --help)");
    }
  }
  if (saw_steps && saw_epochs) throw std::invalid_argument("--steps and --epochs exclude each other: give one");
  if (o.model == ModelKind::kMlp) {
    if (!gpt_only.empty())
      throw std::invalid_argument(gpt_only.front() + " is a GPT setting: pass --model gpt, or leave it out for the MLP");
    o.cosine = seen.count("--warmup-steps") || seen.count("--min-lr");
  } else {
    if (seen.count("--layers"))
      throw std::invalid_argument("--layers sets the MLP's widths: the GPT's shape is --n-layer, --n-head, --n-embd and "
                                  "--block-size");
    if (seen.count("--data"))
      throw std::invalid_argument("--data is the Fashion-MNIST folder: the GPT reads --text FILE (default: the "
                                  "fortunes corpus)");
    // nanoGPT's settings, unless given.
    if (!seen.count("--batch-size")) o.batch_size = 16;
    if (!seen.count("--optimizer")) o.optimizer.kind = OptimizerKind::kAdamW;
    if (!seen.count("--lr")) o.optimizer.lr = 3e-3;  // nanoGPT shakespeare_char: 1e-3; 3e-3 learns faster here (docs/TRAINING.md)
    if (!seen.count("--betas")) o.optimizer.beta1 = 0.9, o.optimizer.beta2 = 0.95;
    if (!seen.count("--weight-decay")) o.optimizer.weight_decay = 0.1;
    if (!seen.count("--warmup-steps")) o.warmup_steps = 20;
    if (!seen.count("--grad-clip")) o.grad_clip = 1.0;
    if (!seen.count("--sample")) o.sample = 256;
    if (o.gpt.n_embd % o.gpt.n_head != 0)
      throw std::invalid_argument("--n-embd " + std::to_string(o.gpt.n_embd) + " is not a multiple of --n-head " +
                                  std::to_string(o.gpt.n_head) + ": each head gets n_embd / n_head channels");
    // The library's bounds, said with the flag that sets each field ("GPT config: n_embd is 20000;
    // the embedding width must be ..." becomes "--n-embd 20000: the embedding width must be ...").
    try {
      trainer::validateGptConfig(o.gpt);
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      for (const auto& [field, flag] : {std::pair{"n_layer", "--n-layer"}, std::pair{"n_head", "--n-head"},
                                        std::pair{"n_embd", "--n-embd"}, std::pair{"block_size", "--block-size"}}) {
        const std::string head = std::string("GPT config: ") + field + " is ";
        const size_t semicolon = what.find("; ");
        if (what.rfind(head, 0) == 0 && semicolon != std::string::npos)
          throw std::invalid_argument(flag + (" " + what.substr(head.size(), semicolon - head.size())) + ":" +
                                      what.substr(semicolon + 1));
      }
      throw std::invalid_argument("GPT shape: " + what);
    }
    o.cosine = true;
  }
  if (!o.min_lr) o.min_lr = o.optimizer.lr / 10;
  if (o.cosine && *o.min_lr > o.optimizer.lr)
    throw std::invalid_argument("--min-lr " + numberText(*o.min_lr) + " is above --lr " + numberText(o.optimizer.lr) +
                                ": the schedule decays from --lr down to --min-lr; pass a --min-lr at most --lr");
  if (o.resume_dir == "auto" && o.checkpoint_dir.empty())
    throw std::invalid_argument("--resume auto continues from --checkpoint DIR's newest checkpoint: pass --checkpoint");
  if (o.shard_size > 0 && o.mode != Mode::kHsdp)
    throw std::invalid_argument("--shard-size sets hsdp's shard groups: pass --mode hsdp, or leave it out");
  if (o.on_failure_shrink && o.virtual_ranks == 0)
    throw std::invalid_argument("--on-failure shrink needs --virtual-ranks V: the virtual ranks are what the ranks left "
                                "share out again, with the same bits");
  if (o.on_failure_shrink && o.mode == Mode::kSingle)
    throw std::invalid_argument("--on-failure shrink needs ranks to lose: use --mode ddp (or a ZeRO mode, which "
                                "reloads the newest checkpoint)");
  if (o.virtual_ranks > 0 && o.accumulate != 1)
    throw std::invalid_argument("--virtual-ranks sets the global batch (V micro-batches of --batch-size): leave "
                                "--accumulate at 1");
  if (o.verify_every > 0 && o.mode == Mode::kSingle)
    throw std::invalid_argument("--verify-every compares the ranks' copies of the state: a --mode single run has one "
                                "copy; use --mode ddp, zero1, zero2, zero3 or hsdp");
  if (o.verify_replay && o.verify_every == 0)
    throw std::invalid_argument("--verify-replay redoes steps after a failed check: pass --verify-every K too");
  if (o.verify_replay && o.mode != Mode::kDdp)
    throw std::invalid_argument("--verify-replay needs --mode ddp, where every rank holds the whole state to go back "
                                "to; the other modes' checks stop at a difference");
  if (o.checkpoint_every > 0 && o.checkpoint_dir.empty())
    throw std::invalid_argument("--checkpoint-every needs --checkpoint DIR (where to write them)");
  if (o.log_every == 0 && !o.metrics_path.empty())
    throw std::invalid_argument("--metrics records the progress lines, which --log-every 0 turns off");
  if (o.log_every == 0 && !o.plot_path.empty())
    throw std::invalid_argument("--plot draws the progress lines' values, which --log-every 0 turns off");
  return o;
}

}  // namespace ouro::train
