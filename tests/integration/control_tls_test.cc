// The TCP control listener in mutual TLS, and server reflection, against real daemons: hcctl with
// a client certificate, without one, with one of another CA, and in plaintext; daemons that stop
// at startup on a missing or mismatched TLS file; reflection on the control server (admin socket
// and TLS port) but not on the health-only listener.
//
// Its own executable, without hc_control: the daemon side's libgrpc++_reflection carries a
// compiled reflection.proto of its own, which would clash with this test's client stub.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/hcctl_run.h"
#include "tests/support/temp_dir.h"

namespace hc::integ {
namespace {

using grpc::reflection::v1alpha::ServerReflection;
using grpc::reflection::v1alpha::ServerReflectionRequest;
using grpc::reflection::v1alpha::ServerReflectionResponse;

constexpr auto kProcessTimeout = std::chrono::seconds(20);
constexpr const char* kHealthService = "grpc.health.v1.Health";
constexpr const char* kControlService = "hetero_comm.v1.Control";

struct ProcessRun {
  int exitCode = -1;
  std::string output;  // stdout and stderr
};

// Runs a program to its end; exit code -1 when it cannot start or is still running at the
// timeout (it is killed then).
ProcessRun runProcess(const std::vector<std::string>& argv, const std::string& outputPath) {
  std::string error;
  auto child = ChildProcess::spawn(argv, {}, outputPath, &error);
  if (!child) return {-1, error};
  if (!child->waitExit(kProcessTimeout))
    return {-1, argv[0] + " did not exit:\n" + child->output()};
  return {child->exitCode(), child->output()};
}

// A throwaway PKI, made with the openssl command line in a temporary directory: a CA, a server
// certificate for 127.0.0.1 and localhost, a client certificate of that CA, and a client
// certificate of another CA that the daemon does not trust.
class TestPki {
 public:
  // "" on success, else what failed.
  std::string create() {
    dir_ = test::makeTempDir("hc-tls");
    if (dir_.empty()) return "mkdtemp failed";
    writeConfig();
    for (const std::string& error : {makeCa("ca", "hc-test-ca"), makeCa("other-ca", "hc-other-ca"),
                                     makeLeaf("server", "ca", "localhost", "server"),
                                     makeLeaf("client", "ca", "hc-test-client", "client"),
                                     makeLeaf("stranger", "other-ca", "hc-stranger", "client")}) {
      if (!error.empty()) return error;
    }
    return "";
  }
  ~TestPki() { test::removeTempDir(dir_); }

  const std::string& dir() const { return dir_; }
  std::string pem(const std::string& name) const { return dir_ + "/" + name + ".pem"; }
  std::string key(const std::string& name) const { return dir_ + "/" + name + ".key"; }

 private:
  // Our own extension sections, so the system's openssl.cnf does not decide what the
  // certificates may do.
  void writeConfig() {
    std::FILE* f = std::fopen((dir_ + "/openssl.cnf").c_str(), "w");
    if (f == nullptr) return;
    std::fputs(
        "[req]\n"
        "distinguished_name = dn\n"
        "[dn]\n"
        "[ca]\n"
        "basicConstraints = critical, CA:TRUE\n"
        "keyUsage = critical, keyCertSign, cRLSign\n"
        "subjectKeyIdentifier = hash\n"
        "[server]\n"
        "basicConstraints = CA:FALSE\n"
        "keyUsage = critical, digitalSignature\n"
        "extendedKeyUsage = serverAuth\n"
        "subjectAltName = IP:127.0.0.1, DNS:localhost\n"
        "[client]\n"
        "basicConstraints = CA:FALSE\n"
        "keyUsage = critical, digitalSignature\n"
        "extendedKeyUsage = clientAuth\n",
        f);
    std::fclose(f);
  }

  std::string openssl(std::vector<std::string> args) {
    args.insert(args.begin(), HC_OPENSSL_PATH);
    ProcessRun run = runProcess(args, dir_ + "/openssl-" + std::to_string(++runs_) + ".out");
    if (run.exitCode == 0) return "";
    return "openssl " + args[1] + " failed (" + std::to_string(run.exitCode) + "):\n" + run.output;
  }

  std::string makeCa(const std::string& name, const std::string& commonName) {
    return openssl({"req", "-x509", "-config", dir_ + "/openssl.cnf", "-extensions", "ca",
                    "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", key(name), "-out", pem(name), "-days", "2", "-subj",
                    "/CN=" + commonName});
  }

  std::string makeLeaf(const std::string& name, const std::string& ca,
                       const std::string& commonName, const std::string& section) {
    const std::string csr = dir_ + "/" + name + ".csr";
    std::string error = openssl({"req", "-new", "-config", dir_ + "/openssl.cnf", "-newkey", "ec",
                                 "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                                 key(name), "-out", csr, "-subj", "/CN=" + commonName});
    if (!error.empty()) return error;
    return openssl({"x509", "-req", "-in", csr, "-CA", pem(ca), "-CAkey", key(ca), "-set_serial",
                    std::to_string(++serial_), "-days", "2", "-extfile", dir_ + "/openssl.cnf",
                    "-extensions", section, "-out", pem(name)});
  }

  std::string dir_;
  int runs_ = 0;
  int serial_ = 1;
};

class ControlTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pki_ = new TestPki();
    pkiError_ = new std::string(pki_->create());
  }
  static void TearDownTestSuite() {
    delete pki_;
    delete pkiError_;
  }
  void SetUp() override {
    if (!std::filesystem::exists(HC_OPENSSL_PATH)) {
      GTEST_SKIP() << "no openssl command line to make test certificates";
    }
    ASSERT_TRUE(pkiError_->empty()) << *pkiError_;
  }

  // The daemon options of mutual TLS on a free loopback port; the server's own files unless
  // given.
  static std::vector<std::string> mutualTlsArgs(std::string certFile = "",
                                                std::string keyFile = "") {
    if (certFile.empty()) certFile = pki_->pem("server");
    if (keyFile.empty()) keyFile = pki_->key("server");
    return {"--set", "control.listen=127.0.0.1:0",
            "--set", "control.tls_cert_file=" + certFile,
            "--set", "control.tls_key_file=" + keyFile,
            "--set", "control.tls_client_ca_file=" + pki_->pem("ca")};
  }

  static std::unique_ptr<DaemonProcess> startDaemon(const std::vector<std::string>& args) {
    return startServingDaemon(args);
  }

  // A daemon that must stop at startup: its exit code (-1 when it did not exit by itself) and
  // its log.
  static ProcessRun failedStart(const std::vector<std::string>& args) {
    std::string error;
    auto d = DaemonProcess::start(args, &error);
    if (d == nullptr) {
      std::smatch m;
      if (!std::regex_search(error, m,
                             std::regex("ended before accepting connections \\(exit "
                                        "([0-9]+)\\)"))) {
        return {-1, error};
      }
      return {std::stoi(m[1]), error};
    }
    // The client socket accepts before the control server starts: the daemon may be seen
    // running for a moment before it fails.
    if (!d->process().waitExit(std::chrono::seconds(10))) {
      return {-1, "the daemon still runs:\n" + d->logTail()};
    }
    return {d->process().exitCode(), d->log()};
  }

  // hcctl, its output in dir.
  static ProcessRun hcctl(const std::string& dir, const std::vector<std::string>& args) {
    static int counter = 0;
    std::vector<std::string> argv = {HC_HCCTL_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    return runProcess(argv, dir + "/hcctl-" + std::to_string(++counter) + ".out");
  }

  // The arguments that reach a TLS port at 127.0.0.1:port with the server's CA.
  static std::vector<std::string> tlsTarget(int port, int connectTimeoutMs) {
    return {"--address",
            "127.0.0.1:" + std::to_string(port),
            "--connect-timeout-ms",
            std::to_string(connectTimeoutMs),
            "--rpc-timeout-ms",
            "5000",
            "--tls-ca",
            pki_->pem("ca")};
  }

  static std::shared_ptr<grpc::Channel> mutualTlsChannel(int port) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = readFile(pki_->pem("ca"));
    ssl.pem_cert_chain = readFile(pki_->pem("client"));
    ssl.pem_private_key = readFile(pki_->key("client"));
    return grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::SslCredentials(ssl));
  }

  static TestPki* pki_;
  static std::string* pkiError_;
};

TestPki* ControlTlsTest::pki_ = nullptr;
std::string* ControlTlsTest::pkiError_ = nullptr;

std::string adminSocket(const DaemonProcess& d) { return d.dir() + "/run/hetero-commd-admin.sock"; }

// ListServices over one reflection stream: the service names, or the call's failure.
grpc::Status listServices(const std::shared_ptr<grpc::Channel>& channel,
                          std::set<std::string>* names) {
  auto stub = ServerReflection::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto stream = stub->ServerReflectionInfo(&context);
  ServerReflectionRequest request;
  request.set_list_services("");
  if (stream->Write(request)) stream->WritesDone();
  ServerReflectionResponse response;
  while (stream->Read(&response)) {
    for (const auto& service : response.list_services_response().service()) {
      names->insert(service.name());
    }
  }
  return stream->Finish();
}

bool failedToConnectOrCall(int exitCode) { return exitCode == 2 || exitCode == 3; }

TEST_F(ControlTlsTest, ClientWithCertificateOfTheTrustedCaIsServed) {
  auto d = startDaemon(mutualTlsArgs());
  ASSERT_NE(d, nullptr);
  const int port = listenerPort(*d, "control");
  ASSERT_GT(port, 0) << d->logTail();
  EXPECT_NE(d->log().find("(mutual TLS)"), std::string::npos) << d->logTail();
  std::vector<std::string> withCert = tlsTarget(port, 10000);
  withCert.insert(withCert.end(),
                  {"--tls-cert", pki_->pem("client"), "--tls-key", pki_->key("client")});

  std::vector<std::string> health = withCert;
  health.push_back("health");
  ProcessRun healthRun = hcctl(d->dir(), health);
  EXPECT_EQ(healthRun.exitCode, 0) << healthRun.output;
  EXPECT_NE(healthRun.output.find("SERVING"), std::string::npos) << healthRun.output;

  std::vector<std::string> node = withCert;
  node.insert(node.end(), {"node", "--json"});
  ProcessRun nodeRun = hcctl(d->dir(), node);
  ASSERT_EQ(nodeRun.exitCode, 0) << nodeRun.output;
  nlohmann::json parsed = nlohmann::json::parse(nodeRun.output, nullptr, false);
  ASSERT_FALSE(parsed.is_discarded()) << nodeRun.output;
  EXPECT_EQ(parsed.at("version"), HC_VERSION);

  // The certificate names localhost too: checked against that name instead of the address.
  std::vector<std::string> byName = withCert;
  byName.insert(byName.end(), {"--tls-server-name", "localhost", "health"});
  ProcessRun byNameRun = hcctl(d->dir(), byName);
  EXPECT_EQ(byNameRun.exitCode, 0) << byNameRun.output;
  EXPECT_EQ(d->stop(), 0);
}

TEST_F(ControlTlsTest, ClientsWithoutATrustedCertificateAreRefused) {
  auto d = startDaemon(mutualTlsArgs());
  ASSERT_NE(d, nullptr);
  const int port = listenerPort(*d, "control");
  ASSERT_GT(port, 0) << d->logTail();

  std::vector<std::string> noCert = tlsTarget(port, 1500);
  noCert.push_back("health");
  ProcessRun noCertRun = hcctl(d->dir(), noCert);
  EXPECT_TRUE(failedToConnectOrCall(noCertRun.exitCode)) << noCertRun.exitCode << "\n"
                                                         << noCertRun.output;

  std::vector<std::string> stranger = tlsTarget(port, 1500);
  stranger.insert(stranger.end(), {"--tls-cert", pki_->pem("stranger"), "--tls-key",
                                   pki_->key("stranger"), "health"});
  ProcessRun strangerRun = hcctl(d->dir(), stranger);
  EXPECT_TRUE(failedToConnectOrCall(strangerRun.exitCode)) << strangerRun.exitCode << "\n"
                                                           << strangerRun.output;

  ProcessRun plaintextRun = hcctl(d->dir(), {"--address", "127.0.0.1:" + std::to_string(port),
                                             "--connect-timeout-ms", "1500", "health"});
  EXPECT_TRUE(failedToConnectOrCall(plaintextRun.exitCode)) << plaintextRun.exitCode << "\n"
                                                            << plaintextRun.output;

  // The client trusts another CA than the one that signed the server's certificate.
  std::vector<std::string> wrongCa = {"--address",
                                      "127.0.0.1:" + std::to_string(port),
                                      "--connect-timeout-ms",
                                      "1500",
                                      "--tls-ca",
                                      pki_->pem("other-ca"),
                                      "--tls-cert",
                                      pki_->pem("client"),
                                      "--tls-key",
                                      pki_->key("client"),
                                      "health"};
  ProcessRun wrongCaRun = hcctl(d->dir(), wrongCa);
  EXPECT_TRUE(failedToConnectOrCall(wrongCaRun.exitCode)) << wrongCaRun.exitCode << "\n"
                                                          << wrongCaRun.output;

  // The admin socket stays plaintext, guarded by its file mode.
  ProcessRun adminRun = hcctl(d->dir(), {"--socket", adminSocket(*d), "health"});
  EXPECT_EQ(adminRun.exitCode, 0) << adminRun.output;
  EXPECT_EQ(d->stop(), 0);
}

// Bad arguments (exit 1) before any connection: nobody needs to listen.
TEST_F(ControlTlsTest, TlsOptionsNeedTheirCompanions) {
  const std::string dir = pki_->dir();
  ProcessRun certOnly = hcctl(dir, {"--address", "127.0.0.1:1", "--tls-ca", pki_->pem("ca"),
                                    "--tls-cert", pki_->pem("client"), "health"});
  EXPECT_EQ(certOnly.exitCode, 1) << certOnly.output;
  ProcessRun onSocket =
      hcctl(dir, {"--socket", dir + "/some.sock", "--tls-ca", pki_->pem("ca"), "health"});
  EXPECT_EQ(onSocket.exitCode, 1) << onSocket.output;
  ProcessRun missingCa =
      hcctl(dir, {"--address", "127.0.0.1:1", "--tls-ca", dir + "/no-such.pem", "health"});
  EXPECT_EQ(missingCa.exitCode, 1) << missingCa.output;
}

TEST_F(ControlTlsTest, MissingCertificateFileStopsTheDaemon) {
  const std::string missing = pki_->dir() + "/no-such-cert.pem";
  ProcessRun start = failedStart(mutualTlsArgs(missing));
  EXPECT_GT(start.exitCode, 0) << start.output;
  EXPECT_NE(start.output.find("control.tls_cert_file"), std::string::npos) << start.output;
  EXPECT_NE(start.output.find(missing), std::string::npos) << start.output;
}

TEST_F(ControlTlsTest, KeyOfAnotherCertificateStopsTheDaemon) {
  ProcessRun start = failedStart(mutualTlsArgs("", pki_->key("client")));
  EXPECT_GT(start.exitCode, 0) << start.output;
  EXPECT_NE(start.output.find("control.tls_key_file"), std::string::npos) << start.output;
  EXPECT_NE(start.output.find("is not the key of the certificate"), std::string::npos)
      << start.output;
}

TEST_F(ControlTlsTest, CertificateFileWithoutACertificateStopsTheDaemon) {
  // A key file is PEM, but holds no certificate.
  ProcessRun start = failedStart(mutualTlsArgs(pki_->key("server")));
  EXPECT_GT(start.exitCode, 0) << start.output;
  EXPECT_NE(start.output.find("control.tls_cert_file"), std::string::npos) << start.output;
  EXPECT_NE(start.output.find("holds no PEM certificate"), std::string::npos) << start.output;
}

TEST_F(ControlTlsTest, ReflectionListsTheServicesOfTheControlServer) {
  std::vector<std::string> args = mutualTlsArgs();
  args.insert(args.end(), {"--set", "control.health_listen=127.0.0.1:0"});
  auto d = startDaemon(args);
  ASSERT_NE(d, nullptr);
  const int controlPort = listenerPort(*d, "control");
  ASSERT_GT(controlPort, 0) << d->logTail();

  std::set<std::string> onSocket;
  grpc::Status socketStatus = listServices(
      grpc::CreateChannel("unix:" + adminSocket(*d), grpc::InsecureChannelCredentials()),
      &onSocket);
  ASSERT_TRUE(socketStatus.ok()) << socketStatus.error_message();
  EXPECT_TRUE(onSocket.contains(kHealthService));
  EXPECT_TRUE(onSocket.contains(kControlService));

  std::set<std::string> onTls;
  grpc::Status tlsStatus = listServices(mutualTlsChannel(controlPort), &onTls);
  ASSERT_TRUE(tlsStatus.ok()) << tlsStatus.error_message();
  EXPECT_EQ(onTls, onSocket);
  EXPECT_EQ(d->stop(), 0);
}

TEST_F(ControlTlsTest, HealthListenerOffersNoReflection) {
  auto d = startDaemon({"--set", "control.health_listen=127.0.0.1:0"});
  ASSERT_NE(d, nullptr);
  const int healthPort = listenerPort(*d, "health");
  ASSERT_GT(healthPort, 0) << d->logTail();
  std::set<std::string> names;
  grpc::Status status = listServices(grpc::CreateChannel("127.0.0.1:" + std::to_string(healthPort),
                                                         grpc::InsecureChannelCredentials()),
                                     &names);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << status.error_message();
  EXPECT_TRUE(names.empty());
  EXPECT_EQ(d->stop(), 0);
}

}  // namespace
}  // namespace hc::integ
