// NetExecutor over two UCX transports in one process (tcp on lo, as two daemons would talk): one
// small and one large allreduce. Apart from net_executor_test so that the loopback tests link no
// UCX (the ThreadSanitizer build runs those, scripts/tsan-build).
#include <gtest/gtest.h>
#include <poll.h>

#include <memory>
#include <string>
#include <vector>

#include "daemon/coll/net/net_executor.h"
#include "tests/unit/daemon/coll/net/net_executor_harness.h"
#include "tests/unit/daemon/coll/net/net_test_values.h"
#include "tests/unit/daemon/transport/test_support.h"

namespace hc::coll::net::testing {
namespace {

// Two executors, each over its own UCX transport (tcp on lo, as two daemons would talk), run one
// small and one large allreduce.
TEST(NetExecutorUcxTest, AllreduceBetweenTwoUcxTransports) {
  const transport::UcxOptions ucx = transport::testing::testUcxOptions();
  NetExecutorOptions options = testOptions();
  options.maxSleep = transport::maxSleep(ucx);
  std::vector<std::unique_ptr<NetExecutor>> executors;
  std::vector<transport::PeerAddress> addresses;
  for (int i = 0; i < 2; ++i) {
    Result<std::unique_ptr<transport::Transport>> t = transport::createUcxTransport(ucx);
    if (!t.isOk()) GTEST_SKIP() << "no UCX transport here: " << t.status().toString();
    Result<std::unique_ptr<NetExecutor>> e = NetExecutor::start(std::move(t.value()), options);
    ASSERT_TRUE(e.isOk()) << e.status().toString();
    addresses.push_back(e.value()->address());
    executors.push_back(std::move(e.value()));
  }
  for (size_t count : {4097, 300000}) {
    SCOPED_TRACE("count " + std::to_string(count));
    std::vector<Contribution> inputs;
    std::vector<Guarded> buffers;
    buffers.reserve(2);
    for (uint32_t node = 0; node < 2; ++node) {
      inputs.push_back(randomValues(kFloat32, kSum, count, 31 * node + count));
      buffers.emplace_back(count * 4).assign(encode(kFloat32, inputs.back()));
      NetJob job;
      job.id = count;
      job.spec.kind = NetOpKind::AllReduce;
      job.spec.self = node;
      job.spec.comm = 0x0c0c;
      job.spec.seq = static_cast<uint32_t>(count);
      job.spec.dtype = Dtype{kFloat32};
      job.spec.redop = RedOp{kSum};
      job.spec.count = count;
      job.spec.buffer = buffers.back().data();
      job.nodes = addresses;
      executors[node]->submit(std::move(job));
    }
    const std::vector<uint8_t> want = reference(kFloat32, kSum, inputs, 1);
    for (uint32_t node = 0; node < 2; ++node) {
      pollfd p{executors[node]->doneFd(), POLLIN, 0};
      ASSERT_EQ(::poll(&p, 1, static_cast<int>(kDeadline.count())), 1) << "node " << node;
      std::vector<NetJobResult> results = executors[node]->takeResults();
      ASSERT_EQ(results.size(), 1u);
      EXPECT_EQ(results[0].id, count);
      EXPECT_TRUE(results[0].status.isOk()) << results[0].status.toString();
      EXPECT_EQ(buffers[node].wrongElements(want, 0, 4), 0u) << "node " << node;
    }
  }
}

}  // namespace
}  // namespace hc::coll::net::testing
