// The installed C++ header, hetero_comm/hc.hpp, compiles on its own and links against the
// installed library. No daemon is needed.
#include <hetero_comm/hc.hpp>

#include <cstdio>

int main() {
  hetero_comm::Comm comm;  // empty: destroying it must not reach for a daemon
  int version = 0;
  if (hc_get_version(&version) != HC_OK || version != HC_VERSION_CODE) return 1;
  std::printf("hc.hpp consumer: version %d\n", version);
  return 0;
}
