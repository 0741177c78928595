// placeholder, replaced by the C++ API
#pragma once
#include "ouro/ouro.h"
