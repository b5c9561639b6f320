// MetricsServer over 127.0.0.1:0, fetched with a plain-socket HTTP/1.1 client: status line,
// content type, a body that parses and moves after an event; 404, 405; binding errors.
#include "daemon/metrics/metrics_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "tests/unit/daemon/metrics/exposition_parser.h"
#include "tests/unit/daemon/metrics/http_client.h"

namespace hc::metrics {
namespace {

using testing::HttpResponse;

class MetricsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = MetricsServer::start("127.0.0.1:0", metrics_);
    ASSERT_TRUE(server.isOk()) << server.status().toString();
    server_ = std::move(server.value());
    ASSERT_GT(server_->port(), 0);
  }

  HttpResponse get(std::string_view path, std::string_view method = "GET") {
    HttpResponse response;
    const std::string error = testing::httpRequest(server_->port(), method, path, &response);
    EXPECT_EQ(error, "") << method << " " << path;
    return response;
  }

  DaemonMetrics metrics_{BuildInfo{"0.1.0", false, false, ""}};
  std::unique_ptr<MetricsServer> server_;  // declared after metrics_: stops before it goes
};

TEST_F(MetricsServerTest, ServesMetricsAsTextFormat004) {
  const HttpResponse response = get("/metrics");
  EXPECT_EQ(response.statusLine, "HTTP/1.1 200 OK");
  EXPECT_EQ(response.headers.at("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  testing::Exposition parsed;
  ASSERT_EQ(testing::parseExposition(response.body, &parsed), "") << response.body;
  EXPECT_NE(parsed.family("hetero_comm_collectives_total"), nullptr);
  EXPECT_EQ(response.body, metrics_.render());
}

TEST_F(MetricsServerTest, BodyMovesAfterCollectiveFinished) {
  const testing::Labels series = {{"op", "allreduce"}, {"dtype", "float32"}, {"status", "ok"}};
  testing::Exposition before;
  ASSERT_EQ(testing::parseExposition(get("/metrics").body, &before), "");
  EXPECT_FALSE(before.value("hetero_comm_collectives_total", series));

  metrics_.collectiveFinished("allreduce", "float32", "ok", 0.004, 1 << 20);
  metrics_.collectiveFinished("allreduce", "float32", "ok", 0.006, 1 << 20);
  testing::Exposition after;
  ASSERT_EQ(testing::parseExposition(get("/metrics").body, &after), "");
  EXPECT_EQ(after.value("hetero_comm_collectives_total", series), 2);
  EXPECT_EQ(after.value("hetero_comm_collective_duration_seconds_count",
                        {{"op", "allreduce"}, {"size_class", "le_1MiB"}}),
            2);
}

TEST_F(MetricsServerTest, QueryStringIsIgnored) { EXPECT_EQ(get("/metrics?name[]=x").status, 200); }

TEST_F(MetricsServerTest, OtherPathsAre404) {
  for (const char* path : {"/other", "/", "/metrics/", "/metricsx", "/metrics/../etc/passwd"}) {
    EXPECT_EQ(get(path).status, 404) << path;
  }
}

TEST_F(MetricsServerTest, OtherMethodsAre405) {
  for (const char* method : {"POST", "PUT", "DELETE", "HEAD"}) {
    const HttpResponse response = get("/metrics", method);
    EXPECT_EQ(response.status, 405) << method;
    EXPECT_EQ(response.headers.count("allow") ? response.headers.at("allow") : "", "GET");
  }
}

TEST_F(MetricsServerTest, TwoServersOnPortZeroGetDifferentPorts) {
  auto second = MetricsServer::start("localhost:0", metrics_);
  ASSERT_TRUE(second.isOk()) << second.status().toString();
  EXPECT_NE(second.value()->port(), server_->port());
  HttpResponse response;
  ASSERT_EQ(testing::httpRequest(second.value()->port(), "GET", "/metrics", &response), "");
  EXPECT_EQ(response.status, 200);
}

TEST_F(MetricsServerTest, PortInUseIsAnErrorNotACrash) {
  // Held by the first server.
  auto taken = MetricsServer::start("127.0.0.1:" + std::to_string(server_->port()), metrics_);
  ASSERT_FALSE(taken.isOk());
  EXPECT_EQ(taken.status().code(), Code::Unavailable);
  EXPECT_NE(taken.status().message().find("in use"), std::string::npos)
      << taken.status().toString();

  // Held by a plain listening socket.
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), len), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  auto busy = MetricsServer::start("127.0.0.1:" + std::to_string(ntohs(addr.sin_port)), metrics_);
  ::close(fd);
  ASSERT_FALSE(busy.isOk());
  EXPECT_EQ(busy.status().code(), Code::Unavailable) << busy.status().toString();

  // The first server is unharmed.
  EXPECT_EQ(get("/metrics").status, 200);
}

TEST(MetricsServerStartTest, WildcardListenerServesLoopbackAndStopsPromptly) {
  const DaemonMetrics metrics(BuildInfo{});
  auto server = MetricsServer::start("0.0.0.0:0", metrics);
  ASSERT_TRUE(server.isOk()) << server.status().toString();
  HttpResponse response;
  ASSERT_EQ(testing::httpRequest(server.value()->port(), "GET", "/metrics", &response), "");
  EXPECT_EQ(response.status, 200);
  // civetweb alone takes up to 2 s to stop (its listener polls in 2 s steps); the server wakes
  // it, so stopping takes milliseconds. The bound leaves room for a loaded machine.
  const auto before = std::chrono::steady_clock::now();
  server.value().reset();
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::milliseconds(1500));
}

TEST(MetricsServerStartTest, MalformedAddressesAreInvalidArgument) {
  const DaemonMetrics metrics(BuildInfo{});
  for (const char* listen :
       {"", "9410", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:80s",
        "127.0.0.1:1,127.0.0.1:2", ":9410", "::1:9410", "[]:9410", "[zz]:9410", "a b:1"}) {
    auto server = MetricsServer::start(listen, metrics);
    ASSERT_FALSE(server.isOk()) << listen;
    EXPECT_EQ(server.status().code(), Code::InvalidArgument) << listen;
  }
}

TEST(MetricsServerStartTest, UnknownHostIsUnavailable) {
  const DaemonMetrics metrics(BuildInfo{});
  auto server = MetricsServer::start("no-such-host.invalid:0", metrics);
  ASSERT_FALSE(server.isOk());
  EXPECT_EQ(server.status().code(), Code::Unavailable) << server.status().toString();
}

TEST(MetricsServerStartTest, Ipv6LoopbackServesOrSaysWhyNot) {
  const DaemonMetrics metrics(BuildInfo{});
  auto server = MetricsServer::start("[::1]:0", metrics);
  if (server.isOk()) {
    EXPECT_GT(server.value()->port(), 0);
    return;
  }
  // Debian 12's civetweb is built without IPv6: a clear error, not a crash or a silent v4 bind.
  EXPECT_EQ(server.status().code(), Code::InvalidArgument);
  EXPECT_NE(server.status().message().find("IPv6"), std::string::npos)
      << server.status().toString();
}

}  // namespace
}  // namespace hc::metrics
