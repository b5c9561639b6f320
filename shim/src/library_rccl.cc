// Compiled into librccl.so.1 only.
#include "shim/src/comm_table.h"
#include "shim/src/shim.h"

const char* hc::shim::libraryName() { return "librccl.so.1"; }
hc::shim::Library hc::shim::thisLibrary() { return Library::Rccl; }
