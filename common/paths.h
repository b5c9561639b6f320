// Where the client socket lives, resolved the same way by the daemon and the client:
// HC_SOCKET; else /run/hetero-comm/hetero-commd.sock for root; else
// $XDG_RUNTIME_DIR/hetero-comm/hetero-commd.sock; else /tmp/hetero-comm-<uid>/hetero-commd.sock.
#pragma once

#include <string>

namespace hc {

std::string defaultSocketPath();

}  // namespace hc
