#include "bench/bound_model.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace hc::bench {
namespace {

std::string readLine(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

OpBytes onePassBytes(const Case& c, int nranks, bool inPlace) {
  const double ws = static_cast<double>(dtypeSize(c.dtype));
  const double send = static_cast<double>(c.sendCount) * ws;  // per rank
  const double recv = static_cast<double>(c.recvCount) * ws;  // per rank
  const double n = nranks;
  switch (c.op) {
    case OpKind::AllReduce:
    case OpKind::ReduceScatter:  // every rank's whole input, reduced block by block
    case OpKind::AllToAll:
    case OpKind::SendRecv:  // one transfer per rank
      return {n * send, n * recv};
    case OpKind::Reduce:  // only the root's output
      return {n * send, recv};
    case OpKind::Broadcast:  // in place, the root's output is its input and is skipped
      return {send, (inPlace ? n - 1 : n) * recv};
    case OpKind::AllGather:  // in place, each rank's own block is already in its output
      return {n * send, (inPlace ? n - 1 : n) * recv};
    case OpKind::Gather:  // in place, the root's block is not copied at all
      return inPlace ? OpBytes{(n - 1) * send, recv - send} : OpBytes{n * send, recv};
    case OpKind::Scatter:  // in place, the root's block is not copied at all
      return inPlace ? OpBytes{send - recv, (n - 1) * recv} : OpBytes{send, n * recv};
    case OpKind::Barrier:
      break;
  }
  return {};
}

StreamRates bestOf(const StreamRates& a, const StreamRates& b) {
  return {std::max(a.readBps, b.readBps), std::max(a.writeBps, b.writeBps)};
}

double boundSeconds(const OpBytes& bytes, const StreamRates& rates) {
  if (rates.readBps <= 0 || rates.writeBps <= 0) return 0;
  return std::max(bytes.read / rates.readBps, bytes.written / rates.writeBps);
}

size_t parseCacheSize(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  size_t value = 0;
  size_t digits = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, ++digits) {
    value = value * 10 + static_cast<size_t>(text[i] - '0');
  }
  if (digits == 0) return 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  if (i == text.size()) return value;
  switch (std::toupper(static_cast<unsigned char>(text[i]))) {
    case 'K':
      return value << 10;
    case 'M':
      return value << 20;
    case 'G':
      return value << 30;
    default:
      return 0;
  }
}

LastLevelCache lastLevelCache(const std::string& cpuDir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  int bestLevel = 0;
  size_t bestBytes = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(cpuDir) / "cache", ec)) {
    if (entry.path().filename().string().rfind("index", 0) != 0) continue;
    if (readLine(entry.path() / "type") == "Instruction") continue;
    const int level = std::atoi(readLine(entry.path() / "level").c_str());
    const size_t bytes = parseCacheSize(readLine(entry.path() / "size"));
    if (bytes == 0) continue;
    // Level 3 when there is one; otherwise the highest level, the largest cache among equals.
    if (level > bestLevel || (level == bestLevel && bytes > bestBytes)) {
      bestLevel = level;
      bestBytes = bytes;
    }
  }
  if (bestBytes > 0) {
    return {bestBytes, "sysfs L" + std::to_string(bestLevel) + " (" + cpuDir + "/cache)"};
  }
  const std::string missing = cpuDir + "/cache has no sizes";
  if (long l3 = ::sysconf(_SC_LEVEL3_CACHE_SIZE); l3 > 0) {
    return {static_cast<size_t>(l3), "cpuid through sysconf, L3 (" + missing + ")"};
  }
  if (long l2 = ::sysconf(_SC_LEVEL2_CACHE_SIZE); l2 > 0) {
    return {static_cast<size_t>(l2), "cpuid through sysconf, L2 (" + missing + ")"};
  }
  return {0, "unknown (" + missing + ", and sysconf knows none)"};
}

bool rowGetsBound(size_t rowBytes, size_t llcBytes) {
  return llcBytes > 0 && rowBytes / kBoundMinCaches >= llcBytes;
}

BoundVerdict judgeRow(double boundSec, double measuredSec) {
  if (boundSec <= 0 || measuredSec <= 0) return {};
  const double fraction = boundSec / measuredSec;
  return {fraction, fraction > 1.0};
}

}  // namespace hc::bench
