#include "daemon/transport/ucx/socket_ifname.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <system_error>

namespace hc::transport::ucx {
namespace {

std::vector<std::string_view> splitList(std::string_view list) {
  std::vector<std::string_view> items;
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    if (!item.empty()) items.push_back(item);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return items;
}

}  // namespace

Result<std::vector<std::string>> selectInterfaces(std::string_view spec,
                                                  const std::vector<std::string>& available) {
  const std::string original(spec);
  // NCCL's order: "^" first, then "=".
  const bool exclude = spec.starts_with('^');
  if (exclude) spec.remove_prefix(1);
  const bool exact = spec.starts_with('=');
  if (exact) spec.remove_prefix(1);
  const std::vector<std::string_view> patterns = splitList(spec);

  auto listed = [&](const std::string& name) {
    return std::any_of(patterns.begin(), patterns.end(), [&](std::string_view p) {
      return exact ? name == p : std::string_view(name).starts_with(p);
    });
  };
  std::vector<std::string> chosen;
  for (const std::string& name : available) {
    if (listed(name) != exclude) chosen.push_back(name);
  }
  if (chosen.empty()) {
    std::string names;
    for (const std::string& name : available) names += (names.empty() ? "" : ",") + name;
    return invalidArgument("socket interface spec \"" + original + "\" selects none of [" + names +
                           "]");
  }
  return chosen;
}

Result<std::vector<std::string>> listNetworkInterfaces() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return systemError("getifaddrs", errno);
  std::vector<std::string> names;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || !(it->ifa_flags & IFF_UP)) continue;
    const int family = it->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    if (std::find(names.begin(), names.end(), it->ifa_name) == names.end()) {
      names.emplace_back(it->ifa_name);
    }
  }
  ::freeifaddrs(list);
  return names;
}

std::vector<std::string> listRdmaPorts() {
  namespace fs = std::filesystem;
  std::vector<std::string> ports;
  std::error_code error;  // no /sys/class/infiniband: no RDMA devices
  for (const fs::directory_entry& device : fs::directory_iterator("/sys/class/infiniband", error)) {
    std::error_code portError;
    for (const fs::directory_entry& port :
         fs::directory_iterator(device.path() / "ports", portError)) {
      ports.push_back(device.path().filename().string() + ":" + port.path().filename().string());
    }
  }
  std::sort(ports.begin(), ports.end());
  return ports;
}

Result<std::string> netDevicesFor(std::string_view spec) {
  Result<std::vector<std::string>> available = listNetworkInterfaces();
  if (!available.isOk()) return available.status();
  Result<std::vector<std::string>> chosen = selectInterfaces(spec, *available);
  if (!chosen.isOk()) return chosen.status();
  std::string devices;
  for (const std::string& name : *chosen) devices += (devices.empty() ? "" : ",") + name;
  for (const std::string& port : listRdmaPorts()) devices += "," + port;
  return devices;
}

}  // namespace hc::transport::ucx
