// One hetero-commd for every test of an executable whose tests call libhcclient from the test
// process itself (several ranks of one communicator as threads, calls racing on one handle).
// libhcclient keeps one connection per process, so one daemon serves them all: it starts before
// the first test, with HC_SOCKET pointed at it, and stops after the last.
#pragma once

namespace hc::integ {

// The daemon's session.max_ranks: a communicator of more ranks is refused at its join.
constexpr int kInProcessMaxRanks = 4;

}  // namespace hc::integ
