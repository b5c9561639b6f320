#include <iostream>

#include "tools/hcctl/commands.h"

namespace hc::hcctl {

std::shared_ptr<grpc::Channel> connect(const Target& target) {
  auto channel = grpc::CreateChannel(target.uri(), grpc::InsecureChannelCredentials());
  // Connect first, with its own timeout, so that "nobody listens" (exit 2) is told apart from
  // "the call failed" (exit 3), as grpc_health_probe does.
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + target.connectTimeout)) {
    std::cerr << "hcctl: cannot connect to " << target.uri() << " within "
              << target.connectTimeout.count() << " ms\n";
    return nullptr;
  }
  return channel;
}

std::unique_ptr<grpc::ClientContext> rpcContext(const Target& target) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + target.rpcTimeout);
  return context;
}

}  // namespace hc::hcctl
