// ControlSide: the daemon as operators see it: the [control] listeners (Health and Control over
// gRPC, daemon/control/control_server.h), the node's inventory (the DeviceBoard: taken at
// startup, speeds measured since) for Control.GetNode and MeasureDevices, and the health
// statuses the lifecycle sets:
//   ""                            SERVING from start() until the drain;
//   hetero_comm.v1.Peers          SERVING when there is no Peer listener, or it is up and no
//                                 peer daemon was lost since a communicator last formed with it
//                                 (markPeers());
//   hetero_comm.v1.Collectives    SERVING once the devices, the client socket and (with [peer]
//                                 listen) the transport are up: markReady();
// and all NOT_SERVING when the SIGTERM drain starts: markDraining().
#pragma once

#include <memory>
#include <set>
#include <string>

#include "common/status.h"
#include "daemon/config/daemon_config.h"
#include "daemon/control/control_server.h"
#include "daemon/discovery/device_board.h"
#include "daemon/observe/status_board.h"

namespace hc::server {

class ControlSide {
 public:
  // Starts the listeners. `devices` (borrowed, outlives this) holds the inventory GetNode
  // reports and measures again for MeasureDevices; `peerAddress` is the Peer listener's
  // advertised address, "" without one; `board` (borrowed, outlives this) answers the Control
  // RPCs about clients and communicators. Control path, IPC thread.
  [[nodiscard]] static Result<std::unique_ptr<ControlSide>> start(
      const config::DaemonConfig& config, discovery::DeviceBoard& devices,
      const std::string& peerAddress, const observe::StatusBoard* board);
  ~ControlSide();  // shutdown()

  // The IPC thread calls these; gRPC threads read the statuses they set.
  void markReady();
  // hetero_comm.v1.Peers: SERVING while no peer daemon is known lost (`unreachable` empty).
  // Changes are logged; draining wins.
  void markPeers(const std::set<std::string>& unreachable);
  void markDraining();
  // Ends the Watch streams and stops the listeners. Idempotent.
  void shutdown();

 private:
  explicit ControlSide(std::unique_ptr<control::ControlServer> server)
      : server_(std::move(server)) {}

  std::unique_ptr<control::ControlServer> server_;
  bool peersServing_ = true;
  bool draining_ = false;
};

}  // namespace hc::server
