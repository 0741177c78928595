// Small string helpers used across the layers (printf-style formatting, joining, strict parsing).
#pragma once

#include <cstdarg>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ouro {

std::string strprintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string vstrprintf(const char* fmt, va_list ap);

// "1, 2, 5" (or "1..4, 7" style is not attempted: lists here are short).
std::string joinInts(const std::vector<int>& values, const char* sep = ", ");

// Whole-string integer parsing; nullopt on junk, sign errors or overflow.
std::optional<int64_t> parseInt(std::string_view text);
std::optional<uint64_t> parseUint(std::string_view text);

// Edit distance, for "did you mean" hints.
size_t editDistance(std::string_view a, std::string_view b);

}  // namespace ouro
