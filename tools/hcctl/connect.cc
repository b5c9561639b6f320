#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "tools/hcctl/commands.h"

namespace hc::hcctl {
namespace {

// The whole file, or nullopt after printing why.
std::optional<std::string> readPem(const char* flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  if (!in || in.bad()) {
    std::cerr << "hcctl: " << flag << ": cannot read " << path << "\n";
    return std::nullopt;
  }
  return text.str();
}

// TLS with the target's PEM files when --tls-ca is given, else plaintext; null after printing why.
std::shared_ptr<grpc::ChannelCredentials> channelCredentials(const Target& target) {
  if (target.tlsCaFile.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  auto ca = readPem("--tls-ca", target.tlsCaFile);
  if (!ca) return nullptr;
  ssl.pem_root_certs = std::move(*ca);
  if (!target.tlsCertFile.empty()) {
    auto cert = readPem("--tls-cert", target.tlsCertFile);
    auto key = readPem("--tls-key", target.tlsKeyFile);
    if (!cert || !key) return nullptr;
    ssl.pem_cert_chain = std::move(*cert);
    ssl.pem_private_key = std::move(*key);
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

std::shared_ptr<grpc::Channel> connect(const Target& target) {
  auto credentials = channelCredentials(target);
  if (!credentials) return nullptr;
  grpc::ChannelArguments args;
  if (!target.tlsServerName.empty()) {
    args.SetString(GRPC_SSL_TARGET_NAME_OVERRIDE_ARG, target.tlsServerName);
  }
  auto channel = grpc::CreateCustomChannel(target.uri(), credentials, args);
  // Connect first, with its own timeout, so that "nobody listens" (exit 2) is told apart from
  // "the call failed" (exit 3), as grpc_health_probe does. A failed TLS handshake looks the same
  // from here: the channel never gets ready. The reason is in the daemon's log, and in hcctl's
  // own with GRPC_VERBOSITY=info.
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + target.connectTimeout)) {
    std::cerr << "hcctl: cannot connect to " << target.uri() << " within "
              << target.connectTimeout.count() << " ms"
              << (target.tlsCaFile.empty()
                      ? ""
                      : " (TLS: check --tls-ca, --tls-cert/--tls-key and --tls-server-name "
                        "against the server's certificate)")
              << "\n";
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
