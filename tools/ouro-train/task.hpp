// What ouro-train trains on: the model and its data. The MLP learns Fashion-MNIST's images; the GPT
// learns a byte-level text corpus (its training windows are the samples, its validation split
// what it is measured on). Everything else in the run (modes, data order, checkpoints, reports) is
// the same for both and does not know which one it drives.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "job.hpp"
#include "model/model.hpp"
#include "options.hpp"
#include "parallel/trainer.hpp"

namespace ouro::train {

// One evaluation: the test set's (MLP) or the validation split's (GPT).
struct Evaluation {
  double loss = 0;             // mean cross-entropy per prediction (nats)
  double accuracy = 0;         // fraction of predictions right (argmax = target)
  int64_t predictions = 0;     // images, or windows * block_size bytes
  double bits_per_byte = 0;    // GPT: loss / ln 2
};

class Task {
 public:
  // No input is read yet: that is load()'s.
  static std::unique_ptr<Task> create(const Options& options);
  virtual ~Task() = default;

  // The model's description for messages ("layers 784,512,256,10" / "GPT 4 layers, 4 heads, ...").
  virtual std::string describe() const = 0;
  // A model sized for `rows` rows per forward.
  virtual std::unique_ptr<trainer::Model> makeModel(int rows) const = 0;
  // The model's tensors and units (a model of one row).
  const trainer::Model& shape() const { return *shape_; }
  // What checkpoints record (CheckpointManifest::model).
  virtual std::string manifestModel() const = 0;
  // "test" or "validation": what evaluate() measures.
  virtual const char* evaluationName() const = 0;

  // Reads the data. Throws std::invalid_argument for input the flags make wrong (a block larger
  // than the corpus) and std::runtime_error for data that is missing or damaged.
  virtual void load() = 0;
  // Samples the DistributedSampler draws from.
  virtual int64_t trainSamples() const = 0;

  // Room for `rows` rows, and sample `sample` of the training set into row `row` of it.
  virtual void reserveRows(int64_t rows) = 0;
  virtual void fillRow(int64_t sample, int64_t row) = 0;
  virtual trainer::Rows rows() = 0;

  // Collective: every rank calls it with the same trainer state.
  virtual Evaluation evaluate(trainer::Trainer& trainer, Job& job) = 0;

  // GPT: --sample bytes generated from params (the whole model) after --prompt; empty otherwise.
  virtual std::string sampleText(const std::vector<float>& /*params*/) const { return {}; }

 protected:
  std::unique_ptr<trainer::Model> shape_;
};

}  // namespace ouro::train
