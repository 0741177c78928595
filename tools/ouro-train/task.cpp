// The MLP's and the GPT's data (see task.hpp).
#include "task.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "data/fashion_mnist.hpp"
#include "data/text_corpus.hpp"
#include "model/gpt.hpp"
#include "model/gpt_sampling.hpp"
#include "model/mlp_model.hpp"

namespace ouro::train {

namespace {

// Fashion-MNIST: 60000 training images, the 10000 test images evaluated on every rank.
class MlpTask final : public Task {
 public:
  explicit MlpTask(const Options& o) : o_(o), layout_(o.layers) { shape_ = makeModel(1); }

  std::string describe() const override { return "layers " + layout_.describe(); }
  std::unique_ptr<trainer::Model> makeModel(int rows) const override {
    return std::make_unique<trainer::MlpModel>(layout_, rows);
  }
  std::string manifestModel() const override { return "mlp"; }
  const char* evaluationName() const override { return "test"; }

  void load() override {
    train_ = trainer::loadFashionMnist(o_.data_dir, true);
    test_ = trainer::loadFashionMnist(o_.data_dir, false);
    if (train_.size != 60000 || train_.rows * train_.cols != 784)
      throw std::runtime_error("--data " + o_.data_dir + ": the training set holds " + std::to_string(train_.size) +
                               " images of " + std::to_string(train_.rows) + "x" + std::to_string(train_.cols) +
                               ", expected Fashion-MNIST's 60000 of 28x28");
  }
  int64_t trainSamples() const override { return 60000; }

  void reserveRows(int64_t rows) override {
    inputs_.assign(size_t(rows) * 784, 0.0f);
    labels_.assign(size_t(rows), 0);
  }
  void fillRow(int64_t sample, int64_t row) override {
    std::copy_n(train_.image(sample), 784, inputs_.data() + size_t(row) * 784);
    labels_[size_t(row)] = train_.labels[size_t(sample)];
  }
  trainer::Rows rows() override { return featureRows(inputs_.data(), labels_.data(), int64_t(labels_.size())); }

  // Every rank evaluates the whole test set (it is small), so all get the same figures.
  Evaluation evaluate(trainer::Trainer& trainer, Job&) override {
    const trainer::LossResult r = trainer.evaluate(featureRows(test_.image(0), test_.labels.data(), test_.size));
    Evaluation e;
    e.predictions = test_.size;
    e.loss = r.loss_sum / double(test_.size);
    e.accuracy = double(r.correct) / double(test_.size);
    return e;
  }

 private:
  static trainer::Rows featureRows(const float* features, const int32_t* labels, int64_t count) {
    trainer::Rows rows;
    rows.features = features;
    rows.feature_width = 784;
    rows.targets = labels;
    rows.count = count;
    return rows;
  }

  const Options& o_;
  trainer::MlpLayout layout_;
  trainer::Dataset train_, test_;
  std::vector<float> inputs_;
  std::vector<int32_t> labels_;
};

// A byte-level corpus: training sample k is the window of T + 1 bytes at k * T of the first 90%;
// the validation loss is over every such window of the last 10%.
class GptTask final : public Task {
 public:
  explicit GptTask(const Options& o) : o_(o), layout_(o.gpt) { shape_ = makeModel(1); }

  std::string describe() const override {
    const trainer::GptConfig& c = o_.gpt;
    return "GPT " + std::to_string(c.n_layer) + " layers, " + std::to_string(c.n_head) + " heads, " +
           std::to_string(c.n_embd) + " channels, block " + std::to_string(c.block_size);
  }
  std::unique_ptr<trainer::Model> makeModel(int rows) const override {
    return std::make_unique<trainer::Gpt>(layout_, rows);
  }
  std::string manifestModel() const override { return layout_.describe(); }
  const char* evaluationName() const override { return "validation"; }

  void load() override {
    corpus_ = trainer::loadTextCorpus(o_.text_path);
    trainer::checkCorpusFits(corpus_, o_.gpt.block_size);
  }
  int64_t trainSamples() const override { return trainer::trainWindows(corpus_, o_.gpt.block_size).count(); }
  const trainer::TextCorpus& corpus() const { return corpus_; }

  void reserveRows(int64_t rows) override {
    tokens_.assign(size_t(rows) * size_t(o_.gpt.block_size), 0);
    targets_.assign(tokens_.size(), 0);
    rows_ = rows;
  }
  void fillRow(int64_t sample, int64_t row) override {
    const size_t at = size_t(row) * size_t(o_.gpt.block_size);
    trainer::trainWindows(corpus_, o_.gpt.block_size).fill(sample, tokens_.data() + at, targets_.data() + at);
  }
  trainer::Rows rows() override { return tokenRows(tokens_.data(), targets_.data(), rows_); }

  // The validation windows split evenly over the ranks (each its n / W), the n % W left over
  // evaluated by every rank and counted by rank 0: every rank makes the same calls (ZeRO-3
  // gathers in them), and the sums are over every window once.
  Evaluation evaluate(trainer::Trainer& trainer, Job& job) override {
    const trainer::TokenWindows windows = trainer::validationWindows(corpus_, o_.gpt.block_size);
    // With virtual ranks the figures must not depend on W: every rank evaluates every window (rank
    // 0 counts them), the chunks and their sums the same at any world size.
    const int64_t n = windows.count(), world = job.world(), each = o_.virtual_ranks > 0 ? 0 : n / world;
    double sums[2] = {0, 0};
    auto run = [&](int64_t first, int64_t count, bool counted) {
      if (count == 0) return;
      const size_t T = size_t(o_.gpt.block_size);
      std::vector<int32_t> tokens(size_t(count) * T), targets(tokens.size());
      for (int64_t k = 0; k < count; k++)
        windows.fill(first + k, tokens.data() + size_t(k) * T, targets.data() + size_t(k) * T);
      const trainer::LossResult r = trainer.evaluate(tokenRows(tokens.data(), targets.data(), count));
      if (counted) {
        sums[0] += r.loss_sum;
        sums[1] += r.correct;
      }
    };
    run(int64_t(job.rank()) * each, each, true);
    run(world * each, n - world * each, job.rank() == 0);
    job.sum(sums);
    Evaluation e;
    e.predictions = n * o_.gpt.block_size;
    e.loss = sums[0] / double(e.predictions);
    e.accuracy = sums[1] / double(e.predictions);
    e.bits_per_byte = e.loss / std::log(2.0);
    return e;
  }

  // Seeded by --seed: the same model and flags give the same text.
  std::string sampleText(const std::vector<float>& params) const override {
    if (o_.sample == 0) return {};
    trainer::Gpt gpt(layout_, 1);
    return trainer::generateText(gpt, params.data(), o_.prompt, o_.sample, o_.temperature, o_.top_k, o_.seed);
  }

 private:
  trainer::Rows tokenRows(const int32_t* tokens, const int32_t* targets, int64_t count) const {
    trainer::Rows rows;
    rows.tokens = tokens;
    rows.seq = o_.gpt.block_size;
    rows.targets = targets;
    rows.count = count;
    return rows;
  }

  const Options& o_;
  trainer::GptLayout layout_;
  trainer::TextCorpus corpus_;
  std::vector<int32_t> tokens_, targets_;
  int64_t rows_ = 0;
};

}  // namespace

std::unique_ptr<Task> Task::create(const Options& options) {
  if (options.model == ModelKind::kGpt) return std::make_unique<GptTask>(options);
  return std::make_unique<MlpTask>(options);
}

}  // namespace ouro::train
