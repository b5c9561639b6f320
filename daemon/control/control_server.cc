#include "daemon/control/control_server.h"

#include <fcntl.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/impl/server_builder_option.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "common/unique_fd.h"

namespace hc::control {
namespace {

constexpr auto kShutdownGrace = std::chrono::seconds(1);
// The config keys, as errors name them.
constexpr const char* kCertKey = "control.tls_cert_file";
constexpr const char* kPrivateKeyKey = "control.tls_key_file";
constexpr const char* kClientCaKey = "control.tls_client_ca_file";
// Certificates and keys are a few KiB; the cap only stops a path such as /dev/zero.
constexpr size_t kMaxPemBytes = 1 << 20;

// Drops the plugin that libgrpc++_reflection added to the builder and, when offered, adds one of
// its own: the same outcome whether or not the library registered itself.
class ReflectionOption final : public grpc::ServerBuilderOption {
 public:
  explicit ReflectionOption(bool offered) : offered_(offered) {}

  // grpc::ServerBuilderOption
  void UpdateArguments(grpc::ChannelArguments* /*args*/) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    auto ours = std::make_unique<grpc::reflection::ProtoServerReflectionPlugin>();
    const std::string name = ours->name();
    std::erase_if(*plugins, [&](const auto& plugin) { return plugin->name() == name; });
    if (offered_) plugins->push_back(std::move(ours));
  }

 private:
  bool offered_;
};

// The reason OpenSSL gives for its last failure; empties its per-thread error queue, which gRPC
// reads on the same thread.
std::string takeOpensslError() {
  const unsigned long code = ERR_peek_last_error();
  char text[256] = "unknown reason";
  if (code != 0) ERR_error_string_n(code, text, sizeof(text));
  ERR_clear_error();
  return text;
}

Result<std::string> readPemFile(const char* key, const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd.valid()) return systemError(std::string(key) + ": cannot open " + path, errno);
  std::string pem;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return systemError(std::string(key) + ": cannot read " + path, errno);
    if (n == 0) break;
    pem.append(buffer, static_cast<size_t>(n));
    if (pem.size() > kMaxPemBytes) {
      return invalidArgument(std::string(key) + " " + path + " is larger than 1 MiB: not PEM");
    }
  }
  return pem;
}

using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;
using KeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using BioPtr = std::unique_ptr<BIO, decltype(&BIO_free)>;

BioPtr memoryBio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
}

// The first certificate of a PEM file. gRPC itself would only fail at the first handshake, long
// after startup said the listener was up.
Result<X509Ptr> firstCertificate(const char* key, const std::string& path, const std::string& pem) {
  BioPtr bio = memoryBio(pem);
  X509Ptr cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr, &X509_free);
  if (!cert) {
    return invalidArgument(std::string(key) + " " + path +
                           " holds no PEM certificate: " + takeOpensslError());
  }
  return cert;
}

// Refuses to prompt on the terminal for the passphrase of an encrypted key.
int noPassphrase(char* /*buf*/, int /*size*/, int /*rwflag*/, void* /*userdata*/) { return -1; }

Status checkPrivateKey(const std::string& path, const std::string& pem, X509* cert,
                       const std::string& certPath) {
  BioPtr bio = memoryBio(pem);
  KeyPtr key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, noPassphrase, nullptr) : nullptr,
             &EVP_PKEY_free);
  if (!key) {
    return invalidArgument(std::string(kPrivateKeyKey) + " " + path +
                           " holds no unencrypted PEM private key: " + takeOpensslError());
  }
  if (X509_check_private_key(cert, key.get()) != 1) {
    takeOpensslError();
    return invalidArgument(std::string(kPrivateKeyKey) + " " + path +
                           " is not the key of the certificate in " + kCertKey + " " + certPath);
  }
  return okStatus();
}

// Credentials of the TCP control listener, from the control.tls_* files, checked here so that a
// bad file stops the daemon at startup with a message that names it.
Result<std::shared_ptr<grpc::ServerCredentials>> tlsCredentials(
    const ControlServerOptions& options) {
  if (options.tlsCertFile.empty() || options.tlsKeyFile.empty()) {
    return invalidArgument(std::string("TLS needs both ") + kCertKey + " and " + kPrivateKeyKey);
  }
  auto certPem = readPemFile(kCertKey, options.tlsCertFile);
  if (!certPem.isOk()) return certPem.status();
  auto cert = firstCertificate(kCertKey, options.tlsCertFile, *certPem);
  if (!cert.isOk()) return cert.status();
  auto keyPem = readPemFile(kPrivateKeyKey, options.tlsKeyFile);
  if (!keyPem.isOk()) return keyPem.status();
  HC_RETURN_IF_ERROR(
      checkPrivateKey(options.tlsKeyFile, *keyPem, cert->get(), options.tlsCertFile));

  grpc::SslServerCredentialsOptions ssl(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  ssl.pem_key_cert_pairs.push_back({*keyPem, *certPem});
  if (!options.tlsClientCaFile.empty()) {
    auto caPem = readPemFile(kClientCaKey, options.tlsClientCaFile);
    if (!caPem.isOk()) return caPem.status();
    auto ca = firstCertificate(kClientCaKey, options.tlsClientCaFile, *caPem);
    if (!ca.isOk()) return ca.status();
    ssl.pem_root_certs = *caPem;
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

void stopServer(std::unique_ptr<grpc::Server>& server) {
  if (!server) return;
  server->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
  server->Wait();
  server.reset();
}

}  // namespace

std::unique_ptr<grpc::ServerBuilderOption> serverReflectionOption(bool offered) {
  return std::make_unique<ReflectionOption>(offered);
}

namespace {

ControlSources withCallers(ControlSources sources, std::shared_ptr<CallerRegistry> callers) {
  sources.callers = std::move(callers);
  return sources;
}

}  // namespace

ControlServer::ControlServer(NodeInfo node, ControlSources sources)
    : callers_(std::make_shared<CallerRegistry>()),
      health_(board_),
      control_(std::move(node), withCallers(std::move(sources), callers_)) {}

ControlServer::~ControlServer() { shutdown(); }

Result<std::unique_ptr<ControlServer>> ControlServer::start(const ControlServerOptions& options,
                                                            NodeInfo node) {
  const bool tls = !options.tlsCertFile.empty() || !options.tlsKeyFile.empty() ||
                   !options.tlsClientCaFile.empty();
  if (tls && options.listen.empty()) {
    return invalidArgument(std::string(kCertKey) + " applies to control.listen, which is not set");
  }
  std::shared_ptr<grpc::ServerCredentials> listenCredentials = grpc::InsecureServerCredentials();
  if (tls) {
    auto credentials = tlsCredentials(options);
    if (!credentials.isOk()) return credentials.status();
    listenCredentials = std::move(credentials.value());
  }

  std::unique_ptr<ControlServer> s(new ControlServer(std::move(node), options.sources));
  if (!options.adminSocket.empty() || !options.listen.empty()) {
    grpc::ServerBuilder builder;
    // gRPC turns SO_REUSEPORT on by default: two daemons could then share a port silently.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.SetOption(serverReflectionOption(true));
    if (!options.listen.empty()) {
      builder.AddListeningPort(options.listen, listenCredentials, &s->controlPort_);
    }
    builder.RegisterService(&s->health_);
    builder.RegisterService(&s->control_);
    // The admin socket is not a gRPC listening port: AdminListener accepts its connections, so
    // that each call is answered for the uid on the other end (caller.h).
    s->controlServer_ = builder.BuildAndStart();
    if (s->controlServer_ == nullptr || (!options.listen.empty() && s->controlPort_ == 0)) {
      s->controlServer_.reset();
      return unavailable("cannot start the control server on " +
                         (options.adminSocket.empty() ? options.listen : options.adminSocket) +
                         (options.listen.empty() || options.adminSocket.empty()
                              ? std::string()
                              : " and " + options.listen));
    }
    if (!options.adminSocket.empty()) {
      auto admin = AdminListener::start(options.adminSocket, s->controlServer_.get(), s->callers_);
      if (!admin.isOk()) {
        stopServer(s->controlServer_);
        return admin.status();
      }
      s->adminListener_ = std::move(admin.value());
      spdlog::info("control listening on unix:{}", options.adminSocket);
    }
    if (!options.listen.empty()) {
      const std::string host = options.listen.substr(0, options.listen.rfind(':'));
      spdlog::info("control listening on {}:{} ({})", host, s->controlPort_,
                   !tls                              ? "plaintext"
                   : options.tlsClientCaFile.empty() ? "TLS"
                                                     : "mutual TLS");
    }
  }
  if (!options.healthListen.empty()) {
    grpc::ServerBuilder builder;
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.SetOption(serverReflectionOption(false));
    builder.AddListeningPort(options.healthListen, grpc::InsecureServerCredentials(),
                             &s->healthPort_);
    builder.RegisterService(&s->health_);
    s->healthServer_ = builder.BuildAndStart();
    if (s->healthServer_ == nullptr || s->healthPort_ == 0) {
      s->healthServer_.reset();
      return unavailable("cannot listen for health checks on " + options.healthListen);
    }
    const std::string host = options.healthListen.substr(0, options.healthListen.rfind(':'));
    spdlog::info("health listening on {}:{}", host, s->healthPort_);
  }
  return s;
}

void ControlServer::shutdown() {
  // Watches first: a Watch is a call that never ends on its own, and Shutdown would otherwise
  // wait for it until the grace period runs out.
  board_.close();
  // No new admin connections for a server that is going away; stop() also removes the path.
  if (adminListener_) adminListener_->stop();
  stopServer(controlServer_);
  stopServer(healthServer_);
  adminListener_.reset();
}

}  // namespace hc::control
