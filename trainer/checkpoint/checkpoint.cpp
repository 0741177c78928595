#include "checkpoint/checkpoint.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <optional>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <system_error>

#include "checkpoint/atomic_file.hpp"
#include "data/safetensors.hpp"
#include "data/strict_json.hpp"

namespace ouro::trainer {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "ouro-train checkpoint";
constexpr int kVersion = 1;
constexpr const char* kParamsTensor = "params";

std::string stepName(int64_t step) { return "step-" + std::to_string(step); }
std::string shardName(int rank, int world) {
  return "rank-" + std::to_string(rank) + "-of-" + std::to_string(world) + ".safetensors";
}

// Every rank says whether its part succeeded; all learn whether every rank did. Doubles as the
// barrier between the phases of a checkpoint, so one rank's failure cannot leave the others
// waiting in a barrier that rank never reaches.
bool allSucceeded(ouro::Communicator* comm, bool ok) {
  if (!comm) return ok;
  int32_t failed = ok ? 0 : 1;
  comm->allReduce(std::span<int32_t>(&failed, 1), ouroMax);
  return failed == 0;
}

void throwIfAnyFailed(ouro::Communicator* comm, const std::string& error, const std::string& phase) {
  if (allSucceeded(comm, error.empty())) return;
  if (!error.empty()) throw std::runtime_error(error);
  throw std::runtime_error(phase + " failed on another rank (its own message says why)");
}

std::string rangesText(const std::vector<OwnedRange>& ranges) {
  std::string out;
  for (const auto& r : ranges) out += (out.empty() ? "" : ",") + std::to_string(r.offset) + ":" + std::to_string(r.count);
  return out;
}

std::vector<OwnedRange> parseRanges(const std::string& text, const std::string& where) {
  std::vector<OwnedRange> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(pos, comma - pos);
    size_t colon = item.find(':');
    OwnedRange r;
    bool ok = colon != std::string::npos;
    if (ok) {
      auto a = std::from_chars(item.data(), item.data() + colon, r.offset);
      auto b = std::from_chars(item.data() + colon + 1, item.data() + item.size(), r.count);
      ok = a.ec == std::errc() && a.ptr == item.data() + colon && b.ec == std::errc() &&
           b.ptr == item.data() + item.size();
    }
    if (!ok) throw std::runtime_error(where + ": metadata \"ranges\" holds '" + item + "', expected OFFSET:COUNT");
    out.push_back(r);
    pos = comma + 1;
  }
  return out;
}

void writeShard(const std::string& path, Trainer& trainer, int rank, int world, size_t param_count) {
  const std::vector<OwnedRange> ranges = trainer.ownedRanges();
  const std::vector<float> params = trainer.ownedParameters();
  const std::vector<StateTensor> state = trainer.ownedOptimizerState();
  size_t owned = 0;
  for (const auto& r : ranges) owned += r.count;
  if (owned != params.size())
    throw std::runtime_error("the trainer's owned ranges hold " + std::to_string(owned) + " parameters but it gave " +
                             std::to_string(params.size()) + " (a trainer bug)");
  std::vector<TensorOut> tensors;
  tensors.push_back({kParamsTensor, {int64_t(params.size())}, "F32", asBytes(params)});
  for (const auto& s : state) {
    if (s.values.size() != owned)
      throw std::runtime_error("optimizer state '" + s.name + "' holds " + std::to_string(s.values.size()) +
                               " floats, expected " + std::to_string(owned) + " (a trainer bug)");
    tensors.push_back({s.name, {int64_t(owned)}, "F32", asBytes(std::span<const float>(s.values))});
  }
  writeSafetensors(path, tensors,
                   {{"ranges", rangesText(ranges)},
                    {"rank", std::to_string(rank)},
                    {"world_size", std::to_string(world)},
                    {"param_count", std::to_string(param_count)},
                    {"optimizer_steps", std::to_string(trainer.optimizerSteps())}});
}

// Rank 0's last phase: manifest into the temporary folder, the folder renamed into place (an
// older folder of the same step moved aside first: rename cannot replace a non-empty folder),
// then `latest` pointed at it.
void publish(const std::string& dir, const std::string& tmp, const CheckpointManifest& manifest) {
  writeFileAtomic(tmp + "/manifest.json", manifestToJson(manifest));
  const std::string final_path = dir + "/" + stepName(manifest.step);
  const std::string old = dir + "/." + stepName(manifest.step) + ".old";
  std::error_code ec;
  fs::remove_all(old, ec);
  if (fs::exists(final_path)) {
    fs::rename(final_path, old, ec);
    if (ec) throw std::runtime_error("cannot move the older " + final_path + " aside: " + ec.message());
  }
  fs::rename(tmp, final_path, ec);
  if (ec) throw std::runtime_error("cannot rename " + tmp + " to " + final_path + ": " + ec.message());
  writeFileAtomic(dir + "/latest", stepName(manifest.step) + "\n");
  fs::remove_all(old, ec);
}

nlohmann::ordered_json optimizerJson(const OptimizerConfig& o) {
  nlohmann::ordered_json j;
  j["kind"] = optimizerName(o.kind);
  j["lr"] = o.lr;  // doubles are written with digits that read back as the same double
  j["momentum"] = o.momentum;
  j["weight_decay"] = o.weight_decay;
  j["betas"] = {o.beta1, o.beta2};
  j["eps"] = o.eps;
  return j;
}

// x as the shortest text that reads back as x ("0.9", "0"), for messages that suggest a flag.
std::string numberText(double x) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, x);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(x);
}

std::string layersText(const std::vector<int>& layers) {
  std::string out;
  for (int w : layers) out += (out.empty() ? "" : ",") + std::to_string(w);
  return out;
}

}  // namespace

std::string manifestToJson(const CheckpointManifest& m) {
  std::vector<std::string> shards;
  for (int r = 0; r < m.world_size; r++) shards.push_back(shardName(r, m.world_size));
  nlohmann::ordered_json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["mode"] = modeName(m.mode);
  j["world_size"] = m.world_size;
  j["virtual_ranks"] = m.virtual_ranks;
  j["precision"] = precisionName(m.precision);
  j["model"] = m.model;
  j["layers"] = m.layers;
  j["param_count"] = uint64_t(m.param_count);
  j["optimizer"] = optimizerJson(m.optimizer);
  j["step"] = m.step;
  j["epoch"] = m.epoch;
  j["batch_in_epoch"] = m.batch_in_epoch;
  j["seed"] = m.seed;
  j["batch_size"] = m.batch_size;
  j["accumulate"] = m.accumulate;
  if (!m.run_id.empty()) j["run_id"] = m.run_id;
  j["shards"] = shards;
  return j.dump(2) + "\n";
}

namespace {

// Typed access to the manifest's members, each failure naming the file and the member.
class ManifestReader {
 public:
  ManifestReader(const nlohmann::json& object, std::string where) : object_(object), where_(std::move(where)) {
    if (!object_.is_object()) throw std::runtime_error(where_ + ": expected a JSON object");
  }
  const nlohmann::json& member(const char* key) const {
    const auto it = object_.find(key);
    if (it == object_.end()) throw std::runtime_error(where_ + ": the member \"" + key + "\" is missing");
    return *it;
  }
  std::string string(const char* key) const {
    const nlohmann::json& v = member(key);
    if (!v.is_string()) wrong(key, "a string", v);
    return v.get<std::string>();
  }
  uint64_t whole(const char* key) const { return wholeValue(member(key), key); }
  // Exact: a fraction, an exponent, a sign or a number past 64 bits is refused, never rounded.
  uint64_t wholeValue(const nlohmann::json& v, const std::string& key) const {
    std::optional<uint64_t> n = exactUint64(v);
    if (!n) wrong(key, "a whole number >= 0", v);
    return *n;
  }
  // Any JSON number: manifests written before nlohmann-json have "momentum": 0, now 0.0.
  double real(const nlohmann::json& v, const std::string& key) const {
    if (!v.is_number() || !std::isfinite(v.get<double>())) wrong(key, "a finite number", v);
    return v.get<double>();
  }
  double real(const char* key) const { return real(member(key), key); }
  const std::string& where() const { return where_; }

 private:
  [[noreturn]] void wrong(const std::string& key, const char* wanted, const nlohmann::json& v) const {
    throw std::runtime_error(where_ + ": \"" + key + "\" must be " + wanted + ", found " + describeJsonValue(v));
  }
  const nlohmann::json& object_;
  std::string where_;
};

}  // namespace

CheckpointManifest manifestFromJson(const std::string& text, const std::string& where) {
  nlohmann::json doc;
  try {
    doc = parseStrictJson(text);
  } catch (const std::exception& e) {
    throw std::runtime_error(where + ": " + e.what() + "; the manifest is damaged: resume from another checkpoint");
  }
  const ManifestReader top(doc, where);
  if (top.string("format") != kFormat)
    throw std::runtime_error(where + ": not an ouro-train checkpoint manifest (format is '" + top.string("format") + "')");
  if (top.whole("version") != uint64_t(kVersion))
    throw std::runtime_error(where + ": manifest version " + std::to_string(top.whole("version")) +
                             " is not the version " + std::to_string(kVersion) + " this ouro-train reads");
  CheckpointManifest m;
  const ManifestReader opt(top.member("optimizer"), where + ": optimizer");
  try {
    m.mode = parseMode(top.string("mode"));
    m.precision = parsePrecision(top.string("precision"));
    m.optimizer.kind = parseOptimizerKind(opt.string("kind"));
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(where + ": " + e.what());
  }
  const uint64_t world = top.whole("world_size");
  if (world < 1 || world > uint64_t(INT32_MAX)) throw std::runtime_error(where + ": world_size must be >= 1");
  m.world_size = int(world);
  // Manifests from before virtual ranks have none.
  if (doc.contains("virtual_ranks")) {
    const uint64_t v = top.whole("virtual_ranks");
    if (v > uint64_t(INT32_MAX) || (v > 0 && v < world))
      throw std::runtime_error(where + ": virtual_ranks " + std::to_string(v) + " with world_size " +
                               std::to_string(world) + " is not a run ouro-train makes; the manifest is damaged");
    m.virtual_ranks = int(v);
  }
  // Manifests from before the GPT have no "model": they hold an MLP.
  if (doc.contains("model")) m.model = top.string("model");
  if (m.model != "mlp" && m.model.rfind("gpt:", 0) != 0)
    throw std::runtime_error(where + ": \"model\" is '" + m.model + "', neither \"mlp\" nor a GPT's \"gpt:...\"");
  const nlohmann::json& layers = top.member("layers");
  if (!layers.is_array()) throw std::runtime_error(where + ": \"layers\" must be an array of widths");
  for (const nlohmann::json& w : layers) m.layers.push_back(int(std::min<uint64_t>(top.wholeValue(w, "layers"), INT32_MAX)));
  m.param_count = size_t(top.whole("param_count"));
  m.optimizer.lr = opt.real("lr");
  m.optimizer.momentum = opt.real("momentum");
  m.optimizer.weight_decay = opt.real("weight_decay");
  const nlohmann::json& betas = opt.member("betas");
  if (!betas.is_array() || betas.size() != 2)
    throw std::runtime_error(where + ": optimizer: \"betas\" must hold two numbers");
  m.optimizer.beta1 = opt.real(betas[0], "betas");
  m.optimizer.beta2 = opt.real(betas[1], "betas");
  m.optimizer.eps = opt.real("eps");
  m.step = int64_t(top.whole("step"));
  m.epoch = int64_t(top.whole("epoch"));
  m.batch_in_epoch = int64_t(top.whole("batch_in_epoch"));
  m.seed = top.whole("seed");
  // Manifests from before run identities have none.
  if (doc.contains("run_id")) {
    m.run_id = top.string("run_id");
    if (m.run_id.size() != 32 || m.run_id.find_first_not_of("0123456789abcdef") != std::string::npos)
      throw std::runtime_error(where + ": \"run_id\" is '" + m.run_id + "', not 32 hex digits; the manifest is damaged");
  }
  m.batch_size = int(std::min<uint64_t>(top.whole("batch_size"), INT32_MAX));
  m.accumulate = int(std::min<uint64_t>(top.whole("accumulate"), INT32_MAX));
  if (m.batch_size < 1 || m.accumulate < 1 || m.step < 0 || m.epoch < 0 || m.batch_in_epoch < 0)
    throw std::runtime_error(where + ": batch_size and accumulate must be >= 1, step, epoch and batch_in_epoch < 2^63");
  // Untrusted sizes are checked before anything is sized by them: the shards are read into
  // param_count floats, and data_order.cpp multiplies the epoch position out into samples.
  unsigned __int128 implied = 0;
  for (size_t k = 0; k + 1 < m.layers.size(); k++)
    implied += (unsigned __int128)m.layers[k] * unsigned(m.layers[k + 1]) + unsigned(m.layers[k + 1]);
  if (m.model == "mlp" && (m.layers.size() < 2 || implied != m.param_count))
    throw std::runtime_error(where + ": param_count " + std::to_string(m.param_count) +
                             " is not the parameter count of its layers; the manifest is damaged");
  // A GPT's count follows from its shape, which the run checks against its own (checkResumable);
  // here only a bound, before shards are read into param_count floats.
  if (m.model != "mlp" && (m.param_count == 0 || m.param_count > (size_t(1) << 34)))
    throw std::runtime_error(where + ": param_count " + std::to_string(m.param_count) +
                             " is not a GPT's of this trainer; the manifest is damaged");
  constexpr unsigned __int128 kMaxSamplesIntoEpoch = (unsigned __int128)1 << 40;
  if ((unsigned __int128)m.batch_in_epoch * unsigned(m.batch_size) * unsigned(m.accumulate) * unsigned(m.world_size) >
      kMaxSamplesIntoEpoch)
    throw std::runtime_error(where + ": batch_in_epoch " + std::to_string(m.batch_in_epoch) +
                             " is further into an epoch than any data set holds; the manifest is damaged");
  return m;
}

void probeCheckpointDir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("--checkpoint " + dir + ": cannot create the folder: " + ec.message());
  if (!fs::is_directory(dir)) throw std::runtime_error("--checkpoint " + dir + ": exists and is not a folder");
  const std::string probe = dir + "/.probe-" + std::to_string(getpid());
  try {
    writeFileAtomic(probe, "ouro-train checks that it can write checkpoints here\n");
  } catch (const std::exception& e) {
    throw std::runtime_error("--checkpoint " + dir + ": the folder is not writable (" + e.what() + ")");
  }
  fs::remove(probe, ec);
}

std::string writeCheckpoint(const std::string& dir, const CheckpointManifest& manifest, Trainer& trainer,
                            ouro::Communicator* comm) {
  const int rank = comm ? comm->rank() : 0;
  const int world = comm ? comm->size() : 1;
  const std::string what = "checkpoint " + stepName(manifest.step) + " in " + dir;
  const std::string on_rank = what + ", rank " + std::to_string(rank) + ": ";
  const std::string tmp = dir + "/." + stepName(manifest.step) + ".tmp";
  std::string error;
  if (rank == 0) {
    try {
      std::error_code ec;
      fs::remove_all(tmp, ec);  // left by a run that died mid-checkpoint
      fs::create_directories(tmp, ec);
      if (ec) throw std::runtime_error("cannot create " + tmp + ": " + ec.message());
    } catch (const std::exception& e) {
      error = on_rank + e.what();
    }
  }
  throwIfAnyFailed(comm, error, what + ": preparing the folder");
  try {
    writeShard(tmp + "/" + shardName(rank, world), trainer, rank, world, manifest.param_count);
  } catch (const std::exception& e) {
    error = on_rank + e.what() + " (check free space and permissions)";
  }
  throwIfAnyFailed(comm, error, what + ": writing the shards");
  if (rank == 0) {
    try {
      publish(dir, tmp, manifest);
    } catch (const std::exception& e) {
      error = on_rank + e.what();
    }
  }
  throwIfAnyFailed(comm, error, what + ": publishing");
  return dir + "/" + stepName(manifest.step);
}

namespace {

// DIR/<what DIR/latest names>.
std::string latestFolder(const std::string& dir) {
  const std::string latest_path = dir + "/latest";
  if (!fs::exists(latest_path))
    throw std::runtime_error("--resume " + dir + ": no checkpoint there (" + latest_path +
                             " does not exist; ouro-train --checkpoint DIR writes it)");
  std::string latest = readFile(latest_path);
  while (!latest.empty() && (latest.back() == '\n' || latest.back() == ' ' || latest.back() == '\r')) latest.pop_back();
  if (latest.rfind("step-", 0) != 0 || latest.find('/') != std::string::npos)
    throw std::runtime_error(latest_path + ": holds '" + latest + "', expected step-<N>");
  return dir + "/" + latest;
}

}  // namespace

std::optional<CheckpointManifest> latestManifest(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir + "/latest", ec)) return std::nullopt;
  const std::string manifest_path = latestFolder(dir) + "/manifest.json";
  return manifestFromJson(readFile(manifest_path), manifest_path);
}

CheckpointState readCheckpoint(const std::string& dir) { return readCheckpointFolder(latestFolder(dir)); }

CheckpointState readCheckpointFolder(const std::string& step_path) {
  CheckpointState st;
  st.path = step_path;
  const std::string manifest_path = st.path + "/manifest.json";
  st.manifest = manifestFromJson(readFile(manifest_path), manifest_path);
  const size_t n = st.manifest.param_count;
  st.params.assign(n, 0.0f);
  std::vector<char> covered(n, 0);
  size_t covered_count = 0;
  std::vector<std::string> state_names;
  // ddp's shards are whole replicas: the first one covers everything and the rest are skipped;
  // ZeRO shards each add their ranges.
  for (int r = 0; r < st.manifest.world_size && covered_count < n; r++) {
    const std::string path = st.path + "/" + shardName(r, st.manifest.world_size);
    SafetensorsFile file = readSafetensors(path);
    auto meta = file.metadata.find("ranges");
    if (meta == file.metadata.end()) throw std::runtime_error(path + ": the metadata has no \"ranges\"");
    const std::vector<OwnedRange> ranges = parseRanges(meta->second, path);
    const TensorIn* params = file.find(kParamsTensor);
    if (!params) throw std::runtime_error(path + ": no tensor \"params\"");
    const std::vector<float> owned = params->asFloats();
    size_t total = 0;
    for (const auto& range : ranges) {
      if (range.offset > n || range.count > n - range.offset)
        throw std::runtime_error(path + ": range " + std::to_string(range.offset) + ":" + std::to_string(range.count) +
                                 " lies outside the " + std::to_string(n) + " parameters");
      total += range.count;
    }
    if (total != owned.size())
      throw std::runtime_error(path + ": \"params\" holds " + std::to_string(owned.size()) +
                               " floats but the ranges cover " + std::to_string(total));
    std::vector<std::string> names;
    for (const auto& t : file.tensors)
      if (t.name != kParamsTensor) names.push_back(t.name);
    if (r == 0) {
      state_names = names;
      for (const auto& name : names) st.optimizer_state.emplace_back(name, std::vector<float>(n, 0.0f));
    } else if (names != state_names) {
      throw std::runtime_error(path + ": holds other optimizer state tensors than rank 0's shard");
    }
    std::vector<std::vector<float>> state_values;
    for (const auto& name : names) {
      state_values.push_back(file.find(name)->asFloats());
      if (state_values.back().size() != total)
        throw std::runtime_error(path + ": \"" + name + "\" holds " + std::to_string(state_values.back().size()) +
                                 " floats, expected " + std::to_string(total));
    }
    size_t src = 0;
    for (const auto& range : ranges) {
      std::copy_n(owned.begin() + long(src), range.count, st.params.begin() + long(range.offset));
      for (size_t s = 0; s < names.size(); s++)
        std::copy_n(state_values[s].begin() + long(src), range.count,
                    st.optimizer_state[s].second.begin() + long(range.offset));
      for (size_t i = range.offset; i < range.offset + range.count; i++) {
        covered_count += covered[i] ? 0 : 1;
        covered[i] = 1;
      }
      src += range.count;
    }
  }
  if (covered_count != n) {
    size_t first = size_t(std::find(covered.begin(), covered.end(), 0) - covered.begin());
    throw std::runtime_error(st.path + ": the shards cover " + std::to_string(covered_count) + " of " +
                             std::to_string(n) + " parameters (element " + std::to_string(first) +
                             " is in none); the checkpoint is incomplete");
  }
  return st;
}

void checkResumable(const CheckpointManifest& saved, const CheckpointManifest& now, const std::string& dir) {
  const std::string head = "--resume " + dir + ": the checkpoint (step " + std::to_string(saved.step) + ") ";
  if (saved.model != now.model)
    throw std::runtime_error(head + "holds the model " + saved.model + ", this run trains " + now.model +
                             ": pass the checkpoint's --model and its shape flags");
  if (saved.layers != now.layers)
    throw std::runtime_error(head + "holds the model --layers " + layersText(saved.layers) + ", this run asks for " +
                             layersText(now.layers) + ": pass --layers " + layersText(saved.layers));
  if (saved.virtual_ranks != now.virtual_ranks)
    throw std::runtime_error(head + "was trained with --virtual-ranks " + std::to_string(saved.virtual_ranks) +
                             (saved.virtual_ranks == 0 ? " (none)" : "") + ", this run has " +
                             std::to_string(now.virtual_ranks) + ": pass --virtual-ranks " +
                             std::to_string(saved.virtual_ranks) + " (the virtual ranks fix the run's bits)");
  // The distributed modes give the same bits at the same world size and their checkpoints hold
  // whole vectors once rebuilt, so one continues another's run (ddp, zero1/2/3, hsdp); single and
  // the distributed modes count their batch differently (one process of B, or W ranks of B).
  if ((saved.mode == Mode::kSingle) != (now.mode == Mode::kSingle))
    throw std::runtime_error(head + "was written by --mode " + modeName(saved.mode) + ", this run is --mode " +
                             modeName(now.mode) + ": pass --mode " + modeName(saved.mode));
  if (saved.precision != now.precision)
    throw std::runtime_error(head + "was trained in --precision " + precisionName(saved.precision) +
                             ", this run asks for " + precisionName(now.precision) + ": pass --precision " +
                             precisionName(saved.precision));
  if (saved.optimizer.kind != now.optimizer.kind)
    throw std::runtime_error(head + "holds " + optimizerName(saved.optimizer.kind) + " state, this run asks for --optimizer " +
                             optimizerName(now.optimizer.kind) + ": pass --optimizer " +
                             optimizerName(saved.optimizer.kind));
  // SGD keeps a momentum buffer only when momentum != 0: the saved state must be what this run needs.
  if (saved.optimizer.kind == OptimizerKind::kSgd && (saved.optimizer.momentum == 0) != (now.optimizer.momentum == 0))
    throw std::runtime_error(head + "was written with --momentum " + numberText(saved.optimizer.momentum) +
                             (saved.optimizer.momentum == 0 ? " (no momentum buffer)" : " (a momentum buffer)") +
                             ", this run asks for --momentum " + numberText(now.optimizer.momentum) +
                             ": pass a momentum that is " + (saved.optimizer.momentum == 0 ? "0" : "not 0"));
  if (saved.seed != now.seed)
    throw std::runtime_error(head + "was run with --seed " + std::to_string(saved.seed) + ", this run has --seed " +
                             std::to_string(now.seed) + " (the seed fixes the data order the run continues): pass --seed " +
                             std::to_string(saved.seed));
  if (saved.param_count != now.param_count)
    throw std::runtime_error(head + "holds " + std::to_string(saved.param_count) + " parameters, the model has " +
                             std::to_string(now.param_count));
}

}  // namespace ouro::trainer
