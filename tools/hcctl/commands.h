// hcctl's commands. Each returns the process exit code, grpc_health_probe's scheme for all of
// them so that scripts can tell the cases apart:
//   0 success (health: SERVING), 1 bad arguments, 2 cannot connect, 3 the RPC failed,
//   4 (health only) the service is not SERVING.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

namespace hc::hcctl {

enum ExitCode : int {
  kExitOk = 0,
  kExitBadArguments = 1,
  kExitConnectFailed = 2,
  kExitRpcFailed = 3,
  kExitNotServing = 4,
};

struct Target {
  std::string socketPath;  // admin Unix socket; used when address is empty
  std::string address;     // "host:port"
  // TLS to address (a TCP control listener with control.tls_*), on when tlsCaFile is set. PEM
  // file paths; "" = not set.
  std::string tlsCaFile;      // the CA that signed the server's certificate
  std::string tlsCertFile;    // the client's certificate, for mutual TLS (with tlsKeyFile)
  std::string tlsKeyFile;     // its private key
  std::string tlsServerName;  // the name the server's certificate must carry; "" = the host
  std::chrono::milliseconds connectTimeout{1000};
  std::chrono::milliseconds rpcTimeout{1000};

  // "unix:/run/..." or "host:port", as gRPC dials it and as messages name it.
  std::string uri() const { return address.empty() ? "unix:" + socketPath : address; }
};

// A connected channel (TLS when target.tlsCaFile is set), or null after printing why to stderr
// (exit with kExitConnectFailed): nobody listens, the TLS handshake failed, or a TLS file cannot
// be read.
std::shared_ptr<grpc::Channel> connect(const Target& target);
// A context whose deadline is rpcTimeout from now.
std::unique_ptr<grpc::ClientContext> rpcContext(const Target& target);

int runHealth(const Target& target, const std::string& service, bool json);
int runNode(const Target& target, bool json, bool printConfig);
int runDevices(const Target& target, bool json, bool measure);
// comm_commands.cc
int runClients(const Target& target, bool json);
int runComms(const Target& target, bool json);
int runTrace(const Target& target, const std::string& comm, bool json);
int runRecord(const Target& target, const std::string& comm, uint32_t last);
int runStats(const Target& target, bool json);

// top_command.cc
struct TopOptions {
  bool once = false;           // one plain frame, then exit
  double intervalSeconds = 1;  // between samples; rates are over it
  uint64_t iterations = 0;     // frames to print; 0 = until q, Ctrl-C or a signal
};
int runTop(const Target& target, const TopOptions& options);

}  // namespace hc::hcctl
