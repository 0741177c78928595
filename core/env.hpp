// The one registry of OURO_* settings: every variable ouro reads is listed in env.cpp with its
// default and meaning; docs/SETTINGS.md documents the same table (tests/core checks they agree).
// Reading a name that is not registered is a bug; OURO_* variables in the environment that are not
// registered get one warning naming the nearest known setting.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace ouro {

struct Setting {
  const char* name;
  const char* default_value;  // "" means unset
  const char* help;
};

std::span<const Setting> allSettings();

// The variable's value, or its registered default when unset or empty.
std::string envString(const char* name);
// As above, parsed as an integer; a value that does not parse throws Error(kInvalidArgument).
int64_t envInt(const char* name);
double envDouble(const char* name);
bool envIsSet(const char* name);

// Warns once per process about OURO_* variables that are not in the registry.
void warnUnknownSettingsOnce();

}  // namespace ouro
