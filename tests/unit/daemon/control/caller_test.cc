// Who calls Control, and what each caller sees (daemon/control/caller.h): the rules on their own,
// then the admin socket over real gRPC in process: AdminListener hands each accepted fd to gRPC
// and the service finds the caller again by the channel's peer string, while a plaintext TCP
// caller, whom nothing identifies, sees no tenant at all.
#include "daemon/control/caller.h"

#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <set>

#include "daemon/control/control_server.h"
#include "hetero_comm/v1/control.grpc.pb.h"
#include "tests/support/temp_dir.h"

namespace hc::control {
namespace {

constexpr gid_t kAdminGid = 4242;

TEST(CallerTest, RootAndAdminGroupMembersAreAdminsOthersTenants) {
  EXPECT_TRUE(callerOf({1, 0, 0, {}}, std::nullopt).seesEverything()) << "root, no admin group";
  EXPECT_TRUE(callerOf({1, 1000, kAdminGid, {}}, kAdminGid).seesEverything()) << "primary group";
  EXPECT_TRUE(callerOf({1, 1000, 100, {7, kAdminGid}}, kAdminGid).seesEverything())
      << "supplementary group";
  EXPECT_FALSE(callerOf({1, 1000, 100, {7, 8}}, kAdminGid).seesEverything());
  EXPECT_FALSE(callerOf({1, 1000, kAdminGid, {kAdminGid}}, std::nullopt).seesEverything())
      << "a system without the admin group has no admins but root";
}

TEST(CallerTest, ATenantSeesItsOwnUidOnlyAndAnUnknownCallerNothing) {
  const Caller tenant = Caller::tenant(1000);
  EXPECT_TRUE(tenant.sees(1000));
  EXPECT_FALSE(tenant.sees(0));
  EXPECT_FALSE(tenant.sees(1001));
  EXPECT_TRUE(tenant.seesAny({0, 1000}));
  EXPECT_FALSE(tenant.seesAny({0, 1001}));
  EXPECT_FALSE(tenant.seesAny({}));
  const Caller unknown = Caller::unknown();
  EXPECT_FALSE(unknown.sees(0));
  EXPECT_FALSE(unknown.seesAny({0, 1000}));
  EXPECT_FALSE(unknown.seesEverything());
  const Caller admin = Caller::admin(1000);
  EXPECT_TRUE(admin.sees(0));
  EXPECT_TRUE(admin.seesAny({}));
}

TEST(CallerTest, VisibleClientsKeepsTheCallersUidsOnly) {
  std::vector<observe::ClientInfo> clients(3);
  clients[0].id = 1, clients[0].uid = 0;
  clients[1].id = 2, clients[1].uid = 1000;
  clients[2].id = 3, clients[2].uid = 1001;
  auto mine = visibleClients(clients, Caller::tenant(1000));
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_EQ(mine[0].id, 2u);
  EXPECT_TRUE(visibleClients(clients, Caller::unknown()).empty());
  EXPECT_EQ(visibleClients(clients, Caller::admin(1000)).size(), 3u);
}

TEST(CallerRegistryTest, FindsRememberedFdPeersOnlyAndTheLatestOfAReusedFd) {
  CallerRegistry registry;
  registry.remember(7, Caller::tenant(1000));
  EXPECT_TRUE(registry.lookup("fd:7").sees(1000));
  EXPECT_FALSE(registry.lookup("fd:7").sees(0));
  for (const char* peer : {"fd:8", "fd:7x", "fd:", "fd:-7", "unix:/run/x.sock",
                           "ipv4:127.0.0.1:5000", "", "fd:99999999999999999999"}) {
    const Caller c = registry.lookup(peer);
    EXPECT_FALSE(c.sees(1000) || c.sees(0)) << peer;
  }
  registry.remember(7, Caller::tenant(1001));  // the number went to a newer connection
  EXPECT_TRUE(registry.lookup("fd:7").sees(1001));
  EXPECT_FALSE(registry.lookup("fd:7").sees(1000));
}

// A ControlServer on an admin socket and a plaintext TCP port, over a board with one client of
// this process's uid and one of another uid, each with a communicator.
class AdminSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const uid_t other = ::geteuid() == 0 ? 65534 : ::geteuid() + 1;
    addClient(1, ::geteuid(), "aaaa0000000000000000000000000001");
    addClient(2, other, "bbbb0000000000000000000000000002");
    ControlServerOptions options;
    options.adminSocket = dir_.path() + "/admin.sock";
    options.listen = "127.0.0.1:0";
    options.sources.board = &board_;
    auto server = ControlServer::start(options, NodeInfo{});
    ASSERT_TRUE(server.isOk()) << server.status().toString();
    server_ = std::move(server.value());
  }

  void addClient(uint32_t id, uid_t uid, const std::string& key) {
    observe::ClientInfo info;
    info.id = id;
    info.uid = uid;
    board_.clientConnected(info);
    board_.commCreated(observe::CommIdentity{.id = id, .keyHex = key, .nranks = 1, .localRanks = {0}},
                       4);
    board_.clientJoined(id, id);
  }

  std::unique_ptr<hetero_comm::v1::Control::Stub> stub(const std::string& target) {
    return hetero_comm::v1::Control::NewStub(
        grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  }

  std::set<uint32_t> clientUids(hetero_comm::v1::Control::Stub& control) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    hetero_comm::v1::ListClientsResponse response;
    EXPECT_TRUE(control.ListClients(&context, {}, &response).ok());
    std::set<uint32_t> uids;
    for (const auto& c : response.clients()) uids.insert(c.uid());
    return uids;
  }

  std::set<std::string> commKeys(hetero_comm::v1::Control::Stub& control) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    hetero_comm::v1::ListCommunicatorsResponse response;
    EXPECT_TRUE(control.ListCommunicators(&context, {}, &response).ok());
    std::set<std::string> keys;
    for (const auto& c : response.communicators()) keys.insert(c.key());
    return keys;
  }

  grpc::StatusCode recordOf(hetero_comm::v1::Control::Stub& control, const std::string& name) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    hetero_comm::v1::GetFlightRecordRequest request;
    request.set_communicator(name);
    hetero_comm::v1::GetFlightRecordResponse response;
    return control.GetFlightRecord(&context, request, &response).error_code();
  }

  test::TempDir dir_{"hc-caller"};
  observe::StatusBoard board_;
  std::unique_ptr<ControlServer> server_;
};

TEST_F(AdminSocketTest, TheAdminSocketAnswersForTheConnectedUid) {
  auto control = stub("unix:" + dir_.path() + "/admin.sock");
  if (::geteuid() == 0) {
    // Root is an admin: everything.
    EXPECT_EQ(clientUids(*control), (std::set<uint32_t>{0, 65534}));
    EXPECT_EQ(commKeys(*control).size(), 2u);
    EXPECT_EQ(recordOf(*control, "bbbb"), grpc::StatusCode::OK);
  } else {
    EXPECT_EQ(clientUids(*control), (std::set<uint32_t>{::geteuid()}));
    EXPECT_EQ(commKeys(*control), (std::set<std::string>{"aaaa0000000000000000000000000001"}));
    EXPECT_EQ(recordOf(*control, "aaaa"), grpc::StatusCode::OK);
    EXPECT_EQ(recordOf(*control, "2"), grpc::StatusCode::NOT_FOUND) << "another uid's, by id";
    EXPECT_EQ(recordOf(*control, "bbbb"), grpc::StatusCode::NOT_FOUND) << "by key prefix";
  }
}

TEST_F(AdminSocketTest, APlaintextTcpCallerSeesNoTenant) {
  auto control = stub("127.0.0.1:" + std::to_string(server_->controlPort()));
  EXPECT_TRUE(clientUids(*control).empty());
  EXPECT_TRUE(commKeys(*control).empty());
  EXPECT_EQ(recordOf(*control, "aaaa"), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(recordOf(*control, "1"), grpc::StatusCode::NOT_FOUND);
}

TEST_F(AdminSocketTest, ManyConnectionsEachKeepTheirCaller) {
  // Connections come and go; fd numbers are reused; each new one is known at once.
  for (int i = 0; i < 20; ++i) {
    auto control = stub("unix:" + dir_.path() + "/admin.sock");
    EXPECT_TRUE(clientUids(*control).count(::geteuid()) == 1) << "connection " << i;
  }
}

TEST_F(AdminSocketTest, ShutdownRemovesTheSocket) {
  const std::string path = dir_.path() + "/admin.sock";
  ASSERT_EQ(::access(path.c_str(), F_OK), 0);
  server_->shutdown();
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
}

}  // namespace
}  // namespace hc::control
