// The one Catch2 main every unit-test program links (Debian's catch2 is the header-only v2).
#define CATCH_CONFIG_MAIN
// With -fsanitize (address, undefined or thread) at -O3, GCC 12 reports -Wmaybe-uninitialized
// inside the std::function members of <regex>'s NFA states, which Catch2's implementation (its
// Matches matcher) instantiates here: a false positive in the standard library, and -Werror
// makes it fatal. This translation unit holds only Catch2, so the one diagnostic is off for it.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <catch2/catch.hpp>
