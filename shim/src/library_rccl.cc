// Compiled into librccl.so.1 only.
#include "shim/src/shim.h"

const char* hc::shim::libraryName() { return "librccl.so.1"; }
