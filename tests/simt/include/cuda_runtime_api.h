// SIMT emulation stand-in (tests/simt/simt.h).
#pragma once
#include "simt.h"
