#include "flags.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

namespace ouro::bench {
namespace {

std::string format(const char* fmt, const std::string& a, const std::string& b = "") {
  char buf[512];
  std::snprintf(buf, sizeof(buf), fmt, a.c_str(), b.c_str());
  return buf;
}

template <class T>
std::optional<T> parseNumber(std::string_view text) {
  T value{};
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || text.empty()) return std::nullopt;
  return value;
}

// Long names as nccl-tests spells them, mapped to the short flag.
struct LongFlag {
  std::string_view name;
  char flag;
};
constexpr LongFlag kLongFlags[] = {
    {"minbytes", 'b'}, {"maxbytes", 'e'},     {"stepbytes", 'i'}, {"stepfactor", 'f'}, {"iters", 'n'},
    {"warmup_iters", 'w'}, {"check", 'c'},    {"op", 'o'},        {"datatype", 'd'},   {"root", 'r'},
    {"average", 'a'},  {"blocking", 'z'},     {"output_file", 'J'},
};

}  // namespace

std::optional<uint64_t> parseBytes(std::string_view text) {
  if (text.ends_with("iB")) text.remove_suffix(2);
  else if (text.ends_with("B") || text.ends_with("b")) text.remove_suffix(1);
  uint64_t scale = 1;
  if (!text.empty()) {
    switch (text.back()) {
      case 'K': case 'k': scale = uint64_t(1) << 10; break;
      case 'M': case 'm': scale = uint64_t(1) << 20; break;
      case 'G': case 'g': scale = uint64_t(1) << 30; break;
      case 'T': case 't': scale = uint64_t(1) << 40; break;
      default: break;
    }
    if (scale != 1) text.remove_suffix(1);
  }
  auto value = parseNumber<uint64_t>(text);
  if (!value || *value > UINT64_MAX / scale) return std::nullopt;
  return *value * scale;
}

std::vector<uint64_t> sweepSizes(const BenchOptions& o) {
  std::vector<uint64_t> sizes;
  for (uint64_t size = o.min_bytes; size <= o.max_bytes;) {
    sizes.push_back(size);
    uint64_t next = o.step_factor > 1 ? size * o.step_factor : size + o.step_bytes;
    if (next <= size) break;  // overflow, or a zero size with a factor: one run, as nccl-tests
    size = next;
  }
  return sizes;
}

std::string usageText(std::string_view program) {
  std::string p(program);
  return "usage: " + p + " COLLECTIVE [flags]\n"
         "  COLLECTIVE: all_reduce reduce_scatter all_gather broadcast reduce alltoall sendrecv\n"
         "  (nccl-tests' names such as all_reduce_perf are accepted too)\n"
         "nccl-tests' flags:\n"
         "  -b, --minbytes SIZE     smallest message (default 32M; K, M, G suffixes are 1024-based)\n"
         "  -e, --maxbytes SIZE     largest message (default 32M)\n"
         "  -f, --stepfactor N      multiply the size by N each step (default 1: add -i)\n"
         "  -i, --stepbytes SIZE    add SIZE each step when -f is 1 (default 1M)\n"
         "  -n, --iters N           timed iterations per size (default 20)\n"
         "  -w, --warmup_iters N    untimed iterations before each size (default 5)\n"
         "  -c, --check N           verified iterations per size; 0 turns the check off (default 1)\n"
         "  -o, --op OP             sum prod max min avg, or all (default sum)\n"
         "  -d, --datatype TYPE     int8 uint8 int32 uint32 int64 uint64 float16 float32 float64 bfloat16\n"
         "                          float8e4m3 float8e5m2, or all (aliases: char int half fp16 float fp32\n"
         "                          double fp64 bf16 fp8e4m3 e4m3 fp8e5m2 e5m2; default float32)\n"
         "  -r, --root R            root of broadcast and reduce; 'all' (or -1) runs every root (default 0)\n"
         "  -a, --average N         combine the ranks' times: 0 rank 0, 1 mean, 2 min, 3 max (default 1)\n"
         "  -z, --blocking 0|1      1: each call blocks (default); 0: ops queued on a stream, synchronized\n"
         "                          after each timed loop\n"
         "  -J, --output_file FILE  write the results as JSON\n"
         "ouro's own:\n"
         "  --budget S              timed iterations per size from a time budget of S seconds\n"
         "                          (at least 5, at most --max-iters), instead of -n\n"
         "  --max-iters N           cap on iterations under --budget (default 10000)\n"
         "  --placement out|in|both out-of-place, in-place or both (default both)\n"
         "  --seed N                seed of the inputs (default 1)\n"
         "  -D, --device            CUDA device buffers (needs a CUDA build and a GPU; ouro-bench's default\n"
         "                          where it finds one, as nccl-tests)\n"
         "  --host                  host buffers even where a GPU is present\n"
         "  --no-progress           no progress line on the terminal\n"
         "  --model                 beside each row, the cost model's predicted time and busbw (out-of-place) and\n"
         "                          the algorithm ouro's planner chose (OURO_MODEL: docs/SETTINGS.md)\n"
         "  --inject-error          corrupt one element of one checked result (tests the check)\n"
         "  -h, --help              this text\n";
}

ParseOutcome parseArgs(const std::vector<std::string>& args) {
  ParseOutcome out;
  BenchOptions o;
  bool have_collective = false;
  auto fail = [&](std::string message) {
    out.error = std::move(message);
    return out;
  };
  for (size_t i = 0; i < args.size(); i++) {
    std::string arg = args[i];
    if (arg == "-h" || arg == "--help") {
      out.help = true;
      return out;
    }
    if (arg.empty() || arg[0] != '-' || arg == "-") {
      if (have_collective) return fail(format("unexpected argument '%s'; give one collective, then flags", arg));
      auto c = parseCollective(arg);
      if (!c)
        return fail(format("unknown collective '%s'; use all_reduce, reduce_scatter, all_gather, broadcast, "
                           "reduce, alltoall or sendrecv", arg));
      o.collective = *c;
      have_collective = true;
      continue;
    }
    // Flags without a value.
    if (arg == "-D" || arg == "--device") { o.device_buffers = true; continue; }
    if (arg == "--host") { o.host_buffers = true; continue; }
    if (arg == "--no-progress") { o.progress = false; continue; }
    if (arg == "--inject-error") { o.inject_error = true; continue; }
    if (arg == "--model") { o.model = true; continue; }

    // Flags with a value: "-b 8", "-b8", "--minbytes 8", "--minbytes=8".
    char flag = 0;
    std::string name, value;
    bool value_attached = false;
    if (arg.rfind("--", 0) == 0) {
      name = arg.substr(2);
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        value_attached = true;
      }
      for (const LongFlag& f : kLongFlags)
        if (f.name == name) flag = f.flag;
      if (!flag && name != "budget" && name != "max-iters" && name != "placement" && name != "seed")
        return fail(format("unknown flag '%s'; see --help", arg));
    } else {
      flag = arg[1];
      name = std::string(1, flag);
      if (arg.size() > 2) {
        value = arg.substr(2);
        value_attached = true;
      }
    }
    if (!value_attached) {
      if (i + 1 >= args.size()) return fail(format("flag '%s' needs a value; see --help", arg));
      value = args[++i];
    }
    auto badValue = [&](const char* what) {
      char buf[512];
      std::snprintf(buf, sizeof(buf), "bad value '%s' for %s: expected %s", value.c_str(), arg.c_str(), what);
      return fail(buf);
    };
    auto positiveInt = [&](int min) -> std::optional<int> {
      auto v = parseNumber<int>(value);
      if (!v || *v < min) return std::nullopt;
      return v;
    };
    if (name == "budget") {
      auto v = parseNumber<double>(value);
      if (!v || !(*v > 0) || !std::isfinite(*v)) return badValue("a positive number of seconds");
      o.budget_s = *v;
      continue;
    }
    if (name == "max-iters") {
      auto v = positiveInt(1);
      if (!v) return badValue("an integer >= 1");
      o.max_iters = *v;
      continue;
    }
    if (name == "placement") {
      if (value == "out") o.out_of_place = true, o.in_place = false;
      else if (value == "in") o.out_of_place = false, o.in_place = true;
      else if (value == "both") o.out_of_place = o.in_place = true;
      else return badValue("out, in or both");
      continue;
    }
    if (name == "seed") {
      auto v = parseNumber<uint32_t>(value);
      if (!v) return badValue("an unsigned 32-bit integer");
      o.seed = *v;
      continue;
    }
    switch (flag) {
      case 'b':
      case 'e':
      case 'i': {
        auto v = parseBytes(value);
        if (!v) return badValue("a size such as 8, 64K, 16M or 1G");
        (flag == 'b' ? o.min_bytes : flag == 'e' ? o.max_bytes : o.step_bytes) = *v;
        break;
      }
      case 'f': {
        auto v = parseNumber<uint64_t>(value);
        if (!v || *v < 1) return badValue("an integer >= 1");
        o.step_factor = *v;
        break;
      }
      case 'n':
      case 'w':
      case 'c': {
        auto v = positiveInt(flag == 'n' ? 1 : 0);
        if (!v) return badValue(flag == 'n' ? "an integer >= 1" : "an integer >= 0");
        (flag == 'n' ? o.iters : flag == 'w' ? o.warmup_iters : o.check_iters) = *v;
        break;
      }
      case 'o': {
        if (value == "all") {
          o.ops = allRedOps();
        } else {
          auto op = parseRedOp(value);
          if (!op) return badValue("sum, prod, max, min, avg or all");
          o.ops = {*op};
        }
        break;
      }
      case 'd': {
        if (value == "all") {
          o.dtypes = allDTypes();
        } else {
          auto t = parseDataType(value);
          if (!t) return badValue("a type name such as float32, bfloat16, int8, or all");
          o.dtypes = {*t};
        }
        break;
      }
      case 'r': {
        if (value == "all" || value == "-1") {
          o.all_roots = true;
          break;
        }
        auto v = positiveInt(0);
        if (!v) return badValue("a rank >= 0, or all");
        o.root = *v;
        o.all_roots = false;
        break;
      }
      case 'a': {
        auto v = parseNumber<int>(value);
        if (!v || *v < 0 || *v > 3) return badValue("0 (rank 0), 1 (mean), 2 (min) or 3 (max)");
        o.average = Average(*v);
        break;
      }
      case 'z': {
        if (value != "0" && value != "1") return badValue("0 (ops on a stream) or 1 (blocking)");
        o.blocking = value == "1";
        break;
      }
      case 'J':
        if (value.empty()) return badValue("a file name");
        o.json_path = value;
        break;
      default:
        return fail(format("unknown flag '%s'; see --help", arg));
    }
  }
  if (!have_collective) return fail("no collective given; for example: all_reduce -b 8 -e 128M -f 2");
  if (o.min_bytes > o.max_bytes) {
    char buf[256];
    std::snprintf(buf, sizeof(buf), "-b (%llu bytes) is larger than -e (%llu bytes); swap them",
                  (unsigned long long)o.min_bytes, (unsigned long long)o.max_bytes);
    return fail(buf);
  }
  if (o.step_factor == 1 && o.step_bytes == 0 && o.min_bytes != o.max_bytes)
    return fail("-i 0 with -f 1 would never reach -e; give -i > 0 or -f > 1");
  out.options = o;
  return out;
}

}  // namespace ouro::bench
