// libFuzzer target: core/wire.hpp's WireReader, the reader under every length-prefixed record.
// The first bytes are a little program (which field to read next, and a string's length limit);
// the rest is the message. Reads either return what is there or throw ouro::Error.
#include <cstdint>
#include <string_view>

#include "core/wire.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t program_len = std::min<size_t>(data[0] % 16, size - 1);
  const uint8_t* program = data + 1;
  std::string_view message(reinterpret_cast<const char*>(data) + 1 + program_len, size - 1 - program_len);
  ouro::WireReader r(message, "fuzzed message");
  try {
    size_t read = 0;
    for (size_t i = 0; i < program_len; i++) {
      switch (program[i] % 5) {
        case 0: (void)r.u32(); read += 4; break;
        case 1: (void)r.u64(); read += 8; break;
        case 2: (void)r.i64(); read += 8; break;
        case 3: read += 4 + r.str(program[i] >> 3).size(); break;
        case 4: read += 4 + r.str().size(); break;
      }
      if (read > message.size()) __builtin_trap();
    }
    r.expectDone();
    if (read != message.size()) __builtin_trap();
  } catch (const ouro::Error& e) {
    if (e.message().empty()) __builtin_trap();
  }
  // What a writer writes, a reader reads back.
  ouro::WireWriter w;
  w.u32(uint32_t(size));
  w.str(message);
  w.i64(-int64_t(size));
  std::string bytes = w.take();
  ouro::WireReader back(bytes, "round trip");
  if (back.u32() != uint32_t(size) || back.str() != message || back.i64() != -int64_t(size)) __builtin_trap();
  back.expectDone();
  return 0;
}
