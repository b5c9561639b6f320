// hcctl top's samples, from the Control service: GetNode once for the header, then per sample
// GetStats, ListCommunicators, and TraceCommunicator for each communicator with an operation
// outstanding on this daemon (the others wait for nobody, and are not asked about).
#pragma once

#include <memory>

#include "common/status.h"
#include "hetero_comm/v1/control.grpc.pb.h"
#include "tools/hcctl/commands.h"
#include "tools/hcctl/top_frame.h"

namespace hc::hcctl::top {

class ControlSampler {
 public:
  // Borrowed: target outlives the sampler.
  ControlSampler(const Target& target, std::shared_ptr<grpc::Channel> channel);

  // The header's hostname and version. A failure names the RPC, the target and gRPC's reason.
  [[nodiscard]] Result<Source> source();
  // Unavailable when the daemon cannot be reached (hcctl's exit 2), another code when an RPC
  // failed (exit 3); the message says which RPC and why.
  [[nodiscard]] Result<Sample> sample();

 private:
  void askWhoIsWaited(CommSample& comm);

  const Target& target_;
  std::unique_ptr<hetero_comm::v1::Control::Stub> stub_;
};

}  // namespace hc::hcctl::top
