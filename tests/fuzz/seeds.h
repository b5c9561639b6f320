// The seed corpus of every fuzz target, built in code: at least one valid input per message kind,
// each checked against the real parser before make_seeds writes it, so that a target cannot pass
// its run without reaching the parser. make_seeds.cc writes them; --check compares them with the
// committed corpus/ (ctest fuzz_seeds_current).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hc::fuzz {

struct Seed {
  std::string target;  // the corpus folder: corpus/<target>/
  std::string name;    // the file: what kind of input it is
  std::vector<uint8_t> bytes;
};

// frames, submit (seeds_ipc.cc).
std::vector<Seed> ipcSeeds();
// config_toml, config_env, config_flags, ucx_wire, notices, pci_ids (seeds_daemon.cc).
std::vector<Seed> daemonSeeds();
// peer (seeds_peer.cc).
std::vector<Seed> peerSeeds();

// Prints why `seed` is no valid input of its target and exits 1 when `valid` is false.
void requireValid(bool valid, const Seed& seed, const std::string& why);

}  // namespace hc::fuzz
