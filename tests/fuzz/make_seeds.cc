// make_seeds: writes the fuzz targets' seed corpus, or checks the committed one.
//   make_seeds OUT_DIR          writes OUT_DIR/<target>/<name> for every seed (seeds.h)
//   make_seeds --check DIR      exits 1 when DIR/<target>/ differs from what would be written
//                               (a missing, extra or changed file); ctest fuzz_seeds_current
// Every seed is parsed by the real code first and must be accepted, so after a format change the
// generator fails (or --check does) instead of a corpus that quietly stops reaching the parser.
// Regenerate the committed corpus with: make_seeds tests/fuzz/corpus (from the repository root).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/fuzz/seeds.h"
#include "tests/fuzz/session_fixture.h"

namespace fs = std::filesystem;

namespace hc::fuzz {

void requireValid(bool valid, const Seed& seed, const std::string& why) {
  if (valid) return;
  std::fprintf(stderr, "make_seeds: seed %s/%s is not a valid input: %s\n", seed.target.c_str(),
               seed.name.c_str(), why.c_str());
  std::exit(1);
}

}  // namespace hc::fuzz

namespace {

std::vector<uint8_t> readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

int write(const fs::path& root, const std::vector<hc::fuzz::Seed>& seeds) {
  for (const auto& seed : seeds) {
    fs::create_directories(root / seed.target);
    std::ofstream out(root / seed.target / seed.name, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(seed.bytes.data()),
              static_cast<std::streamsize>(seed.bytes.size()));
    if (!out) {
      std::fprintf(stderr, "make_seeds: cannot write %s/%s\n", seed.target.c_str(),
                   seed.name.c_str());
      return 1;
    }
  }
  std::printf("make_seeds: wrote %zu seeds under %s\n", seeds.size(), root.c_str());
  return 0;
}

int check(const fs::path& root, const std::vector<hc::fuzz::Seed>& seeds) {
  int problems = 0;
  std::map<std::string, std::set<std::string>> expected;
  for (const auto& seed : seeds) {
    expected[seed.target].insert(seed.name);
    const fs::path file = root / seed.target / seed.name;
    if (!fs::exists(file)) {
      std::fprintf(stderr, "missing: %s\n", file.c_str());
      ++problems;
    } else if (readFile(file) != seed.bytes) {
      std::fprintf(stderr, "differs: %s\n", file.c_str());
      ++problems;
    }
  }
  for (const auto& [target, names] : expected) {
    for (const auto& entry : fs::directory_iterator(root / target)) {
      if (names.count(entry.path().filename().string()) == 0) {
        std::fprintf(stderr, "not made by make_seeds: %s\n", entry.path().c_str());
        ++problems;
      }
    }
  }
  if (problems != 0) {
    std::fprintf(stderr, "make_seeds: %d difference(s) in %s; regenerate it with make_seeds %s\n",
                 problems, root.c_str(), root.c_str());
    return 1;
  }
  std::printf("make_seeds: %zu seeds in %s are current\n", seeds.size(), root.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool checking = argc == 3 && std::string(argv[1]) == "--check";
  if (argc != 2 && !checking) {
    std::fprintf(stderr, "usage: make_seeds OUT_DIR | make_seeds --check DIR\n");
    return 2;
  }
  hc::fuzz::quietLogs();
  std::vector<hc::fuzz::Seed> seeds = hc::fuzz::ipcSeeds();
  for (auto& seed : hc::fuzz::daemonSeeds()) seeds.push_back(std::move(seed));
  for (auto& seed : hc::fuzz::peerSeeds()) seeds.push_back(std::move(seed));
  return checking ? check(argv[2], seeds) : write(argv[1], seeds);
}
