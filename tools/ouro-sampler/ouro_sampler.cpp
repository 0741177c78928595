// ouro-sampler: prints one rank's DistributedSampler indices so a data split can be
// inspected, and compared with a PyTorch run, from a shell.
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <ouro/sampler.hpp>

namespace {

namespace sampler = ouro::sampler;

constexpr int kUsageError = 2;

constexpr const char* kUsage =
    "usage: ouro-sampler --size N --replicas R --rank K [--seed S] [--epoch E]\n"
    "                    [--drop-last] [--no-shuffle] [--batch-size B] [--pytorch VERSION]\n"
    "Prints rank K's indices of torch.utils.data.distributed.DistributedSampler, separated by\n"
    "spaces; with --batch-size, one BatchSampler batch per line (--drop-last then drops the\n"
    "sampler's tail and the short last batch, as a DataLoader given the same drop_last does).\n"
    "  --size N        dataset length (>= 0)\n"
    "  --replicas R    number of ranks (>= 1)\n"
    "  --rank K        this rank, in [0, R)\n"
    "  --seed S        shuffle seed, same on every rank (default 0; negative as in PyTorch)\n"
    "  --epoch E       epoch passed to set_epoch (default 0)\n"
    "  --drop-last     drop the tail instead of padding (and the short last batch)\n"
    "  --no-shuffle    keep dataset order\n"
    "  --batch-size B  print batches of B (>= 1)\n"
    "  --pytorch V     reproduce PyTorch release V's randperm, e.g. 1.13 or 2.7 (default: 2.7\n"
    "                  and later; the two differ only for --size >= 214748364)\n";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Options {
  std::optional<std::int64_t> size;
  std::optional<std::int64_t> replicas;
  std::optional<std::int64_t> rank;
  std::uint64_t seed = 0;
  std::int64_t epoch = 0;
  bool drop_last = false;
  bool shuffle = true;
  std::optional<std::int64_t> batch_size;
  sampler::RandpermVersion randperm_version = sampler::RandpermVersion::kTorch2_7;
};

std::int64_t parseInt(std::string_view flag, std::string_view text) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    throw UsageError(std::string(flag) + ": '" + std::string(text) + "' is not a 64-bit integer");
  }
  return value;
}

// PyTorch accepts seeds in [-2^63, 2^64) and keeps them modulo 2^64.
std::uint64_t parseSeed(std::string_view flag, std::string_view text) {
  std::uint64_t value = 0;
  if (!text.empty() && text.front() == '-') return static_cast<std::uint64_t>(parseInt(flag, text));
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    throw UsageError(std::string(flag) + ": '" + std::string(text) + "' is not an integer in [-2^63, 2^64)");
  }
  return value;
}

sampler::RandpermVersion parseTorchVersion(std::string_view flag, std::string_view text) {
  const auto dot = text.find('.');
  int major = 0;
  int minor = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  const char* dot_at = dot == std::string_view::npos ? last : text.data() + dot;
  const auto major_result = std::from_chars(first, dot_at, major);
  bool ok = major_result.ec == std::errc() && major_result.ptr == dot_at && dot_at != last;
  if (ok) {
    // Accept "2.7" and "2.7.1": only major and minor matter.
    const auto minor_result = std::from_chars(dot_at + 1, last, minor);
    ok = minor_result.ec == std::errc() && (minor_result.ptr == last || *minor_result.ptr == '.');
  }
  if (!ok) throw UsageError(std::string(flag) + ": '" + std::string(text) + "' is not a version like 2.7 or 1.13");
  return sampler::randpermVersionForTorch(major, minor);
}

Options parseArgs(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    std::optional<std::string_view> inline_value;
    if (const auto eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
      inline_value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    auto value = [&]() -> std::string_view {
      if (inline_value) return *inline_value;
      if (i + 1 >= argc) throw UsageError(std::string(arg) + " needs a value");
      return argv[++i];
    };
    auto no_value = [&] {
      if (inline_value) throw UsageError(std::string(arg) + " takes no value");
    };
    if (arg == "--size") {
      options.size = parseInt(arg, value());
    } else if (arg == "--replicas") {
      options.replicas = parseInt(arg, value());
    } else if (arg == "--rank") {
      options.rank = parseInt(arg, value());
    } else if (arg == "--seed") {
      options.seed = parseSeed(arg, value());
    } else if (arg == "--epoch") {
      options.epoch = parseInt(arg, value());
    } else if (arg == "--batch-size") {
      options.batch_size = parseInt(arg, value());
    } else if (arg == "--pytorch") {
      options.randperm_version = parseTorchVersion(arg, value());
    } else if (arg == "--drop-last") {
      no_value();
      options.drop_last = true;
    } else if (arg == "--no-shuffle") {
      no_value();
      options.shuffle = false;
    } else if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else {
      throw UsageError("unknown argument " + std::string(arg));
    }
  }
  if (!options.size) throw UsageError("--size is required");
  if (!options.replicas) throw UsageError("--replicas is required");
  if (!options.rank) throw UsageError("--rank is required");
  // The library would refuse these too, but in its own parameter names; say the flag.
  if (*options.size < 0) throw UsageError("--size must be >= 0");
  if (*options.replicas < 1) throw UsageError("--replicas must be >= 1");
  if (*options.rank < 0 || *options.rank >= *options.replicas) {
    throw UsageError("--rank " + std::to_string(*options.rank) + " is outside [0, --replicas " +
                     std::to_string(*options.replicas) + ")");
  }
  if (*options.size == 0 && options.drop_last) {
    throw UsageError("--size 0 with --drop-last leaves every rank without samples");
  }
  if (options.batch_size && *options.batch_size < 1) throw UsageError("--batch-size must be >= 1");
  return options;
}

// Output can be hundreds of megabytes; printf per index would dominate the run time.
class Writer {
 public:
  void index(std::int64_t value) {
    if (buffer_.size() - used_ < 24) flush();
    used_ = static_cast<std::size_t>(std::to_chars(buffer_.data() + used_, buffer_.data() + buffer_.size(), value).ptr -
                                     buffer_.data());
  }
  void put(char c) {
    if (used_ == buffer_.size()) flush();
    buffer_[used_++] = c;
  }
  void flush() {
    if (used_ > 0 && std::fwrite(buffer_.data(), 1, used_, stdout) != used_) {
      throw std::runtime_error("writing to stdout failed");
    }
    used_ = 0;
  }

 private:
  std::vector<char> buffer_ = std::vector<char>(1 << 20);
  std::size_t used_ = 0;
};

void printIndices(std::span<const std::int64_t> indices, Writer& out) {
  for (std::size_t i = 0; i < indices.size(); ++i) {
    if (i > 0) out.put(' ');
    out.index(indices[i]);
  }
  out.put('\n');
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  try {
    options = parseArgs(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "ouro-sampler: %s\n%s", e.what(), kUsage);
    return kUsageError;
  }
  try {
    sampler::DistributedSampler distributed(*options.size, *options.replicas, *options.rank, options.shuffle,
                                            options.seed, options.drop_last, options.randperm_version);
    distributed.setEpoch(options.epoch);
    Writer out;
    if (options.batch_size) {
      for (auto batch : sampler::BatchSampler(distributed, *options.batch_size, options.drop_last)) {
        printIndices(batch, out);
      }
    } else {
      printIndices(distributed.indices(), out);
    }
    out.flush();
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "ouro-sampler: %s\n%s", e.what(), kUsage);
    return kUsageError;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ouro-sampler: %s\n", e.what());
    return 1;
  }
  return 0;
}
