// Recursive-doubling allreduce: log2(P) steps in which partners swap their whole buffers and
// both reduce, P the largest power of two <= N. Fewest steps of any allreduce, each moving the
// full buffer: the algorithm for small messages.
//
// With N = P + E nodes (E < P), the E extra nodes fold in first (the standard scheme, as in
// MPICH): among nodes 0..2E-1, each even node sends its buffer to the odd node after it and sits
// out; the odd node combines the two. The P remaining nodes take virtual numbers 0..P-1
// (odd node 2i+1 becomes i; node j >= 2E becomes j - E) and run the doubling: at step i, virtual
// v exchanges with v XOR 2^i. Afterwards each odd node hands the result to its even neighbour.
//
// Bitwise equality. At every exchange both partners reduce the same two operands in the same
// order, the lower node's first, so they get the same bits even where the operator is not
// commutative bit for bit (which NaN payload an x86 sum keeps; max(-0, +0)). By induction every
// node in a group of 2^(i+1) holds the same bits after step i; the extra nodes receive a copy.
// The last exchange finalizes (divides, for Avg) on both partners, again with equal operands.
#include <vector>

#include "daemon/coll/net/algorithms.h"

namespace hc::coll::net {
namespace {

// One full-buffer exchange with `partner`, reduced into our buffer.
Step exchange(const NetOpSpec& spec, int partner, bool finalizes, bool forwards) {
  const size_t bytes = spec.count * elementBytes(spec);
  Step step;
  step.sendTo = partner;
  step.sendData = bufferBytes(spec);
  step.sendBytes = bytes;
  step.sendsPreviousResult = forwards;
  step.recvFrom = partner;
  step.recvData = bufferBytes(spec);
  step.recvBytes = bytes;
  step.landing = Landing::Combine;
  step.receivedFirst = partner < static_cast<int>(spec.self);
  step.finalizes = finalizes;
  return step;
}

}  // namespace

Schedule recursiveDoublingAllreduce(const NetOpSpec& spec) {
  const size_t n = nodeCount(spec);
  const int self = static_cast<int>(spec.self);
  const size_t bytes = spec.count * elementBytes(spec);
  uint8_t* data = bufferBytes(spec);
  size_t powerOfTwo = 1;
  while (powerOfTwo * 2 <= n) powerOfTwo *= 2;
  const int extra = static_cast<int>(n - powerOfTwo);

  Schedule schedule;
  schedule.algorithm = "allreduce_recursive_doubling";
  if (n == 1) {  // alone: the contribution is the sum; Avg still divides
    schedule.finalizeAtStart = data;
    schedule.finalizeBytes = bytes;
    return schedule;
  }

  // 1. Fold-in. An even node below 2E gives its buffer away and waits for the result.
  const bool foldsIn = self < 2 * extra;
  if (foldsIn && self % 2 == 0) {
    Step give;
    give.sendTo = self + 1;
    give.sendData = data;
    give.sendBytes = bytes;
    Step result;
    result.recvFrom = self + 1;
    result.recvData = data;
    result.recvBytes = bytes;
    result.landing = Landing::Direct;
    schedule.steps = {give, result};
    return schedule;
  }
  // Its odd neighbour absorbs it: the lower node's operand first.
  if (foldsIn) {
    Step absorb;
    absorb.recvFrom = self - 1;
    absorb.recvData = data;
    absorb.recvBytes = bytes;
    absorb.landing = Landing::Combine;
    absorb.receivedFirst = true;
    schedule.steps.push_back(absorb);
  }

  // 2. Doubling among the P nodes that remain, by virtual number.
  const int virtualSelf = foldsIn ? self / 2 : self - extra;
  auto realNode = [extra](int v) { return v < extra ? 2 * v + 1 : v + extra; };
  for (size_t distance = 1; distance < powerOfTwo; distance *= 2) {
    const int partner = realNode(virtualSelf ^ static_cast<int>(distance));
    schedule.steps.push_back(exchange(spec, partner, /*finalizes=*/distance * 2 == powerOfTwo,
                                      /*forwards=*/!schedule.steps.empty()));
  }

  // 3. Hand the result back to the node that folded in.
  if (foldsIn) {
    Step handBack;
    handBack.sendTo = self - 1;
    handBack.sendData = data;
    handBack.sendBytes = bytes;
    handBack.sendsPreviousResult = true;
    schedule.steps.push_back(handBack);
  }
  return schedule;
}

}  // namespace hc::coll::net
