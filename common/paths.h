// Where the client socket lives, resolved the same way by the daemon and the client:
// HC_SOCKET; else $XDG_RUNTIME_DIR/hetero-comm/hetero-commd.sock for a user other than root who
// has a runtime folder; else /run/hetero-comm/hetero-commd.sock, the system daemon's. Never a
// folder under /tmp: another user could create the predictable name first and serve it.
#pragma once

#include <string>
#include <string_view>

namespace hc {

// The system daemon's paths (root, or no runtime folder): what the packaged units and the
// manual pages name.
inline constexpr std::string_view kSystemSocketPath = "/run/hetero-comm/hetero-commd.sock";
inline constexpr std::string_view kSystemStateDir = "/var/lib/hetero-comm";

std::string defaultSocketPath();

// The daemon's admin (gRPC control) socket beside the client socket `clientSocket`, named after
// it: ".../hetero-commd.sock" -> ".../hetero-commd-admin.sock". Deriving the name, rather than
// fixing it, keeps two daemons that share a runtime directory from taking each other's socket.
std::string adminSocketPathFor(const std::string& clientSocket);

// The daemon's state directory: $STATE_DIRECTORY (systemd's StateDirectory=, first entry); else
// /var/lib/hetero-comm for root; else $XDG_STATE_HOME/hetero-comm; else
// $HOME/.local/state/hetero-comm, with HOME from the user database when the environment has
// none; else "" (no default: the daemon's configuration check then asks for --state-dir).
std::string defaultStateDir();

}  // namespace hc
