// Compiled into libnccl.so.2 only.
#include "shim/src/shim.h"

const char* hc::shim::libraryName() { return "libnccl.so.2"; }
