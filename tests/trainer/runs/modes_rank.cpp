// One rank of the trainer's mode tests (test_modes.cpp starts W of them under ouro-run). Trains a
// small model on synthetic, deterministic data with the Trainer directly, in every configuration of
// the chosen suite, and writes what the test compares. --model mlp: an MLP (784,48,30,10: W = 3
// and 4 need padding). --model gpt: a tiny GPT (2 blocks, 2 heads, 16 channels, 8 positions:
// embeddings, blocks and ln_f as units, the head tied to wte), trained as ouro-train trains it:
// AdamW with decay on matrices only, a warm-up and cosine schedule, and clipping that clips.
//   --suite equality  after K steps, rank 0 writes the gathered fp32 parameters of each run to
//                     OUT/<mode>-<precision>-<optimizer>-acc<N>.bin, plus OUT/init.bin; the single
//                     runs (W * B samples per step, rank 0 only) go to OUT/single-....bin; every
//                     run's evaluation to OUT/<label>.eval; 5 steps in one mode, restored into
//                     another from owned pieces, 5 more: OUT/restore-<A>-to-<B>-<precision>-<opt>.bin.
//   --suite memory    after one step, every rank writes OUT/memory-<mode>-<precision>-rank<R>.txt:
//                     "params grads optimizer buffers activations" in bytes (AdamW).
//   --suite hybrid    hsdp with shard groups of W / 2 ranks (--shard-size L: of L), and ddp, zero3, 10 steps each (fp32
//                     and bf16, AdamW, accumulate 1 and 2): rank 0 writes OUT/<label>.bin and
//                     .eval as the equality suite; every rank also writes hsdp's memory account to
//                     OUT/memory-hsdp-<precision>-rank<R>.txt
//   --suite nonfinite NaN and infinities planted in gradients and data: see nonfiniteSuite.
//   --suite virtual   with 12 virtual ranks (TrainerConfig::virtual_ranks), every mode (single at
//                     W = 1; hsdp in groups of W / 2, or of 1 at odd W) and both precisions train
//                     4 steps; rank 0 writes the parameters to
//                     OUT/virtual-<mode>-<precision>.bin and the steps' loss sums' bits to
//                     OUT/virtual-<mode>-<precision>.loss: the test requires the same files at
//                     every W.
// Synthetic data keep the test fast and independent of the Fashion-MNIST package. Rank r's
// micro-batch j of step i is samples ((i * N + j) * W + r) * B ..+B, so W ranks of B samples and
// one process of W * B samples see the same global batch.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/gpt.hpp"
#include "model/blas_kernels.hpp"
#include "model/mlp.hpp"
#include "model/mlp_model.hpp"
#include "ouro/ouro.hpp"
#include "parallel/fixed_point_gradients.hpp"
#include "parallel/nonfinite_gradients.hpp"
#include "parallel/trainer.hpp"

using namespace ouro::trainer;

namespace {

constexpr int kSteps = 10;
constexpr int kBatch = 8;  // per rank, per micro-batch
const std::vector<int> kWidths = {784, 48, 30, 10};
// Small enough that fp32 makes three buckets ({2}, {1}, {0}) and bf16 two ({1, 2}, {0}).
constexpr double kBucketMb = 0.001;

uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

const GptConfig kGpt{2, 2, 16, 8, kGptByteVocab};
// Low enough that every step of the GPT runs clips (the norm is checked to exceed it).
constexpr double kGptClip = 0.05;

// What the suites train: the model and its synthetic data.
struct Workload {
  bool gpt = false;

  std::unique_ptr<Model> makeModel(int rows) const {
    if (gpt) return std::make_unique<Gpt>(GptLayout(kGpt), rows);
    return std::make_unique<MlpModel>(MlpLayout(kWidths), rows);
  }
  size_t paramCount() const { return gpt ? GptLayout(kGpt).paramCount() : MlpLayout(kWidths).paramCount(); }
  std::vector<float> init() const {
    std::vector<float> params(paramCount());
    makeModel(1)->initParameters(7, params.data());
    return params;
  }
};

// Room for `rows` rows of either model's data.
struct RowBuffers {
  std::vector<float> features;
  std::vector<int32_t> tokens, targets;
  Rows rows;

  RowBuffers(const Workload& w, int count) {
    rows.count = count;
    if (w.gpt) {
      tokens.resize(size_t(count) * size_t(kGpt.block_size));
      targets.resize(tokens.size());
      rows.tokens = tokens.data();
      rows.seq = kGpt.block_size;
    } else {
      features.resize(size_t(count) * 784);
      targets.resize(size_t(count));
      rows.features = features.data();
      rows.feature_width = 784;
    }
    rows.targets = targets.data();
  }

  // Sample s into row `at`. MLP: pixels in [0, 1), the label a function of the first pixels.
  // GPT: bytes that mostly count up from a random start (something to learn), the targets the
  // next byte of each position.
  void makeSample(const Workload& w, int64_t s, size_t at) {
    if (!w.gpt) {
      float* pixels = features.data() + at * 784;
      for (int p = 0; p < 784; p++)
        pixels[p] = float(mix(uint64_t(s) * 1000003u + uint64_t(p)) >> 40) / float(1 << 24);
      targets[at] = int32_t(int(pixels[0] * 5) + int(pixels[1] * 2)) % 10;
      return;
    }
    const size_t T = size_t(kGpt.block_size);
    int32_t byte = int32_t(mix(uint64_t(s)) % 256);
    for (size_t t = 0; t <= T; t++) {
      const uint64_t noise = mix(uint64_t(s) * 7919u + t);
      byte = noise % 5 == 0 ? int32_t(noise % 256) : (byte + 1) % 256;
      if (t < T) tokens[at * T + t] = byte;
      if (t > 0) targets[at * T + t - 1] = byte;
    }
  }

  void makeBatch(const Workload& w, int64_t first, int count, size_t at) {
    for (int b = 0; b < count; b++) makeSample(w, first + b, at + size_t(b));
  }
};

struct RunSpec {
  Workload work;
  Mode mode;
  Precision precision;
  OptimizerKind optimizer;
  int accumulate = 1;
  int virtual_ranks = 0;
  int shard_size = 0;  // hsdp
};

OptimizerConfig optimizerConfig(OptimizerKind kind) {
  OptimizerConfig c;
  c.kind = kind;
  if (kind == OptimizerKind::kSgd) {
    c.lr = 0.05;
    c.momentum = 0.9;
    c.weight_decay = 1e-4;
  } else {
    c.lr = 1e-3;
    c.weight_decay = 0.01;
  }
  return c;
}

std::string label(const RunSpec& r) {
  return std::string(r.work.gpt ? "gpt-" : "") + modeName(r.mode) +
         (r.shard_size > 0 ? "L" + std::to_string(r.shard_size) : "") + "-" + precisionName(r.precision) + "-" + optimizerName(r.optimizer) + "-acc" +
         std::to_string(r.accumulate);
}

void fail(const std::string& what) { throw std::runtime_error(what); }

std::unique_ptr<Trainer> create(const RunSpec& spec, ouro::Communicator* comm, int batch,
                                const std::vector<float>& init) {
  TrainerConfig config;
  config.mode = spec.mode;
  config.precision = spec.precision;
  config.optimizer = optimizerConfig(spec.optimizer);
  config.batch_size = batch;
  config.accumulate = spec.accumulate;
  config.bucket_mb = kBucketMb;
  if (spec.work.gpt) {
    // ouro-train's GPT settings: nanoGPT's schedule (2 warm-up steps, cosine to a tenth),
    // decay on matrices only, betas 0.9, 0.95, and clipping (low, so that it clips).
    config.optimizer.kind = OptimizerKind::kAdamW;
    config.optimizer.lr = 3e-3;
    config.optimizer.beta2 = 0.95;
    config.optimizer.weight_decay = 0.1;
    config.schedule = {3e-3, 3e-4, 2, kSteps, true};
    config.grad_clip = kGptClip;
    config.decay_matrices_only = true;
    // Buckets: ln_f with block 1, block 0, the embeddings (fp32); blocks with ln_f, the
    // embeddings (bf16).
    config.bucket_mb = 0.01;
  } else {
    config.schedule = {config.optimizer.lr, config.optimizer.lr, 0, kSteps, false};
  }
  config.virtual_ranks = spec.virtual_ranks;
  config.shard_size = spec.shard_size;
  return Trainer::create(config, spec.work.makeModel(batch), comm, init.data());
}

// Steps first .. first + steps - 1; `world` and `rank` pick the data (single: world 1, W * B samples).
void trainSteps(Trainer& trainer, const RunSpec& spec, int world, int rank, int batch, int first, int steps) {
  const int rows = batch * spec.accumulate;
  RowBuffers data(spec.work, rows);
  for (int i = first; i < first + steps; i++) {
    for (int j = 0; j < spec.accumulate; j++)
      data.makeBatch(spec.work, (int64_t(i) * spec.accumulate + j) * world * batch + int64_t(rank) * batch, batch,
                     size_t(j) * size_t(batch));
    const StepResult r = trainer.step(data.rows);
    if (r.samples != rows)
      fail(label(spec) + ": step reports " + std::to_string(r.samples) + " samples, not " + std::to_string(rows));
    if (!std::isfinite(r.loss_sum) || r.loss_sum <= 0) fail(label(spec) + ": loss sum " + std::to_string(r.loss_sum));
    if (r.correct < 0 || r.correct > r.predictions || r.comm_wait_seconds < 0 || r.seconds < r.comm_wait_seconds)
      fail(label(spec) + ": implausible step result");
    // The GPT's runs clip on every step: the test is about clipping that happens.
    if (spec.work.gpt && !(r.grad_norm > kGptClip))
      fail(label(spec) + ": gradient norm " + std::to_string(r.grad_norm) + " at step " + std::to_string(i) +
           " does not exceed the clipping norm, so clipping is not tested");
  }
  if (trainer.optimizerSteps() != first + steps)
    fail(label(spec) + ": optimizerSteps() is not " + std::to_string(first + steps));
}

std::unique_ptr<Trainer> train(const RunSpec& spec, ouro::Communicator* comm, int world, int rank, int batch, int steps,
                               const std::vector<float>& init) {
  auto trainer = create(spec, comm, batch, init);
  trainSteps(*trainer, spec, world, rank, batch, 0, steps);
  return trainer;
}

// Loss and accuracy on 29 held-out samples: more than three of the model's batches of 8, so
// evaluate() works in chunks. Written as the loss sum's bits (equal across modes, bit for bit).
std::string evaluation(Trainer& trainer, const Workload& work) {
  constexpr int n = 29;
  RowBuffers data(work, n);
  data.makeBatch(work, 1000000, n, 0);
  const LossResult r = trainer.evaluate(data.rows);
  if (!(r.loss_sum > 0) || r.correct < 0 || r.correct > n * data.rows.predictionsPerRow())
    fail("implausible evaluation");
  uint64_t bits;
  std::memcpy(&bits, &r.loss_sum, 8);
  return std::to_string(bits) + " " + std::to_string(r.correct) + "\n";
}

void writeFloats(const std::string& path, const std::vector<float>& v) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
  if (!out) fail("cannot write " + path);
}

void writeText(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) fail("cannot write " + path);
}

void restoreRuns(const Workload& work, ouro::Communicator& comm, const std::string& out,
                 const std::vector<float>& init);

void equalitySuite(const Workload& work, ouro::Communicator& comm, const std::string& out) {
  const int world = comm.size(), rank = comm.rank();
  const std::vector<float> init = work.init();
  if (rank == 0) writeFloats(out + "/init.bin", init);
  std::vector<RunSpec> runs;
  const Mode modes[] = {Mode::kDdp, Mode::kZero1, Mode::kZero2, Mode::kZero3};
  // The GPT trains with AdamW only (as ouro-train does); its SGD names stand for the same runs.
  const std::vector<OptimizerKind> optimizers =
      work.gpt ? std::vector<OptimizerKind>{OptimizerKind::kAdamW} : std::vector{OptimizerKind::kSgd, OptimizerKind::kAdamW};
  for (Precision p : {Precision::kFp32, Precision::kBf16})
    for (OptimizerKind o : optimizers)
      for (Mode m : modes) runs.push_back({work, m, p, o, 1});
  for (Mode m : modes) {
    runs.push_back({work, m, Precision::kFp32, optimizers.front(), 2});
    runs.push_back({work, m, Precision::kBf16, OptimizerKind::kAdamW, 2});
  }
  for (const RunSpec& spec : runs) {
    auto trainer = train(spec, &comm, world, rank, kBatch, kSteps, init);
    const std::vector<float> params = trainer->gatherParameters();
    if (params.size() != work.paramCount()) fail(label(spec) + ": gatherParameters() size");
    const std::string eval = evaluation(*trainer, work);  // collective in zero3: every rank
    if (rank == 0) {
      writeFloats(out + "/" + label(spec) + ".bin", params);
      writeText(out + "/" + label(spec) + ".eval", eval);
    }
  }
  restoreRuns(work, comm, out, init);
  // The same global batches in one process: W * B samples per step.
  if (rank == 0) {
    for (OptimizerKind o : optimizers) {
      const RunSpec spec{work, Mode::kSingle, Precision::kFp32, o, 1};
      auto trainer = train(spec, nullptr, 1, 0, kBatch * world, kSteps, init);
      writeFloats(out + "/" + label(spec) + ".bin", trainer->gatherParameters());
    }
  }
}

// Every rank's owned parameters and optimizer state, written to files and read back whole, as a
// checkpoint does (ownedRanges / ownedParameters / ownedOptimizerState, then restore()).
struct Whole {
  std::vector<float> params;
  std::vector<std::pair<std::string, std::vector<float>>> state;
};

Whole exportWhole(Trainer& trainer, ouro::Communicator& comm, const std::string& prefix) {
  const size_t total = trainer.model().paramCount();
  const std::vector<OwnedRange> ranges = trainer.ownedRanges();
  const std::vector<float> params = trainer.ownedParameters();
  const std::vector<StateTensor> state = trainer.ownedOptimizerState();
  {
    std::ofstream file(prefix + std::to_string(comm.rank()) + ".bin", std::ios::binary);
    const uint64_t n = ranges.size();
    file.write(reinterpret_cast<const char*>(&n), 8);
    file.write(reinterpret_cast<const char*>(ranges.data()), std::streamsize(n * sizeof(OwnedRange)));
    file.write(reinterpret_cast<const char*>(params.data()), std::streamsize(params.size() * 4));
    for (const StateTensor& t : state)
      file.write(reinterpret_cast<const char*>(t.values.data()), std::streamsize(t.values.size() * 4));
    if (!file) fail("cannot write " + prefix);
  }
  comm.barrier();
  Whole whole;
  whole.params.assign(total, 0.0f);
  for (const StateTensor& t : state) whole.state.push_back({t.name, std::vector<float>(total, 0.0f)});
  std::vector<int> covered(total, 0);
  for (int r = 0; r < comm.size(); r++) {
    std::ifstream file(prefix + std::to_string(r) + ".bin", std::ios::binary);
    uint64_t n = 0;
    file.read(reinterpret_cast<char*>(&n), 8);
    std::vector<OwnedRange> theirs(n);
    file.read(reinterpret_cast<char*>(theirs.data()), std::streamsize(n * sizeof(OwnedRange)));
    size_t owned = 0;
    for (const OwnedRange& range : theirs) owned += range.count;
    std::vector<float> values(owned * (1 + state.size()));
    file.read(reinterpret_cast<char*>(values.data()), std::streamsize(values.size() * 4));
    if (!file) fail("cannot read rank " + std::to_string(r) + "'s owned values");
    for (size_t t = 0; t <= state.size(); t++) {
      std::vector<float>& into = t == 0 ? whole.params : whole.state[t - 1].second;
      size_t at = t * owned;
      for (const OwnedRange& range : theirs) {
        if (range.offset + range.count > total) fail("owned range past the end of the model");
        std::copy_n(values.begin() + long(at), range.count, into.begin() + long(range.offset));
        if (t == 0)
          for (size_t i = range.offset; i < range.offset + range.count; i++) covered[i]++;
        at += range.count;
      }
    }
  }
  // ZeRO ranks own disjoint pieces; ddp ranks own everything, the same values (checked by the
  // test comparing whole results).
  const int owners = params.size() == total ? comm.size() : 1;
  if (std::any_of(covered.begin(), covered.end(), [&](int c) { return c != owners; }))
    fail("the ranks' owned ranges do not cover every parameter " + std::to_string(owners) + " time(s)");
  comm.barrier();  // everybody has read the files before the next export overwrites them
  return whole;
}

bool sameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

// Train 5 steps in mode A, move everything through owned pieces into a fresh trainer in mode B
// (another layout of shards), and train 5 more in both: B must equal A, and both the
// uninterrupted 10-step run (compared by the test: OUT/restore-A-to-B-....bin).
void restoreRuns(const Workload& work, ouro::Communicator& comm, const std::string& out,
                 const std::vector<float>& init) {
  const int world = comm.size(), rank = comm.rank();
  const Mode modes[] = {Mode::kDdp, Mode::kZero1, Mode::kZero2, Mode::kZero3};
  const std::vector<float> zeros(init.size(), 0.0f);
  const OptimizerKind fp32_optimizer = work.gpt ? OptimizerKind::kAdamW : OptimizerKind::kSgd;
  for (auto [precision, optimizer] :
       {std::pair{Precision::kFp32, fp32_optimizer}, std::pair{Precision::kBf16, OptimizerKind::kAdamW}}) {
    for (int m = 0; m < 4; m++) {
      const RunSpec a_spec{work, modes[m], precision, optimizer, 1},
          b_spec{work, modes[(m + 1) % 4], precision, optimizer, 1};
      const std::string what = "restore " + label(a_spec) + " into " + modeName(b_spec.mode);
      auto a = train(a_spec, &comm, world, rank, kBatch, kSteps / 2, init);
      const Whole saved = exportWhole(*a, comm, out + "/owned-");
      auto b = create(b_spec, &comm, kBatch, zeros);
      b->restore(saved.params, saved.state, a->optimizerSteps());
      if (b->optimizerSteps() != a->optimizerSteps()) fail(what + ": optimizerSteps() differs");
      if (!sameBits(b->gatherParameters(), a->gatherParameters())) fail(what + ": parameters differ after restore");
      const Whole again = exportWhole(*b, comm, out + "/owned-");
      if (!sameBits(again.params, saved.params) || again.state.size() != saved.state.size())
        fail(what + ": owned parameters differ after restore");
      for (size_t t = 0; t < saved.state.size(); t++)
        if (again.state[t].first != saved.state[t].first || !sameBits(again.state[t].second, saved.state[t].second))
          fail(what + ": optimizer state '" + saved.state[t].first + "' differs after restore");
      trainSteps(*a, a_spec, world, rank, kBatch, kSteps / 2, kSteps - kSteps / 2);
      trainSteps(*b, b_spec, world, rank, kBatch, kSteps / 2, kSteps - kSteps / 2);
      const std::vector<float> final_a = a->gatherParameters(), final_b = b->gatherParameters();
      if (!sameBits(final_a, final_b)) fail(what + ": parameters differ after 5 more steps");
      if (rank == 0)
        writeFloats(out + "/restore-" + (work.gpt ? "gpt-" : "") + modeName(a_spec.mode) + "-to-" + modeName(b_spec.mode) + "-" +
                        precisionName(precision) + "-" + optimizerName(optimizer) + ".bin",
                    final_b);
    }
  }
}

// 12 virtual ranks of 2 samples: rank r computes micro-batches virtualSlice(12, W, r), micro-batch v
// of step i being samples (i * 12 + v) * 2 ..+2 whoever computes it.
void virtualSuite(const Workload& work, ouro::Communicator& comm, const std::string& out) {
  constexpr int kVirtual = 12, kMicro = 2, kVirtualSteps = 4;
  const std::vector<float> init = work.init();
  const int world = comm.size(), rank = comm.rank();
  const VirtualSlice slice = virtualSlice(kVirtual, world, rank);
  std::vector<Mode> modes = {Mode::kDdp, Mode::kZero1, Mode::kZero2, Mode::kZero3, Mode::kHsdp};
  if (world == 1) modes.insert(modes.begin(), Mode::kSingle);
  // hsdp: two replicas of W / 2 ranks when W is even, else W replicas of one rank.
  const int L = world % 2 == 0 ? world / 2 : 1;
  for (Precision p : {Precision::kFp32, Precision::kBf16}) {
    for (Mode m : modes) {
      const RunSpec spec{work, m, p, OptimizerKind::kAdamW, 1, kVirtual, m == Mode::kHsdp ? L : 0};
      auto trainer = create(spec, m == Mode::kSingle ? nullptr : &comm, kMicro, init);
      RowBuffers data(work, slice.count * kMicro);
      std::string losses;
      for (int i = 0; i < kVirtualSteps; i++) {
        for (int j = 0; j < slice.count; j++)
          data.makeBatch(work, (int64_t(i) * kVirtual + slice.first + j) * kMicro, kMicro, size_t(j) * kMicro);
        const StepResult r = trainer->step(data.rows);
        uint64_t bits;
        std::memcpy(&bits, &r.loss_sum, 8);
        losses += std::to_string(bits) + " " + std::to_string(r.correct) + " " + std::to_string(r.predictions) + "\n";
        if (work.gpt && !(r.grad_norm > kGptClip)) fail(label(spec) + ": no clipping at step " + std::to_string(i));
      }
      const std::vector<float> params = trainer->gatherParameters();
      if (rank == 0) {
        const std::string name = out + "/virtual-" + modeName(m) + "-" + precisionName(p);
        writeFloats(name + ".bin", params);
        writeText(name + ".loss", losses);
      }
    }
  }
}

void hybridSuite(const Workload& work, ouro::Communicator& comm, const std::string& out, int shard_size) {
  const int world = comm.size(), rank = comm.rank(), L = shard_size > 0 ? shard_size : world / 2;
  const std::vector<float> init = work.init();
  if (rank == 0) writeFloats(out + "/init.bin", init);
  for (Precision p : {Precision::kFp32, Precision::kBf16}) {
    for (int accumulate : {1, 2}) {
      for (RunSpec spec : {RunSpec{work, Mode::kDdp, p, OptimizerKind::kAdamW, accumulate},
                           RunSpec{work, Mode::kZero3, p, OptimizerKind::kAdamW, accumulate},
                           RunSpec{work, Mode::kHsdp, p, OptimizerKind::kAdamW, accumulate, 0, L}}) {
        auto trainer = train(spec, &comm, world, rank, kBatch, kSteps, init);
        const std::vector<float> params = trainer->gatherParameters();
        const std::string eval = evaluation(*trainer, work);
        if (rank == 0) {
          writeFloats(out + "/" + label(spec) + ".bin", params);
          writeText(out + "/" + label(spec) + ".eval", eval);
        }
        if (spec.mode == Mode::kHsdp && accumulate == 1) {
          const MemoryAccount a = trainer->memory();
          std::ofstream file(out + "/memory-" + (work.gpt ? "gpt-" : "") + "hsdp-" + precisionName(p) + "-rank" +
                             std::to_string(rank) + ".txt");
          file << a.params << " " << a.grads << " " << a.optimizer << " " << a.buffers << " " << a.activations << "\n";
        }
      }
    }
  }
}

// NaN and infinities in the gradients (parallel/nonfinite_gradients.hpp): every rank stops at the
// same step with the same report. Writes OUT/nonfinite-rank<R>.txt, one line per case:
//   fixed <case> <precision>: <virtual rank> <element> <nan|inf>   FixedPointGradients::reduce
//                                                                  with values planted in chosen
//                                                                  virtual ranks' micro-batches
//   scan <case> <precision>: <origin> <element> <nan|inf>         firstNonFinite + NonFiniteKey
//                                                                  over the ranks, values planted
//                                                                  in every rank's own gradient
//   step <label> <data>: <the message up to ", computed by">      a Trainer's step with a NaN or
//                                                                  an infinity in one sample
// "none" where nothing was thrown. The test requires the same lines on every rank and, except
// for scan's origin and the default path's messages (which name ranks), at every W.
struct Planted {
  int64_t origin;  // virtual rank (fixed) or rank (scan)
  int64_t element;
  float value;
};

std::string describeKey(int64_t origin, int64_t element, bool is_nan) {
  return std::to_string(origin) + " " + std::to_string(element) + " " + (is_nan ? "nan" : "inf");
}

void nonfiniteSuite(const Workload& work, ouro::Communicator& comm, const std::string& out) {
  const int world = comm.size(), rank = comm.rank();
  CommOps ops(&comm, Mode::kDdp);
  std::string report;
  constexpr size_t kCount = 5000;
  constexpr int kVirtual = 8;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // Finite gradients of micro-batch (or rank) v: small values of both signs.
  auto fill = [](std::vector<float>& g, int64_t v) {
    for (size_t i = 0; i < g.size(); i++) g[i] = float(int64_t(mix(uint64_t(v) * 7777u + i) % 2001) - 1000) * 1e-4f;
  };
  const std::vector<std::pair<std::string, std::vector<Planted>>> cases = {
      {"nan", {{5, 1234, nan}}},
      {"inf", {{6, 10, -inf}, {2, 4000, inf}}},        // the lower virtual rank is reported
      {"both", {{3, 100, nan}, {3, 50, inf}, {7, 0, nan}}},  // then the lower element
  };
  for (Precision p : {Precision::kFp32, Precision::kBf16}) {
    const VirtualSlice slice = virtualSlice(kVirtual, world, rank);
    for (const auto& [name, planted] : cases) {
      FixedPointGradients sum(p, kCount, kVirtual, slice.count, slice.first);
      std::vector<float> g(kCount);
      for (int j = 0; j < slice.count; j++) {
        const int v = slice.first + j;
        fill(g, v);
        for (const Planted& x : planted)
          if (x.origin == v) g[size_t(x.element)] = x.value;
        sum.microBatch(j).store(0, g.data(), kCount);
      }
      std::string got = "none";
      try {
        sum.reduce(ops);
      } catch (const NonFiniteGradient& e) {
        got = describeKey(e.origin, e.element, e.is_nan);
      } catch (const std::exception& e) {
        got = std::string("another error: ") + e.what();
      }
      report += "fixed " + name + " " + precisionName(p) + ": " + got + "\n";

      // The default path's pieces: each rank's own gradient (origin: the rank), the planted
      // values at rank origin % W.
      PrecisionArray own(p, kCount);
      fill(g, rank);
      for (const Planted& x : planted)
        if (x.origin % world == rank) g[size_t(x.element)] = x.value;
      own.store(0, g.data(), kCount);
      NonFiniteKey key;
      bool is_nan = false;
      const int64_t bad = firstNonFinite(own.at(0), kCount, p, &is_nan);
      if (bad >= 0) key.note(rank, bad, is_nan, kCount);
      key.agree(ops);
      report += "scan " + name + " " + precisionName(p) + ": " +
                (key.found() ? describeKey(key.origin(kCount), key.element(kCount), key.isNan()) : "none") + "\n";
    }
  }
  // A step with a NaN or an infinity in one sample's first feature (the MLP) in step 1, in the
  // micro-batch of virtual rank 2 (with --virtual-ranks 4) or in the last rank's batch.
  std::vector<RunSpec> runs;
  const int L = world % 2 == 0 ? world / 2 : 1;
  for (Precision p : {Precision::kFp32, Precision::kBf16})
    for (int virtual_ranks : {0, 4})
      for (Mode m : {Mode::kDdp, Mode::kZero1, Mode::kZero2, Mode::kZero3, Mode::kHsdp})
        runs.push_back({work, m, p, OptimizerKind::kAdamW, 1, virtual_ranks, m == Mode::kHsdp ? L : 0});
  constexpr int kMicro = 2;
  const std::vector<float> init = work.init();
  for (const RunSpec& spec : runs) {
    for (float bad : {nan, inf}) {
      auto trainer = create(spec, &comm, kMicro, init);
      const bool virt = spec.virtual_ranks > 0;
      const VirtualSlice slice = virt ? virtualSlice(spec.virtual_ranks, world, rank) : VirtualSlice{0, 1};
      RowBuffers data(work, slice.count * kMicro);
      std::string got = "none";
      for (int i = 0; i < 2 && got == "none"; i++) {
        for (int j = 0; j < slice.count; j++) {
          const int64_t first = virt ? (int64_t(i) * spec.virtual_ranks + slice.first + j) * kMicro
                                     : (int64_t(i) * world + rank) * kMicro;
          data.makeBatch(work, first, kMicro, size_t(j) * kMicro);
          const bool planted = i == 1 && (virt ? slice.first + j == 2 : rank == world - 1);
          if (planted) data.features[(size_t(j) * kMicro + 1) * 784] = bad;
        }
        try {
          trainer->step(data.rows);
        } catch (const std::exception& e) {
          const std::string text = e.what();
          got = text.substr(0, text.find(", computed by"));
        }
      }
      // (Named without hsdp's shard size, which differs between the world sizes.)
      report += std::string("step ") + modeName(spec.mode) + "-" + precisionName(spec.precision) + (virt ? "-virtual" : "") + " " + (std::isnan(bad) ? "nan" : "inf") + ": " +
                got + "\n";
    }
  }
  writeText(out + "/nonfinite-rank" + std::to_string(rank) + ".txt", report);
}

void memorySuite(const Workload& work, ouro::Communicator& comm, const std::string& out) {
  const std::vector<float> init = work.init();
  for (Precision p : {Precision::kFp32, Precision::kBf16}) {
    for (Mode m : {Mode::kDdp, Mode::kZero1, Mode::kZero2, Mode::kZero3}) {
      const RunSpec spec{work, m, p, OptimizerKind::kAdamW, 1};
      auto trainer = train(spec, &comm, comm.size(), comm.rank(), kBatch, 1, init);
      const MemoryAccount a = trainer->memory();
      std::ofstream file(out + "/memory-" + (work.gpt ? "gpt-" : "") + modeName(m) + "-" + precisionName(p) + "-rank" +
                         std::to_string(comm.rank()) + ".txt");
      file << a.params << " " << a.grads << " " << a.optimizer << " " << a.buffers << " " << a.activations << "\n";
      if (!file) fail("cannot write the memory report into " + out);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string suite, out, model = "mlp";
  int shard_size = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--suite") suite = argv[i + 1];
    else if (flag == "--shard-size") shard_size = std::stoi(argv[i + 1]);
    else if (flag == "--out") out = argv[i + 1];
    else if (flag == "--model") model = argv[i + 1];
  }
  if (out.empty() || (suite != "equality" && suite != "memory" && suite != "virtual" && suite != "hybrid" &&
                        suite != "nonfinite") ||
      (model != "mlp" && model != "gpt")) {
    std::cerr << "usage: modes_rank --suite equality|memory|virtual|hybrid|nonfinite --out DIR [--model mlp|gpt] [--shard-size L] (under ouro-run -n W)\n";
    return 2;
  }
  const Workload work{model == "gpt"};
  int rank = -1;
  try {
    setBlasThreads(1);
    ouro::Communicator comm = ouro::Communicator::fromEnv();
    rank = comm.rank();
    if (suite == "equality") equalitySuite(work, comm, out);
    else if (suite == "virtual") virtualSuite(work, comm, out);
    else if (suite == "hybrid") hybridSuite(work, comm, out, shard_size);
    else if (suite == "nonfinite") nonfiniteSuite(work, comm, out);
    else memorySuite(work, comm, out);
    comm.barrier();
  } catch (const std::exception& e) {
    std::cerr << "modes_rank (rank " << rank << "): " << e.what() << "\n";
    return 1;
  }
  return 0;
}
