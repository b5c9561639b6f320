// InlineOp: a small collective whose node contributions travel inside the daemons' descriptor
// agreement (daemon/session/net_runner.cc), so that it costs one exchange among the daemons
// instead of two. Each daemon puts its contribution (at most kInlineBytes) into its agreement
// block; once every block has arrived, every daemon combines the same contributions in node
// order and writes its local ranks' results, with no NetOp at all.
//   AllReduce, Reduce  contribution: the local ranks' operands reduced (Avg summed, PreMulSum
//                      scaled, as NodePlan does); result: every node's contribution reduced in
//                      node order (Avg divided once by the communicator's ranks), written to every
//                      local rank (Reduce: to the root only).
//   Broadcast          contribution: the root's operand on the root's node, nothing elsewhere;
//                      result: the root node's contribution, written to every local rank.
//   Barrier            no contribution: the agreement itself is the barrier.
// Numerics: the same inputs in the same order on every daemon give every rank the same bits; for
// two nodes they are also the bits of the recursive-doubling NetOp (lower node first).
// contribute() reads only the local operands and result() writes only receive buffers, so an op
// whose agreement decides against inlining (another daemon could not inline it) runs as before.
// Depends on hc_coll (reduce and copy kernels) and node_layout.h. Stateless; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "daemon/coll/hier/node_layout.h"
#include "daemon/coll/local_plan.h"

namespace hc::coll::hier {

// The room for one node's contribution in an agreement block.
constexpr size_t kInlineBytes = 992;

// Whether `op` can run inline: a kind above whose contribution fits kInlineBytes.
bool inlinable(const LocalOp& op);

// Writes this node's contribution to `out` (kInlineBytes of room); `local` holds the local ranks'
// buffers in local order, resolved, in host memory. Requires inlinable(op).
void contribute(const LocalOp& op, const NodeLayout& layout, const std::vector<RankBuffers>& local,
                uint8_t* out);

// Writes the result to the local ranks' receive buffers from every node's contribution
// (`contributions[n]`, node order). Requires inlinable(op).
void result(const LocalOp& op, const NodeLayout& layout,
            const std::vector<const uint8_t*>& contributions,
            const std::vector<RankBuffers>& local);

}  // namespace hc::coll::hier
