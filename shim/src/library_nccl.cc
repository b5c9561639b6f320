// Compiled into libnccl.so.2 only.
#include "shim/src/comm_table.h"
#include "shim/src/shim.h"

const char* hc::shim::libraryName() { return "libnccl.so.2"; }
hc::shim::Library hc::shim::thisLibrary() { return Library::Nccl; }
