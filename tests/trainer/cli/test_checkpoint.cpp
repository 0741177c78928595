// trainer/checkpoint on its own (one process, --mode single's trainer): the manifest round trip
// bit for bit, write/read of a real trainer's state, what a second checkpoint of the same step
// and a crashed one leave behind, and every damaged or mismatched checkpoint refused with the file
// and the problem named. The multi-rank paths (ZeRO shards, another world size) run end to end in
// test_ouro_train.py.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "checkpoint/atomic_file.hpp"
#include "checkpoint/checkpoint.hpp"
#include "data/safetensors.hpp"
#include "data/strict_json.hpp"
#include "model/mlp.hpp"
#include "model/mlp_model.hpp"
#include "parallel/trainer.hpp"
#include "tests/support/process.hpp"

namespace ouro::trainer::test {
namespace {

using Catch::Matchers::Contains;
namespace fs = std::filesystem;

CheckpointManifest sampleManifest() {
  CheckpointManifest m;
  m.mode = Mode::kZero2;
  m.precision = Precision::kBf16;
  m.world_size = 3;
  m.layers = {784, 32, 10};
  m.optimizer.kind = OptimizerKind::kAdamW;
  m.optimizer.lr = 0.1 + 0.2;  // 0.30000000000000004: only an exact writer brings it back
  m.optimizer.weight_decay = 1e-2;
  m.optimizer.beta2 = 0.98;
  m.optimizer.eps = 1e-12;
  m.step = 1234;
  m.epoch = 2;
  m.batch_in_epoch = 56;
  m.seed = (uint64_t(1) << 63) + 5;  // beyond a double's 53 bits
  m.batch_size = 32;
  m.accumulate = 4;
  m.param_count = 25450;
  m.run_id = "0123456789abcdef0123456789abcdef";
  return m;
}

std::unique_ptr<Trainer> singleTrainer(const MlpLayout& layout, OptimizerKind kind, std::vector<float>* params) {
  TrainerConfig config;
  config.optimizer.kind = kind;
  config.optimizer.momentum = 0.9;
  config.batch_size = 8;
  params->resize(layout.paramCount());
  initParameters(layout, 7, params->data());
  return Trainer::create(config, std::make_unique<MlpModel>(layout, 8), nullptr, params->data());
}

// A few steps so that the optimizer state is not all zeros.
void train(Trainer& trainer, int steps) {
  std::vector<float> inputs(8 * 784);
  std::vector<int32_t> labels(8);
  Rows rows;
  rows.features = inputs.data();
  rows.feature_width = 784;
  rows.targets = labels.data();
  rows.count = 8;
  for (int s = 0; s < steps; s++) {
    for (size_t i = 0; i < inputs.size(); i++) inputs[i] = float((i * 7 + size_t(s)) % 13) / 13.0f;
    for (size_t i = 0; i < labels.size(); i++) labels[i] = int32_t((i + size_t(s)) % 10);
    trainer.step(rows);
  }
}

CheckpointManifest manifestFor(const MlpLayout& layout, OptimizerKind kind, int64_t step) {
  CheckpointManifest m;
  m.layers = layout.widths();
  m.optimizer.kind = kind;
  m.optimizer.momentum = 0.9;
  m.step = step;
  m.batch_in_epoch = step;
  m.batch_size = 8;
  m.param_count = layout.paramCount();
  return m;
}

TEST_CASE("checkpoint manifest: round trip keeps every field bit for bit", "[checkpoint]") {
  const CheckpointManifest m = sampleManifest();
  const CheckpointManifest back = manifestFromJson(manifestToJson(m), "manifest.json");
  CHECK(back.mode == m.mode);
  CHECK(back.precision == m.precision);
  CHECK(back.world_size == m.world_size);
  CHECK(back.layers == m.layers);
  CHECK(back.optimizer.kind == m.optimizer.kind);
  CHECK(back.optimizer.lr == m.optimizer.lr);
  CHECK(back.optimizer.momentum == m.optimizer.momentum);
  CHECK(back.optimizer.weight_decay == m.optimizer.weight_decay);
  CHECK(back.optimizer.beta1 == m.optimizer.beta1);
  CHECK(back.optimizer.beta2 == m.optimizer.beta2);
  CHECK(back.optimizer.eps == m.optimizer.eps);
  CHECK(back.step == m.step);
  CHECK(back.epoch == m.epoch);
  CHECK(back.batch_in_epoch == m.batch_in_epoch);
  CHECK(back.seed == m.seed);
  CHECK(back.batch_size == m.batch_size);
  CHECK(back.accumulate == m.accumulate);
  CHECK(back.param_count == m.param_count);
  CHECK(back.run_id == m.run_id);
  // The shard names a reader would look for are listed.
  CHECK_THAT(manifestToJson(m), Contains("\"rank-2-of-3.safetensors\""));
}

TEST_CASE("checkpoint manifest: damaged manifests are refused naming the member", "[checkpoint]") {
  std::string good = manifestToJson(sampleManifest());
  auto without = [&](const std::string& key) {
    size_t at = good.find("\"" + key + "\":");
    REQUIRE(at != std::string::npos);
    size_t end = good.find('\n', at);
    std::string text = good.substr(0, at) + "\"x_" + good.substr(at + 1, end - at - 1) + good.substr(end);
    return text;
  };
  CHECK_THROWS_WITH(manifestFromJson(without("step"), "M"), Contains("M: the member \"step\" is missing"));
  CHECK_THROWS_WITH(manifestFromJson(without("seed"), "M"), Contains("\"seed\""));
  std::string wrong_version = good;
  wrong_version.replace(wrong_version.find("\"version\": 1"), 12, "\"version\": 9");
  CHECK_THROWS_WITH(manifestFromJson(wrong_version, "M"), Contains("manifest version 9"));
  std::string negative = good;
  negative.replace(negative.find("\"step\": 1234"), 12, "\"step\": -4");
  CHECK_THROWS_WITH(manifestFromJson(negative, "M"), Contains("\"step\" must be a whole number >= 0, found '-4'"));
  std::string bad_mode = good;
  bad_mode.replace(bad_mode.find("\"zero2\""), 7, "\"zero9\"");
  CHECK_THROWS_WITH(manifestFromJson(bad_mode, "M"), Contains("zero9"));
  CHECK_THROWS_WITH(manifestFromJson("{\"format\": 1", "M"), Contains("M: JSON"));
  CHECK_THROWS_WITH(manifestFromJson("{\"format\": \"other\"}", "M"), Contains("not an ouro-train checkpoint"));
  // The run's identity: optional (manifests written before it), else 32 hex digits.
  CHECK(manifestFromJson(without("run_id"), "M").run_id.empty());
  std::string bad_id = good;
  bad_id.replace(bad_id.find("0123456789abcdef0123"), 4, "XYZ!");
  CHECK_THROWS_WITH(manifestFromJson(bad_id, "M"), Contains("\"run_id\" is 'XYZ!"));
}

TEST_CASE("checkpoint: a single trainer's state written and read back", "[checkpoint]") {
  ouro::test::TempDir tmp;
  const std::string dir = tmp.path() + "/ck";
  const MlpLayout layout({784, 16, 10});
  for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdamW}) {
    std::vector<float> init;
    auto trainer = singleTrainer(layout, kind, &init);
    train(*trainer, 3);
    probeCheckpointDir(dir);
    const std::string path = writeCheckpoint(dir, manifestFor(layout, kind, 3), *trainer, nullptr);
    CHECK(path == dir + "/step-3");
    CHECK(readFile(dir + "/latest") == "step-3\n");
    const CheckpointState st = readCheckpoint(dir);
    CHECK(st.path == path);
    CHECK(st.manifest.step == 3);
    CHECK(st.params == trainer->gatherParameters());
    const std::vector<StateTensor> state = trainer->ownedOptimizerState();
    REQUIRE(st.optimizer_state.size() == state.size());
    CHECK(state.size() == (kind == OptimizerKind::kSgd ? 1u : 2u));
    for (size_t i = 0; i < state.size(); i++) {
      CHECK(st.optimizer_state[i].first == state[i].name);
      CHECK(std::vector<float>(state[i].values.begin(), state[i].values.end()) == st.optimizer_state[i].second);
    }
    // The shard names its range and step count.
    const SafetensorsFile shard = readSafetensors(path + "/rank-0-of-1.safetensors");
    CHECK(shard.metadata.at("ranges") == "0:" + std::to_string(layout.paramCount()));
    CHECK(shard.metadata.at("optimizer_steps") == "3");
    fs::remove_all(dir);
  }
}

TEST_CASE("checkpoint: the same step written twice, a crashed one, and latest", "[checkpoint]") {
  ouro::test::TempDir tmp;
  const std::string dir = tmp.path() + "/ck";
  const MlpLayout layout({784, 16, 10});
  std::vector<float> init;
  auto trainer = singleTrainer(layout, OptimizerKind::kSgd, &init);
  probeCheckpointDir(dir);
  train(*trainer, 1);
  writeCheckpoint(dir, manifestFor(layout, OptimizerKind::kSgd, 1), *trainer, nullptr);
  train(*trainer, 1);
  writeCheckpoint(dir, manifestFor(layout, OptimizerKind::kSgd, 2), *trainer, nullptr);
  CHECK(readFile(dir + "/latest") == "step-2\n");
  // A run that died mid-checkpoint left its temporary folder; the next checkpoint of that step
  // replaces it, and an existing step folder is replaced whole.
  fs::create_directories(dir + "/.step-2.tmp/junk");
  train(*trainer, 1);
  writeCheckpoint(dir, manifestFor(layout, OptimizerKind::kSgd, 2), *trainer, nullptr);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"latest", "step-1", "step-2"});
  CHECK(readCheckpoint(dir).params == trainer->gatherParameters());
}

TEST_CASE("checkpoint: damaged checkpoints are refused naming the file", "[checkpoint]") {
  ouro::test::TempDir tmp;
  const std::string dir = tmp.path() + "/ck";
  const MlpLayout layout({784, 16, 10});
  const size_t n = layout.paramCount();
  CHECK_THROWS_WITH(readCheckpoint(dir), Contains("no checkpoint there"));
  fs::create_directories(dir + "/step-5");
  writeFileAtomic(dir + "/latest", "../elsewhere\n");
  CHECK_THROWS_WITH(readCheckpoint(dir), Contains("expected step-<N>"));
  writeFileAtomic(dir + "/latest", "step-5\n");
  CHECK_THROWS_WITH(readCheckpoint(dir), Contains(dir + "/step-5/manifest.json"));

  CheckpointManifest m = manifestFor(layout, OptimizerKind::kSgd, 5);
  m.mode = Mode::kZero1;
  m.world_size = 2;
  writeFileAtomic(dir + "/step-5/manifest.json", manifestToJson(m));
  auto shard = [&](int rank, const std::string& ranges, size_t count) {
    std::vector<float> values(count, float(rank + 1));
    writeSafetensors(dir + "/step-5/rank-" + std::to_string(rank) + "-of-2.safetensors",
                     {{"params", {int64_t(count)}, "F32", asBytes(values)}}, {{"ranges", ranges}});
  };
  shard(0, "0:" + std::to_string(n / 2), n / 2);
  CHECK_THROWS_WITH(readCheckpoint(dir), Contains("rank-1-of-2.safetensors"));  // missing
  shard(1, std::to_string(n / 2 + 1) + ":" + std::to_string(n - n / 2 - 1), n - n / 2 - 1);
  CHECK_THROWS_WITH(readCheckpoint(dir), Contains("element " + std::to_string(n / 2) + " is in none"));
  shard(1, std::to_string(n / 2) + ":" + std::to_string(n - n / 2), n - n / 2 - 1);
  CHECK_THROWS_WITH(readCheckpoint(dir), Contains("but the ranges cover"));
  shard(1, std::to_string(n) + ":5", 5);
  CHECK_THROWS_WITH(readCheckpoint(dir), Contains("lies outside"));
  shard(1, "12:x", 5);
  CHECK_THROWS_WITH(readCheckpoint(dir), Contains("expected OFFSET:COUNT"));
  shard(1, std::to_string(n / 2) + ":" + std::to_string(n - n / 2), n - n / 2);
  const CheckpointState st = readCheckpoint(dir);  // whole again: rank 0's half 1s, rank 1's half 2s
  CHECK(st.params[0] == 1.0f);
  CHECK(st.params[n - 1] == 2.0f);
}

TEST_CASE("checkpoint: resuming under another configuration is refused, another world size is not",
          "[checkpoint]") {
  const CheckpointManifest saved = sampleManifest();
  CheckpointManifest now = saved;
  now.world_size = 5;
  now.batch_size = 7;
  now.optimizer.lr = 0.5;
  CHECK_NOTHROW(checkResumable(saved, now, "D"));
  auto refusal = [&](auto change) {
    CheckpointManifest other = saved;
    change(other);
    try {
      checkResumable(saved, other, "D");
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  CHECK_THAT(refusal([](auto& m) { m.layers = {784, 64, 10}; }), Contains("pass --layers 784,32,10"));
  // Distributed modes continue each other's runs (the same bits); single and them do not.
  CHECK_THAT(refusal([](auto& m) { m.mode = Mode::kSingle; }), Contains("pass --mode zero2"));
  CHECK(refusal([](auto& m) { m.mode = Mode::kDdp; }) == "(accepted)");
  CHECK(refusal([](auto& m) { m.mode = Mode::kHsdp; }) == "(accepted)");
  CHECK_THAT(refusal([](auto& m) { m.precision = Precision::kFp32; }), Contains("pass --precision bf16"));
  CHECK_THAT(refusal([](auto& m) { m.optimizer.kind = OptimizerKind::kSgd; }), Contains("pass --optimizer adamw"));
  CHECK_THAT(refusal([](auto& m) { m.seed = 1; }), Contains("pass --seed 9223372036854775813"));
}

TEST_CASE("checkpoint manifest: one written before nlohmann-json still loads", "[checkpoint]") {
  // Byte for byte what the hand-written JSON writer produced for a zero2 AdamW run (784,32,10 at
  // W = 2, step 30): arrays on one line, whole doubles without ".0".
  const std::string old_text = R"({
  "format": "ouro-train checkpoint",
  "version": 1,
  "mode": "zero2",
  "world_size": 2,
  "precision": "fp32",
  "layers": [784,32,10],
  "param_count": 25450,
  "optimizer": {
    "kind": "adamw",
    "lr": 0.001,
    "momentum": 0,
    "weight_decay": 0.01,
    "betas": [0.9, 0.999],
    "eps": 1e-08
  },
  "step": 30,
  "epoch": 0,
  "batch_in_epoch": 30,
  "seed": 0,
  "batch_size": 64,
  "accumulate": 1,
  "shards": ["rank-0-of-2.safetensors", "rank-1-of-2.safetensors"]
}
)";
  const CheckpointManifest m = manifestFromJson(old_text, "old/manifest.json");
  CHECK(m.mode == Mode::kZero2);
  CHECK(m.world_size == 2);
  CHECK(m.precision == Precision::kFp32);
  CHECK(m.layers == std::vector<int>{784, 32, 10});
  CHECK(m.param_count == 25450);
  CHECK(m.optimizer.kind == OptimizerKind::kAdamW);
  CHECK(m.optimizer.lr == 0.001);
  CHECK(m.optimizer.momentum == 0.0);
  CHECK(m.optimizer.weight_decay == 0.01);
  CHECK(m.optimizer.beta1 == 0.9);
  CHECK(m.optimizer.beta2 == 0.999);
  CHECK(m.optimizer.eps == 1e-8);
  CHECK(m.step == 30);
  CHECK(m.epoch == 0);
  CHECK(m.batch_in_epoch == 30);
  CHECK(m.seed == 0);
  CHECK(m.batch_size == 64);
  CHECK(m.accumulate == 1);
  // Written again it holds the same values (nlohmann's layout: one array element per line).
  const CheckpointManifest again = manifestFromJson(manifestToJson(m), "new/manifest.json");
  CHECK(again.layers == m.layers);
  CHECK(again.optimizer.momentum == m.optimizer.momentum);
  CHECK(again.optimizer.eps == m.optimizer.eps);
}

TEST_CASE("checkpoint manifest: duplicate members and inexact integers are refused", "[checkpoint]") {
  const std::string good = manifestToJson(sampleManifest());
  auto replaced = [&](const std::string& from, const std::string& to) {
    const size_t at = good.find(from);
    REQUIRE(at != std::string::npos);
    return good.substr(0, at) + to + good.substr(at + from.size());
  };
  // A member given twice would otherwise be read as whichever came last.
  CHECK_THROWS_WITH(manifestFromJson(replaced("\"step\": 1234,", "\"step\": 1234,\n  \"step\": 7,"), "M"),
                    Contains("M: JSON: duplicate key \"step\"") && Contains("resume from another checkpoint"));
  CHECK_THROWS_WITH(manifestFromJson(replaced("\"kind\": \"adamw\",", "\"kind\": \"adamw\", \"kind\": \"sgd\","), "M"),
                    Contains("duplicate key \"kind\""));
  // Whole numbers are read exactly: never a fraction, an exponent, or a value past 64 bits.
  CHECK_THROWS_WITH(manifestFromJson(replaced("\"step\": 1234", "\"step\": 1234.0"), "M"),
                    Contains("\"step\" must be a whole number >= 0, found '1234.0'"));
  CHECK_THROWS_WITH(manifestFromJson(replaced("\"step\": 1234", "\"step\": 1.234e3"), "M"),
                    Contains("\"step\" must be a whole number >= 0"));
  CHECK_THROWS_WITH(manifestFromJson(replaced("\"seed\": 9223372036854775813", "\"seed\": 18446744073709551616"), "M"),
                    Contains("\"seed\" must be a whole number >= 0"));
  CHECK_THROWS_WITH(manifestFromJson(replaced("\"layers\": [", "\"layers\": [-1, "), "M"),
                    Contains("\"layers\" must be a whole number >= 0, found '-1'"));
  // A double is any JSON number, but a finite one.
  CHECK(manifestFromJson(replaced("\"momentum\": 0.0", "\"momentum\": 0"), "M").optimizer.momentum == 0.0);
  CHECK_THROWS_WITH(manifestFromJson(replaced("\"momentum\": 0.0", "\"momentum\": \"0\""), "M"),
                    Contains("\"momentum\" must be a finite number, found '0'"));
  CHECK_THROWS_WITH(manifestFromJson(replaced("\"momentum\": 0.0", "\"momentum\": 1e999"), "M"),
                    Contains("M: JSON") && Contains("1e999"));
}

}  // namespace
}  // namespace ouro::trainer::test
