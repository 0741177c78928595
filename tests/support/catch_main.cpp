// The one Catch2 main every unit-test program links (Debian's catch2 is the header-only v2).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
